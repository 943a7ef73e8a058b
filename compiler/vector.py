"""Vector-unit lowerings: element-wise ops with broadcasting, activations, pooling, softmax, layer norm, reductions.

Every op here is one :class:`~compiler.pipeline.RingPipeline`: ``dma.ld`` brings a tile of each input into SPM,
the vector unit computes it, ``dma.st`` writes it back; tiles are double-buffered. Tensors are row-major in DRAM
(4-D activations NHWC). Results are computed in f32 for float types (i64 for integers) and rounded once when written.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from isa import (
    Act,
    BinOp,
    DmaCopy,
    DType,
    Pad,
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

from .epilogue import activation_ops
from .errors import CompileError, TilingError
from .pipeline import RingPipeline, vector_config
from .target import Target

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


def _overlap_cap(total: int, floor: int) -> int:
    """The most units a tile may hold so that ``total`` units make at least MIN_TILES tiles, but at least ``floor``."""
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
    limit = min(limit, _overlap_cap(math.prod(shape), 4096))
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
    """``Y = act(X)`` for any activation of :mod:`compiler.epilogue` (``gelu_tanh``: eight instructions, ``silu``:
    two, or three with ``alpha``) as one stream: per tile all of the activation's instructions, the output slot
    serving as their scratch; regions X, Y."""
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
    per = min(per, _overlap_cap(rows, -(-4096 // length)))
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


def softmax(rows: int, length: int, dtype: DType, target: Target):
    """Softmax over the last axis of ``[rows][length]``: max, subtract, exp, sum, reciprocal, multiply (f32)."""
    def tile(x, y, s, cols, _, r):
        t, m, z = s[0], _col(cols[0]), _col(cols[1])
        return [VecConvert(shape=(r, length), dst=t, src=x),
                VecUnary(fn=Act.MOV, reduce=Reduce.MAX, zero=True, shape=(r, length), dst=m, src=t),
                VecBinary(op=BinOp.SUB, shape=(r, length), dst=t, src0=t, src1=m),
                VecUnary(fn=Act.EXP, shape=(r, length), dst=t, src=t),
                VecUnary(fn=Act.MOV, reduce=Reduce.SUM, zero=True, shape=(r, length), dst=z, src=t),
                VecUnary(fn=Act.RECIP, shape=(r,), dst=_vec(cols[1]), src=_vec(cols[1])),
                VecBinary(op=BinOp.MUL, shape=(r, length), dst=y, src0=t, src1=z)]
    return _rows_op(rows, length, dtype, min(target.spm, 1 << 22), (), tile, scratch=1, scalars=2)


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
    per = max(1, (spm // 2) // (length * es + 8))
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


def pool2d(kind: str, N: int, H: int, W: int, C: int, k: int, stride: int, pad: int, dtype: DType, target: Target,
           count_include_pad: bool = False, divide: bool = False):
    """MaxPool / AveragePool (square window) on NHWC; regions X, Y (+ RC, the per-position 1/count map for average
    pooling without counting the padding). Tiles cover ``toh`` output rows of ``tc`` channels. ``divide``: a
    count-including average divides the sum by ``k*k`` (onnxruntime's rounding) instead of multiplying by 1/(k*k)."""
    spm = target.spm
    es = dtype.size
    OH, OW = (H + 2 * pad - k) // stride + 1, (W + 2 * pad - k) // stride + 1
    Wp = W + 2 * pad
    fill = (-math.inf if dtype.is_float else {DType.I8: -128, DType.U8: 0}.get(dtype, -(2**31))) if kind == "max" \
        else 0

    def slots(toh: int, tc: int) -> tuple[int, int, int, int]:
        return ((toh - 1) * stride + k) * Wp * tc * es, toh * OW * tc * 4, toh * OW * tc * es, toh * OW * 4

    # the most channels for which one output row fits twice, then as many rows as fit
    tc = next((c for c in range(C, 0, -1) if 2 * sum(slots(1, c)) <= spm), 0)
    if not tc:
        raise TilingError(f"a {k}x{k} pooling window over {W + 2 * pad} padded columns does not fit the SPM")
    toh = max(t for t in range(1, OH + 1) if 2 * sum(slots(t, tc)) <= spm)
    toh = min(toh, _overlap_cap(N * OH * -(-C // tc), 1))
    in_slot, sum_slot, out_slot, rc_slot = slots(toh, tc)
    pipe = RingPipeline()
    for b in range(N):
        for oh0 in range(0, OH, toh):
            t = min(toh, OH - oh0)
            th = (t - 1) * stride + k
            ih0 = oh0 * stride - pad
            top, bottom = max(0, -ih0), max(0, ih0 + th - H)
            for c0 in range(0, C, tc):
                c = min(tc, C - c0)
                row, pix = Wp * c * es, c * es
                base = pipe.slot * (in_slot + sum_slot + out_slot + rc_slot)
                pads = tuple(p for p in (Pad(0, top, bottom), Pad(1, pad, pad)) if p.lo or p.hi)
                loads = [DmaCopy(queue=Queue.DMA_LD, shape=(th, Wp, c), dst=View(Space.SPM, base, dtype,
                                                                                 (row, pix, es)),
                                 pad=pads, fill=fill,
                                 src=View(Space.DRAM, (((b * H + max(ih0, 0)) * W) * C + c0) * es, dtype,
                                          (W * C * es, C * es, es), "X"))]
                y = View(Space.SPM, base + in_slot + sum_slot, dtype, (OW * c * es, c * es, es))
                # channels innermost: each beat of lanes reads consecutive words of one window position
                window = View(Space.SPM, base, dtype, (stride * row, stride * pix, row, pix, es))
                if kind == "max":
                    compute = [VecUnary(fn=Act.MOV, reduce=Reduce.MAX, zero=True, shape=(t, OW, k, k, c),
                                        dst=y.with_strides((OW * c * es, c * es, 0, 0, es)), src=window)]
                else:
                    s = View(Space.SPM, base + in_slot, F32, (OW * c * 4, c * 4, 4))
                    compute = [VecUnary(fn=Act.MOV, reduce=Reduce.SUM, zero=True, shape=(t, OW, k, k, c),
                                        dst=s.with_strides((OW * c * 4, c * 4, 0, 0, 4)), src=window)]
                    if count_include_pad:
                        compute.append(VecBinary(op=BinOp.DIV, shape=(t, OW, c), dst=y, src0=s, imm=k * k) if divide
                                       else VecBinary(op=BinOp.MUL, shape=(t, OW, c), dst=y, src0=s, imm=1.0 / (k * k)))
                    else:
                        rc = View(Space.SPM, base + in_slot + sum_slot + out_slot, F32, (OW * 4, 4, 0))
                        loads.append(DmaCopy(queue=Queue.DMA_LD, shape=(t, OW), dst=rc.with_strides((OW * 4, 4)),
                                             src=View(Space.DRAM, oh0 * OW * 4, F32, (OW * 4, 4), "RC")))
                        compute.append(VecBinary(op=BinOp.MUL, shape=(t, OW, c), dst=y, src0=s, src1=rc))
                store = DmaCopy(queue=Queue.DMA_ST, shape=(t, OW, c), src=y,
                                dst=View(Space.DRAM, (((b * OH + oh0) * OW) * C + c0) * es, dtype,
                                         (OW * C * es, C * es, es), "Y"))
                pipe.step(loads, compute, [store])
    regions = (Region("X", 0, N * H * W * C * es), Region("Y", 1, N * OH * OW * C * es))
    if kind == "avg" and not count_include_pad:
        regions += (Region("RC", 2, OH * OW * 4),)
    return pipe.program(vector_config(spm), regions)


def avgpool_reciprocals(H: int, W: int, k: int, stride: int, pad: int) -> np.ndarray:
    """``[OH][OW]`` f32 map of 1 / (window elements inside the image), for AveragePool(count_include_pad=0)."""
    OH, OW = (H + 2 * pad - k) // stride + 1, (W + 2 * pad - k) // stride + 1
    hs = np.arange(OH) * stride - pad
    ws = np.arange(OW) * stride - pad
    ch = np.minimum(hs + k, H) - np.maximum(hs, 0)
    cw = np.minimum(ws + k, W) - np.maximum(ws, 0)
    return (1.0 / np.outer(ch, cw)).astype(np.float32)


def permute(in_shape: tuple[int, ...], perm: tuple[int, ...], dtype: DType, target: Target):
    """``Y = transpose(X, perm)`` (row-major in and out); regions X, Y. Per tile the DMA reads X's box in X's own order
    (long DRAM runs), the vector unit moves it into Y's order in SPM, and the DMA writes Y's box."""
    spm = target.spm
    out = tuple(in_shape[p] for p in perm)
    xst = row_major(tuple(in_shape))
    shape, (xs, ys) = collapse(out, tuple(xst[p] for p in perm), row_major(out))
    if len(shape) > 5:
        raise CompileError(f"transpose of {in_shape} by {perm} does not collapse to 5 dimensions")
    es = dtype.size
    limit = min(max(1, (spm // 2) // (2 * es)), _overlap_cap(math.prod(shape), 4096))
    order = sorted(range(len(shape)), key=lambda d: -xs[d])   # X's order of the output dimensions
    pipe = RingPipeline()
    for start, tshape in _tiles(shape, limit):
        x_base, y_base = pipe.slot * limit * es, (2 + pipe.slot) * limit * es
        held = tuple(tshape[d] for d in order)
        dense = row_major(held)
        load = DmaCopy(queue=Queue.DMA_LD, shape=held, dst=View(Space.SPM, x_base, dtype, tuple(s * es for s in dense)),
                       src=_dram_box(tuple(start[d] for d in order), tuple(xs[d] for d in order), dtype, "X"))
        src = View(Space.SPM, x_base, dtype, tuple(dense[order.index(d)] * es for d in range(len(shape))))
        y = View(Space.SPM, y_base, dtype, tuple(s * es for s in row_major(tshape)))
        store = DmaCopy(queue=Queue.DMA_ST, shape=tshape, src=y, dst=_dram_box(start, ys, dtype, "Y"))
        pipe.step([load], [VecUnary(fn=Act.MOV, shape=tshape, dst=y, src=src)], [store])
    n = math.prod(in_shape) * es
    return pipe.program(vector_config(spm), (Region("X", 0, n), Region("Y", 1, n)))


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
