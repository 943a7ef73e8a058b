"""The hardware description: one ``Arch`` drives both the compiler and the simulator.

It lives in ``isa`` because both sides need it and neither may import the other. Every field is validated on
construction; a bad one raises :class:`ArchError` naming the field, the value and what is allowed. Arches load from
and save to TOML, come as named presets, and take ``section.field=value`` overrides.
"""

from __future__ import annotations

import dataclasses
import difflib
import tomllib
from dataclasses import dataclass, field, fields
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import Any

from isa.errors import ArchError
from isa.speeds import DramTiming, HostTiming
from isa.techtable import load_table, table_names
from isa.units import MAX_PER_KIND, UNITS, UnitSpec
from isa.utf8 import decode_utf8

DATAFLOWS = ("ws", "os", "is")
DRAM_MODELS = ("rowbuffer", "bandwidth")
MXU_DTYPES = ("i8", "u8", "f16", "bf16", "f32")


INT_MAX = 2**31 - 1
"""The default upper bound of an Arch integer: every count, size and latency stays far from overflowing the int64
arithmetic of the cost model and the simulator's cycle counters."""
FLOAT_MAX = 1e9
"""The default upper bound of an Arch number (rates, energies): finite, and small enough for the same reason."""


def _int(lo: int = 1, pow2: bool = False, hi: int = INT_MAX, why: str = ""):
    """An integer in [lo, hi] (a power of two if ``pow2``); ``why`` explains ``hi`` in the error message."""
    def check(name: str, v: Any) -> None:
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi or (pow2 and v & (v - 1)):
            what = f"an integer in [{_bound(lo)}, {_bound(hi)}]" + (" and a power of two" if pow2 else "")
            raise ArchError(f"{name} must be {what}{f' ({why})' if why else ''}, not {v!r}")
    check.allowed = f"[{_bound(lo)}, {_bound(hi)}]" + (", power of 2" if pow2 else "")
    return check


def _float(lo: float = 0.0, hi: float = FLOAT_MAX, why: str = "", zero: bool = False):
    """A finite number in (lo, hi] (in [lo, hi] when ``lo`` > 0 or ``zero``)."""
    closed = lo > 0 or zero

    def check(name: str, v: Any) -> None:
        if isinstance(v, bool) or not isinstance(v, int | float) or not (v >= lo if closed else v > lo) \
                or not v <= hi:
            low = f"[{lo:g}" if closed else f"({lo:g}"
            raise ArchError(f"{name} must be a number in {low}, {_bound(hi)}]{f' ({why})' if why else ''}, "
                            f"not {v!r}")
    check.allowed = f"{'[' if closed else '('}{lo:g}, {_bound(hi)}]"
    return check


def _bound(v: int | float) -> str:
    """A bound as people write it: 255, 65_536, 2**31 - 1, 1e+09."""
    if isinstance(v, float):
        return f"{v:g}"
    if v >= 1 << 16 and not v & (v - 1):
        return f"2**{v.bit_length() - 1}"
    if v >= (1 << 16) - 1 and not v & (v + 1):
        return f"2**{v.bit_length()} - 1"
    return f"{v:_}" if v >= 10_000 else str(v)


def _choice(options: tuple[str, ...]):
    def check(name: str, v: Any) -> None:
        if v not in options:
            raise ArchError(f"{name} must be one of {', '.join(map(repr, options))}, not {v!r}")
    check.allowed = ", ".join(options)
    return check


def _subset(options: tuple[str, ...]):
    def check(name: str, v: Any) -> None:
        if not isinstance(v, tuple) or not v or any(x not in options for x in v):
            raise ArchError(f"{name} must be a non-empty list drawn from {', '.join(options)}, not {v!r}")
    check.allowed = "non-empty list of " + ", ".join(options)
    return check


def _bool(name: str, v: Any) -> None:
    if not isinstance(v, bool):
        raise ArchError(f"{name} must be true or false, not {v!r}")


_bool.allowed = "true, false"


def _text(name: str, v: Any) -> None:
    if not isinstance(v, str):
        raise ArchError(f"{name} must be a string, not {v!r}")


_text.allowed = "text"


LATENCY = 1_000_000
"""Bound of latencies and intervals, cycles: a millisecond at 1 GHz."""
SRAM_MAX = 1 << 31
SRAM_WHY = "2 GiB: program addresses are 32-bit and the simulator holds the memory"
RATE_MIN = 0.001
"""Least throughput or clock: a slower one makes cycle counts overflow."""


def _table(name: str, v: Any) -> None:
    _text(name, v)
    load_table(v)   # an ArchError saying what is wrong with the table


_table.allowed = "bundled name or TOML path"


def spec(default: Any, check, doc: str, unit: str = ""):
    """A validated Arch field with its documentation and unit (used by docs and error messages); ``check(name,
    value)`` raises ArchError, and its ``allowed`` attribute (if any) says what it allows for the docs."""
    return field(default=default, metadata={"check": check, "doc": doc, "unit": unit})


class _Section:
    def __post_init__(self) -> None:
        for f in fields(self):
            f.metadata["check"](f"{self._name}.{f.name}", getattr(self, f.name))


_PES = _int(hi=65535, why="the k and n of mxu.mm hold 1-65535")
_CYCLES = _int(0, hi=LATENCY)
_INTERVAL = _int(hi=LATENCY)
_SRAM_SIZE = _int(hi=SRAM_MAX, why=SRAM_WHY)
_GBS = _float(0.1, 1e6, why="at least 0.001 bytes per cycle at the fastest clock")
_NS = _float(0.0, 1e6, why="a millisecond", zero=True)
_HOST_RATE = _float(RATE_MIN, 1e6)


@dataclass(frozen=True)
class MatrixUnit(_Section):
    """The systolic array."""

    _name = "matrix"
    rows: int = spec(16, _PES, "processing-element rows (K extent of one weight tile under ws)", "PEs")
    cols: int = spec(16, _PES, "processing-element columns (N extent of one weight tile under ws)", "PEs")
    dataflow: str = spec("ws", _choice(DATAFLOWS), "weight-, output- or input-stationary")
    dtypes: tuple[str, ...] = spec(MXU_DTYPES, _subset(MXU_DTYPES), "operand types the array accepts")
    fold_overlap: bool = spec(True, _bool, "preload the next fold's stationary operand while the current one streams")
    max_rows: int = spec(256, _int(hi=65535, why="the m of mxu.mm holds 1-65535"),
                         "largest m (rows streamed) of one mxu.mm", "rows")


@dataclass(frozen=True)
class VectorUnit(_Section):
    """The SIMD vector unit."""

    _name = "vector"
    lanes: int = spec(16, _int(hi=4096), "elements processed per cycle", "elements/cycle")
    alu_latency: int = spec(2, _CYCLES, "pipeline depth of add/sub/min/max/logic/compare/mov/relu/clamp", "cycles")
    mul_latency: int = spec(3, _CYCLES, "pipeline depth of mul/shifts/cvt/rq", "cycles")
    special_latency: int = spec(12, _CYCLES, "pipeline depth of div/exp/log/recip/sqrt/rsqrt/sigmoid/tanh/gelu/erf",
                                "cycles")
    alu_interval: int = spec(1, _INTERVAL, "initiation interval of the alu class: cycles between successive vectors "
                             "of lanes elements", "cycles/vector")
    mul_interval: int = spec(1, _INTERVAL, "initiation interval of the mul class (mul/shifts/cvt/rq)", "cycles/vector")
    special_interval: int = spec(4, _INTERVAL, "initiation interval of the special class (div/exp/log/recip/sqrt/"
                                 "rsqrt/sigmoid/tanh/gelu/erf)", "cycles/vector")
    gather_rows: int = spec(1, _int(hi=4096), "table rows vpu.gather reads per cycle (G; above 1 assumes a "
                            "conflict-free crossbar)", "rows/cycle")


@dataclass(frozen=True)
class Memory(_Section):
    """An on-chip SRAM (scratchpad or accumulator buffer): address-interleaved banks."""

    _name = "spm"
    size: int = spec(256 * 1024, _SRAM_SIZE, "capacity", "bytes")
    banks: int = spec(16, _int(pow2=True, hi=1024), "number of banks; bank = (address // bank_width) % banks")
    bank_width: int = spec(16, _int(pow2=True, hi=4096), "bytes one bank delivers per cycle", "bytes")
    ports: int = spec(4, _int(hi=64), "units that can access the memory at the same time")

    def __post_init__(self) -> None:
        super().__post_init__()
        line = self.banks * self.bank_width
        if line > 1 << 16:
            raise ArchError(f"{self._name}.banks * bank_width (one memory line) must be at most 65_536 bytes, not "
                            f"{self.banks} * {self.bank_width} = {line}")
        if self.size % line:
            raise ArchError(f"{self._name}.size must be a multiple of banks * bank_width = {line}, not {self.size}")


@dataclass(frozen=True)
class Accumulator(Memory):
    _name = "acc"
    size: int = spec(64 * 1024, _SRAM_SIZE, "capacity", "bytes")


@dataclass(frozen=True)
class Dma(_Section):
    """The DMA engines that run the dma.ld and dma.st queues."""

    _name = "dma"
    channels: int = spec(2, _int(hi=64), "independent channels; with 1, dma.ld and dma.st take turns")
    setup_latency: int = spec(8, _CYCLES, "descriptor processing before the first request", "cycles")
    burst_bytes: int = spec(64, _int(pow2=True, hi=65536), "largest DRAM request; requests are aligned to it; a "
                          "multiple of dram.access_bytes", "bytes")
    outstanding: int = spec(8, _int(hi=4096), "DRAM requests one channel keeps in flight", "requests")
    gather_issue: int = spec(1, _INTERVAL, "dma.ld.gather: cycles to fetch one index and issue its row",
                             "cycles/index")


@dataclass(frozen=True)
class Dram(_Section):
    """Off-chip memory: a pipelined bus shared by the DMA channels, in physical units (GB/s, ns): its speed does not
    change with ``clock.ghz`` (:mod:`isa.speeds` converts it to core cycles exactly)."""

    _name = "dram"
    gb_per_s: float = spec(16.0, _GBS, "data bus throughput (1 GB = 1e9 B); bytes per core cycle = gb_per_s / "
                           "clock.ghz", "GB/s")
    access_bytes: int = spec(16, _int(pow2=True, hi=65536), "least bytes one request moves over the bus (channel "
                             "width x burst length): a request's bytes round up to a multiple of it", "bytes")
    latency_ns: float = spec(100.0, _NS, "request to data; in core cycles ceil(latency_ns x clock.ghz)", "ns")
    model: str = spec("rowbuffer", _choice(DRAM_MODELS), "rowbuffer: banks with open rows, a burst to a closed row "
                      "waits for row_miss_ns (less what other banks' bursts hide); bandwidth: bus bandwidth and "
                      "latency only")
    banks: int = spec(16, _int(pow2=True, hi=1024), "banks, each with one open row; bank = page % banks (rowbuffer "
                      "model)")
    page_bytes: int = spec(2048, _int(pow2=True, hi=1 << 20), "row (page) size; page = region offset // page_bytes; "
                           "at least dma.burst_bytes (rowbuffer model)", "bytes")
    row_miss_ns: float = spec(30.0, _NS, "to open a burst's row (precharge + activate; rowbuffer model); overlaps "
                              "earlier bursts to other banks; in core cycles ceil(row_miss_ns x clock.ghz)", "ns")


@dataclass(frozen=True)
class Clock(_Section):
    _name = "clock"
    ghz: float = spec(1.0, _float(RATE_MIN, 100.0), "core clock: converts cycles to time, and the DRAM's and "
                      "the host's physical speeds to cycles", "GHz")


@dataclass(frozen=True)
class Queues(_Section):
    _name = "queues"
    depth: int = spec(8, _int(hi=65536), "instructions each unit queue holds; the dispatcher stalls when one is full",
                      "instructions")


@dataclass(frozen=True)
class Host(_Section):
    """The host CPU that runs the ops the NPU cannot (fallback), at its own speed (physical units, independent of
    ``clock.ghz``). It reads and writes DRAM over its own path (it does not hold the NPU's DRAM bus). A call costs
    ``ceil(launch_ns x ghz) + ceil((rd + wr) x ghz / gb_per_s) + ceil(ops x ghz / gops)`` NPU cycles."""

    _name = "host"
    launch_ns: float = spec(10000.0, _float(0.0, 1e9, zero=True), "fixed cost of one host call: interrupt, driver, "
                            "kernel launch and return", "ns")
    gb_per_s: float = spec(8.0, _HOST_RATE, "host DRAM throughput (reads + writes; 1 GB = 1e9 B)", "GB/s")
    gops: float = spec(4.0, _HOST_RATE, "host scalar operations per ns (1e9 per second)", "ops/ns")


@dataclass(frozen=True)
class Energy(_Section):
    """Which technology table prices the run's actions and parts (docs/energy.md); it changes no cycle."""

    _name = "energy"
    table: str = spec("45nm", _table, "technology table of energy per action and area per part: a bundled one (45nm, "
                      "7nm) or a TOML file path")
    dram: str = spec("lpddr4", _text, "DRAM type, priced by the table's [dram_pj_per_bit] (lpddr4, lpddr5, ddr4, "
                     "ddr5, hbm2, hbm2e, hbm3 in the bundled tables)")

    def __post_init__(self) -> None:
        super().__post_init__()
        kinds = load_table(self.table).dram_types
        if self.dram not in kinds:
            raise ArchError(f"energy.dram must be one of table {self.table}'s DRAM types {', '.join(kinds)}, "
                            f"not {self.dram!r}")


def _units_section() -> type:
    """The ``units`` section: one field per kind of the unit table a core has (:data:`isa.units.UNITS`), each the
    number of units of that kind (default 1)."""
    def doc(u: UnitSpec) -> str:
        return (f"{u.role.value} units per core (queue {u.mnemonic}; an instruction picks one with unit=0..n-1)")
    fields_ = [(u.name, int, spec(1, _int(hi=MAX_PER_KIND, why="an instruction names its unit in 4 bits"), doc(u),
                                  "units")) for u in UNITS if u.per_core]
    namespace = {"_name": "units", "_optional": True, "__module__": __name__,
                 "__doc__": "How many units of each kind a core has. Optional in an Arch file: one of each by default."}
    return dataclasses.make_dataclass("Units", fields_, bases=(_Section,), frozen=True, namespace=namespace)


Units = _units_section()


SECTIONS = {"units": Units, "matrix": MatrixUnit, "vector": VectorUnit, "spm": Memory, "acc": Accumulator, "dma": Dma,
            "dram": Dram, "clock": Clock, "queues": Queues, "host": Host, "energy": Energy}


@dataclass(frozen=True)
class Arch:
    """A whole NPU. Sections: units, matrix, vector, spm, acc, dma, dram, clock, queues, host, energy."""

    name: str = "custom"
    description: str = ""
    units: Units = field(default_factory=Units)
    matrix: MatrixUnit = field(default_factory=MatrixUnit)
    vector: VectorUnit = field(default_factory=VectorUnit)
    spm: Memory = field(default_factory=Memory)
    acc: Accumulator = field(default_factory=Accumulator)
    dma: Dma = field(default_factory=Dma)
    dram: Dram = field(default_factory=Dram)
    clock: Clock = field(default_factory=Clock)
    queues: Queues = field(default_factory=Queues)
    host: Host = field(default_factory=Host)
    energy: Energy = field(default_factory=Energy)

    def __post_init__(self) -> None:
        _text("name", self.name)
        _text("description", self.description)
        for sec, klass in SECTIONS.items():
            if not isinstance(getattr(self, sec), klass):
                raise ArchError(f"[{sec}] must be a {klass.__name__}, not {getattr(self, sec)!r}")
        if self.dma.burst_bytes < self.dram.access_bytes:
            raise ArchError(f"dma.burst_bytes ({self.dma.burst_bytes}) must be a multiple of dram.access_bytes "
                            f"({self.dram.access_bytes}): a DMA request moves whole DRAM accesses; raise "
                            f"dma.burst_bytes or lower dram.access_bytes")
        if self.dram.model == "rowbuffer" and self.dram.page_bytes < self.dma.burst_bytes:
            raise ArchError(f"dram.page_bytes ({self.dram.page_bytes}) must be >= dma.burst_bytes "
                            f"({self.dma.burst_bytes}) so that no burst spans two rows")
        self.dram_timing   # noqa: B018 (an ArchError now if the DRAM's bus time cannot be timed exactly)

    @cached_property
    def dram_timing(self) -> DramTiming:
        """The DRAM fields in core cycles and bus ticks, exactly (:class:`isa.speeds.DramTiming`)."""
        return DramTiming.of(self)

    @cached_property
    def host_timing(self) -> HostTiming:
        """The host CPU's fields in core cycles, exactly (:class:`isa.speeds.HostTiming`)."""
        return HostTiming.of(self)

    def to_dict(self) -> dict[str, Any]:
        """Nested plain dict, sections by name (the shape of the TOML file and of reports' ``arch``)."""
        out: dict[str, Any] = {"name": self.name, "description": self.description}
        for sec in SECTIONS:
            out[sec] = {f.name: _plain(getattr(getattr(self, sec), f.name)) for f in fields(getattr(self, sec))}
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "arch") -> Arch:
        """Build from a nested dict (the shape of the TOML file). Every field must be given, unless ``base`` names a
        preset whose values the others are taken from (``{"base": "mid32", "matrix": {"rows": 64}}``). Unknown
        sections or fields are errors with a suggestion."""
        if not isinstance(data, dict):
            raise ArchError(f"{source}: an Arch must be a table of sections, not {data!r}")
        top = {"base", "name", "description", *SECTIONS}
        for key in data:
            if key not in top:
                raise ArchError(f"{source}: unknown Arch section {key!r}{_suggest(key, top)}")
        for sec in SECTIONS:
            values = data.get(sec, {})
            if not isinstance(values, dict):
                raise ArchError(f"{source}: [{sec}] must be a table of fields, not {values!r}")
            names = {f.name for f in fields(SECTIONS[sec])}
            for key in values:
                if key not in names:
                    raise ArchError(f"{source}: {_unknown_field(sec, key, names)}")
        for key in ("name", "description"):
            if key in data and not isinstance(data[key], str):
                raise ArchError(f"{source}: {key} must be a string, not {data[key]!r}")
        if "base" in data:
            base = data["base"]
            if not isinstance(base, str) or base not in preset_names():
                raise ArchError(f"{source}: base must name a preset ({', '.join(preset_names())}), not {base!r}")
            full = load_arch(base).to_dict()
            for key, value in data.items():
                if key in SECTIONS:
                    full[key] = full[key] | value
                elif key != "base":
                    full[key] = value
            data = full
        else:
            _require_all(data, source)
        kwargs: dict[str, Any] = {k: data[k] for k in ("name", "description") if k in data}
        try:
            for sec, klass in SECTIONS.items():
                kwargs[sec] = klass(**{k: _coerce(klass, k, v) for k, v in data.get(sec, {}).items()})
            return cls(**kwargs)
        except ArchError as e:
            raise ArchError(f"{source}: {e}") from None

    def to_toml(self) -> str:
        """TOML text that :meth:`from_toml` reads back to an equal Arch."""
        d = self.to_dict()
        lines = [f"name = {_toml_value(d['name'])}", f"description = {_toml_value(d['description'])}"]
        for sec in SECTIONS:
            lines += ["", f"[{sec}]"] + [f"{k} = {_toml_value(v)}" for k, v in d[sec].items()]
        return "\n".join(lines) + "\n"

    @classmethod
    def from_toml(cls, text: str, source: str = "arch.toml", folder: Path | None = None) -> Arch:
        """Parse an Arch file; ``folder``: where the file is (a relative ``energy.table`` path is taken from there
        when the table is there)."""
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ArchError(f"{source}: not valid TOML: {e}") from None
        return cls.from_dict(data if folder is None else _table_beside(data, folder), source)

    def with_overrides(self, overrides: list[str] | tuple[str, ...]) -> Arch:
        """Apply ``section.field=value`` strings, e.g. ``matrix.rows=32``; values parse by the field's type.

        Each field is checked as it is set; checks across sections run once all overrides are applied.
        """
        sections: dict[str, Any] = {}
        for item in overrides:
            sec, name, value = parse_override(item, check=False)
            sections[sec] = dataclasses.replace(sections.get(sec, getattr(self, sec)), **{name: value})
        if not sections:
            return self
        arch = dataclasses.replace(self, **sections)
        changed = self.changes_to(arch)
        if not changed:
            return arch
        return dataclasses.replace(arch, name=f"{self.name}+{','.join(changed)}",
                                   description=f"{arch.summary()} ({self.name} with {', '.join(changed)})")

    def changes_to(self, other: Arch) -> list[str]:
        """``section.field=value`` of every field whose value differs in ``other``, in declaration order."""
        out = []
        for sec in SECTIONS:
            mine, theirs = getattr(self, sec), getattr(other, sec)
            out += [f"{sec}.{f.name}={_override_text(getattr(theirs, f.name))}" for f in fields(mine)
                    if getattr(mine, f.name) != getattr(theirs, f.name)]
        return out

    def summary(self) -> str:
        """A description made from the fields: array, SPM, DRAM bandwidth and clock."""
        units = f"{self.units.matrix} x " if self.units.matrix > 1 else ""
        return (f"{units}{self.matrix.rows}x{self.matrix.cols} NPU: {bytes_text(self.spm.size)} SPM, "
                f"{self.dram.gb_per_s:g} GB/s DRAM, {self.clock.ghz:g} GHz")

    @property
    def peak_macs_per_cycle(self) -> int:
        """MACs the matrix units complete per cycle at full use (rows x cols x ``units.matrix``)."""
        return self.matrix.rows * self.matrix.cols * self.units.matrix


def _override_text(value: Any) -> str:
    """A field's value as ``--set`` spells it."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple | list):
        return ",".join(map(str, value))
    return f"{value:g}" if isinstance(value, float) else str(value)


def bytes_text(n: int) -> str:
    """``256 KiB``, ``1 MiB``, ``1000 B``: the largest binary unit that divides ``n``."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} B"


def _require_all(data: dict[str, Any], source: str) -> None:
    """Raise ArchError naming what ``data`` lacks (with no base preset to take it from)."""
    missing = [k for k in ("name", "description") if k not in data]
    missing += [f"{sec}.{f.name}" for sec, klass in SECTIONS.items() for f in fields(klass)
                if f.name not in data.get(sec, {}) and not getattr(klass, "_optional", False)]
    if not missing:
        return
    names = preset_names()
    example = f"base = {_toml_value('edge16' if 'edge16' in names else names[0])}"
    if not data:
        raise ArchError(f"{source} is empty: an Arch gives every field, or names a preset to take the others from "
                        f"({example}; presets: {', '.join(names)})")
    shown = ", ".join(missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
    raise ArchError(f"{source} lacks {shown}: give every field, or name a preset to take the others from ({example}; "
                    f"presets: {', '.join(names)})")


def parse_override(item: str, check: bool = True) -> tuple[str, str, Any]:
    """``section.field=value`` as (section, field, value parsed by the field's type), e.g. ``("matrix", "rows", 32)``.

    check: also run the field's own check (range, choices); checks across fields need a whole Arch
    (:meth:`Arch.with_overrides`). Raises ArchError naming the unknown section or field, or the bad value.
    """
    key, sep, text = item.partition("=")
    sec, dot, name = key.strip().partition(".")
    if not sep or not dot:
        raise ArchError(f"override must look like section.field=value, not {item!r}")
    if sec not in SECTIONS:
        raise ArchError(f"unknown Arch section {sec!r} in override {item!r}{_suggest(sec, SECTIONS)}")
    klass = SECTIONS[sec]
    meta = {f.name: f.metadata for f in fields(klass)}
    if name not in meta:
        raise ArchError(_unknown_field(sec, name, meta))
    value = _parse_text(klass, name, text.strip(), f"{sec}.{name}")
    if check:
        meta[name]["check"](f"{sec}.{name}", value)
    return sec, name, value


RENAMED = {
    "dram.bandwidth": "dram.bandwidth (bytes per core cycle) is now dram.gb_per_s in GB/s, which the core clock does "
                      "not scale: bytes/cycle x clock.ghz, e.g. 32 B/cycle at 1.2 GHz is dram.gb_per_s = 38.4 (and "
                      "dram.access_bytes = 32 keeps a partial burst's cycles)",
    "dram.latency": "dram.latency (core cycles) is now dram.latency_ns in ns: cycles / clock.ghz, e.g. 120 cycles at "
                    "0.8 GHz is dram.latency_ns = 150",
    "dram.row_miss_latency": "dram.row_miss_latency (core cycles) is now dram.row_miss_ns in ns: cycles / clock.ghz, "
                             "e.g. 29 cycles at 0.8 GHz is dram.row_miss_ns = 36.25",
    "host.launch": "host.launch (core cycles) is now host.launch_ns in ns: cycles / clock.ghz, e.g. 12000 cycles at "
                   "1.2 GHz is host.launch_ns = 10000",
    "host.bandwidth": "host.bandwidth (bytes per core cycle) is now host.gb_per_s in GB/s: bytes/cycle x clock.ghz, "
                      "e.g. 16 B/cycle at 1.2 GHz is host.gb_per_s = 19.2",
    "host.ops_per_cycle": "host.ops_per_cycle (per core cycle) is now host.gops, operations per ns at the host's own "
                          "speed: ops/cycle x clock.ghz, e.g. 16 ops/cycle at 1.2 GHz is host.gops = 19.2",
}
"""Arch fields given in core cycles before DRAM and the host had physical units: what replaced each, and how to
convert (the error an old Arch file or ``--set`` gets)."""


def _unknown_field(sec: str, name: str, known) -> str:
    """The message for a field ``sec.name`` that is not in ``known``: what replaced it, or the nearest name."""
    return RENAMED.get(f"{sec}.{name}") or f"unknown Arch field '{sec}.{name}'{_suggest(name, known, sec + '.')}"


def _plain(v: Any) -> Any:
    return list(v) if isinstance(v, tuple) else v


def _suggest(word: str, options, prefix: str = "") -> str:
    close = difflib.get_close_matches(word, list(options), n=1)
    return f"; did you mean '{prefix}{close[0]}'?" if close else f"; known: {', '.join(sorted(options))}"


def _field_type(klass, name: str) -> type:
    default = {f.name: f.default for f in fields(klass)}[name]
    return type(default)


def _coerce(klass, name: str, v: Any) -> Any:
    """TOML values to field types: lists to tuples, integers to floats where the field is a float."""
    t = _field_type(klass, name)
    if t is tuple and isinstance(v, list):
        return tuple(v)
    if t is float and isinstance(v, int) and not isinstance(v, bool):
        return float(v)
    return v


def _parse_text(klass, name: str, text: str, full: str) -> Any:
    t = _field_type(klass, name)
    try:
        if t is bool:
            if text.lower() not in ("true", "false"):
                raise ValueError
            return text.lower() == "true"
        if t is int:
            return int(text, 0)
        if t is float:
            return float(text)
        if t is tuple:
            return tuple(x.strip() for x in text.split(",") if x.strip())
        return text
    except ValueError:
        kind = {bool: "true or false", int: "an integer", float: "a number"}[t]
        raise ArchError(f"{full} must be {kind}, not {text!r}") from None


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(v)


def preset_names() -> list[str]:
    """Names of the bundled presets, sorted: the one list of them (what ``--arch`` and ``base =`` take)."""
    return sorted(p.name.removesuffix(".toml") for p in resources.files("isa.presets").iterdir()
                  if p.name.endswith(".toml"))


def presets_by_size() -> tuple[str, ...]:
    """:func:`preset_names` ordered as tables and test matrices show them: the smallest matrix array (rows x cols
    PEs) first, then by name."""
    arrays = {name: load_arch(name).matrix for name in preset_names()}
    return tuple(sorted(arrays, key=lambda name: (arrays[name].rows * arrays[name].cols, name)))


def _table_beside(data: dict[str, Any], folder: Path) -> dict[str, Any]:
    """An Arch file's relative ``energy.table`` path names a file beside the Arch file (when there is one there)."""
    energy = data.get("energy")
    table = energy.get("table") if isinstance(energy, dict) else None
    if not isinstance(table, str) or table in table_names() or Path(table).is_absolute() \
            or not (folder / table).is_file():
        return data
    return data | {"energy": energy | {"table": str(folder / table)}}


def load_arch(spec_: str | Path, overrides: list[str] | tuple[str, ...] = ()) -> Arch:
    """A preset name or a TOML file path (UTF-8 text), then overrides."""
    name = str(spec_)
    if name in preset_names():
        arch = Arch.from_toml(resources.files("isa.presets").joinpath(f"{name}.toml").read_text("utf-8"),
                              f"preset {name}")
    elif Path(name).is_file():
        text = decode_utf8(Path(name).read_bytes(), name,
                           lambda msg, line, col: ArchError(f"{name}:{line}:{col}: {msg}"))
        arch = Arch.from_toml(text, name, Path(name).parent)
    else:
        raise ArchError(f"--arch must be a preset ({', '.join(preset_names())}) or a TOML file, not {name!r}")
    return arch.with_overrides(overrides)
