"""Text assembly: parse and print programs with an exact round trip.

One instruction or directive per line; ``\\`` at the end of a line continues it; ``;`` or ``#`` starts a comment::

    .config rows=16 cols=16 spm=262144 acc=65536
    .region A r0 32768
    .sem a_full 0
    .equ TILE 0x2000
    dma.ld shape[64,128] dst=spm:TILE*2<i8>{128,1} src=dram:A+0x80<i8>{256,1} pad{0:1/0} signal(a_full*2)

``format_program`` prints the canonical form (fields in a fixed order, optional fields only when not default);
``parse_program(format_program(p)) == p`` for every valid program and ``format_program(parse_program(t)) == t`` for
canonical text ``t``.
"""

from __future__ import annotations

import dataclasses
import difflib
import operator
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from types import MappingProxyType
from typing import Any, NamedTuple

from isa.dtypes import DType, Space
from isa.errors import AsmSyntaxError, IsaError
from isa.instructions import (
    GATHER_QUEUES,
    Act,
    Barrier,
    BinOp,
    DmaCopy,
    DmaFill,
    Gather,
    Halt,
    HostCall,
    Instr,
    MatMul,
    Pad,
    Reduce,
    SemOp,
    Sync,
    VecBinary,
    VecConvert,
    VecRequant,
    VecUnary,
)
from isa.program import MAX_REGIONS, MAX_SEMS, Program, ProgramConfig, Region, SemDecl
from isa.units import DMA_QUEUES, UNIT_QUEUES
from isa.view import NAME_CHARS, View

Number = int | float
_DIGITS = "0123456789"
_WORD = frozenset(NAME_CHARS + ".")
_PUNCT = "[](){}<>,:=+-*/"
_FLOAT_NAMES = MappingProxyType({"inf": float("inf"), "nan": float("nan")})
_ARITH = MappingProxyType({"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv})

# ---- the tables: mnemonics and fields ---------------------------------------------------------------------------

_MNEMONIC_ATTRS: Mapping[type, tuple[str, ...]] = MappingProxyType({
    DmaCopy: ("queue",), DmaFill: ("queue",), MatMul: ("zero",), VecBinary: ("op", "reduce", "zero"),
    VecUnary: ("fn", "reduce", "zero"), VecConvert: (), VecRequant: (), Gather: ("queue",), HostCall: (),
    Sync: ("on",), Barrier: (), Halt: (),
})
"""The instruction attributes a mnemonic fixes, per class."""


def _mnemonic_table() -> dict[str, tuple[type, tuple[Any, ...]]]:
    """mnemonic -> (class, values of its _MNEMONIC_ATTRS). Later entries win when printing (vpu.red over act.mov)."""
    t: dict[str, tuple[type, tuple[Any, ...]]] = {"barrier": (Barrier, ()), "halt": (Halt, ()),
                                                  "vpu.cvt": (VecConvert, ()), "vpu.rq": (VecRequant, ()),
                                                  "host.call": (HostCall, ())}
    t.update({f"{q.text}.gather": (Gather, (q,)) for q in GATHER_QUEUES})
    for q in UNIT_QUEUES:
        if q in DMA_QUEUES:
            t[q.text] = (DmaCopy, (q,))
            t[q.text + ".fill"] = (DmaFill, (q,))
        t[q.text + ".sync"] = (Sync, (q,))
    for z in (False, True):
        zs = ".z" if z else ""
        t["mxu.mm" + zs] = (MatMul, (z,))
        for r in Reduce:
            suffix = ("" if r is Reduce.NONE else "." + r.name.lower()) + zs
            t.update({f"vpu.{op.name.lower()}{suffix}": (VecBinary, (op, r, z)) for op in BinOp})
            t.update({f"vpu.act.{fn.name.lower()}{suffix}": (VecUnary, (fn, r, z)) for fn in Act})
        for r in (Reduce.SUM, Reduce.MAX, Reduce.MIN):
            t[f"vpu.red.{r.name.lower()}{zs}"] = (VecUnary, (Act.MOV, r, z))
    return t


_MNEMONICS = MappingProxyType(_mnemonic_table())
_MNEMONIC_OF = MappingProxyType({entry: name for name, entry in _MNEMONICS.items()})


def _spec(*items: str) -> tuple[tuple[str, str, str], ...]:
    """``"key:kind"`` items -> (key, attribute, kind); the attribute is the key with '.' replaced by '_'."""
    return tuple((key, key.replace(".", "_"), kind) for key, _, kind in (s.partition(":") for s in items))


_SYNC_FIELDS = (("wait", "waits", "sems"), ("signal", "signals", "sems"))
_UNIT_FIELD = (("unit", "unit", "int"),)   # which of its queue's units runs it (printed when not 0)
_FIELDS: Mapping[type, tuple[tuple[str, str, str], ...]] = MappingProxyType({
    DmaCopy: _spec("shape:shape", "dst:view", "src:view", "pad:pad", "fill:num"),
    DmaFill: _spec("shape:shape", "dst:view", "value:num"),
    MatMul: _spec("shape:shape", "m:int", "k:int", "n:int", "acc:view", "acc.row:int", "a:view", "a.row:int",
                  "b:view"),
    VecBinary: _spec("shape:shape", "dst:view", "src0:view", "src1:view", "imm:num", "act:act", "lo:num", "hi:num"),
    VecUnary: _spec("shape:shape", "dst:view", "src:view", "lo:num", "hi:num"),
    VecConvert: _spec("shape:shape", "dst:view", "src:view", "scale:num", "zp_in:int", "zp_out:int"),
    VecRequant: _spec("shape:shape", "dst:view", "src:view", "prm:view", "zp:int", "lo:int", "hi:int"),
    Gather: _spec("shape:shape", "row:int", "rows:int", "dst:view", "table:view", "idx:view", "fill:num"),
    HostCall: _spec("fn:name", "rd:int", "wr:int", "ops:int"),
    Sync: (), Barrier: (), Halt: (),
})
"""Per class, its fields in canonical order: (key in the text, dataclass attribute, kind of value)."""

_SHOWN: Mapping[tuple[type, str], Callable[[Any], bool]] = MappingProxyType({
    (DmaCopy, "fill"): lambda i: bool(i.pad) or i.fill != 0,
    (VecBinary, "imm"): lambda i: i.src1 is None or i.imm != 0,
    (VecBinary, "lo"): lambda i: i.lo != 0 or i.hi != 0,
    (VecBinary, "hi"): lambda i: i.lo != 0 or i.hi != 0,
    (VecUnary, "lo"): lambda i: i.lo != 0 or i.hi != 0,
    (VecUnary, "hi"): lambda i: i.lo != 0 or i.hi != 0,
} | {(cls, "unit"): (lambda i: i.unit != 0) for cls in _FIELDS})
"""Fields printed only under a condition (besides None views and empty pad/wait/signal lists)."""

# ---- printing -------------------------------------------------------------------------------------------------


def _fmt_num(v: Number) -> str:
    return repr(float(v)) if isinstance(v, float) else str(v)


_SPACE_TEXT = MappingProxyType({sp: sp.text for sp in Space})


def format_view(v: View) -> str:
    """``space:0xBASE<dtype>{strides}``, or ``dram:REGION+0xOFFSET<dtype>{strides}``."""
    where = f"{v.region}+{v.base:#x}" if v.space is Space.DRAM else f"{v.base:#x}"
    return f"{_SPACE_TEXT[v.space]}:{where}<{v.dtype.text}>{{{','.join(map(str, v.strides))}}}"


_FORMAT: Mapping[str, Callable[[str, Any], str]] = MappingProxyType({
    "shape": lambda k, v: f"shape[{','.join(map(str, v))}]",
    "view": lambda k, v: f"{k}={format_view(v)}",
    "int": lambda k, v: f"{k}={v}",
    "name": lambda k, v: f"{k}={v}",
    "act": lambda k, v: f"{k}={v.name.lower()}",
    "num": lambda k, v: f"{k}={_fmt_num(v)}",
    "pad": lambda k, v: "pad{" + ",".join(f"{p.dim}:{p.lo}/{p.hi}" for p in v) + "}",
    "sems": lambda k, v: f"{k}(" + ", ".join(o.name + (f"*{o.count}" if o.count != 1 else "") for o in v) + ")",
})


def _all_fields(cls: type) -> tuple[tuple[str, str, str], ...]:
    """Every field of ``cls`` in canonical order: its own, ``unit`` (not for the dispatcher's barrier and halt), the
    semaphore operations."""
    return _FIELDS[cls] + (_UNIT_FIELD if cls not in (Barrier, Halt) else ()) + _SYNC_FIELDS


def _print_plan(cls: type) -> tuple[tuple[str, bool, Callable[[Any], bool] | None, Callable[[Any], str]], ...]:
    """Per field of ``cls``: (attribute, hidden when empty, shown-condition or None, formatter of the value)."""
    return tuple((attr, kind in ("pad", "sems"), _SHOWN.get((cls, key)), partial(_FORMAT[kind], key))
                 for key, attr, kind in _all_fields(cls))


_PRINT_PLANS = MappingProxyType({cls: _print_plan(cls) for cls in _FIELDS})


def mnemonic(i: Instr) -> str:
    """The mnemonic of an instruction (``vpu.gather``, ``dma.ld``, ``mxu.mm.z``...)."""
    cls = type(i)
    return _MNEMONIC_OF[cls, tuple(getattr(i, a) for a in _MNEMONIC_ATTRS[cls])]


def format_instr(i: Instr) -> str:
    """The canonical one-line assembly of an instruction."""
    cls = type(i)
    parts = [mnemonic(i)]
    for attr, hide_empty, shown, fmt in _PRINT_PLANS[cls]:
        v = getattr(i, attr)
        if v is None or hide_empty and not v or shown is not None and not shown(i):
            continue
        parts.append(fmt(v))
    return " ".join(parts)


def format_program(p: Program) -> str:
    """The canonical assembly of a program: .config, .region and .sem lines, then one instruction per line."""
    c = p.config
    lines = [f".config rows={c.rows} cols={c.cols} spm={c.spm} acc={c.acc}"]
    lines += [f".region {r.name} r{r.index} {r.size}" for r in p.regions]
    lines += [f".sem {s.name} {s.init}" for s in p.sems]
    lines += [format_instr(i) for i in p.instrs]
    return "\n".join(lines) + "\n"


# ---- tokenizing -----------------------------------------------------------------------------------------------


class _Tok(NamedTuple):
    kind: str  # "name", "num", "op" or "eol"
    text: str
    line: int
    col: int

    def __str__(self) -> str:
        return "end of line" if self.kind == "eol" else repr(self.text)


def _logical_lines(text: str, source: str) -> Iterator[list[_Tok]]:
    """The tokens of each non-empty logical line (continuations joined), each list ending with an "eol" token."""
    toks: list[_Tok] = []
    for ln, s in enumerate(text.splitlines(), 1):
        i, cont = 0, False
        while i < len(s):
            c, j = s[i], i + 1
            if c in " \t":
                i += 1
                continue
            if c in ";#":
                break
            if c == "\\":
                rest = s[j:].lstrip(" \t")
                if rest and rest[0] not in ";#":
                    raise AsmSyntaxError(f"expected end of line after '\\' (line continuation), found {rest[0]!r}",
                                         ln, len(s) - len(rest) + 1, source)
                cont = True
                break
            if c in _DIGITS or c == "." and j < len(s) and s[j] in _DIGITS:
                kind, hexa = "num", s[i:i + 2].lower() == "0x"
                while j < len(s) and (s[j] in _WORD or s[j] in "+-" and s[j - 1] in "eE" and not hexa):
                    j += 1
            elif c in _WORD:
                kind = "name"
                while j < len(s) and s[j] in _WORD:
                    j += 1
            elif c in _PUNCT:
                kind, j = "op", j + (s[i:i + 2] == "//")
            else:
                raise AsmSyntaxError(f"unexpected character {c!r}", ln, i + 1, source)
            toks.append(_Tok(kind, s[i:j], ln, i + 1))
            i = j
        if not cont and toks:
            yield _with_eol(toks)
            toks = []
    if toks:
        yield _with_eol(toks)


def _with_eol(toks: list[_Tok]) -> list[_Tok]:
    last = toks[-1]
    return toks + [_Tok("eol", "", last.line, last.col + len(last.text))]


# ---- parsing --------------------------------------------------------------------------------------------------


def _required(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls)
                     if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)


class _Parser:
    """Recursive-descent parser; holds the declarations seen so far and the tokens of the current line."""

    def __init__(self, source: str):
        self.source = source
        self.config: ProgramConfig | None = None
        self.regions: dict[str, Region] = {}
        self.sems: dict[str, SemDecl] = {}
        self.equ: dict[str, int] = {}
        self.instrs: list[Instr] = []
        self.toks: list[_Tok] = []
        self.pos = self.depth = 0

    # token helpers
    def err(self, tok: _Tok, msg: str) -> AsmSyntaxError:
        return AsmSyntaxError(msg, tok.line, tok.col, self.source)

    def peek(self) -> _Tok:
        return self.toks[self.pos]

    def next(self) -> _Tok:
        t = self.toks[self.pos]
        self.pos += t.kind != "eol"
        return t

    def accept(self, op: str) -> bool:
        t = self.peek()
        if t.kind == "op" and t.text == op:
            self.pos += 1
            return True
        return False

    def expect(self, op: str, where: str) -> None:
        if not self.accept(op):
            raise self.err(self.peek(), f"expected '{op}' {where}, found {self.peek()}")

    def name(self, what: str) -> _Tok:
        t = self.next()
        if t.kind != "name":
            raise self.err(t, f"expected {what}, found {t}")
        return t

    def end(self) -> None:
        if self.peek().kind != "eol":
            raise self.err(self.peek(), f"expected end of line, found {self.peek()}")

    # values
    def number(self, t: _Tok) -> Number:
        s = t.text
        try:
            if s[:2].lower() in ("0x", "0o", "0b"):
                return int(s, 0)
            return int(s, 10) if all(c in _DIGITS + "_" for c in s) else float(s)
        except ValueError:
            raise self.err(t, f"malformed number {s!r}") from None

    def atom(self) -> Number:
        negate = False
        while self.peek().kind == "op" and self.peek().text in ("-", "+"):
            negate ^= self.next().text == "-"
        v = self.primary()
        return -v if negate else v

    def primary(self) -> Number:
        t = self.next()
        if t.kind == "op" and t.text == "(":
            self.depth += 1
            if self.depth > 50:
                raise self.err(t, "expression nested too deeply")
            v = self.expr()
            self.depth -= 1
            self.expect(")", "to close '('")
            return v
        if t.kind == "num":
            return self.number(t)
        if t.kind == "name":
            if t.text in self.equ:
                return self.equ[t.text]
            if t.text in _FLOAT_NAMES:
                return _FLOAT_NAMES[t.text]
            raise self.err(t, f"undefined name {t.text!r} (define it with .equ)")
        raise self.err(t, f"expected a number, found {t}")

    def term(self) -> Number:
        v = self.atom()
        while self.peek().kind == "op" and self.peek().text in ("*", "//"):
            op = self.next()
            r = self.atom()
            if op.text == "//" and r == 0:
                raise self.err(op, "division by zero")
            v = self.arith(op, v, r)
        return v

    def expr(self) -> Number:
        """``expr := term (('+'|'-') term)*``; ``term := atom (('*'|'//') atom)*``; atom: number, name, -atom, (..)."""
        v = self.term()
        while self.peek().kind == "op" and self.peek().text in ("+", "-"):
            op = self.next()
            v = self.arith(op, v, self.term())
        return v

    def arith(self, op: _Tok, a: Number, b: Number) -> Number:
        try:
            return _ARITH[op.text](a, b)
        except OverflowError:
            raise self.err(op, f"result of {op.text!r} is too large") from None

    def integer(self) -> int:
        t = self.peek()
        v = self.expr()
        if not isinstance(v, int):
            raise self.err(t, f"expected an integer, found {_fmt_num(v)}")
        return v

    def listing(self, close: str, what: str, item: Callable[[], Any]) -> list[Any]:
        """Comma-separated items up to ``close`` (the opening bracket is already consumed)."""
        items: list[Any] = []
        if self.accept(close):
            return items
        while True:
            items.append(item())
            if self.accept(close):
                return items
            if not self.accept(","):
                raise self.err(self.peek(), f"expected ',' or '{close}' after {what}, found {self.peek()}")

    def view(self) -> View:
        t = self.name("a memory space (dram, spm or acc)")
        space = {s.text: s for s in Space}.get(t.text)
        if space is None:
            raise self.err(t, f"unknown memory space {t.text!r}, expected dram, spm or acc")
        self.expect(":", f"after memory space {t.text}")
        region = None
        if space is Space.DRAM:
            r = self.name("a region name")
            if r.text not in self.regions:
                raise self.err(r, f"unknown region {r.text!r} (declare it with .region)")
            region, base = r.text, self.integer() if self.accept("+") else 0
        else:
            base = self.integer()
        self.expect("<", "before the view's dtype")
        d = self.name("a dtype")
        try:
            dtype = DType.from_text(d.text)
        except KeyError:
            raise self.err(d, f"unknown dtype {d.text!r}, expected one of {', '.join(x.text for x in DType)}") from None
        self.expect(">", "after the view's dtype")
        self.expect("{", "before the view's strides")
        strides = self.listing("}", "a stride", self.integer)
        try:
            return View(space, base, dtype, tuple(strides), region)
        except IsaError as e:
            raise self.err(t, str(e)) from None

    def semop(self) -> SemOp:
        t = self.name("a semaphore name")
        if t.text not in self.sems:
            raise self.err(t, f"unknown semaphore {t.text!r} (declare it with .sem)")
        count = self.integer() if self.accept("*") else 1
        try:
            return SemOp(t.text, count)
        except IsaError as e:
            raise self.err(t, str(e)) from None

    def pad(self) -> Pad:
        dim = self.integer()
        self.expect(":", "after the pad dimension")
        lo = self.integer()
        self.expect("/", "between pad lo and hi")
        return Pad(dim, lo, self.integer())

    def value(self, kind: str, key: str) -> Any:
        opener = {"shape": "[", "pad": "{", "sems": "("}.get(kind, "=")
        self.expect(opener, f"after {key}")
        if kind == "shape":
            return tuple(self.listing("]", "a shape extent", self.integer))
        if kind == "pad":
            return tuple(self.listing("}", "a pad", self.pad))
        if kind == "sems":
            return tuple(self.listing(")", "a semaphore", self.semop))
        if kind == "name":
            return self.name(f"a name after {key}=").text
        if kind == "act":
            t = self.name(f"an activation after {key}=")
            fn = {a.name.lower(): a for a in Act}.get(t.text)
            if fn is None:
                raise self.err(t, f"unknown activation {t.text!r}, expected one of: "
                                  f"{', '.join(a.name.lower() for a in Act)}")
            return fn
        return {"view": self.view, "int": self.integer, "num": self.expr}[kind]()

    def fields(self, specs: Mapping[str, tuple[str, str]], what: str) -> tuple[dict[str, Any], set[str]]:
        """``key=value`` (and ``shape[..]``, ``pad{..}``, ``wait(..)``...) fields up to the end of the line."""
        out: dict[str, Any] = {}
        seen: set[str] = set()
        while self.peek().kind != "eol":
            k = self.next()
            if k.kind != "name":
                raise self.err(k, f"expected a field name or end of line, found {k}")
            if k.text not in specs:
                known = ", ".join(specs) or "none"
                raise self.err(k, f"unknown field {k.text!r} for {what}, expected one of: {known}")
            if k.text in seen:
                raise self.err(k, f"duplicate field {k.text!r}")
            seen.add(k.text)
            attr, kind = specs[k.text]
            out[attr] = self.value(kind, k.text)
        return out, seen

    # lines
    def instr(self, mt: _Tok) -> Instr:
        entry = _MNEMONICS.get(mt.text)
        if entry is None:
            close = difflib.get_close_matches(mt.text, list(_MNEMONICS), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise self.err(mt, f"unknown mnemonic {mt.text!r}{hint}")
        cls, fixed = entry
        specs = {key: (attr, kind) for key, attr, kind in _all_fields(cls)}
        kwargs, seen = self.fields(specs, mt.text)
        required = _required(cls)
        for key, (attr, _) in specs.items():
            if key not in seen and attr in required:
                raise self.err(mt, f"missing field {key!r} for {mt.text}")
        try:
            return cls(**dict(zip(_MNEMONIC_ATTRS[cls], fixed)), **kwargs)
        except IsaError as e:
            raise self.err(mt, str(e)) from None

    def directive(self, t: _Tok) -> None:
        if t.text == ".config":
            if self.config is not None:
                raise self.err(t, ".config is given twice")
            keys = ("rows", "cols", "spm", "acc")
            vals, seen = self.fields({k: (k, "int") for k in keys}, ".config")
            if missing := [k for k in keys if k not in seen]:
                raise self.err(t, f"missing field {missing[0]!r} for .config")
            try:
                self.config = ProgramConfig(**vals)
            except IsaError as e:
                raise self.err(t, str(e)) from None
        elif t.text == ".region":
            n = self.declared_name(t, self.regions, MAX_REGIONS, "region")
            r = self.name("a region index like r0")
            digits = r.text[1:]
            if r.text[:1] != "r" or not digits or any(c not in _DIGITS for c in digits):
                raise self.err(r, f"expected a region index like r0, found {r}")
            if any(x.index == int(digits) for x in self.regions.values()):
                raise self.err(r, f"region index {r.text} is used twice")
            size = self.integer()
            self.regions[n.text] = self.declare(n, Region, n.text, int(digits), size)
            self.end()
        elif t.text == ".sem":
            n = self.declared_name(t, self.sems, MAX_SEMS, "semaphore")
            init = self.integer() if self.peek().kind != "eol" else 0
            self.sems[n.text] = self.declare(n, SemDecl, n.text, init)
            self.end()
        elif t.text == ".equ":
            n = self.name("a constant name")
            if n.text in self.equ:
                raise self.err(n, f".equ {n.text!r} is defined twice")
            if n.text[0] in _DIGITS or any(c not in NAME_CHARS for c in n.text) or n.text in _FLOAT_NAMES:
                raise self.err(n, f".equ name must be letters, digits and '_' not starting with a digit, not {n}")
            self.equ[n.text] = self.integer()
            self.end()
        else:
            raise self.err(t, f"unknown directive {t.text!r}, expected .config, .region, .sem or .equ")

    def declared_name(self, t: _Tok, table: Mapping[str, Any], limit: int, what: str) -> _Tok:
        n = self.name(f"a {what} name")
        if n.text in table:
            raise self.err(n, f"{what} {n.text!r} is declared twice")
        if len(table) == limit:
            raise self.err(t, f"a program declares at most {limit} {what}s")
        return n

    def declare(self, n: _Tok, cls: Callable[..., Any], *args: Any) -> Any:
        try:
            return cls(*args)
        except IsaError as e:
            raise self.err(n, str(e)) from None

    def line(self, toks: list[_Tok]) -> None:
        self.toks, self.pos = toks, 0
        t = self.name("a mnemonic or a directive")
        if t.text.startswith("."):
            self.directive(t)
        elif self.config is None:
            raise self.err(t, "missing .config: it must come before the first instruction")
        else:
            self.instrs.append(self.instr(t))

    def program(self) -> Program:
        if self.config is None:
            raise AsmSyntaxError("missing .config directive (.config rows=.. cols=.. spm=.. acc=..)", 1, 1,
                                 self.source)
        try:
            return Program(self.config, tuple(self.regions.values()), tuple(self.sems.values()), tuple(self.instrs))
        except IsaError as e:
            raise AsmSyntaxError(str(e), 1, 1, self.source) from None


def parse_program(text: str, source: str = "<asm>") -> Program:
    """Parse assembly text into a Program; errors are AsmSyntaxError carrying ``source:line:col``."""
    p = _Parser(source)
    for toks in _logical_lines(text, source):
        p.line(toks)
    return p.program()


def parse_instr(line: str, program: Program | None = None, source: str = "<asm>") -> Instr:
    """Parse one instruction; DRAM regions and semaphores it names must be declared in ``program``."""
    p = _Parser(source)
    if program is not None:
        p.regions = dict(program.region_map)
        p.sems = {s.name: s for s in program.sems}
    lines = list(_logical_lines(line, source))
    if len(lines) != 1:
        raise AsmSyntaxError(f"expected one instruction, found {len(lines)} lines", 1, 1, source)
    p.toks = lines[0]
    t = p.name("a mnemonic")
    return p.instr(t)
