"""Row-wise vector programs over ``[rows][length]`` in tiles of whole rows: softmax (and over a middle axis without a
transpose), layer and RMS normalisation, reductions of the last axis. Computed in f32, rounded once when written."""

from __future__ import annotations

from compiler.errors import TilingError
from compiler.kernels.common.pipeline import RingPipeline, vector_config
from compiler.kernels.common.target import Target
from compiler.kernels.vector.streams import overlap_cap
from isa import Act, BinOp, DmaCopy, DType, Queue, Reduce, Region, Space, VecBinary, VecConvert, VecUnary, View
from isa.view import MAX_EXTENT

F32 = DType.F32


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


def rmsnorm(rows: int, length: int, dtype: DType, target: Target, eps: float = 1e-5):
    """RMSNormalization (onnxruntime's SimplifiedLayerNormalization) over the last axis, ``x * rsqrt(mean(x^2) +
    eps) * scale``; region G holds the f32 scale: the mean square (one multiply-reduce), rsqrt, two multiplies. One
    DRAM pass."""
    def loads(addr, r):
        return [DmaCopy(queue=Queue.DMA_LD, shape=(length,), dst=View(Space.SPM, addr, F32, (4,)),
                        src=View(Space.DRAM, 0, F32, (4,), "G"))]

    def tile(x, y, s, cols, addr, r):
        d, ms, one = s[0], _col(cols[0]), (r,)
        scale = View(Space.SPM, addr, F32, (0, 4))
        return [VecConvert(shape=(r, length), dst=d, src=x),
                VecBinary(op=BinOp.MUL, reduce=Reduce.SUM, zero=True, shape=(r, length), dst=ms, src0=d, src1=d),
                VecBinary(op=BinOp.MUL, shape=one, dst=_vec(cols[0]), src0=_vec(cols[0]), imm=1.0 / length),
                VecBinary(op=BinOp.ADD, shape=one, dst=_vec(cols[0]), src0=_vec(cols[0]), imm=eps),
                VecUnary(fn=Act.RSQRT, shape=one, dst=_vec(cols[0]), src=_vec(cols[0])),
                VecBinary(op=BinOp.MUL, shape=(r, length), dst=d, src0=d, src1=ms),
                VecBinary(op=BinOp.MUL, shape=(r, length), dst=y, src0=d, src1=scale)]
    return _rows_op(rows, length, dtype, min(target.spm, 1 << 22), (Region("G", 2, length * 4),), tile, scratch=1,
                    scalars=1, extra=length * 4, extra_loads=loads)


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
