"""Vector-unit lowerings: element-wise ops with broadcasting, activations, pooling, softmax, layer norm, reductions.

Every op here is one :class:`~compiler.kernels.common.pipeline.RingPipeline`: ``dma.ld`` brings a tile of each input
into SPM, the vector unit computes it, ``dma.st`` writes it back; tiles are double-buffered. Tensors are row-major in
DRAM (4-D activations NHWC). Results are computed in f32 for float types (i64 for integers) and rounded once when
written.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from compiler.errors import CompileError, TilingError
from compiler.frontend.canonical import window_out
from compiler.kernels.common.epilogue import activation_ops
from compiler.kernels.common.halo import padded_load
from compiler.kernels.common.pipeline import RingPipeline, vector_config
from compiler.kernels.common.target import Target
from isa import (
    Act,
    BinOp,
    DmaCopy,
    DType,
    Instr,
    Queue,
    Reduce,
    Region,
    Space,
    VecBinary,
    VecConvert,
    VecUnary,
    View,
)
from isa.view import MAX_EXTENT

F32 = DType.F32


def row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Element strides of a dense row-major ``shape``."""
    strides, acc = [], 1
    for e in reversed(shape):
        strides.append(acc)
        acc *= e
    return tuple(reversed(strides))


def broadcast_strides(shape: tuple[int, ...], out: tuple[int, ...]) -> tuple[int, ...]:
    """Element strides of a row-major ``shape`` read as ``out`` under numpy broadcasting (0 where broadcast)."""
    shape = (1,) * (len(out) - len(shape)) + tuple(shape)
    return tuple(0 if e == 1 and o != 1 else s for e, o, s in zip(shape, out, row_major(shape)))


def collapse(out: tuple[int, ...], *strides: tuple[int, ...]) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """Merge adjacent dimensions that every operand walks contiguously (fewer, longer dimensions)."""
    dims = [[e, *(s[i] for s in strides)] for i, e in enumerate(out) if e != 1] or [[1, *(0 for _ in strides)]]
    merged = [dims[0]]
    for d in dims[1:]:
        prev = merged[-1]
        if prev[0] * d[0] <= MAX_EXTENT and all(prev[k + 1] == d[k + 1] * d[0] for k in range(len(strides))):
            merged[-1] = [prev[0] * d[0], *d[1:]]
        else:
            merged.append(d)
    return tuple(d[0] for d in merged), [tuple(d[k + 1] for d in merged) for k in range(len(strides))]


def _tiles(shape: tuple[int, ...], limit: int):
    """Yield (index of the tile's first element per dim, tile shape) covering ``shape`` with <= ``limit`` elements."""
    d = next(i for i in range(len(shape)) if math.prod(shape[i + 1:]) <= limit)
    inner = math.prod(shape[d + 1:])
    chunk = max(1, min(limit // inner, MAX_EXTENT))
    for outer in np.ndindex(*shape[:d]):
        for c0 in range(0, shape[d], chunk):
            c = min(chunk, shape[d] - c0)
            yield (*outer, c0) + (0,) * (len(shape) - d - 1), (1,) * d + (c,) + tuple(shape[d + 1:])


MIN_TILES = 8   # a stream that fits the SPM whole still runs in 8 tiles, so loads, compute and stores overlap


def overlap_cap(total: int, floor: int) -> int:
    """The most units (elements, rows, ...) a tile may hold so that ``total`` units make at least MIN_TILES tiles (so
    loads, compute and stores overlap), but at least ``floor``."""
    return max(-(-total // MIN_TILES), floor)


def _dram_box(start: tuple[int, ...], strides: tuple[int, ...], dtype: DType, region: str) -> View:
    """The DRAM view of a tile starting at element index ``start`` of ``region`` (strides in elements)."""
    return View(Space.DRAM, sum(i * st for i, st in zip(start, strides)) * dtype.size, dtype,
                tuple(st * dtype.size for st in strides), region)


@dataclass(frozen=True)
class _Operand:
    region: str
    strides: tuple[int, ...]  # in elements


def _stream(pipe: RingPipeline, out_shape, ins: list[_Operand], out: _Operand, dtypes: list[DType], out_dtype: DType,
            spm: int, compute) -> None:
    """Tile ``out_shape``; per tile load every input into a contiguous SPM slot, ``compute(dst, srcs, shape)``,
    store. ``compute`` returns the vector instructions for one tile given its SPM views."""
    shape, strides = collapse(out_shape, *(o.strides for o in ins), out.strides)
    if len(shape) > 5:
        raise CompileError(f"shape {out_shape} does not collapse to 5 dimensions")
    sizes = [d.size for d in dtypes] + [out_dtype.size]
    limit = max(1, (spm // 2) // sum(sizes))   # two ring slots of every buffer
    limit = min(limit, overlap_cap(math.prod(shape), 4096))
    if len(set(sizes)) > 1 and limit >= 4:      # mixed element sizes: keep every slot word-aligned
        limit -= limit % 4
    slot_bytes = [limit * s for s in sizes]
    for start, tshape in _tiles(shape, limit):
        base, offs, views = 0, [], []
        for size in slot_bytes:
            offs.append(base + pipe.slot * size)
            base += 2 * size
        loads = []
        for k, d in enumerate(dtypes + [out_dtype]):
            # a broadcast input (DRAM stride 0) is loaded once per distinct element and read with stride 0
            held = tuple(1 if k < len(ins) and st == 0 else e for e, st in zip(tshape, strides[k]))
            dense = row_major(held)
            views.append(View(Space.SPM, offs[k], d, tuple(0 if h < e else s * d.size
                                                           for h, e, s in zip(held, tshape, dense))))
            if k < len(ins):
                loads.append(DmaCopy(queue=Queue.DMA_LD, shape=held,
                                     dst=View(Space.SPM, offs[k], d, tuple(s * d.size for s in dense)),
                                     src=_dram_box(start, strides[k], d, ins[k].region)))
        store = DmaCopy(queue=Queue.DMA_ST, shape=tshape, src=views[-1],
                        dst=_dram_box(start, strides[-1], out_dtype, out.region))
        pipe.step(loads, compute(views[-1], views[:-1], tshape), [store])


def binary(op: BinOp, a_shape: tuple[int, ...], b_shape: tuple[int, ...], dtype: DType, target: Target,
           act: tuple[Act, float, float] | None = None):
    """``Y = act(A op B)`` with numpy broadcasting; regions A, B, Y (all ``dtype``, row-major). ``act`` is a fused
    activation ``(fn, lo, hi)`` (relu or clamp) that the binary op applies in the same pass (its ``act``)."""
    spm = target.spm
    out = tuple(np.broadcast_shapes(tuple(a_shape), tuple(b_shape)))
    pipe = RingPipeline()
    fused = {} if act is None else dict(act=act[0], lo=act[1], hi=act[2])

    def compute(dst, srcs, shape):
        return [VecBinary(op=op, shape=shape, dst=dst, src0=srcs[0], src1=srcs[1], **fused)]

    _stream(pipe, out, [_Operand("A", broadcast_strides(a_shape, out)), _Operand("B", broadcast_strides(b_shape, out))],
            _Operand("Y", row_major(out)), [dtype, dtype], dtype, spm, compute)
    es = dtype.size
    return pipe.program(vector_config(spm), (Region("A", 0, math.prod(a_shape) * es),
                                             Region("B", 1, math.prod(b_shape) * es),
                                             Region("Y", 2, math.prod(out) * es)))


def select(out: tuple[int, ...], strides: tuple[tuple[int, ...], ...], sizes: tuple[int, ...], dtype: DType,
           target: Target):
    """``Y = M ? X : Z`` bit for bit, as ``Z ^ ((X ^ Z) & M)`` on the integer view of the bytes (M: all ones where
    the condition holds, else 0), so NaN or inf in the branch not taken cannot leak. ``strides``: element strides of
    X, Z and M per dimension of ``out`` (0 where broadcast); ``sizes``: their bytes; regions X, Z, M, Y. ``dtype``
    is the integer type of the elements' size (i32 for f32, i8 for int8)."""
    spm = target.spm
    pipe = RingPipeline()

    def compute(dst, srcs, shape):
        x, z, m = srcs
        return [VecBinary(op=BinOp.XOR, shape=shape, dst=dst, src0=x, src1=z),
                VecBinary(op=BinOp.AND, shape=shape, dst=dst, src0=dst, src1=m),
                VecBinary(op=BinOp.XOR, shape=shape, dst=dst, src0=dst, src1=z)]

    _stream(pipe, tuple(out), [_Operand(r, s) for r, s in zip("XZM", strides)], _Operand("Y", row_major(out)),
            [dtype] * 3, dtype, spm, compute)
    return pipe.program(vector_config(spm), tuple(Region(r, i, max(1, n)) for i, (r, n) in
                                                  enumerate(zip("XZMY", (*sizes, math.prod(out) * dtype.size)))))


def unary(fn: Act, shape: tuple[int, ...], dtype: DType, target: Target, lo: float = 0, hi: float = 0):
    """``Y = fn(X)`` (relu, clamp(lo, hi), sigmoid, tanh, gelu, erf, exp, ...); regions X, Y."""
    spm = target.spm
    pipe = RingPipeline()
    _stream(pipe, tuple(shape), [_Operand("X", row_major(shape))], _Operand("Y", row_major(shape)), [dtype], dtype,
            spm, lambda dst, srcs, s: [VecUnary(fn=fn, shape=s, dst=dst, src=srcs[0], lo=lo, hi=hi)])
    n = math.prod(shape) * dtype.size
    return pipe.program(vector_config(spm), (Region("X", 0, n), Region("Y", 1, n)))


def activation(act: str, shape: tuple[int, ...], dtype: DType, target: Target, lo: float = 0.0, hi: float = 0.0,
               alpha: float = 1.0):
    """``Y = act(X)`` for any activation of :mod:`compiler.kernels.common.epilogue` (``gelu_tanh``: eight instructions,
    ``silu``: two, or three with ``alpha``) as one stream: per tile all of the activation's instructions, the output
    slot serving as their scratch; regions X, Y."""
    spm = target.spm
    pipe = RingPipeline()
    _stream(pipe, tuple(shape), [_Operand("X", row_major(shape))], _Operand("Y", row_major(shape)), [dtype], dtype,
            spm, lambda dst, srcs, s: activation_ops(act, s, dst, srcs[0], dst, lo, hi, alpha))
    n = math.prod(shape) * dtype.size
    return pipe.program(vector_config(spm), (Region("X", 0, n), Region("Y", 1, n)))


def _rows_op(rows: int, length: int, dtype: DType, spm: int, regions_extra: tuple[Region, ...], per_tile,
             scratch: int, scalars: int, extra: int = 0, extra_loads=lambda addr, r: []):
    """Row-wise ops over ``[rows][length]`` in tiles of whole rows. Each ring slot holds the input rows x, the output
    rows y, ``scratch`` f32 row buffers, ``scalars`` f32 per-row scalar columns and ``extra`` bytes (loaded by
    ``extra_loads(addr, r)``); ``per_tile(x, y, scratch_views, scalar_addrs, extra_addr, r)`` gives the vector
    instructions for r rows."""
    es = dtype.size
    row_bytes = length * (2 * es + 4 * scratch) + 4 * scalars
    per = (spm // 2 - extra) // row_bytes
    if per < 1:
        raise TilingError(f"a row of {length} elements does not fit the SPM")
    per = min(per, overlap_cap(rows, -(-4096 // length)))
    pipe = RingPipeline()
    x_slot, s_slot = per * length * es, per * length * 4
    slot = 2 * x_slot + scratch * s_slot + scalars * per * 4 + extra
    for r0 in range(0, rows, per):
        r = min(per, rows - r0)
        base = pipe.slot * slot
        x = View(Space.SPM, base, dtype, (length * es, es))
        y = View(Space.SPM, base + x_slot, dtype, (length * es, es))
        views = [View(Space.SPM, base + 2 * x_slot + i * s_slot, F32, (length * 4, 4)) for i in range(scratch)]
        cols = [base + 2 * x_slot + scratch * s_slot + i * per * 4 for i in range(scalars)]
        extra_addr = base + 2 * x_slot + scratch * s_slot + scalars * per * 4
        loads = [DmaCopy(queue=Queue.DMA_LD, shape=(r, length), dst=x,
                         src=View(Space.DRAM, r0 * length * es, dtype, (length * es, es), "X"))]
        loads += extra_loads(extra_addr, r)
        store = DmaCopy(queue=Queue.DMA_ST, shape=(r, length), src=y,
                        dst=View(Space.DRAM, r0 * length * es, dtype, (length * es, es), "Y"))
        pipe.step(loads, per_tile(x, y, views, cols, extra_addr, r), [store])
    n = rows * length * es
    return pipe.program(vector_config(spm), (Region("X", 0, n), Region("Y", 1, n)) + regions_extra)


def _col(addr: int) -> View:
    """An f32 per-row scalar column at ``addr`` broadcast along the row (strides {4, 0})."""
    return View(Space.SPM, addr, F32, (4, 0))


def _vec(addr: int) -> View:
    """The same column as a plain vector of per-row scalars (stride {4})."""
    return View(Space.SPM, addr, F32, (4,))


def softmax(rows: int, length: int, dtype: DType, target: Target, log: bool = False):
    """Softmax over the last axis of ``[rows][length]``: max, subtract, exp, sum, reciprocal, multiply (f32).
    ``log``: LogSoftmax, ``x - max - log(sum(exp(x - max)))`` (the exp summed in one pass)."""
    def tile(x, y, s, cols, _, r):
        t, m, z = s[0], _col(cols[0]), _col(cols[1])
        head = [VecConvert(shape=(r, length), dst=t, src=x),
                VecUnary(fn=Act.MOV, reduce=Reduce.MAX, zero=True, shape=(r, length), dst=m, src=t),
                VecBinary(op=BinOp.SUB, shape=(r, length), dst=t, src0=t, src1=m)]
        if log:
            return head + [VecUnary(fn=Act.EXP, reduce=Reduce.SUM, zero=True, shape=(r, length), dst=z, src=t),
                           VecUnary(fn=Act.LOG, shape=(r,), dst=_vec(cols[1]), src=_vec(cols[1])),
                           VecBinary(op=BinOp.SUB, shape=(r, length), dst=y, src0=t, src1=z)]
        return head + [VecUnary(fn=Act.EXP, shape=(r, length), dst=t, src=t),
                       VecUnary(fn=Act.MOV, reduce=Reduce.SUM, zero=True, shape=(r, length), dst=z, src=t),
                       VecUnary(fn=Act.RECIP, shape=(r,), dst=_vec(cols[1]), src=_vec(cols[1])),
                       VecBinary(op=BinOp.MUL, shape=(r, length), dst=y, src0=t, src1=z)]
    return _rows_op(rows, length, dtype, min(target.spm, 1 << 22), (), tile, scratch=1, scalars=2)


def softmax_axis(outer: int, length: int, inner: int, dtype: DType, target: Target, log: bool = False):
    """Softmax (``log``: LogSoftmax) over the middle axis of ``[outer][length][inner]`` without a transpose: a tile
    holds whole ``length`` columns of ``io`` inner elements (DRAM runs of ``io``), and the max and the sum reduce
    across the rows of the tile (destination stride 0 on the middle axis), so every vector instruction walks
    contiguous SPM; regions X, Y. Same instructions per element as :func:`softmax`."""
    spm, es = min(target.spm, 1 << 22), dtype.size
    col_bytes = length * (2 * es + 4) + 8          # x, y and the f32 scratch of one column, plus its max and sum
    fit = (spm // 2) // col_bytes                  # columns per ring slot
    if not fit:
        raise TilingError(f"a softmax column of {length} elements does not fit the SPM")
    cols = min(fit, overlap_cap(outer * inner, -(-4096 // length)))
    io = min(inner, cols)
    if io < inner and io >= target.lanes:          # whole beats of the vector unit
        io -= io % target.lanes
    per = max(1, min(outer, cols // io))
    pipe = RingPipeline()
    x_slot, t_slot = per * length * io * es, per * length * io * 4
    slot = 2 * x_slot + t_slot + 2 * per * io * 4
    for o0 in range(0, outer, per):
        for i0 in range(0, inner, io):
            o, i = min(per, outer - o0), min(io, inner - i0)
            base = pipe.slot * slot
            shape = (o, length, i)
            x = View(Space.SPM, base, dtype, (length * io * es, io * es, es))
            y = View(Space.SPM, base + x_slot, dtype, (length * io * es, io * es, es))
            t = View(Space.SPM, base + 2 * x_slot, F32, (length * io * 4, io * 4, 4))
            m_addr, z_addr = base + 2 * x_slot + t_slot, base + 2 * x_slot + t_slot + per * io * 4
            m, z = View(Space.SPM, m_addr, F32, (io * 4, 0, 4)), View(Space.SPM, z_addr, F32, (io * 4, 0, 4))
            zv = View(Space.SPM, z_addr, F32, (io * 4, 4))
            dram = (length * inner * es, inner * es, es)
            off = (o0 * length * inner + i0) * es
            compute = [VecConvert(shape=shape, dst=t, src=x),
                       VecUnary(fn=Act.MOV, reduce=Reduce.MAX, zero=True, shape=shape, dst=m, src=t),
                       VecBinary(op=BinOp.SUB, shape=shape, dst=t, src0=t, src1=m)]
            if log:
                compute += [VecUnary(fn=Act.EXP, reduce=Reduce.SUM, zero=True, shape=shape, dst=z, src=t),
                            VecUnary(fn=Act.LOG, shape=(o, i), dst=zv, src=zv),
                            VecBinary(op=BinOp.SUB, shape=shape, dst=y, src0=t, src1=z)]
            else:
                compute += [VecUnary(fn=Act.EXP, shape=shape, dst=t, src=t),
                            VecUnary(fn=Act.MOV, reduce=Reduce.SUM, zero=True, shape=shape, dst=z, src=t),
                            VecUnary(fn=Act.RECIP, shape=(o, i), dst=zv, src=zv),
                            VecBinary(op=BinOp.MUL, shape=shape, dst=y, src0=t, src1=z)]
            pipe.step([DmaCopy(queue=Queue.DMA_LD, shape=shape, dst=x, src=View(Space.DRAM, off, dtype, dram, "X"))],
                      compute,
                      [DmaCopy(queue=Queue.DMA_ST, shape=shape, src=y, dst=View(Space.DRAM, off, dtype, dram, "Y"))])
    n = outer * length * inner * es
    return pipe.program(vector_config(spm), (Region("X", 0, n), Region("Y", 1, n)))


def layernorm(rows: int, length: int, dtype: DType, target: Target, eps: float = 1e-5):
    """LayerNormalization over the last axis; region GB holds f32 gamma then beta: mean, variance, rsqrt."""
    def loads(addr, r):
        return [DmaCopy(queue=Queue.DMA_LD, shape=(2, length), dst=View(Space.SPM, addr, F32, (length * 4, 4)),
                        src=View(Space.DRAM, 0, F32, (length * 4, 4), "GB"))]

    def tile(x, y, s, cols, addr, r):
        d, mu, var, one = s[0], _col(cols[0]), _col(cols[1]), (r,)
        gamma, beta = View(Space.SPM, addr, F32, (0, 4)), View(Space.SPM, addr + length * 4, F32, (0, 4))
        return [VecConvert(shape=(r, length), dst=d, src=x),
                VecUnary(fn=Act.MOV, reduce=Reduce.SUM, zero=True, shape=(r, length), dst=mu, src=d),
                VecBinary(op=BinOp.MUL, shape=one, dst=_vec(cols[0]), src0=_vec(cols[0]), imm=1.0 / length),
                VecBinary(op=BinOp.SUB, shape=(r, length), dst=d, src0=d, src1=mu),
                VecBinary(op=BinOp.MUL, reduce=Reduce.SUM, zero=True, shape=(r, length), dst=var, src0=d, src1=d),
                VecBinary(op=BinOp.MUL, shape=one, dst=_vec(cols[1]), src0=_vec(cols[1]), imm=1.0 / length),
                VecBinary(op=BinOp.ADD, shape=one, dst=_vec(cols[1]), src0=_vec(cols[1]), imm=eps),
                VecUnary(fn=Act.RSQRT, shape=one, dst=_vec(cols[1]), src=_vec(cols[1])),
                VecBinary(op=BinOp.MUL, shape=(r, length), dst=d, src0=d, src1=var),
                VecBinary(op=BinOp.MUL, shape=(r, length), dst=d, src0=d, src1=gamma),
                VecBinary(op=BinOp.ADD, shape=(r, length), dst=y, src0=d, src1=beta)]
    return _rows_op(rows, length, dtype, min(target.spm, 1 << 22), (Region("GB", 2, 2 * length * 4),), tile, scratch=1,
                    scalars=2, extra=2 * length * 4, extra_loads=loads)


def reduce_rows(kind: Reduce, rows: int, length: int, dtype: DType, target: Target, mean: bool = False):
    """ReduceSum/ReduceMean/ReduceMax over the last axis: ``[rows][length] -> [rows]`` (f32 accumulation)."""
    spm = target.spm
    es = dtype.size
    pipe = RingPipeline()
    per = max(1, min(MAX_EXTENT, (spm // 2) // (length * es + 8)))   # rows per step: one shape extent at most
    for r0 in range(0, rows, per):
        r = min(per, rows - r0)
        base = pipe.slot * (per * length * es + per * 8)
        x = View(Space.SPM, base, dtype, (length * es, es))
        acc = View(Space.SPM, base + per * length * es, F32, (4, 0))
        y = View(Space.SPM, base + per * length * es + per * 4, dtype, (es,))
        compute = [VecUnary(fn=Act.MOV, reduce=kind, zero=True, shape=(r, length), dst=acc, src=x)]
        if mean:
            compute.append(VecBinary(op=BinOp.MUL, shape=(r,), dst=acc.with_strides((4,)),
                                     src0=acc.with_strides((4,)), imm=1.0 / length))
        compute.append(VecConvert(shape=(r,), dst=y, src=acc.with_strides((4,))))
        pipe.step([DmaCopy(queue=Queue.DMA_LD, shape=(r, length), dst=x,
                           src=View(Space.DRAM, r0 * length * es, dtype, (length * es, es), "X"))], compute,
                  [DmaCopy(queue=Queue.DMA_ST, shape=(r,), src=y, dst=View(Space.DRAM, r0 * es, dtype, (es,), "Y"))])
    return pipe.program(vector_config(spm), (Region("X", 0, rows * length * es), Region("Y", 1, rows * es)))


def _window_ints(value, n: int) -> tuple[int, ...]:
    """An int or a tuple of ``n`` ints as the tuple."""
    return (int(value),) * n if isinstance(value, (int, np.integer)) else tuple(int(v) for v in value)


def pool2d(kind: str, N: int, H: int, W: int, C: int, k: int | tuple[int, int], stride: int | tuple[int, int],
           pad: int | tuple[int, int, int, int], dtype: DType, target: Target, count_include_pad: bool = False,
           divide: bool = False, *, dilation: int | tuple[int, int] = 1, ceil: bool = False):
    """MaxPool / AveragePool on NHWC; regions X, Y (+ RC, the per-position 1/count map of an average whose count
    varies, or CNT, the counts, with ``divide``). Tiles cover ``toh`` output rows of ``tc`` channels.

    ``k``, ``stride`` and ``dilation`` per axis ``(h, w)`` and ``pad`` as ``(top, left, bottom, right)`` (an int for
    all). ``ceil``: ceil_mode, the output size of :func:`compiler.frontend.canonical.window_out` (a last window that
    would start in the end padding is dropped); windows reaching past the end padding read the fill value (-inf, or 0
    outside the count). The average counts the window's positions inside the input, or with ``count_include_pad`` inside
    the padded input (:func:`avgpool_counts`); a count that is the same everywhere is an immediate. ``divide``: divide
    the sum by the count (onnxruntime's rounding) instead of multiplying by its reciprocal."""
    spm = target.spm
    es = dtype.size
    (kh, kw), (sh, sw), (dh, dw) = _window_ints(k, 2), _window_ints(stride, 2), _window_ints(dilation, 2)
    pt, pl, pb, pr = _window_ints(pad, 4)
    OH, OW = window_out(H, kh, sh, pt, pb, dh, ceil), window_out(W, kw, sw, pl, pr, dw, ceil)
    counts = avgpool_counts(H, W, (kh, kw), (sh, sw), (pt, pl, pb, pr), (dh, dw), (OH, OW), count_include_pad) \
        if kind == "avg" else None
    uniform = counts is not None and (counts == counts.flat[0]).all()
    pr = max(pr, (OW - 1) * sw + (kw - 1) * dw + 1 - W - pl)   # ceil_mode: the last window's columns past the pads
    Wp = W + pl + pr
    fill = (-math.inf if dtype.is_float else {DType.I8: -128, DType.U8: 0}.get(dtype, -(2**31))) if kind == "max" \
        else 0

    def slots(toh: int, tc: int) -> tuple[int, int, int, int]:
        return ((toh - 1) * sh + (kh - 1) * dh + 1) * Wp * tc * es, toh * OW * tc * 4, toh * OW * tc * es, toh * OW * 4

    # the most channels for which one output row fits twice, then as many rows as fit
    tc = next((c for c in range(C, 0, -1) if 2 * sum(slots(1, c)) <= spm), 0)
    if not tc:
        raise TilingError(f"a {kh}x{kw} pooling window over {Wp} padded columns does not fit the SPM")
    toh = max(t for t in range(1, OH + 1) if 2 * sum(slots(t, tc)) <= spm)
    toh = min(toh, overlap_cap(N * OH * -(-C // tc), 1))
    in_slot, sum_slot, out_slot, rc_slot = slots(toh, tc)
    pipe = RingPipeline()
    for b in range(N):
        for oh0 in range(0, OH, toh):
            t = min(toh, OH - oh0)
            th = (t - 1) * sh + (kh - 1) * dh + 1
            ih0 = oh0 * sh - pt
            top, bottom = max(0, -ih0), max(0, ih0 + th - H)
            for c0 in range(0, C, tc):
                c = min(tc, C - c0)
                row, pix = Wp * c * es, c * es
                base = pipe.slot * (in_slot + sum_slot + out_slot + rc_slot)
                loads = padded_load((th, Wp, c), View(Space.SPM, base, dtype, (row, pix, es)),
                                    View(Space.DRAM, (((b * H + max(ih0, 0)) * W) * C + c0) * es, dtype,
                                         (W * C * es, C * es, es), "X"), ((top, bottom), (pl, pr)), fill)
                y = View(Space.SPM, base + in_slot + sum_slot, dtype, (OW * c * es, c * es, es))
                # channels innermost: each beat of lanes reads consecutive words of one window position
                window = View(Space.SPM, base, dtype, (sh * row, sw * pix, dh * row, dw * pix, es))
                if kind == "max":
                    compute = [VecUnary(fn=Act.MOV, reduce=Reduce.MAX, zero=True, shape=(t, OW, kh, kw, c),
                                        dst=y.with_strides((OW * c * es, c * es, 0, 0, es)), src=window)]
                else:
                    s = View(Space.SPM, base + in_slot, F32, (OW * c * 4, c * 4, 4))
                    compute = [VecUnary(fn=Act.MOV, reduce=Reduce.SUM, zero=True, shape=(t, OW, kh, kw, c),
                                        dst=s.with_strides((OW * c * 4, c * 4, 0, 0, 4)), src=window)]
                    n = int(counts.flat[0])
                    if uniform and divide:
                        compute.append(VecBinary(op=BinOp.DIV, shape=(t, OW, c), dst=y, src0=s, imm=n))
                    elif uniform:
                        compute.append(VecBinary(op=BinOp.MUL, shape=(t, OW, c), dst=y, src0=s, imm=1.0 / n))
                    else:
                        rc = View(Space.SPM, base + in_slot + sum_slot + out_slot, F32, (OW * 4, 4, 0))
                        loads.append(DmaCopy(queue=Queue.DMA_LD, shape=(t, OW), dst=rc.with_strides((OW * 4, 4)),
                                             src=View(Space.DRAM, oh0 * OW * 4, F32, (OW * 4, 4),
                                                      "CNT" if divide else "RC")))
                        compute.append(VecBinary(op=BinOp.DIV if divide else BinOp.MUL, shape=(t, OW, c), dst=y,
                                                 src0=s, src1=rc))
                store = DmaCopy(queue=Queue.DMA_ST, shape=(t, OW, c), src=y,
                                dst=View(Space.DRAM, (((b * OH + oh0) * OW) * C + c0) * es, dtype,
                                         (OW * C * es, C * es, es), "Y"))
                pipe.step(loads, compute, [store])
    regions = (Region("X", 0, N * H * W * C * es), Region("Y", 1, N * OH * OW * C * es))
    if kind == "avg" and not uniform:
        regions += (Region("CNT" if divide else "RC", 2, OH * OW * 4),)
    return pipe.program(vector_config(spm), regions)


def avgpool_counts(H: int, W: int, k: tuple[int, int], stride: tuple[int, int], pads: tuple[int, int, int, int],
                   dilation: tuple[int, int], out: tuple[int, int], include_pad: bool) -> np.ndarray:
    """``[OH][OW]`` f32 map of the positions an average pool's window divides by, as onnxruntime counts them: those
    inside the input, or with ``include_pad`` inside the padded input (positions a ceil_mode window reaches past the
    end padding never count)."""
    def axis(size, kern, s, d, lo, hi, n):
        pos = np.arange(n)[:, None] * s - lo + np.arange(kern)[None, :] * d
        inside = (pos >= (-lo if include_pad else 0)) & (pos < size + (hi if include_pad else 0))
        return inside.sum(1)

    ch = axis(H, k[0], stride[0], dilation[0], pads[0], pads[2], out[0])
    cw = axis(W, k[1], stride[1], dilation[1], pads[1], pads[3], out[1])
    return np.outer(ch, cw).astype(np.float32)


def avgpool_reciprocals(H: int, W: int, k: int, stride: int, pad: int) -> np.ndarray:
    """``[OH][OW]`` f32 map of 1 / (window elements inside the image), for AveragePool(count_include_pad=0) with a
    square window, equal strides and symmetric pads (:func:`avgpool_counts` in general)."""
    OH, OW = (H + 2 * pad - k) // stride + 1, (W + 2 * pad - k) // stride + 1
    return (1.0 / avgpool_counts(H, W, (k, k), (stride, stride), (pad,) * 4, (1, 1), (OH, OW), False)).astype(
        np.float32)


def quantize(shape: tuple[int, ...], out: DType, scale: float, zp: int, target: Target):
    """QuantizeLinear ``Y = saturate(round_half_even(X / scale) + zp)``, f32 X to integer ``out``; regions X, Y.

    A true f32 division (onnxruntime divides; a multiply by 1/scale rounds differently), done in place in the input
    tile, then vpu.cvt rounds, adds the zero point and saturates."""
    spm = target.spm
    pipe = RingPipeline()

    def compute(dst, srcs, s):
        return [VecBinary(op=BinOp.DIV, shape=s, dst=srcs[0], src0=srcs[0], imm=scale),
                VecConvert(shape=s, dst=dst, src=srcs[0], zp_out=zp)]

    _stream(pipe, tuple(shape), [_Operand("X", row_major(shape))], _Operand("Y", row_major(shape)), [F32], out, spm,
            compute)
    n = math.prod(shape)
    return pipe.program(vector_config(spm), (Region("X", 0, n * 4), Region("Y", 1, n * out.size)))


def dequantize(shape: tuple[int, ...], src: DType, scale: float, zp: int, target: Target):
    """DequantizeLinear ``Y = f32(X - zp) * scale`` (one vpu.cvt; the difference is exact in f32); regions X, Y."""
    spm = target.spm
    pipe = RingPipeline()
    _stream(pipe, tuple(shape), [_Operand("X", row_major(shape))], _Operand("Y", row_major(shape)), [src], F32, spm,
            lambda dst, srcs, s: [VecConvert(shape=s, dst=dst, src=srcs[0], scale=scale, zp_in=zp)])
    n = math.prod(shape)
    return pipe.program(vector_config(spm), (Region("X", 0, n * src.size), Region("Y", 1, n * 4)))


def requantize(M: int, N: int, out: DType, zp: int, target: Target):
    """``Y = saturate(round_half_even(f32(C + Bias) * Scale) + zp)`` over ``[M][N]``: i32 C, per-column i32 Bias and
    f32 Scale (N elements each), integer ``out`` Y; regions C, Bias, Scale, Y (onnxruntime's requantization)."""
    spm = target.spm
    pipe = RingPipeline()

    def compute(dst, srcs, s):
        c, bias, scale = srcs
        f = View(c.space, c.base, F32, c.strides)
        return [VecBinary(op=BinOp.ADD, shape=s, dst=c, src0=c, src1=bias), VecConvert(shape=s, dst=f, src=c),
                VecBinary(op=BinOp.MUL, shape=s, dst=f, src0=f, src1=scale),
                VecConvert(shape=s, dst=dst, src=f, zp_out=zp)]

    col = (0, 1)
    _stream(pipe, (M, N), [_Operand("C", (N, 1)), _Operand("Bias", col), _Operand("Scale", col)], _Operand("Y", (N, 1)),
            [DType.I32, DType.I32, F32], out, spm, compute)
    return pipe.program(vector_config(spm), (Region("C", 0, M * N * 4), Region("Bias", 1, N * 4),
                                             Region("Scale", 2, N * 4), Region("Y", 3, M * N * out.size)))


# -- element-wise recipes: a few vector instructions per tile in one stream ----------------------------------------

Recipe = Callable[[View, list[View], tuple[int, ...]], list[Instr]]
"""The vector instructions of one tile: ``recipe(y, xs, shape)`` with the SPM views of the output tile ``y`` and of
each input's tile ``xs`` (a broadcast input is read with stride 0). A recipe may overwrite ``xs[0]`` as scratch when
the first input has the output's shape (every unary recipe below does); ``y`` is f32 scratch until its last write."""


def pointwise(recipe: Recipe, inputs: list[tuple[str, tuple[int, ...]]], out_shape: tuple[int, ...], target: Target,
              dtype: DType = F32):
    """``Y = recipe(inputs)`` element-wise with numpy broadcasting, all its instructions on each tile in turn (one
    DRAM pass however many instructions); regions: the ``inputs`` by name in order, then Y (all ``dtype``)."""
    out = tuple(out_shape)
    pipe = RingPipeline()
    _stream(pipe, out, [_Operand(name, broadcast_strides(shape, out)) for name, shape in inputs],
            _Operand("Y", row_major(out)), [dtype] * len(inputs), dtype, target.spm, recipe)
    regions = tuple(Region(name, k, math.prod(shape) * dtype.size) for k, (name, shape) in enumerate(inputs))
    return pipe.program(vector_config(target.spm), regions + (Region("Y", len(inputs), math.prod(out) * dtype.size),))


def _bin(op: BinOp, s, dst: View, a: View, b: View | None = None, imm: float = 0.0, **kw) -> VecBinary:
    return VecBinary(op=op, shape=s, dst=dst, src0=a, src1=b, imm=imm, **kw)


def _act(fn: Act, s, dst: View, src: View, **kw) -> VecUnary:
    return VecUnary(fn=fn, shape=s, dst=dst, src=src, **kw)


def leaky_relu(alpha: float) -> Recipe:
    """``x >= 0 ? x : alpha * x``: max(x, alpha x) for alpha in [0, 1], min for alpha > 1, else relu(x) +
    relu(alpha x) (exact in every case)."""
    def tile(y, xs, s):
        x = xs[0]
        if alpha >= 0:
            return [_bin(BinOp.MUL, s, y, x, imm=alpha), _bin(BinOp.MAX if alpha <= 1 else BinOp.MIN, s, y, x, y)]
        return [_bin(BinOp.MUL, s, y, x, imm=alpha, act=Act.RELU), _act(Act.RELU, s, x, x), _bin(BinOp.ADD, s, y, x, y)]
    return tile


def prelu(slopes: str) -> Recipe:
    """``x >= 0 ? x : slope * x`` with the slope the second input: max(x, slope x) when every slope is in [0, 1]
    (``slopes="unit"``), min when every slope is >= 1 (``"steep"``), else relu(x) + slope min(x, 0) (``"any"``)."""
    def tile(y, xs, s):
        x, a = xs
        if slopes != "any":
            return [_bin(BinOp.MUL, s, y, x, a), _bin(BinOp.MAX if slopes == "unit" else BinOp.MIN, s, y, x, y)]
        return [_bin(BinOp.MIN, s, y, x, imm=0.0), _bin(BinOp.MUL, s, y, y, a), _act(Act.RELU, s, x, x),
                _bin(BinOp.ADD, s, y, x, y)]
    return tile


def elu(alpha: float, gamma: float | None = None) -> Recipe:
    """Elu ``x > 0 ? x : alpha (exp(x) - 1)`` as relu(x) + alpha (exp(min(x, 0)) - 1), the last two steps one
    vpu.cvt; Selu multiplies that by ``gamma``."""
    def tile(y, xs, s):
        x = xs[0]
        out = [_bin(BinOp.MIN, s, y, x, imm=0.0), _act(Act.EXP, s, y, y),
               VecConvert(shape=s, dst=y, src=y, scale=alpha, zp_in=1),   # (e - 1) * alpha
               _act(Act.RELU, s, x, x), _bin(BinOp.ADD, s, y, x, y)]
        return out + ([_bin(BinOp.MUL, s, y, y, imm=gamma)] if gamma is not None else [])
    return tile


def hard_sigmoid(alpha: float, beta: float, times_x: bool = False) -> Recipe:
    """``clamp(alpha x + beta, 0, 1)`` (the clamp fused into the add); ``times_x``: multiplied by x (HardSwish)."""
    def tile(y, xs, s):
        x = xs[0]
        out = [_bin(BinOp.MUL, s, y, x, imm=alpha), _bin(BinOp.ADD, s, y, y, imm=beta, act=Act.CLAMP, lo=0.0, hi=1.0)]
        return out + ([_bin(BinOp.MUL, s, y, x, y)] if times_x else [])
    return tile


def swish(alpha: float = 1.0) -> Recipe:
    """``x * sigmoid(alpha x)`` (SiLU for alpha = 1)."""
    def tile(y, xs, s):
        x = xs[0]
        scaled = [_bin(BinOp.MUL, s, y, x, imm=alpha)] if alpha != 1 else []
        return scaled + [_act(Act.SIGMOID, s, y, y if scaled else x), _bin(BinOp.MUL, s, y, x, y)]
    return tile


def softplus() -> Recipe:
    """``log(1 + exp(x))`` as relu(x) - log(sigmoid(|x|)), which cannot overflow (exp(x) is inf from x = 88.7)."""
    def tile(y, xs, s):
        x = xs[0]
        return [_act(Act.ABS, s, y, x), _act(Act.SIGMOID, s, y, y), _act(Act.LOG, s, y, y), _act(Act.RELU, s, x, x),
                _bin(BinOp.SUB, s, y, x, y)]
    return tile


def mish() -> Recipe:
    """``x * tanh(log(1 + exp(x)))`` (an overflowing exp gives log inf = inf, tanh 1: y = x, as it should)."""
    def tile(y, xs, s):
        x = xs[0]
        return [_act(Act.EXP, s, y, x), _bin(BinOp.ADD, s, y, y, imm=1.0), _act(Act.LOG, s, y, y),
                _act(Act.TANH, s, y, y), _bin(BinOp.MUL, s, y, x, y)]
    return tile


MAX_POW = 32
"""Largest integer part of a Pow exponent done by multiplication: n multiplications of f32 values lose up to about
n / 2 units in the last place."""


def power(e: float) -> Recipe:
    """``x ** e`` for a constant exponent ``e`` = n + f (n = trunc(e), |n| <= :data:`MAX_POW`): x^n by
    multiplication (x*x, x*x*x: onnxruntime's own products for 2 and 3), x^f by sqrt (0.5), rsqrt (-0.5) or
    exp(f log x); then x^n * x^f (a division for n < 0). A negative base with f != 0 gives NaN, as in onnxruntime."""
    n = int(e)
    f = float(np.float32(e)) - n
    if abs(n) > MAX_POW:
        raise CompileError(f"Pow exponent {e}: integer part beyond {MAX_POW}")
    bits = bin(abs(n))[2:]

    def tile(y, xs, s):
        x = xs[0]
        if f == 0:   # x^|n| left to right (square, times x per set bit), then 1/that for n < 0
            if n == 0:
                return [_act(Act.CLAMP, s, y, x, lo=1.0, hi=1.0)]
            out = [_act(Act.MOV, s, y, x)] if n in (1, -1) else []
            for k, bit in enumerate(bits[1:]):
                out.append(_bin(BinOp.MUL, s, y, x if k == 0 else y, x if k == 0 else y))
                if bit == "1":
                    out.append(_bin(BinOp.MUL, s, y, y, x))
            return out + ([_act(Act.RECIP, s, y, y)] if n < 0 else [])
        if f in (0.5, -0.5):
            out = [_act(Act.SQRT if f > 0 else Act.RSQRT, s, y, x)]
        else:
            out = [_act(Act.LOG, s, y, x), _bin(BinOp.MUL, s, y, y, imm=f), _act(Act.EXP, s, y, y)]
        op = BinOp.MUL if n > 0 else BinOp.DIV
        for k, bit in enumerate(reversed(bits) if n else ()):   # x^|n| right to left, squaring x in place
            if bit == "1":
                out.append(_bin(op, s, y, y, x))
            if k < len(bits) - 1:
                out.append(_bin(BinOp.MUL, s, x, x, x))
        return out
    return tile


def variadic(op: BinOp, count: int, mean: bool = False) -> Recipe:
    """``((x0 op x1) op x2) ...`` over ``count`` inputs (Sum, Min, Max); ``mean``: the sum times 1/count, as
    onnxruntime's Mean."""
    def tile(y, xs, s):
        out = [_bin(op, s, y, xs[0], xs[1])] if count > 1 else [_act(Act.MOV, s, y, xs[0])]
        out += [_bin(op, s, y, y, x) for x in xs[2:]]
        return out + ([_bin(BinOp.MUL, s, y, y, imm=1.0 / count)] if mean and count > 1 else [])
    return tile


def affine() -> Recipe:
    """``x * scale + shift`` with scale and shift the second and third inputs (a BatchNormalization's per-channel
    ``gamma / sqrt(var + eps)`` and ``beta - mean * that``, onnxruntime's own two steps)."""
    def tile(y, xs, s):
        x, a, b = xs
        return [_bin(BinOp.MUL, s, y, x, a), _bin(BinOp.ADD, s, y, y, b)]
    return tile
