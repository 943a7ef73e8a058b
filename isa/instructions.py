"""The instruction set: one frozen dataclass per instruction kind.

Every instruction may carry semaphore operations: ``waits`` are acquired all-or-nothing when the instruction issues
from the head of its queue, ``signals`` are applied when it retires (when its writes become visible). At most four
semaphore operations per instruction (they share the four sync slots of the binary encoding).

Semantics are written per class; ``docs/isa.md`` has the table generated from this module.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from isa.dtypes import INT_RANGE, DType, Space
from isa.errors import IsaError
from isa.units import DMA_QUEUES, MAX_PER_KIND, UNIT_QUEUES, Queue
from isa.view import MAX_DIMS, MAX_EXTENT, NAME_CHARS, View, is_name

MAX_SYNC_SLOTS = 4
MAX_SEM_COUNT = 127
MAX_PAD = 15


class Opcode(enum.IntEnum):
    """Binary opcodes (byte 0 of an encoded instruction)."""

    COPY = 1
    FILL = 2
    MM = 3
    BIN = 4
    UNARY = 5
    CVT = 6
    RQ = 7
    SYNC = 8
    BARRIER = 9
    HALT = 10
    HOST = 11
    GATHER = 12


class BinOp(enum.IntEnum):
    """Element-wise binary operations of the vector unit. Integer-only: shl, shr, and, or, xor. Float-only: div."""

    ADD = 0
    SUB = 1
    MUL = 2
    DIV = 3
    MIN = 4
    MAX = 5
    SHL = 6
    SHR = 7
    AND = 8
    OR = 9
    XOR = 10
    CMPGT = 11
    CMPEQ = 12


INT_ONLY_BINOPS = frozenset({BinOp.SHL, BinOp.SHR, BinOp.AND, BinOp.OR, BinOp.XOR})
FLOAT_ONLY_BINOPS = frozenset({BinOp.DIV})


class Act(enum.IntEnum):
    """Unary functions of the vector unit. The transcendental ones need a float source."""

    MOV = 0
    RELU = 1
    CLAMP = 2
    ABS = 3
    NEG = 4
    EXP = 5
    LOG = 6
    RECIP = 7
    SQRT = 8
    RSQRT = 9
    SIGMOID = 10
    TANH = 11
    GELU = 12
    ERF = 13


FLOAT_ONLY_ACTS = frozenset({Act.EXP, Act.LOG, Act.RECIP, Act.SQRT, Act.RSQRT, Act.SIGMOID, Act.TANH, Act.GELU,
                             Act.ERF})
FUSED_ACTS = frozenset({Act.RELU, Act.CLAMP})
"""Activations a binary op can apply on the way out of its ALU (``act=``): comparisons, no extra pass or cycle."""


class Reduce(enum.IntEnum):
    """How values meeting in one destination element (a dimension with destination stride 0) combine."""

    NONE = 0
    SUM = 1
    MAX = 2
    MIN = 3


@dataclass(frozen=True, slots=True)
class SemOp:
    """``name*count``: wait for (acquire) or signal (release) ``count`` tokens of a counting semaphore."""

    name: str
    count: int = 1

    def __post_init__(self) -> None:
        if not is_name(self.name):
            raise IsaError(f"semaphore name must be letters, digits and '_', not {self.name!r}")
        if not 1 <= self.count <= MAX_SEM_COUNT:
            raise IsaError(f"semaphore count must be in [1, {MAX_SEM_COUNT}], not {self.count}")


@dataclass(frozen=True, slots=True)
class Pad:
    """Padding of one DMA dimension: destination index i reads source index i - lo; i < lo or i >= e - hi read fill."""

    dim: int
    lo: int
    hi: int


def _check_shape(shape: tuple[int, ...], max_dims: int = MAX_DIMS) -> None:
    if not 1 <= len(shape) <= max_dims:
        raise IsaError(f"shape must have 1 to {max_dims} dimensions, not {len(shape)}")
    for e in shape:
        if not 1 <= e <= MAX_EXTENT:
            raise IsaError(f"shape extents must be in [1, {MAX_EXTENT}], not {e}")


def _check_view(v: View, ndim: int, role: str, spaces: tuple[Space, ...] = (Space.SPM, Space.ACC),
                per: str = "one per shape dimension") -> None:
    if not isinstance(v, View):
        raise IsaError(f"operand {role} must be a View, not {v!r}")
    if v.space not in spaces:
        allowed = "/".join(s.text for s in spaces)
        raise IsaError(f"operand {role} must be in {allowed}, not {v.space.text}")
    if len(v.strides) != ndim:
        raise IsaError(f"operand {role} must have {ndim} strides ({per}), not {len(v.strides)}")


def _canon_value(value: int | float, dtype: DType, role: str) -> int | float:
    """An immediate as the exact value its dtype holds: float32-rounded for floats, range-checked for ints."""
    if type(value) is int and value == 0:   # (the default of every immediate)
        return 0.0 if dtype.is_float else 0
    if dtype.is_float:
        return float(np.float32(value))
    if isinstance(value, float) and not value.is_integer():
        raise IsaError(f"{role} must be an integer for {dtype.text}, not {value!r}")
    lo, hi = INT_RANGE[dtype]
    if not lo <= int(value) <= hi:
        raise IsaError(f"{role} must be in [{lo}, {hi}] for {dtype.text}, not {value}")
    return int(value)


@functools.cache
def _slot_names(cls: type) -> tuple[str, ...]:
    """The fields of instruction class ``cls`` (every slot along its bases)."""
    return tuple(f.name for f in dataclasses.fields(cls))


@functools.cache
def _copier(cls: type) -> Callable:
    """``copy(instr, waits, signals)``: a ``cls`` instruction with ``instr``'s fields but these semaphore operations,
    not checked (a straight-line function per class: three times faster than a loop over the fields)."""
    body = "".join(f"    set_(new, {n!r}, instr.{n})\n" for n in _slot_names(cls) if n not in ("waits", "signals"))
    src = (f"def copy(instr, waits, signals):\n    new = new_(cls)\n{body}"
           f"    set_(new, 'waits', waits)\n    set_(new, 'signals', signals)\n    return new\n")
    scope = {"new_": object.__new__, "set_": object.__setattr__, "cls": cls}
    exec(src, scope)
    return scope["copy"]


def _check_unit(unit: int) -> None:
    if type(unit) is not int or not 0 <= unit < MAX_PER_KIND:
        raise IsaError(f"unit (which of its queue's units runs it) must be an integer in [0, {MAX_PER_KIND}), "
                       f"not {unit!r}")


def _check_dma_queue(queue: Queue) -> None:
    if queue not in DMA_QUEUES:
        names = " or ".join(q.text for q in UNIT_QUEUES if q in DMA_QUEUES)
        raise IsaError(f"a DMA instruction goes to {names}, not {getattr(queue, 'text', queue)}")


def reduction_dims(shape: tuple[int, ...], dst: View) -> tuple[int, ...]:
    """Dimensions whose values meet in one destination element: destination stride 0 and extent > 1."""
    return tuple(i for i, (e, s) in enumerate(zip(shape, dst.strides)) if s == 0 and e > 1)


@dataclass(frozen=True, slots=True, kw_only=True)
class Instr:
    """Common part of every instruction: the semaphore operations, and which of its queue's units runs it
    (``unit``: the ordinal among the units of that kind a core has, ``units.<kind>`` of the Arch; 0 by default)."""

    waits: tuple[SemOp, ...] = ()
    signals: tuple[SemOp, ...] = ()
    unit: int = 0
    opcode: ClassVar[Opcode]

    def __post_init__(self) -> None:
        if self.unit:
            _check_unit(self.unit)
        self._check_sync()

    @property
    def unit_key(self) -> int:
        """The unit that runs it, as :func:`isa.units.unit_key` of its queue and ``unit``."""
        return self.queue | self.unit << 4   # (unit_key, inline: read for every instruction of a run)

    def _check_sync(self) -> None:
        waits, signals = self.waits, self.signals
        nw, ns = len(waits), len(signals)
        if nw + ns > MAX_SYNC_SLOTS:
            raise IsaError(f"an instruction has at most {MAX_SYNC_SLOTS} waits and signals in all, "
                           f"not {nw + ns} (split them with a .sync instruction)")
        for ops in (waits, signals) if nw > 1 or ns > 1 else ():   # (most have one of each, or none)
            if len(ops) > 1 and (ops[0].name == ops[1].name if len(ops) == 2 else
                                 len({o.name for o in ops}) != len(ops)):
                raise IsaError(f"a semaphore may appear once among the waits and once among the signals: "
                               f"{[o.name for o in ops]}")

    def resynced(self, waits: tuple[SemOp, ...], signals: tuple[SemOp, ...], **operands: View) -> Instr:
        """This instruction with ``waits`` and ``signals`` instead of its own, and the views ``operands`` (by role)
        instead of those operands: ``dataclasses.replace`` for compilers that wire semaphores into many instructions
        and relocate their operands. Only the semaphore rules are checked again when each new operand has the dtype
        and strides of the one it replaces in the same memory space (a rebased or renamed view, valid if its
        instruction was); otherwise the whole instruction is checked again."""
        new = _copier(type(self))(self, waits, signals)
        if not operands:
            new._check_sync()
            return new
        recheck = False
        for role, view in operands.items():
            old = getattr(self, role)
            recheck = recheck or not (isinstance(view, View) and old is not None and view.space is old.space
                                      and view.dtype is old.dtype and view.strides == old.strides)
            object.__setattr__(new, role, view)
        if recheck:
            new.__post_init__()
        else:
            new._check_sync()
        return new

    @property
    def queue(self) -> Queue:
        raise NotImplementedError

    def views(self) -> tuple[tuple[str, View, tuple[tuple[int, int], ...]], ...]:
        """(role, view, extra (extent, stride) pairs) of every operand, for bounds and footprint checks: the operand
        covers ``view.span(shape, extra)`` (a DmaCopy's src: over its ``src_shape``). A gather's table has no strides
        of its own there, only extra pairs: its footprint is all its rows, not an image of the shape."""
        return ()

    def __str__(self) -> str:
        from isa.asm import format_instr

        return format_instr(self)


@dataclass(frozen=True, slots=True, kw_only=True)
class DmaCopy(Instr):
    """``dma.ld|dma.st shape[..] dst=V src=V [pad{d:lo/hi,..} fill=X]``: element-wise copy, no type change.

    Any direction between DRAM, SPM and ACC. Source and destination dtypes must have the same size (bytes are
    copied as they are). Padded dimensions read ``fill`` outside the source: the source covers ``e - lo - hi``
    elements of such a dimension. A source stride of 0 broadcasts.
    """

    queue: Queue
    shape: tuple[int, ...]
    dst: View
    src: View
    pad: tuple[Pad, ...] = ()
    fill: int | float = 0
    opcode: ClassVar[Opcode] = Opcode.COPY

    def __post_init__(self) -> None:
        Instr.__post_init__(self)
        _check_dma_queue(self.queue)
        _check_shape(self.shape)
        spaces = (Space.DRAM, Space.SPM, Space.ACC)
        _check_view(self.dst, len(self.shape), "dst", spaces)
        _check_view(self.src, len(self.shape), "src", spaces)
        if self.dst.dtype.size != self.src.dtype.size:
            raise IsaError(f"DMA copies bytes: dst and src dtypes must have the same size, not "
                           f"{self.dst.dtype.text} and {self.src.dtype.text} (use vpu.cvt to convert)")
        seen = set()
        for p in self.pad:
            if not 0 <= p.dim < len(self.shape) or p.dim in seen:
                raise IsaError(f"pad dimension must be a distinct dimension in [0, {len(self.shape)}), not {p.dim}")
            seen.add(p.dim)
            if not (0 <= p.lo <= MAX_PAD and 0 <= p.hi <= MAX_PAD):
                raise IsaError(f"pad amounts must be in [0, {MAX_PAD}], not {p.lo}/{p.hi}")
            if p.lo + p.hi > self.shape[p.dim]:
                raise IsaError(f"pad {p.lo}/{p.hi} exceeds extent {self.shape[p.dim]} of dimension {p.dim}")
        object.__setattr__(self, "pad", tuple(sorted(self.pad, key=lambda p: p.dim)))
        object.__setattr__(self, "fill", _canon_value(self.fill, self.dst.dtype, "fill"))

    @property
    def src_shape(self) -> tuple[int, ...]:
        """Extents of the source: the shape less the padding."""
        if not self.pad:
            return self.shape
        shape = list(self.shape)
        for p in self.pad:
            shape[p.dim] -= p.lo + p.hi
        return tuple(shape)

    def views(self):
        return (("dst", self.dst, ()), ("src", self.src, ())) if all(self.src_shape) else (("dst", self.dst, ()),)


@dataclass(frozen=True, slots=True, kw_only=True)
class DmaFill(Instr):
    """``dma.ld.fill|dma.st.fill shape[..] dst=V value=X``: write ``value`` to every destination element."""

    queue: Queue
    shape: tuple[int, ...]
    dst: View
    value: int | float = 0
    opcode: ClassVar[Opcode] = Opcode.FILL

    def __post_init__(self) -> None:
        Instr.__post_init__(self)
        _check_dma_queue(self.queue)
        _check_shape(self.shape)
        _check_view(self.dst, len(self.shape), "dst", (Space.DRAM, Space.SPM, Space.ACC))
        object.__setattr__(self, "value", _canon_value(self.value, self.dst.dtype, "value"))

    def views(self):
        return (("dst", self.dst, ()),)


MXU_INT = (DType.I8, DType.U8)
MXU_FLOAT = (DType.F16, DType.BF16, DType.F32)


@dataclass(frozen=True, slots=True, kw_only=True)
class MatMul(Instr):
    """``mxu.mm[.z] shape[..] m=M k=K n=N acc=V acc.row=R a=V a.row=R b=V``: tiled matmul into the accumulator.

    For each loop point p and row r < m, column j < n:
    ``ACC[acc(p) + r*acc.row + 4j] += sum_{q<k} A[a(p) + r*a.row + q*es] * B[b(p) + (q*n + j)*es]``.
    A rows hold k contiguous elements; the B tile is k x n, row-major and contiguous; ``es`` is each operand's own
    element size. Loop dimensions with an acc stride of 0 reduce into the same rows. ``.z`` first zeroes every
    accumulator element the instruction touches. Operands i8/u8 accumulate in i32 (two's complement wrap);
    f16/bf16/f32 accumulate in f32, with B of A's type or, weight-only, i8/u8 (each code converted exactly to f32;
    see docs/isa.md).
    """

    shape: tuple[int, ...]
    m: int
    k: int
    n: int
    acc: View
    acc_row: int
    a: View
    a_row: int
    b: View
    zero: bool = False
    opcode: ClassVar[Opcode] = Opcode.MM

    def __post_init__(self) -> None:
        Instr.__post_init__(self)
        _check_shape(self.shape, 4)
        nd = len(self.shape)
        _check_view(self.acc, nd, "acc", (Space.ACC,))
        _check_view(self.a, nd, "a", (Space.SPM,))
        _check_view(self.b, nd, "b", (Space.SPM,))
        for name in ("m", "k", "n"):
            if not 1 <= getattr(self, name) <= MAX_EXTENT:
                raise IsaError(f"{name} must be in [1, {MAX_EXTENT}], not {getattr(self, name)}")
        for name in ("acc_row", "a_row"):
            if not -(2**31) <= getattr(self, name) < 2**31:
                raise IsaError(f"{name} must fit in a signed 32-bit integer")
        a, b, acc = self.a.dtype, self.b.dtype, self.acc.dtype
        if a in MXU_INT and b in MXU_INT:
            want = DType.I32
        elif a in MXU_FLOAT and (a == b or b in MXU_INT):
            want = DType.F32
        else:
            raise IsaError(f"mxu.mm operands must be i8/u8 x i8/u8, one of f16/bf16/f32 on both, or f16/bf16/f32 x "
                           f"i8/u8 (weight-only), not {a.text} x {b.text}")
        if acc is not want:
            raise IsaError(f"mxu.mm with {a.text} operands accumulates in {want.text}, not {acc.text}")

    @property
    def queue(self) -> Queue:
        return Queue.MXU

    @property
    def macs(self) -> int:
        """Multiply-accumulates performed (useful work, not array slots)."""
        return math.prod(self.shape) * self.m * self.k * self.n

    def views(self):
        return (("acc", self.acc, ((self.m, self.acc_row), (self.n, 4))),
                ("a", self.a, ((self.m, self.a_row), (self.k, self.a.dtype.size))),
                ("b", self.b, ((self.k * self.n, self.b.dtype.size),)))


def _check_reduce(shape, dst: View, reduce: Reduce, zero: bool, what: str) -> None:
    red = reduction_dims(shape, dst)
    if red and reduce is Reduce.NONE:
        raise IsaError(f"{what}: dst stride 0 on dimension {red[0]} (extent {shape[red[0]]}) needs a reduction "
                       f"(.sum/.max/.min)")
    if zero and reduce is Reduce.NONE:
        raise IsaError(f"{what}: .z initializes a reduction; it needs .sum/.max/.min")


@dataclass(frozen=True, slots=True, kw_only=True)
class VecBinary(Instr):
    """``vpu.<op>[.<red>][.z] shape[..] dst=V src0=V (src1=V | imm=X) [act=F lo=X hi=X]``: element-wise binary op.

    Computes in i64 for integer sources and f32 for float sources, then (optionally) reduces over the dimensions
    whose dst stride is 0, then converts into dst (integers saturate; floats round to nearest even). Without
    ``.z`` a reduction also combines with the value already in dst. ``act=relu`` or ``act=clamp lo=X hi=X`` (in the
    compute type; not with a reduction) is applied to each result before the conversion, in the same pass.
    """

    op: BinOp
    shape: tuple[int, ...]
    dst: View
    src0: View
    src1: View | None = None
    imm: int | float = 0
    reduce: Reduce = Reduce.NONE
    zero: bool = False
    act: Act | None = None
    lo: int | float = 0
    hi: int | float = 0
    opcode: ClassVar[Opcode] = Opcode.BIN

    def __post_init__(self) -> None:
        Instr.__post_init__(self)
        _check_shape(self.shape)
        nd = len(self.shape)
        _check_view(self.dst, nd, "dst")
        _check_view(self.src0, nd, "src0")
        if self.src1 is not None:
            _check_view(self.src1, nd, "src1")
            if self.src1.dtype.is_float != self.src0.dtype.is_float:
                raise IsaError(f"vpu.{self.op.name.lower()} sources must both be integer or both float, not "
                               f"{self.src0.dtype.text} and {self.src1.dtype.text} (convert with vpu.cvt)")
        flt = self.src0.dtype.is_float
        if flt and self.op in INT_ONLY_BINOPS or not flt and self.op in FLOAT_ONLY_BINOPS:
            raise IsaError(f"vpu.{self.op.name.lower()} is not defined on {self.src0.dtype.text}")
        _check_reduce(self.shape, self.dst, self.reduce, self.zero, f"vpu.{self.op.name.lower()}")
        ctype = DType.F32 if flt else DType.I32
        object.__setattr__(self, "imm", _canon_value(self.imm, ctype, "imm"))
        object.__setattr__(self, "lo", _canon_value(self.lo, ctype, "lo"))
        object.__setattr__(self, "hi", _canon_value(self.hi, ctype, "hi"))
        self._check_act()

    def _check_act(self) -> None:
        what = f"vpu.{self.op.name.lower()}"
        if self.act is not None and self.act not in FUSED_ACTS:
            allowed = ", ".join(a.name.lower() for a in sorted(FUSED_ACTS))
            name = str(getattr(self.act, "name", self.act)).lower()
            raise IsaError(f"{what}: act={name} cannot be fused into a binary op; "
                           f"allowed: {allowed} (apply others with a vpu.act instruction)")
        if self.act is not None and self.reduce is not Reduce.NONE:
            raise IsaError(f"{what}: a fused act does not combine with a reduction (.{self.reduce.name.lower()}); "
                           f"apply it with a vpu.act instruction")
        if self.act is Act.CLAMP:
            if self.lo > self.hi:
                raise IsaError(f"{what}: clamp needs lo <= hi, not lo={self.lo} hi={self.hi}")
        elif self.lo != 0 or self.hi != 0:
            raise IsaError(f"{what}: lo/hi are the bounds of act=clamp; they must be 0 without it, not "
                           f"lo={self.lo} hi={self.hi}")

    @property
    def queue(self) -> Queue:
        return Queue.VPU

    def views(self):
        vs = [("dst", self.dst, ()), ("src0", self.src0, ())]
        if self.src1 is not None:
            vs.append(("src1", self.src1, ()))
        return tuple(vs)


@dataclass(frozen=True, slots=True, kw_only=True)
class VecUnary(Instr):
    """``vpu.act.<f>[.<red>][.z] shape[..] dst=V src=V [lo=X hi=X]``: element-wise unary function.

    ``vpu.red.<red>[.z]`` is ``vpu.act.mov`` with a reduction (pooling, row max/sum, global pooling). clamp
    limits the value to [lo, hi] (relu6 is clamp lo=0 hi=6). Same compute types, reduction and conversion
    rules as the binary ops.
    """

    fn: Act
    shape: tuple[int, ...]
    dst: View
    src: View
    lo: int | float = 0
    hi: int | float = 0
    reduce: Reduce = Reduce.NONE
    zero: bool = False
    opcode: ClassVar[Opcode] = Opcode.UNARY

    def __post_init__(self) -> None:
        Instr.__post_init__(self)
        _check_shape(self.shape)
        nd = len(self.shape)
        _check_view(self.dst, nd, "dst")
        _check_view(self.src, nd, "src")
        flt = self.src.dtype.is_float
        if not flt and self.fn in FLOAT_ONLY_ACTS:
            raise IsaError(f"vpu.act.{self.fn.name.lower()} needs a float source, not {self.src.dtype.text}")
        _check_reduce(self.shape, self.dst, self.reduce, self.zero, f"vpu.act.{self.fn.name.lower()}")
        ctype = DType.F32 if flt else DType.I32
        object.__setattr__(self, "lo", _canon_value(self.lo, ctype, "lo"))
        object.__setattr__(self, "hi", _canon_value(self.hi, ctype, "hi"))
        if self.fn is Act.CLAMP and self.lo > self.hi:
            raise IsaError(f"clamp needs lo <= hi, not lo={self.lo} hi={self.hi}")

    @property
    def queue(self) -> Queue:
        return Queue.VPU

    def views(self):
        return (("dst", self.dst, ()), ("src", self.src, ()))


@dataclass(frozen=True, slots=True, kw_only=True)
class VecConvert(Instr):
    """``vpu.cvt shape[..] dst=V src=V scale=F zp_in=I zp_out=I``: quantize, dequantize or cast.

    ``v = (f32(x) - zp_in) * scale``, each step rounded to f32; integer dst: ``clamp(round_half_even(v) + zp_out)``
    (NaN gives zp_out); float dst: ``v + zp_out`` rounded to nearest even in the dst format.
    """

    shape: tuple[int, ...]
    dst: View
    src: View
    scale: float = 1.0
    zp_in: int = 0
    zp_out: int = 0
    opcode: ClassVar[Opcode] = Opcode.CVT

    def __post_init__(self) -> None:
        Instr.__post_init__(self)
        _check_shape(self.shape)
        _check_view(self.dst, len(self.shape), "dst")
        _check_view(self.src, len(self.shape), "src")
        if reduction_dims(self.shape, self.dst):
            raise IsaError("vpu.cvt does not reduce: dst strides must not be 0 on dimensions with extent > 1")
        object.__setattr__(self, "scale", _canon_value(self.scale, DType.F32, "scale"))
        object.__setattr__(self, "zp_in", _canon_value(self.zp_in, DType.I16, "zp_in"))
        object.__setattr__(self, "zp_out", _canon_value(self.zp_out, DType.I16, "zp_out"))

    @property
    def queue(self) -> Queue:
        return Queue.VPU

    def views(self):
        return (("dst", self.dst, ()), ("src", self.src, ()))


@dataclass(frozen=True, slots=True, kw_only=True)
class VecRequant(Instr):
    """``vpu.rq shape[..] dst=V src=V prm=V zp=I lo=I hi=I``: fixed-point requantization of i32 accumulators.

    ``prm`` points, per iteration point, at a 12-byte record ``{bias: i32, mult: i32, shift: i32}`` (per-channel
    records use stride 0 on the non-channel dimensions). ``y = clamp(zp + rshift_rne((x + bias) * mult, shift), lo,
    hi)`` computed exactly (64-bit); ``rshift_rne`` rounds half to even; shift in [0, 62].
    """

    shape: tuple[int, ...]
    dst: View
    src: View
    prm: View
    zp: int = 0
    lo: int = -128
    hi: int = 127
    opcode: ClassVar[Opcode] = Opcode.RQ

    def __post_init__(self) -> None:
        Instr.__post_init__(self)
        _check_shape(self.shape)
        nd = len(self.shape)
        _check_view(self.dst, nd, "dst")
        _check_view(self.src, nd, "src")
        _check_view(self.prm, nd, "prm")
        if self.src.dtype is not DType.I32 or self.prm.dtype is not DType.I32:
            raise IsaError(f"vpu.rq reads i32 src and i32 prm, not {self.src.dtype.text} and {self.prm.dtype.text}")
        if self.dst.dtype.is_float:
            raise IsaError(f"vpu.rq writes an integer dst, not {self.dst.dtype.text}")
        if reduction_dims(self.shape, self.dst):
            raise IsaError("vpu.rq does not reduce: dst strides must not be 0 on dimensions with extent > 1")
        for name in ("zp", "lo", "hi"):
            object.__setattr__(self, name, _canon_value(getattr(self, name), self.dst.dtype, name))
        if self.lo > self.hi:
            raise IsaError(f"vpu.rq needs lo <= hi, not lo={self.lo} hi={self.hi}")

    @property
    def queue(self) -> Queue:
        return Queue.VPU

    def views(self):
        return (("dst", self.dst, ()), ("src", self.src, ()), ("prm", self.prm, ((3, 4),)))


GATHER_QUEUES = (Queue.VPU, Queue.DMA_LD)
GATHER_TABLE_SPACES = {Queue.VPU: (Space.SPM, Space.ACC), Queue.DMA_LD: (Space.DRAM, Space.SPM)}
"""Where each gather queue reads its table from: the vector unit from SPM or ACC, the load DMA from DRAM or SPM."""
MAX_GATHER_DIMS = 4
MAX_TABLE_ROWS = 2**31 - 1


@dataclass(frozen=True, slots=True, kw_only=True)
class Gather(Instr):
    """``vpu.gather|dma.ld.gather shape[..] row=R rows=N dst=V table=V{rs} idx=V fill=X``: row gather by index.

    For each point p of ``shape`` (at most 4 dims), ``i = idx[p]`` (an i32 view over ``shape``): if ``0 <= i < N``,
    ``dst[p, j] = table[base + i*rs + j*es]`` for ``j < R``; if ``i < 0``, ``dst[p, j] = fill``; ``i >= N`` is a
    SimulationError naming p and i. ``dst`` has one stride more than ``shape`` (the element stride inside a row);
    ``table`` has one stride, ``rs``, the byte distance between its rows (rows may overlap). Bytes are copied as
    they are (table and dst dtypes of one size); every read happens before any write. ``vpu.gather`` reads a table
    in SPM/ACC, ``dma.ld.gather`` one in DRAM or SPM; both write SPM/ACC. The table operand's footprint is its whole
    span ``[base, base + (N-1)*rs + R*es)``, whatever the indices.
    """

    queue: Queue
    shape: tuple[int, ...]
    row: int
    rows: int
    dst: View
    table: View
    idx: View
    fill: int | float = 0
    opcode: ClassVar[Opcode] = Opcode.GATHER

    def __post_init__(self) -> None:
        Instr.__post_init__(self)
        if self.queue not in GATHER_QUEUES:
            raise IsaError(f"a gather goes to vpu or dma.ld, not {getattr(self.queue, 'text', self.queue)}")
        _check_shape(self.shape, MAX_GATHER_DIMS)
        nd = len(self.shape)
        _check_view(self.dst, nd + 1, "dst", per="one per shape dimension, then the element stride inside a row")
        _check_view(self.table, 1, "table", GATHER_TABLE_SPACES[self.queue], per="the byte stride between rows")
        _check_view(self.idx, nd, "idx")
        if not isinstance(self.row, int) or not 1 <= self.row <= MAX_EXTENT:
            raise IsaError(f"row (elements per table row) must be an integer in [1, {MAX_EXTENT}], not {self.row!r}")
        if not isinstance(self.rows, int) or not 1 <= self.rows <= MAX_TABLE_ROWS:
            raise IsaError(f"rows (table rows) must be an integer in [1, {MAX_TABLE_ROWS}], not {self.rows!r}")
        if self.idx.dtype is not DType.I32:
            raise IsaError(f"gather indices must be i32, not {self.idx.dtype.text}")
        if self.dst.dtype.size != self.table.dtype.size:
            raise IsaError(f"a gather copies bytes: dst and table dtypes must have the same size, not "
                           f"{self.dst.dtype.text} and {self.table.dtype.text} (use vpu.cvt to convert)")
        object.__setattr__(self, "fill", _canon_value(self.fill, self.dst.dtype, "fill"))

    @property
    def points(self) -> int:
        """Index points (rows gathered): the product of ``shape``."""
        return math.prod(self.shape)

    @property
    def row_bytes(self) -> int:
        """Bytes of one gathered row: ``row * es``."""
        return self.row * self.dst.dtype.size

    def views(self):
        # the table is the one operand that is not the affine image of the shape: its footprint is all N rows
        table = self.table.with_strides(())
        return (("dst", self.dst, ((self.row, self.dst.strides[-1]),)),
                ("table", table, ((self.rows, self.table.strides[0]), (self.row, self.table.dtype.size))),
                ("idx", self.idx, ()))


@dataclass(frozen=True, slots=True, kw_only=True)
class HostCall(Instr):
    """``host.call fn=NAME rd=BYTES wr=BYTES ops=N``: the host CPU runs function NAME on DRAM tensors.

    What the function computes is supplied by whoever launches the program (the simulator's ``host_functions``, name
    -> callable over device memory); the instruction states the DRAM bytes it reads and writes and its scalar
    operations, which the host unit's cost model (the Arch's ``host`` section) turns into cycles. It reads what was
    stored to DRAM before it and its writes are visible to DMA loads that wait for its signal.
    """

    fn: str
    rd: int = 0
    wr: int = 0
    ops: int = 0
    opcode: ClassVar[Opcode] = Opcode.HOST

    def __post_init__(self) -> None:
        Instr.__post_init__(self)
        if not self.fn or len(self.fn) > 31 or any(c not in NAME_CHARS for c in self.fn):
            raise IsaError(f"host function name must be 1-31 letters, digits or '_', not {self.fn!r}")
        for name in ("rd", "wr", "ops"):
            v = getattr(self, name)
            if not isinstance(v, int) or not 0 <= v < 2**63:
                raise IsaError(f"host.call {name} must be an integer in [0, 2**63), not {v!r}")

    @property
    def queue(self) -> Queue:
        return Queue.HOST


@dataclass(frozen=True, slots=True, kw_only=True)
class Sync(Instr):
    """``<queue>.sync wait(..) signal(..)``: a no-op in one queue that only performs semaphore operations."""

    on: Queue
    opcode: ClassVar[Opcode] = Opcode.SYNC

    def __post_init__(self) -> None:
        Instr.__post_init__(self)
        if self.on is Queue.CTRL:
            raise IsaError(f"sync goes to one of the unit queues {', '.join(q.text for q in UNIT_QUEUES)}")

    @property
    def queue(self) -> Queue:
        return self.on


@dataclass(frozen=True, slots=True, kw_only=True)
class _Control(Instr):
    """An instruction the dispatcher itself executes; it carries no semaphore operations."""

    def _check_sync(self) -> None:
        if self.waits or self.signals:
            raise IsaError(f"{self.opcode.name.lower()} takes no semaphore operations")
        if self.unit:
            raise IsaError(f"{self.opcode.name.lower()} runs in the dispatcher, on no unit (unit must be 0)")

    @property
    def queue(self) -> Queue:
        return Queue.CTRL


@dataclass(frozen=True, slots=True, kw_only=True)
class Barrier(_Control):
    """``barrier``: the dispatcher waits until every instruction dispatched before it has retired."""

    opcode: ClassVar[Opcode] = Opcode.BARRIER


@dataclass(frozen=True, slots=True, kw_only=True)
class Halt(_Control):
    """``halt``: drain every queue and end the program; semaphores should be back at their initial counts."""

    opcode: ClassVar[Opcode] = Opcode.HALT


INSTRUCTION_CLASSES = (DmaCopy, DmaFill, MatMul, VecBinary, VecUnary, VecConvert, VecRequant, Gather, HostCall, Sync,
                       Barrier, Halt)
