"""The functional model: what each instruction does to memory. ``execute(instr, mem)`` applies one instruction.

Rules (every address is a byte address; every operand is checked against its memory first, out of range raises
SimulationError and writes nothing):

General
  - All reads of an instruction (its sources and, for a reduction without ``.z``, the destination's initial values)
    happen before any write, except that mxu.mm reads the accumulator afresh for every element it updates.
    Destination elements are written in row-major order of the iteration space; where written elements overlap,
    the later write wins.
  - Floats are stored as IEEE binary32 (f32), binary16 (f16) or bfloat16 (bf16, the upper half of an f32).
    f16 and bf16 widen to f32 exactly. Narrowing f32 to f16 or bf16 rounds to nearest, ties to even; values
    beyond the range become +-inf. Every NaN a compute unit (MXU, VPU) writes to a float element is the canonical
    quiet NaN: 0x7FC00000 (f32), 0x7E00 (f16), 0x7FC0 (bf16). DMA copies bytes as they are.
  - Float to integer rounds half to even, then saturates to the integer type's range; NaN gives 0 (vpu.cvt: zp_out).
    Integer to f32 rounds to nearest even (then narrows again for an f16/bf16 destination).

dma.ld / dma.st (DmaCopy)
  - A byte copy of each element, no conversion. Destination index i on a padded dimension reads source index
    i - lo; positions i < lo or i >= e - hi get ``fill`` (converted to the destination type as above). The source
    covers ``src_shape`` and is read completely before the destination is written.
DmaFill
  - Every destination element becomes ``value`` (converted to the destination type as above).
mxu.mm (MatMul)
  - For each loop point p (row-major), row r < m, column j < n, in that order: read ACC[acc(p) + r*acc.row + 4j],
    add the k products A[a(p) + r*a.row + q*es] * B[b(p) + (q*n + j)*es] for q = 0..k-1, write it back.
    Loop points sharing accumulator elements (acc stride 0) therefore accumulate. ``.z`` first sets every
    accumulator element the instruction touches to 0.
  - i8/u8: products and sums in i32, wrapping (two's complement). f16/bf16/f32: operands widen to f32; each step
    is acc = f32(acc + f32(a * b)) (no fused multiply-add). A float with B i8/u8 (weight-only): B's integer converts
    to f32 exactly, then as for floats. ``es`` is each operand's own element size.
vpu binary / unary (VecBinary, VecUnary)
  - Compute type: i64 when the source is an integer type, f32 when it is a float type. Every f32 operation rounds
    to f32; i64 arithmetic wraps.
  - Binary: add sub mul div(float) min max; shl shr and or xor (int); cmpgt cmpeq give 1 or 0. Shift counts are
    clamped to [0, 63]; shr is arithmetic (floor). Float min/max: NaN if either input is NaN, else the smaller/larger,
    the first input when equal (max(-0.0, +0.0) = -0.0).
  - Unary: mov, relu = max(x, 0), clamp = min(max(x, lo), hi), abs, neg; float only, computed in f64 from the f32
    input and rounded once to f32: exp, log, recip = 1/x, sqrt, rsqrt = 1/sqrt(x), sigmoid = 1/(1+exp(-x)), tanh,
    gelu = 0.5*x*(1+erf(x/sqrt(2))), erf (log(x<0) = sqrt(x<0) = NaN, 1/0 = inf).
  - Binary with ``act`` (relu or clamp, never with a reduction): the unary function above applied to each result.
  - Reduction (``.sum``/``.max``/``.min``): dimensions with destination stride 0 and extent > 1 reduce. Each
    destination element combines its values one by one in row-major order, in the compute type (f32 sums round every
    step, i64 sums wrap), starting from the identity with ``.z`` (0, -inf or i64 min, +inf or i64 max) and from the
    destination's current value converted to the compute type without it.
  - Then the result converts to the destination type: i64 -> integer saturates; f32 -> integer rounds half to even
    and saturates (NaN -> 0); f32 -> float rounds to nearest even; i64 -> float goes through f32.
vpu.cvt (VecConvert)
  - v = (f32(x) - f32(zp_in)) * scale, each step rounded to f32. Integer destination: saturate(round_half_even(v) +
    zp_out), NaN -> zp_out. Float destination: f32(v + zp_out), narrowed to the destination type.
vpu.rq (VecRequant)
  - x = src (i32); bias, mult, shift = the three i32 of the prm record of the point. y = clamp(zp +
    rshift_rne((x + bias) * mult, shift), lo, hi), computed exactly (the product can reach 2**63);
    rshift_rne(v, 0) = v, otherwise floor(v / 2**s) rounded half to even. A shift outside [0, 62] raises
    SimulationError before anything is written. y is stored in the integer destination type.
vpu.gather / dma.ld.gather (Gather)
  - Per point p of the shape, in row-major order, i = idx[p] (i32): 0 <= i < rows copies the row's bytes as they are
    (table and dst dtypes have one size), element j of dst row p from table byte base + i*rs + j*es; i < 0 writes
    ``fill`` (converted to the destination type as above) to every element of dst row p. An index >= rows raises
    SimulationError naming the point and the index, before anything is written. The whole table span, all ``rows``
    rows, must lie in its memory whatever the indices. Every index and table row is read before any write (dst may
    overlap the table or the indices).
host.call (HostCall)
  - Calls the host function named ``fn`` (supplied at launch: ``simulate(..., host_functions={name: f})``) with the
    DRAM regions as a dict of byte arrays, which it reads and writes in place; SPM and ACC are not visible to it.
    A name with no function raises SimulationError.
Sync, Barrier, Halt
  - No effect on memory.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from isa import (
    Act,
    Barrier,
    DmaCopy,
    DmaFill,
    DType,
    Gather,
    Halt,
    HostCall,
    Instr,
    MatMul,
    SimulationError,
    Sync,
    VecBinary,
    VecConvert,
    VecRequant,
    VecUnary,
    View,
)
from npusim.functional import kernels as K
from npusim.functional.memory import DeviceMemory

CODE = {d: n for n, d in enumerate(DType)}
"""DType -> kernel dtype code (DType.code, without its per-call list lookup)."""


def _buf(mem: DeviceMemory, view: View, shape: tuple[int, ...], extra: tuple[tuple[int, int], ...] = ()) -> np.ndarray:
    """The byte array ``view`` addresses, after checking that every element is inside it (unless the memory's program
    was verified: ``mem.bounds_verified``)."""
    buf = mem.buffer(view)
    if mem.bounds_verified:
        return buf
    lo, hi = view.span(shape, extra)
    if lo < 0 or hi > buf.size:
        mem.array(view, shape, extra)  # raises SimulationError with the standard message
    return buf


def _geometry(shape: tuple[int, ...], *views: View) -> np.ndarray:
    """int64[ND + len(views)*(ND+1)]: shape left-padded with 1s, then base and 0-padded strides per view."""
    zeros = (0,) * (K.ND - len(shape))
    g = (1,) * len(zeros) + shape
    for v in views:
        g += (v.base,) + zeros + v.strides
    return np.array(g, np.int64)


def _dma_copy(i: DmaCopy, mem: DeviceMemory) -> None:
    src_shape, es = i.src_shape, i.dst.dtype.size
    dst = _buf(mem, i.dst, i.shape)
    src = _buf(mem, i.src, src_shape) if all(src_shape) else dst
    if not i.pad:
        K.dma_copy(dst, src, _geometry(i.shape, i.dst, i.src), _NO_PAD, es, _NO_FILL[es])
        return
    pad = [0] * (2 * K.ND)  # lo[ND], hi[ND]
    off = K.ND - len(i.shape)
    for p in i.pad:
        pad[off + p.dim], pad[K.ND + off + p.dim] = p.lo, p.hi
    K.dma_copy(dst, src, _geometry(i.shape, i.dst, i.src), np.array(pad, np.int64), es,
               K.scalar_bytes(i.fill, i.dst.dtype))


_BYTES = (DType.I8, DType.U8)
_NO_PAD = np.zeros(2 * K.ND, np.int64)                                 # (read only by the kernel)
_NO_FILL = {n: np.zeros(n, np.uint8) for n in {d.size for d in DType}}  # a fill no position of an unpadded copy reads


def _dma_fill(i: DmaFill, mem: DeviceMemory) -> None:
    dst = _buf(mem, i.dst, i.shape)
    K.dma_fill(dst, _geometry(i.shape, i.dst), i.dst.dtype.size, K.scalar_bytes(i.value, i.dst.dtype))


def _matmul(i: MatMul, mem: DeviceMemory) -> None:
    acc = _buf(mem, i.acc, i.shape, ((i.m, i.acc_row), (i.n, 4)))
    a = _buf(mem, i.a, i.shape, ((i.m, i.a_row), (i.k, i.a.dtype.size)))
    b = _buf(mem, i.b, i.shape, ((i.k * i.n, i.b.dtype.size),))
    g = _geometry(i.shape, i.acc, i.a, i.b)
    ad, bd = i.a.dtype, i.b.dtype
    if ad is DType.F32 and bd is DType.F32 and not (np.bitwise_or.reduce(g[K.ND:]) | i.acc_row | i.a_row) & 3:
        K.matmul_f32(mem.acc_f32, mem.acc_u32, mem.spm_f32, mem.spm_f32, g, i.m, i.k, i.n, i.acc_row, i.a_row,
                     bool(i.zero))   # (every address a whole word)
        return
    if ad is DType.F32 and bd in _BYTES and \
            not (np.bitwise_or.reduce(g[K.ND:K.ND + 2 * (K.ND + 1)]) | i.acc_row | i.a_row) & 3:   # ACC, A whole words
        # weight-only: f32 activations by i8/u8 codes
        K.matmul_f32_codes(mem.acc_f32, mem.acc_u32, mem.spm_f32, mem.spm_i8 if bd is DType.I8 else mem.spm, g,
                           i.m, i.k, i.n, i.acc_row, i.a_row, bool(i.zero))
        return
    if ad in _BYTES and bd in _BYTES and not (np.bitwise_or.reduce(g[K.ND:K.ND + K.ND + 1]) | i.acc_row) & 3:
        K.matmul_int(mem.acc_i32, mem.spm_i8 if ad is DType.I8 else mem.spm, mem.spm_i8 if bd is DType.I8 else mem.spm,
                     g, i.m, i.k, i.n, i.acc_row, i.a_row, bool(i.zero))   # (the ACC operand's addresses whole words)
        return
    K.matmul(acc, a, b, g, i.m, i.k, i.n, i.acc_row, i.a_row, CODE[i.a.dtype],
             CODE[i.b.dtype], bool(i.zero))


def _binary(i: VecBinary, mem: DeviceMemory) -> None:
    src1 = i.src1 or i.src0
    dst, s0 = _buf(mem, i.dst, i.shape), _buf(mem, i.src0, i.shape)
    s1 = _buf(mem, src1, i.shape) if i.src1 is not None else s0
    g = _geometry(i.shape, i.dst, i.src0, src1)
    act = int(Act.MOV if i.act is None else i.act)
    if i.src0.dtype.is_float:
        K.binary_f(dst, s0, s1, g, CODE[i.dst.dtype], CODE[i.src0.dtype], CODE[src1.dtype], int(i.op), float(i.imm),
                   i.src1 is not None, int(i.reduce), bool(i.zero), act, float(i.lo), float(i.hi))
    else:
        K.binary_i(dst, s0, s1, g, CODE[i.dst.dtype], CODE[i.src0.dtype], CODE[src1.dtype], int(i.op), int(i.imm),
                   i.src1 is not None, int(i.reduce), bool(i.zero), act, int(i.lo), int(i.hi))


def _unary(i: VecUnary, mem: DeviceMemory) -> None:
    dst, src = _buf(mem, i.dst, i.shape), _buf(mem, i.src, i.shape)
    g = _geometry(i.shape, i.dst, i.src)
    if i.src.dtype.is_float:
        K.unary_f(dst, src, g, CODE[i.dst.dtype], CODE[i.src.dtype], int(i.fn), float(i.lo), float(i.hi),
                  int(i.reduce), bool(i.zero))
    else:
        K.unary_i(dst, src, g, CODE[i.dst.dtype], CODE[i.src.dtype], int(i.fn), int(i.lo), int(i.hi),
                  int(i.reduce), bool(i.zero))


def _convert(i: VecConvert, mem: DeviceMemory) -> None:
    dst, src = _buf(mem, i.dst, i.shape), _buf(mem, i.src, i.shape)
    K.convert(dst, src, _geometry(i.shape, i.dst, i.src), CODE[i.dst.dtype], CODE[i.src.dtype], float(i.scale),
              int(i.zp_in), int(i.zp_out))


def _requant(i: VecRequant, mem: DeviceMemory) -> None:
    dst, src = _buf(mem, i.dst, i.shape), _buf(mem, i.src, i.shape)
    prm = _buf(mem, i.prm, i.shape, ((3, 4),))
    bad = K.requant(dst, src, prm, _geometry(i.shape, i.dst, i.src, i.prm), CODE[i.dst.dtype], int(i.zp), int(i.lo),
                    int(i.hi))
    if bad != K.RQ_OK:
        raise SimulationError(f"vpu.rq shift must be in [0, 62], not {bad}")


def gather_error(i: Gather, point: tuple[int, ...], index: int) -> SimulationError:
    """The error of a gather whose index at ``point`` is not below its ``rows``."""
    name = f"{i.queue.text}.gather"
    return SimulationError(f"{name} index {index} at point {list(point)} is outside the table's {i.rows} rows "
                           f"(indices must be < rows; a negative index writes fill)")


def _gather(i: Gather, mem: DeviceMemory) -> None:
    es, table = i.dst.dtype.size, i.table.with_strides(())
    dst = _buf(mem, i.dst, i.shape, ((i.row, i.dst.strides[-1]),))
    src = _buf(mem, table, (), ((i.rows, i.table.strides[0]), (i.row, es)))
    idx = _buf(mem, i.idx, i.shape)
    g = _geometry(i.shape, i.dst.with_strides(i.dst.strides[:-1]), i.idx)
    bad = K.gather_rows(dst, src, idx, g, es, i.row, i.rows, i.table.base, i.table.strides[0], i.dst.strides[-1],
                        K.scalar_bytes(i.fill, i.dst.dtype))
    if bad != K.GATHER_OK:
        point = tuple(int(x) for x in np.unravel_index(int(bad), i.shape))
        at = i.idx.base + sum(x * s for x, s in zip(point, i.idx.strides))
        raise gather_error(i, point, int(idx[at:at + 4].view(np.int32)[0]))


def _nothing(i: Instr, mem: DeviceMemory) -> None:
    pass


EXECUTE: dict[type, Callable[[Instr, DeviceMemory], None]] = {
    DmaCopy: _dma_copy, DmaFill: _dma_fill, MatMul: _matmul, VecBinary: _binary, VecUnary: _unary,
    VecConvert: _convert, VecRequant: _requant, Gather: _gather, Sync: _nothing, Barrier: _nothing, Halt: _nothing,
}


HostFunction = Callable[[dict[str, np.ndarray]], None]
"""What a ``host.call`` runs: it gets the DRAM regions (name -> uint8 array) and updates them in place."""


def execute(instr: Instr, mem: DeviceMemory, host: Mapping[str, HostFunction] | None = None) -> None:
    """Apply one instruction's effect to ``mem`` (see the module docstring for the exact rules); ``host`` maps
    host function names to the callables ``host.call`` runs."""
    if type(instr) is HostCall:
        fn = (host or {}).get(instr.fn)
        if fn is None:
            raise SimulationError(f"no host function {instr.fn!r} was supplied (simulate(..., host_functions=...)); "
                                  f"run timing-only to skip values")
        regions = list(mem.dram.items())
        fn(mem.dram)
        if mem.bounds_verified and any(mem.dram.get(name) is not buf for name, buf in regions):
            # (the kernels trust the verified bounds of these arrays)
            raise SimulationError(f"host function {instr.fn!r} replaced the DRAM regions' arrays; it must write "
                                  f"into them in place")
        return
    EXECUTE[type(instr)](instr, mem)
