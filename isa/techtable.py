"""Technology tables: what each action costs in energy and what each part costs in area, for one process node.

A table is a TOML file (the bundled ones are ``isa/techtables/*.toml``; docs/energy.md lists every value). Every
value is an entry ``{ value = NUMBER, source = "KEY[, KEY]", note = "how it was derived" }`` whose source keys name
citations in the file's ``[sources]``: a number without a source is an error. The sections and their units are fixed
(:data:`SCHEMA`); :class:`TechTable` answers the derived questions (SRAM energy at a size, leakage of a MAC).
The Arch selects a table with ``energy.table`` (a bundled name or a TOML path) and a DRAM type with ``energy.dram``.
"""

from __future__ import annotations

import difflib
import math
import os
import tomllib
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path

from isa.errors import ArchError
from isa.utf8 import decode_utf8

MAC_DTYPES = ("i8", "f16", "bf16", "f32")
VECTOR_CLASSES = ("alu", "mul", "special")
OPEN = None   # a section whose keys are free (DRAM types), each with the section's unit
SCHEMA: dict[str, tuple[dict[str, str] | None, str]] = {
    "mac_pj": (dict.fromkeys(MAC_DTYPES, "pJ"), "energy of one multiply-accumulate in the matrix unit, by operand "
               "type"),
    "vector_pj": (dict.fromkeys(VECTOR_CLASSES, "pJ"), "energy of one vector-unit operation on one element, by "
                  "operation class (isa.cost.vpu_class)"),
    "sram": ({"ref_bytes": "bytes", "read_pj_per_byte": "pJ/byte", "write_pj_per_byte": "pJ/byte",
              "size_exponent": "", "area_um2_per_byte": "µm²/byte"},
             "on-chip SRAM (SPM and ACC): access energy at ref_bytes, its growth with size, and area"),
    "dram_pj_per_bit": (OPEN, "DRAM read or write energy per bit, by memory type (energy.dram picks one)"),
    "dma": ({"pj_per_byte": "pJ/byte"}, "the DMA engine moving one byte on chip (besides the memories' own access)"),
    "mac_area_um2": (dict.fromkeys(MAC_DTYPES, "µm²"), "area of one multiply-accumulator, by operand type"),
    "vector_lane": ({"area_um2": "µm²"}, "area of one vector lane"),
    "leakage": ({"logic_nw_per_um2": "nW/µm²", "sram_nw_per_um2": "nW/µm²"},
                "static power per area of logic (MACs, lanes) and of SRAM"),
    "host": ({"pj_per_op": "pJ", "pj_per_byte": "pJ/byte"},
             "the host CPU running fallback ops (host.call): energy per scalar operation and per byte it reads or "
             "writes (its DRAM traffic is priced by [dram_pj_per_bit])"),
}
OPEN_UNIT = {"dram_pj_per_bit": "pJ/bit"}
VALUE_MAX = 1e9
"""Largest table value: far above any real energy or area, and small enough that a run's totals stay finite."""


def unit(section: str, key: str) -> str:
    """The unit of ``[section].key`` in every table."""
    keys = SCHEMA[section][0]
    return OPEN_UNIT[section] if keys is OPEN else keys[key]


@dataclass(frozen=True)
class Entry:
    """One table value with the keys of its sources and how it was obtained."""

    value: float
    source: str
    note: str = ""


@dataclass(frozen=True)
class TechTable:
    """A technology table: ``entries[section][key]`` are :class:`Entry`; ``sources`` maps a key to a citation."""

    name: str
    description: str
    origin: str
    sources: dict[str, str]
    entries: dict[str, dict[str, Entry]]

    def value(self, section: str, key: str) -> float:
        return self.entries[section][key].value

    @property
    def dram_types(self) -> tuple[str, ...]:
        return tuple(self.entries["dram_pj_per_bit"])

    def mac_pj(self, dtype: str) -> float:
        """pJ per MAC with operands of ``dtype`` (an ``isa`` dtype name; u8 costs what i8 does)."""
        return self.value("mac_pj", "i8" if dtype == "u8" else dtype)

    def mac_area_um2(self, dtypes) -> float:
        """µm² of one multiply-accumulator that handles every type in ``dtypes``: the largest of theirs."""
        return max(self.value("mac_area_um2", "i8" if d == "u8" else d) for d in dtypes)

    def sram_pj_per_byte(self, size: int, write: bool = False) -> float:
        """pJ to read (or write) one byte of an SRAM of ``size`` bytes:
        ``e_ref * (size / ref_bytes) ** size_exponent``."""
        e = self.value("sram", "write_pj_per_byte" if write else "read_pj_per_byte")
        return e * (size / self.value("sram", "ref_bytes")) ** self.value("sram", "size_exponent")

    def dram_pj_per_byte(self, kind: str) -> float:
        return 8 * self.value("dram_pj_per_bit", kind)

    def logic_leak_w(self, um2: float) -> float:
        """Watts leaked by ``um2`` µm² of logic."""
        return um2 * self.value("leakage", "logic_nw_per_um2") * 1e-9

    def sram_leak_w(self, nbytes: int) -> float:
        """Watts leaked by an SRAM of ``nbytes``: its area times the SRAM leakage density."""
        return nbytes * self.value("sram", "area_um2_per_byte") * self.value("leakage", "sram_nw_per_um2") * 1e-9


def table_names() -> list[str]:
    """Names of the bundled tables (``isa/techtables/*.toml``), sorted."""
    return sorted(p.name.removesuffix(".toml") for p in resources.files("isa.techtables").iterdir()
                  if p.name.endswith(".toml"))


def load_table(spec: str | Path) -> TechTable:
    """A bundled table by name or a TOML file by path; ArchError saying what is wrong otherwise."""
    name = str(spec)
    if name in table_names():
        return _bundled(name)
    path = Path(name)
    if path.is_file():
        return _file(str(path.resolve()), os.stat(path).st_mtime_ns)
    raise ArchError(f"energy.table must be a bundled table ({', '.join(table_names())}) or a TOML file, not {name!r}")


@cache
def _bundled(name: str) -> TechTable:
    return parse_table(resources.files("isa.techtables").joinpath(f"{name}.toml").read_text(), f"table {name}", name)


@lru_cache(maxsize=32)
def _file(path: str, _mtime: int) -> TechTable:
    text = decode_utf8(Path(path).read_bytes(), path,
                       lambda msg, line, col: ArchError(f"energy table {path}:{line}:{col}: {msg}"))
    return parse_table(text, path, Path(path).stem)


def parse_table(text: str, origin: str, name: str = "custom") -> TechTable:
    """Parse and check a table's TOML text; ``origin`` (a file or table name) starts every error message."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ArchError(f"energy table {origin}: not valid TOML: {e}") from None
    where = f"energy table {origin}"
    sources = data.get("sources")
    if not isinstance(sources, dict) or not sources or not all(isinstance(v, str) for v in sources.values()):
        raise ArchError(f"{where}: needs a [sources] table of citations (key = \"author, title, venue\")")
    known = {"name", "description", "sources", *SCHEMA}
    for key in data:
        if key not in known:
            raise ArchError(f"{where}: unknown section [{key}]{_suggest(key, SCHEMA)}")
    entries = {}
    for section, (keys, _) in SCHEMA.items():
        given = data.get(section)
        if not isinstance(given, dict) or not given:
            raise ArchError(f"{where}: missing section [{section}] ({_describe(section)})")
        if keys is not OPEN:
            missing = [k for k in keys if k not in given]
            if missing:
                raise ArchError(f"{where}: [{section}] lacks {', '.join(missing)}")
            for k in given:
                if k not in keys:
                    raise ArchError(f"{where}: unknown key [{section}].{k}{_suggest(k, keys)}")
        entries[section] = {k: _entry(v, f"{where}: [{section}].{k}", sources) for k, v in given.items()}
    sram = entries["sram"]
    if sram["ref_bytes"].value <= 0:
        raise ArchError(f"{where}: [sram].ref_bytes must be > 0, not {sram['ref_bytes'].value!r}")
    return TechTable(str(data.get("name", name)), str(data.get("description", "")), origin, dict(sources), entries)


def _entry(v, where: str, sources: dict[str, str]) -> Entry:
    if not isinstance(v, dict):
        raise ArchError(f"{where} must be {{ value = NUMBER, source = \"KEY\" }} (every number needs its source), "
                        f"not {v!r}")
    value, source = v.get("value"), v.get("source")
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or not 0 <= value <= VALUE_MAX:
        raise ArchError(f"{where}: value must be a number in [0, {VALUE_MAX:g}], not {value!r}")
    if not isinstance(source, str) or not source.strip():
        raise ArchError(f"{where} has no source; write {{ value = {value!r}, source = \"KEY\" }} with KEY in "
                        f"[sources]")
    for key in (s.strip() for s in source.split(",")):
        if key not in sources:
            raise ArchError(f"{where}: source {key!r} is not in [sources] ({', '.join(sources)})")
    extra = set(v) - {"value", "source", "note"}
    if extra:
        raise ArchError(f"{where}: unknown field {sorted(extra)[0]!r}; an entry has value, source and note")
    return Entry(float(value), source, str(v.get("note", "")))


def _describe(section: str) -> str:
    keys, doc = SCHEMA[section]
    return doc + (f"; keys {', '.join(keys)}" if keys else "")


def _suggest(word: str, options) -> str:
    close = difflib.get_close_matches(word, list(options), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""
