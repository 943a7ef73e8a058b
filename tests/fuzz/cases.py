"""Hypothesis strategies for fuzz cases, one per input surface: assembly text, binary encoding, Arch (overrides, TOML
text, dicts), run inputs (``simulate`` and ``run_model``) and CLI invocations.

A case is plain picklable data (:class:`Case`), mutated from the valid seeds of :mod:`tests.fuzz.fixtures`. ``bad``
is True when the case is certainly invalid (it must be refused), None when only the oracles can tell.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st

from isa.arch import presets_by_size

from .fixtures import TINY_INPUTS, gemm_inputs, preset_tomls, seed_binaries, seed_programs, tiny_inputs

SURFACES = ("asm", "binary", "arch", "inputs", "onnx", "cli")


@dataclass
class Case:
    surface: str
    kind: str
    data: Any
    bad: bool | None = None
    note: str = field(default="", compare=False)

    def short(self) -> str:
        text = self.note if isinstance(self.data, bytes) and self.note else repr(self.data)
        return f"{self.surface}/{self.kind}{' (bad)' if self.bad else ''}: {text[:300]}"


INTS = ("0", "-1", "1", "2", "3", "7", "16", "255", "256", "4096", "65535", "65536", "2147483647", "2147483648",
        "4294967295", "4294967296", "9223372036854775807", "9223372036854775808", "-2147483649", "0x7fffffff",
        "99999999999999999999999", "1_000", "0b101")
FLOATS = ("1.5", "-0.0", "nan", "inf", "-inf", "1e308", "1e-308", "3.4e38", "0.1")
TOKENS = ("shape[", "]", "{", "}", "(", ")", "<", ">", ",", "=", ":", "+", "*", "//", "0x", "dma.ld", "vpu.add",
          "mxu.mm", "halt", "barrier", "wait(", "signal(", ".equ K 4", ".sem s 0", ".region R r9 64", "\\", ";",
          "dram:", "spm:", "acc:", "<i8>", "<f32>", "{1}", "pad{0:1/1}", "act=relu", "\t", " ", "\n", "é", "\u2028",
          "\x00", "\ufeff", "\r")
_NUM = re.compile(r"-?\b(?:0x[0-9a-fA-F]+|\d+)\b")


def _splice(draw, text: str) -> str:
    """One text mutation: a number swapped for an edge value, a line dropped, doubled or moved, a span deleted,
    a token inserted, or the text cut short."""
    kind = draw(st.sampled_from(("number", "number", "number", "drop", "dup", "swap", "delete", "insert", "cut")))
    lines = text.splitlines(keepends=True)
    if kind == "number":
        nums = list(_NUM.finditer(text))
        if nums:
            m = nums[draw(st.integers(0, len(nums) - 1))]
            return text[:m.start()] + draw(st.sampled_from(INTS + FLOATS)) + text[m.end():]
    if kind in ("drop", "dup", "swap") and lines:
        i = draw(st.integers(0, len(lines) - 1))
        if kind == "drop":
            del lines[i]
        elif kind == "dup":
            lines.insert(i, lines[i] * draw(st.integers(1, 3)))
        else:
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        return "".join(lines)
    if not text:
        return draw(st.sampled_from(TOKENS))
    i = draw(st.integers(0, len(text)))
    if kind == "delete":
        return text[:i] + text[i + draw(st.integers(1, 40)):]
    if kind == "cut":
        return text[:i]
    ins = draw(st.one_of(st.sampled_from(TOKENS + INTS), st.text(max_size=8)))
    return text[:i] + ins + text[i:]


def _bytes_noise(draw, data: bytes) -> tuple[bytes, bool]:
    """Maybe break the text's encoding: Latin-1 or random bytes, a BOM, CRLF line ends. Returns (bytes, not UTF-8)."""
    kind = draw(st.sampled_from(("none",) * 6 + ("latin1", "random", "bom", "crlf")))
    if kind == "latin1":
        i = draw(st.integers(0, len(data)))
        data = data[:i] + draw(st.sampled_from((b"\xe9", b"caf\xe9", b"\xff\xfe", b"\x80"))) + data[i:]
    elif kind == "random":
        i = draw(st.integers(0, len(data)))
        data = data[:i] + draw(st.binary(min_size=1, max_size=16)) + data[i:]
    elif kind == "bom":
        data = b"\xef\xbb\xbf" + data
    elif kind == "crlf":
        data = data.replace(b"\n", b"\r\n")
    try:
        data.decode("utf-8")
        return data, False
    except UnicodeDecodeError:
        return data, True


@st.composite
def asm_cases(draw) -> Case:
    """Assembly file bytes: a seed program (or a random valid one) with 0-4 text mutations and maybe bad bytes."""
    from isa.asm import format_program
    from tests.isa.strategies import programs

    if draw(st.integers(0, 9)) == 0:
        text = format_program(draw(programs(max_instrs=4)))
    else:
        text = draw(st.sampled_from(seed_programs()))
    for _ in range(draw(st.integers(0, 4))):
        text = _splice(draw, text)
    data, broken = _bytes_noise(draw, text.encode("utf-8", "surrogatepass"))
    return Case("asm", "text", data, True if broken else None)


_EDGE = {"extent": (1, 2, 3, 255, 4096, 65535), "stride": (0, 1, -1, 3, 64, 4096, 2**31 - 1, -(2**31)),
         "base": (0, 1, 3, 0xFFFF, 2**31, 2**32 - 1), "mkn": (1, 2, 255, 65535)}


def _set(data: bytearray, off: int, width: int, v: int) -> None:
    data[off:off + width] = (v % (1 << 8 * width)).to_bytes(width, "little")


@st.composite
def binary_cases(draw) -> Case:
    """A seed's binary encoding with 1-3 mutations: a used field of a record (an extent, a stride, a base, m/k/n)
    set to an edge value, which keeps the encoding canonical, or bit flips, bytes set, cuts, header counts."""
    from isa.encoding import _HEADER, RECORD_SIZE

    seeds = seed_binaries()
    data = bytearray(draw(st.sampled_from(seeds)))
    n_instr = int.from_bytes(data[28:32], "little")
    start = len(data) - n_instr * RECORD_SIZE
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(("field",) * 6 + ("broadcast",) * 2 + ("flip", "byte", "cut", "extend", "header")))
        if kind in ("field", "broadcast") and n_instr and start + n_instr * RECORD_SIZE <= len(data):
            rec = start + RECORD_SIZE * draw(st.integers(0, n_instr - 1))
            ndim = data[rec + 4]
            ops = [j for j in range(3) if data[rec + 31 + 28 * j] & 0x80 and data[rec] != 11]  # present views
            d = draw(st.integers(0, max(ndim - 1, 0)))
            what = draw(st.sampled_from(("extent", "stride", "stride", "base", "mkn")))
            if kind == "broadcast":      # a huge extent every operand broadcasts over: in bounds, much work
                _set(data, rec + 16 + 2 * d, 2, draw(st.sampled_from((4096, 65535))))
                for j in ops:
                    _set(data, rec + 36 + 28 * j + 4 * d, 4, 0)
            elif what == "extent":
                _set(data, rec + 16 + 2 * d, 2, draw(st.sampled_from(_EDGE[what])))
            elif what in ("stride", "base") and ops:
                j = draw(st.sampled_from(ops))
                off = rec + (36 + 28 * j + 4 * d if what == "stride" else 32 + 28 * j)
                _set(data, off, 4, draw(st.sampled_from(_EDGE[what])))
            elif what == "mkn" and data[rec] == 3:
                off = draw(st.sampled_from((6, 26, 27)))
                _set(data, rec + off, 2 if off == 6 else 1, draw(st.sampled_from(_EDGE[what])))
        elif kind == "flip" and data:
            i = draw(st.integers(0, len(data) * 8 - 1))
            data[i // 8] ^= 1 << i % 8
        elif kind == "byte" and data:
            data[draw(st.integers(0, len(data) - 1))] = draw(st.integers(0, 255))
        elif kind == "cut":
            del data[draw(st.integers(0, len(data))):]
        elif kind == "extend":
            data += draw(st.binary(max_size=200))
        elif kind == "header" and len(data) >= _HEADER.size:
            off = draw(st.sampled_from((8, 12, 16, 20, 24, 26, 28)))
            width = 2 if off in (24, 26) else 4
            _set(data, off, width, draw(st.sampled_from((0, 1, 16, 2**15, 2**16 - 1, 2**31, 2**32 - 1))))
    return Case("binary", "npub", bytes(data))


# ---- Arch ------------------------------------------------------------------------------------------------------
def arch_fields() -> list[tuple[str, str, type]]:
    """(section, field, Python type) of every Arch field."""
    from dataclasses import fields

    from isa.arch import SECTIONS

    return [(s, f.name, type(f.default)) for s, k in SECTIONS.items() for f in fields(k)]


BIG = 2**31
"""No Arch integer needs to exceed 2**31 (sizes in bytes, counts, cycles; an SRAM may be exactly 2 GiB, the Arch's
stated bound): above it a value is certainly bad."""


def _arch_value(draw) -> tuple[str, Any]:
    """(text for an override, Python value for a dict) of an edge value."""
    v = draw(st.one_of(st.sampled_from((0, 1, 2, 3, 4, 16, 64, 100, 1000, 65536, -1, 2**20, 2**31, 2**32, 2**62,
                                        2**63, 2**64, 10**30)),
                       st.sampled_from((0.5, 1.0, 1e-300, 1e300, float("inf"), float("nan"), -2.0, 3.25)),
                       st.booleans(), st.sampled_from(("", "ws", "os", "rowbuffer", "bandwidth", "x", "i8,f16",
                                                       "i8", "é")),
                       st.just(["i8", "f16"]), st.just([])))
    text = str(v).lower() if isinstance(v, bool) else ",".join(v) if isinstance(v, list) else str(v)
    return text, v


def zero_allowed(sec: str, name: str) -> bool:
    """Whether Arch field ``sec.name`` takes 0 (its check's stated range starts at a closed ``[0``: a latency in ns,
    a host call's launch time)."""
    from dataclasses import fields

    from isa.arch import SECTIONS

    check = next(f for f in fields(SECTIONS[sec]) if f.name == name).metadata["check"]
    return getattr(check, "allowed", "").startswith("[0,")


def _certainly_bad(v: Any, kind: type, zero_ok: bool = False) -> bool:
    """A value no sane field of type ``kind`` takes (numbers only; choices are left to the oracles); ``zero_ok``: the
    field's range starts at a closed 0, so 0 and any tiny positive number are in it (for another float field, a
    number below 1e-6 is certainly bad)."""
    if kind is int:
        return isinstance(v, bool) or not isinstance(v, int) or v < 0 or v > BIG
    if kind is float:
        return (isinstance(v, bool) or not isinstance(v, int | float) or v != v or v < 0 or v >= BIG
                or (not zero_ok and v < 1e-6))
    if kind is bool:
        return not isinstance(v, bool)
    return False


@st.composite
def arch_cases(draw) -> Case:
    kind = draw(st.sampled_from(("override", "override", "toml", "toml", "dict")))
    table = arch_fields()
    if kind == "override":
        preset = draw(st.sampled_from(presets_by_size()))
        items, bad = [], {}   # (section, field) -> whether its last override is certainly bad (the last wins)
        for _ in range(draw(st.integers(1, 3))):
            sec, name, typ = draw(st.sampled_from(table))
            text, value = _arch_value(draw)
            if typ is int and isinstance(value, float) and value.is_integer() and np.isfinite(value):
                text = str(int(value)) if draw(st.booleans()) else text
            items.append(f"{sec}.{name}={text}")
            parsed = _parse_like(typ, text)
            bad[sec, name] = parsed is not _UNPARSED and _certainly_bad(parsed, typ, zero_allowed(sec, name))
        return Case("arch", "override", (preset, items), True if any(bad.values()) else None)
    if kind == "toml":
        which = draw(st.sampled_from(("mutate", "mutate", "mutate", "empty", "partial", "based", "name")))
        text = draw(st.sampled_from(preset_tomls()))
        bad = None
        if which == "empty":
            text, bad = draw(st.sampled_from(("", "\n", "# nothing\n", "   "))), True
        elif which == "partial":
            lines = text.splitlines()
            keep = draw(st.lists(st.integers(0, len(lines) - 1), unique=True, max_size=len(lines) - 1))
            text = "\n".join(lines[i] for i in sorted(keep)) + "\n"
            bad = True if _lacks_fields(text, table) else None   # and no base preset named
        elif which == "based":
            sec, name, typ = draw(st.sampled_from(table))
            vt, v = _arch_value(draw)
            lit = _toml_literal(v)
            text = f'base = "{draw(st.sampled_from(presets_by_size()))}"\n[{sec}]\n{name} = {lit}\n'
            bad = True if _certainly_bad(v, typ, zero_allowed(sec, name)) else None
        elif which == "name":
            v = draw(st.sampled_from(("5", "true", "[1]", "{a = 1}", "1.5", '"ok"')))
            text = re.sub(r'^name = .*$', f"name = {v}", text, count=1, flags=re.M)
            bad = True if v != '"ok"' else None
        else:
            bad_lines: dict[int, bool] = {}   # line -> whether its last edit is certainly bad (a later edit wins)
            for _ in range(draw(st.integers(1, 3))):
                lines = text.splitlines() or [""]
                i = draw(st.integers(0, len(lines) - 1))
                key, eq, _ = lines[i].partition(" = ")
                if eq and draw(st.booleans()):
                    vt, v = _arch_value(draw)
                    lines[i] = f"{key} = {_toml_literal(v)}"
                    sec = next((ln[1:-1] for ln in reversed(lines[:i]) if ln.startswith("[")), None)
                    typ = next((t for s, n, t in table if s == sec and n == key), None)
                    bad_lines[i] = typ is not None and _certainly_bad(v, typ, zero_allowed(sec, key))
                    text = "\n".join(lines) + "\n"
                else:
                    text = _splice(draw, text)
                    bad_lines.clear()   # (a splice may move, break or remove the lines edited before it)
            bad = True if any(bad_lines.values()) else None
        data, broken = _bytes_noise(draw, text.encode("utf-8", "surrogatepass"))
        return Case("arch", "toml", data, True if broken or bad else bad)
    d: dict[str, Any] = {}
    for _ in range(draw(st.integers(0, 6))):
        if draw(st.integers(0, 9)) == 0:
            d[draw(st.sampled_from(("name", "description", "bogus", "base")))] = _arch_value(draw)[1]
            continue
        sec, name, _ = draw(st.sampled_from(table))
        d.setdefault(sec, {})[name] = _arch_value(draw)[1]
    if draw(st.booleans()):
        d["base"] = draw(st.sampled_from(presets_by_size()))
    types = {(s, n): t for s, n, t in table}
    bad = any(_certainly_bad(v, types[sec, n], zero_allowed(sec, n)) for sec, values in d.items()
              if isinstance(values, dict)
              for n, v in values.items())
    bad |= any(not isinstance(d[k], str) for k in ("name", "description") if k in d)
    bad = True if bad else None
    return Case("arch", "dict", d, bad)


def _lacks_fields(text: str, table) -> bool:
    """Whether TOML ``text`` parses and leaves out a field of the Arch (name and description included)."""
    import tomllib

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return False
    have = lambda sec, name: isinstance(data.get(sec), dict) and name in data[sec]
    return "name" not in data or "description" not in data or not all(have(s, n) for s, n, _ in table)


_UNPARSED = object()


def _parse_like(typ: type, text: str) -> Any:
    """What an override's text means for a field of type ``typ`` (or _UNPARSED when it is not that type at all)."""
    if typ is bool:
        return text.lower() == "true" if text.lower() in ("true", "false") else _UNPARSED
    try:
        if typ is int:
            return int(text, 0)
        if typ is float:
            return float(text)
    except ValueError:
        return _UNPARSED
    return text


def _toml_literal(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return {"inf": "inf", "-inf": "-inf", "nan": "nan"}.get(str(v), repr(v))
    if isinstance(v, str):
        return '"' + v + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_literal(x) for x in v) + "]"
    return str(v)


# ---- run inputs --------------------------------------------------------------------------------------------------
_DTYPES = ("int8", "uint8", "int16", "int32", "int64", "float16", "float32", "float64", "bool", "complex64",
           "object", "str", "bytes")


def _mutate_array(draw, a: np.ndarray) -> tuple[Any, str]:
    """An edge variant of ``a`` and what was done."""
    kind = draw(st.sampled_from(("same", "same", "dtype", "shape", "size", "scalar", "empty", "list", "strided")))
    if kind == "dtype":
        dt = draw(st.sampled_from(_DTYPES))
        if dt == "object":
            return a.astype(object), "dtype object"
        if dt in ("str", "bytes"):
            return a.astype(dt).astype("U" if dt == "str" else "S"), f"dtype {dt}"
        return a.astype(dt), f"dtype {dt}"
    if kind == "shape":
        return a.reshape(-1) if draw(st.booleans()) else a.reshape((1,) + a.shape), "shape"
    if kind == "size":
        n = draw(st.sampled_from((1, a.size // 2, a.size + 1, a.size * 3)))
        return np.resize(a, n), "size"
    if kind == "scalar":
        return np.array(a.flat[0]), "scalar"
    if kind == "empty":
        return a[:0], "empty"
    if kind == "list":
        return a.tolist(), "list"
    if kind == "strided":
        return np.flip(a), "strided"
    return a, "same"


@st.composite
def input_cases(draw) -> Case:
    """Inputs for ``simulate`` of examples/gemm_int8.s (regions A, B, C) or ``run_model`` of the tiny model."""
    target = draw(st.sampled_from(("simulate", "run_model")))
    base = gemm_inputs() if target == "simulate" else tiny_inputs()
    inputs: dict[str, Any] = {}
    for name, a in base.items():
        if draw(st.integers(0, 9)) == 0:      # left out
            continue
        inputs[name] = _mutate_array(draw, a)[0]
    if draw(st.integers(0, 7)) == 0:
        inputs[draw(st.sampled_from(("Q", "x", "A", "", "C")))] = np.zeros(4, np.int8)
    return Case("inputs", target, inputs, True if _bad_inputs(target, inputs) else None)


REGIONS = {"A": 10752, "B": 8960, "C": 30720}
"""The DRAM regions of examples/gemm_int8.s and their bytes."""


def _bad_inputs(target: str, inputs: dict[str, Any]) -> bool:
    """Inputs the target must refuse: for a program, a name that is no region, an array of no numbers or larger
    than its region; for the model, anything but its two inputs exactly (names, shapes, dtypes)."""
    if target == "run_model":
        return set(inputs) != set(TINY_INPUTS) or any(
            not isinstance(v, np.ndarray) or (v.shape, v.dtype) != TINY_INPUTS[k] for k, v in inputs.items())
    for name, v in inputs.items():
        try:
            arr = np.asarray(v)
        except ValueError:
            return True
        if name not in REGIONS or arr.dtype.kind not in "biuf" or arr.nbytes > REGIONS[name]:
            return True
    return False


# ---- CLI ---------------------------------------------------------------------------------------------------------
SMALL = ("1", "3", "8", "16", "17", "32")
BAD_DIMS = ("0", "-4", "abc", "1e3", "4.5", "")
HUGE_DIMS = ("1000000", "2147483648")
ARCHES = (*presets_by_size(), "{good.toml}", "{empty.toml}", "{partial.toml}", "{based.toml}",
          "{latin1.toml}", "{badname.toml}", "{huge.toml}", "{cycles.toml}", "nonesuch", "{missing.toml}")
BAD_ARCHES = {"{empty.toml}", "{partial.toml}", "{latin1.toml}", "{badname.toml}", "{huge.toml}", "{cycles.toml}",
              "nonesuch", "{missing.toml}"}
SETS = ("matrix.rows=8", "spm.ports=2", "spm.ports=2147483648", "dram.latency_ns=-1", "dram.latency_ns=99999999999",
        "matrix.dataflow=os", "nonsense", "vector.lanes=0", "dram.gb_per_s=inf", "clock.ghz=nan", "dma.channels=1",
        "dram.gb_per_s=50.5", "dram.gb_per_s=38.41234", "dram.bandwidth=32")
BAD_SETS = {"spm.ports=2147483648", "dram.latency_ns=-1", "dram.latency_ns=99999999999", "nonsense",
            "vector.lanes=0", "dram.gb_per_s=inf", "clock.ghz=nan", "dram.gb_per_s=38.41234", "dram.bandwidth=32"}
PROGRAMS = ("{good.s}", "{good.npub}", "{mix.s}", "{deadlock.s}", "{latin1.s}", "{binary.s}", "{nul.s}",
            "{empty.s}", "{truncated.npub}", "{garbage.npub}", "{missing.s}", "{dir}")
BAD_PROGRAMS = {"{latin1.s}", "{binary.s}", "{nul.s}", "{empty.s}", "{truncated.npub}", "{garbage.npub}",
                "{missing.s}", "{dir}", "{deadlock.s}"}
INPUTS = ("{good.npz}", "{wrongdtype.npz}", "{unknown.npz}", "{single.npy}", "{strings.npz}", "{objects.npz}",
          "{corrupt.npz}", "{missing.npz}", "{good.s}")
BAD_INPUTS = {"{wrongdtype.npz}", "{unknown.npz}", "{single.npy}", "{strings.npz}", "{objects.npz}", "{corrupt.npz}",
              "{missing.npz}", "{good.s}"}
MODEL_INPUTS = ("{tiny.npz}", "{tiny_shape.npz}", "{tiny_dtype.npz}", "{tiny_missing.npz}", "{tiny_x.npy}",
                "{objects.npz}", "{corrupt.npz}")
BAD_MODEL_INPUTS = set(MODEL_INPUTS) - {"{tiny.npz}"}


REPORTS = ("{sim.json}", "{sim.json}", "{list.json}", "{garbage.json}", "{empty.json}", "{missing.json}",
           "{weird.json}", "{binary.s}")
BAD_REPORTS = {"{list.json}", "{garbage.json}", "{empty.json}", "{missing.json}", "{weird.json}", "{binary.s}"}


def _pick(draw, pool, bad_pool=()) -> tuple[str, bool]:
    v = draw(st.sampled_from(pool))
    return v, v in bad_pool


@st.composite
def cli_cases(draw) -> Case:
    """A command line: a subcommand, its positionals and options drawn from pools of good and bad values.

    ``{name}`` stands for a fixture file (:func:`tests.fuzz.fixtures.write_files`), ``{out}`` for a fresh output
    path, ``{dir}`` for a directory."""
    cmd = draw(st.sampled_from(("simulate", "simulate", "gemm", "gemm", "conv", "conv", "run", "plot", "verify",
                                "verify", "arch", "topo", "compile", "zoo", "presets", "diff", "sweep", "bogus", "")))
    argv: list[str] = [cmd] if cmd else []
    bad = cmd in ("bogus", "")

    def opt(flag: str, pool, bad_pool=(), p: float = 0.3) -> None:
        nonlocal bad
        if draw(st.floats(0, 1)) < p:
            v, b = _pick(draw, pool, bad_pool)
            argv.extend([flag, v])
            bad |= b

    def flag(name: str, p: float = 0.3) -> None:
        if draw(st.floats(0, 1)) < p:
            argv.append(name)

    def arch() -> None:
        opt("--arch", ARCHES, BAD_ARCHES)
        for _ in range(draw(st.integers(0, 1))):
            opt("--set", SETS, BAD_SETS, 0.4)

    if cmd in ("simulate", "verify"):
        prog, b = _pick(draw, PROGRAMS, BAD_PROGRAMS)
        argv.append(prog)
        bad |= b and not (cmd == "verify" and prog == "{deadlock.s}")   # verify only warns about the deadlock
        if cmd == "verify" and draw(st.booleans()):
            argv.append("--races")
            bad |= prog == "{deadlock.s}"     # a wait that is never signalled: the sanitizer refuses it
            opt("--max-races", ("0", "1", "100", "-1", "x"), ("-1", "x"), 0.3)
        if cmd == "simulate":
            arch()
            if prog not in ("{good.s}", "{good.npub}"):
                opt("--inputs", ("{good.npz}",), (), 0.1)
            else:
                opt("--inputs", INPUTS, BAD_INPUTS, 0.5)
            flag("--timing-only", 0.5)
            flag("--serial", 0.2)
            opt("--max-cycles", ("-1", "0", "10", "100000", "1000000000000", "abc"), ("-1", "abc"), 0.3)
            opt("--json", ("-", "{out}.json"), (), 0.3)
            opt("--save-outputs", ("{out}.npz",), (), 0.1)
            opt("--trace", ("{out}.trace.json",), (), 0.1)
    elif cmd in ("gemm", "conv"):
        n = 3 if cmd == "gemm" else 7
        dims = [draw(st.sampled_from(SMALL)) for _ in range(n)]
        if cmd == "conv":
            dims[5] = dims[6] = draw(st.sampled_from(("1", "3")))   # a filter that fits
            dims[2] = dims[3] = draw(st.sampled_from(("8", "16")))
        mode = draw(st.sampled_from(("small", "small", "small", "bad", "huge")))
        if mode == "bad":          # a value that is no positive integer
            dims[draw(st.integers(0, n - 1))] = draw(st.sampled_from(BAD_DIMS))
        elif mode == "huge":       # two huge dimensions: some DRAM region would hold 10**12 bytes or more
            pair = draw(st.sampled_from(((0, 2), (1, 2), (0, 1)) if cmd == "gemm" else ((0, 1), (1, 4), (2, 3))))
            for i in pair:
                dims[i] = draw(st.sampled_from(HUGE_DIMS))
        argv += dims
        bad |= mode != "small"
        arch()
        opt("--dtype", ("i8", "f16", "f32", "bf16", "u8", "i4", "float"), ("i4", "float"))
        flag("--timing-only", 0.6)
        flag("--ideal-memory", 0.2)
        opt("--seed", ("0", "7", "-1", "x"), ("x",), 0.1)
        opt("--json", ("-",), (), 0.2)
        if cmd == "conv":
            for o in ("--stride", "--pad", "--dilation", "--groups"):
                v = draw(st.sampled_from(("1", "1", "2", "0", "-1", "3", "x")))
                if draw(st.floats(0, 1)) < 0.3:
                    argv += [o, v]
                    bad |= v in ("x", "-1") or v == "0" and o != "--pad"
                    if o != "--groups" and draw(st.booleans()):    # per axis: 2 values (4 pads), or a wrong count
                        more = draw(st.sampled_from((1, 3) if o == "--pad" else (1, 2)))
                        argv += ["1"] * more
                        bad |= more != (3 if o == "--pad" else 1)
    elif cmd in ("run", "compile"):
        model = draw(st.sampled_from(("{tiny.onnx}", "{tiny.onnx}", "{tiny.onnx}", "{missing.onnx}")))
        argv.append(model)
        bad |= model == "{missing.onnx}"
        arch()
        if cmd == "run":
            opt("--inputs", MODEL_INPUTS, BAD_MODEL_INPUTS, 0.6)
            flag("--timing-only", 0.3)
            flag("--validate", 0.3)
            opt("--json", ("-",), (), 0.2)
        else:
            opt("-o", ("{out}.s", "{out}.npub"), (), 0.9)
            bad |= "-o" not in argv
        opt("--dump-after", ("fuse", "nonsense", "import"), (), 0.1)
    elif cmd == "plot":
        report, b = _pick(draw, ("{sim.json}", "{list.json}", "{garbage.json}", "{empty.json}", "{missing.json}",
                                 "{binary.s}"), ("{list.json}", "{garbage.json}", "{empty.json}", "{missing.json}",
                                                 "{binary.s}"))
        argv.append(report)
        bad |= b
        kind, b = _pick(draw, ("timeline", "util", "layers", "roofline", "pie"), ("pie",))
        if draw(st.integers(0, 9)):
            argv += ["--kind", kind]
            bad |= b or report == "{sim.json}" and kind in ("layers", "roofline")
        else:
            bad = True
        if draw(st.integers(0, 9)):
            argv += ["-o", draw(st.sampled_from(("{out}.png", "{out}.svg", "{out}.xyz")))]
            bad |= argv[-1].endswith(".xyz")
        else:
            bad = True
        opt("--window", ("0:100", "100:0", "a:b", "5", "-5:10"), ("a:b", "5", "100:0"), 0.2)
        opt("--buckets", ("10", "0", "-3", "x", "100000000"), ("0", "-3", "x", "100000000"), 0.2)
    elif cmd == "arch":
        arch()
    elif cmd == "topo":
        topo, b = _pick(draw, ("{topo.csv}", "{topo_bad.csv}", "{topo_gemm.csv}", "{missing.csv}", "{empty.s}"),
                        ("{topo_bad.csv}", "{missing.csv}", "{empty.s}"))
        argv.append(topo)
        bad |= b
        if draw(st.booleans()):
            argv.append("--gemm")        # a conv row read as GEMM rows is a (different) valid topology
        else:
            bad |= topo == "{topo_gemm.csv}"
        arch()
    elif cmd == "diff":
        for _ in range(2):
            report, b = _pick(draw, REPORTS, BAD_REPORTS)
            argv.append(report)
            bad |= b
        flag("--all-layers", 0.3)
        opt("--csv", ("{out}.csv",), (), 0.2)
    elif cmd == "sweep":
        spec, b = _pick(draw, ("{sweep.toml}", "{sweep.toml}", "{sweep_bad.toml}", "{empty.toml}", "{latin1.toml}",
                               "{missing.toml}"), ("{sweep_bad.toml}", "{empty.toml}", "{latin1.toml}",
                                                   "{missing.toml}"))
        argv += [spec, "--scheduler", "synchronous", "--quiet", "-o", "{out}"]
        bad |= b
        opt("--pareto", ("cycles,dram_bytes", "cycles", "nonsense,cycles"), ("cycles", "nonsense,cycles"), 0.3)
        opt("--rows", ("5", "0", "-1", "x"), ("-1", "x"), 0.2)
    elif cmd == "zoo":
        name = draw(st.sampled_from(("list", "nonesuch", "")))
        argv.append(name)
        bad |= name != "list"
    helps = False
    if draw(st.integers(0, 19)) == 0:
        argv.append(draw(st.sampled_from(("--bogus", "--help", "-h", "--quiet", "extra"))))
        bad |= argv[-1] in ("--bogus", "extra")
        helps = argv[-1] in ("--help", "-h")     # help may win over what else is wrong: either outcome is fine
    if cmd in ("bogus", ""):
        bad = True
    return Case("cli", cmd or "none", argv, True if bad and not helps else None)


from .onnx_cases import onnx_cases  # noqa: E402 (it builds on Case)

STRATEGIES = {"asm": asm_cases, "binary": binary_cases, "arch": arch_cases, "inputs": input_cases, "onnx": onnx_cases,
              "cli": cli_cases}
