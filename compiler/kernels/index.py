"""GatherND and ScatterND with run-time indices, from the ISA's one data-dependent access, the row gather.

Both see the data as a table of ``rows`` rows of ``S`` elements (the dimensions the indices address, then the
slice each index takes) and an index tuple ``(i_1..i_r)`` as the row ``sum(i_j * stride_j)``
(:func:`flat_ops`): a negative ``i_j`` counts from the end, and a tuple with a component out of range becomes
``rows`` or more, which a gather refuses with an error naming the point and the index (onnxruntime refuses it too)
rather than reading some other row.

- GatherND (:func:`flat_rows`, then :func:`gather_rows`): the rows, then ``dma.ld.gather`` of each from the data
  in DRAM, one tile of points at a time.
- ScatterND with reduction none (:func:`scatter_inverse`, then :func:`scatter_select`): there is no scatter, so the
  inverse map is made instead, ``inv[row] = the last update i whose row is row, else -1`` (onnxruntime applies the
  updates in order, so the last one wins), by comparing each row tile with every update's row; then each output
  row is its update gathered by ``inv`` or the data's row, selected bit for bit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from compiler.errors import CompileError, TilingError
from compiler.kernels.common.pipeline import RingPipeline, sem_op, vector_config
from compiler.kernels.common.target import Target
from isa import (
    BinOp,
    DmaCopy,
    DType,
    Gather,
    Halt,
    Instr,
    Program,
    Queue,
    Reduce,
    Region,
    SemDecl,
    Space,
    VecBinary,
    View,
)
from isa.instructions import MAX_TABLE_ROWS
from isa.view import MAX_EXTENT

I32 = DType.I32
INT_OF_SIZE = {1: DType.I8, 2: DType.I16, 4: DType.I32}
MAX_PAIRS = 1 << 26
"""Row x update comparisons a ScatterND's inverse map may take (about a second of simulation per 2**24)."""


@dataclass(frozen=True)
class Addressing:
    """How index tuples address a table: ``dims`` the extents the ``r`` components index, ``strides`` their rows
    per step, ``rows`` the table's rows, ``batch`` (points per batch, rows per batch) when GatherND's batch_dims
    make each batch its own table (None: one table)."""

    dims: tuple[int, ...]
    rows: int
    batch: tuple[int, int] | None = None

    @property
    def r(self) -> int:
        return len(self.dims)

    @property
    def strides(self) -> tuple[int, ...]:
        return tuple(math.prod(self.dims[j + 1:]) for j in range(self.r))

    def constants(self, points: int) -> np.ndarray:
        """The per-component constants ``dims``, ``dims - 1``, ``strides`` (then, with batches, each point's batch
        offset), as int32: region K of :func:`flat_rows` and :func:`scatter_inverse`."""
        out = [np.array(self.dims), np.array(self.dims) - 1, np.array(self.strides)]
        if self.batch is not None:
            per, rows = self.batch
            out.append(np.arange(points) // per * rows)
        return np.concatenate(out).astype(np.int32)


def flat_ops(a: Addressing, n: int, idx: View, t: View, u: View, k: int, flat: View,
             offsets: View | None = None) -> list[Instr]:
    """Instructions turning ``n`` index tuples (``idx``: an ``(n, r)`` i32 view, overwritten) into table rows
    (``flat``: ``(n,)`` i32 seen as ``(n, r)`` with stride 0 on r); ``t``, ``u``: ``(n, r)`` i32 scratch views;
    ``k``: SPM byte of :meth:`Addressing.constants`; ``offsets``: each point's batch offset, an ``(n, r)`` view
    with stride 0 on r (or None)."""
    s, r = (n, a.r), a.r
    dims, dm1, st = (View(Space.SPM, k + 4 * r * j, I32, (0, 4)) for j in range(3))
    ops = [VecBinary(op=BinOp.SHR, shape=s, dst=t, src0=idx, imm=31),            # -1 where negative
           VecBinary(op=BinOp.AND, shape=s, dst=t, src0=t, src1=dims),
           VecBinary(op=BinOp.ADD, shape=s, dst=idx, src0=idx, src1=t),         # negatives count from the end
           VecBinary(op=BinOp.SUB, shape=s, dst=u, src0=dm1, src1=idx),
           VecBinary(op=BinOp.SHR, shape=s, dst=u, src0=u, imm=31),             # -1 where >= dim
           VecBinary(op=BinOp.SHR, shape=s, dst=t, src0=idx, imm=31),           # -1 where still negative
           VecBinary(op=BinOp.OR, shape=s, dst=t, src0=t, src1=u),              # -1 where out of range
           VecBinary(op=BinOp.XOR, shape=s, dst=u, src0=t, imm=-1),
           VecBinary(op=BinOp.AND, shape=s, dst=idx, src0=idx, src1=u),         # a bad component counts 0 ...
           VecBinary(op=BinOp.MUL, shape=s, dst=flat, src0=idx, src1=st, reduce=Reduce.SUM, zero=True),
           VecBinary(op=BinOp.MUL, shape=s, dst=flat, src0=t, imm=-a.rows, reduce=Reduce.SUM)]   # ... plus rows
    if offsets is not None:
        ops.append(VecBinary(op=BinOp.ADD, shape=(n, 1), dst=_first(flat), src0=_first(flat), src1=_first(offsets)))
    return ops


def _first(v: View) -> View:   # an (n, r) view with stride 0 on r as (n, 1)
    return v.with_strides((v.strides[0], 0))


def _up(n: int) -> int:
    return -(-n // 64) * 64


def flat_rows(points: int, a: Addressing, target: Target) -> Program:
    """The table row of each of ``points`` index tuples: regions I (``(points, r)`` i32), K
    (:meth:`Addressing.constants`) and F (``(points,)`` i32)."""
    r, consts = a.r, a.constants(points)
    room = target.spm - _up(len(consts) * 4) - 6 * 64
    tn = min(points, MAX_EXTENT, room // (4 * (4 * r + 2)), max(64, -(-points // 8)))
    if tn < 1:
        raise TilingError(f"the index constants of {points} points do not fit the SPM")
    slot = _up(tn * r * 4)
    k = 4 * slot + 2 * _up(tn * 4)
    pipe = RingPipeline()
    for p0 in range(0, points, tn):
        n = min(tn, points - p0)
        idx = View(Space.SPM, pipe.slot * slot, I32, (4 * r, 4))
        t, u = View(Space.SPM, 2 * slot, I32, (4 * r, 4)), View(Space.SPM, 3 * slot, I32, (4 * r, 4))
        flat = View(Space.SPM, 4 * slot + pipe.slot * _up(tn * 4), I32, (4, 0))
        loads = [] if pipe.steps else [DmaCopy(queue=Queue.DMA_LD, shape=(len(consts),),
                                               dst=View(Space.SPM, k, I32, (4,)), src=View(Space.DRAM, 0, I32, (4,),
                                                                                          "K"))]
        loads.append(DmaCopy(queue=Queue.DMA_LD, shape=(n, r), dst=idx, src=View(Space.DRAM, p0 * r * 4, I32,
                                                                                   (4 * r, 4), "I")))
        offsets = None if a.batch is None else View(Space.SPM, k + 12 * r + 4 * p0, I32, (4, 0))
        store = DmaCopy(queue=Queue.DMA_ST, shape=(n,), src=flat.with_strides((4,)),
                        dst=View(Space.DRAM, p0 * 4, I32, (4,), "F"))
        pipe.step(loads, flat_ops(a, n, idx, t, u, k, flat, offsets), [store])
    return pipe.program(vector_config(target.spm), (Region("I", 0, points * r * 4), Region("K", 1, len(consts) * 4),
                                                    Region("F", 2, points * 4)))


def _row_tiles(points: int, row: int, es: int, budget: int) -> tuple[int, int]:
    """(points, elements of a row) per tile of at most ``budget`` bytes: whole rows of several points (at least 64,
    else an eighth of them, so tiles overlap) when a row fits, else one point's row in chunks."""
    chunk = max(1, min(row, MAX_EXTENT, budget // es))
    if chunk < row:
        return 1, chunk
    return max(1, min(points, MAX_EXTENT, budget // (row * es), max(64, -(-points // 8)))), row


GATHER_SEMS = (SemDecl("g_full", 0), SemDecl("g_empty", 2))
"""The two-slot ring of :func:`gather_rows`: the load queue's index load and gather fill a slot, the store empties it
(no unit computes in between)."""


def gather_rows(points: int, row: int, rows: int, dtype: DType, target: Target, blocks: int = 1) -> Program:
    """``Y[b, p] = T[b, F[p]]``: each of ``points`` rows of ``row`` elements of ``dtype`` gathered by the DMA from
    table T (``blocks`` tables of ``rows`` rows, one after the other in DRAM: the leading dimensions of a Gather
    along an inner axis) at the rows F (``(points,)`` i32); regions F, T, Y. Per tile the load queue loads the
    indices and gathers into a ring slot, the store queue stores it: a two-slot ring between the DMA queues."""
    if rows > MAX_TABLE_ROWS:
        raise CompileError(f"a table of {rows} rows is more than a gather addresses ({MAX_TABLE_ROWS})")
    es = dtype.size
    tn, chunk = _row_tiles(points, row, es, target.spm // 4)
    islot, dslot = _up(tn * 4), _up(tn * chunk * es)
    instrs: list[Instr] = []
    step = 0
    for b in range(blocks):
        for p0 in range(0, points, tn):
            n = min(tn, points - p0)
            for c0 in range(0, row, chunk):
                c, slot = min(chunk, row - c0), step % 2
                idx = View(Space.SPM, slot * islot, I32, (4,))
                dst = View(Space.SPM, 2 * islot + slot * dslot, dtype, (c * es, es))
                table = View(Space.DRAM, (b * rows * row + c0) * es, dtype, (row * es,), "T")
                instrs += [DmaCopy(queue=Queue.DMA_LD, shape=(n,), dst=idx, waits=(sem_op("g_empty"),),
                                   src=View(Space.DRAM, p0 * 4, I32, (4,), "F")),
                           Gather(queue=Queue.DMA_LD, shape=(n,), row=c, rows=rows, dst=dst, idx=idx, table=table,
                                  signals=(sem_op("g_full"),)),
                           DmaCopy(queue=Queue.DMA_ST, shape=(n, c), src=dst,
                                   dst=View(Space.DRAM, ((b * points + p0) * row + c0) * es, dtype, (row * es, es),
                                            "Y"), waits=(sem_op("g_full"),), signals=(sem_op("g_empty"),))]
                step += 1
    regions = (Region("F", 0, points * 4), Region("T", 1, blocks * rows * row * es),
               Region("Y", 2, blocks * points * row * es))
    return Program(vector_config(target.spm), regions, GATHER_SEMS, tuple(instrs) + (Halt(),))


def scatter_inverse(updates: int, a: Addressing, target: Target) -> Program:
    """ScatterND's inverse map: regions I (the ``(updates, r)`` i32 indices), K (:meth:`Addressing.constants`,
    then ``i + 1`` per update, then ``0..tr-1``) and V (``(rows,)`` i32: the last update addressing each row, or
    -1). The first step also checks every update's row against the table (a gather from a one-element table of
    ``rows`` rows, which refuses a row out of range)."""
    r, rows = a.r, a.rows
    tr = scatter_tile(updates, a, target)
    per_index = _up(updates * r * 4)
    consts = scatter_constants(updates, a, tr)
    k = 0
    idx, t, u = (_up(len(consts) * 4) + j * per_index for j in range(3))
    flat = u + per_index
    cmp = flat + _up(updates * 4)
    rowid = cmp + _up(tr * updates * 4)
    out = rowid + _up(tr * 4)
    token = out + 2 * _up(tr * 4)   # two 64-byte cells the later steps' token loads write
    w = k + 4 * (3 * r)
    iota = w + 4 * updates
    pipe = RingPipeline()
    for r0 in range(0, rows, tr):
        n = min(tr, rows - r0)
        loads, ops = [], []
        if not pipe.steps:
            loads = [DmaCopy(queue=Queue.DMA_LD, shape=(len(consts),), dst=View(Space.SPM, k, I32, (4,)),
                             src=View(Space.DRAM, 0, I32, (4,), "K")),
                     DmaCopy(queue=Queue.DMA_LD, shape=(updates, r), dst=View(Space.SPM, idx, I32, (4 * r, 4)),
                             src=View(Space.DRAM, 0, I32, (4 * r, 4), "I"))]
            v = [View(Space.SPM, b, I32, (4 * r, 4)) for b in (idx, t, u)]
            ops = flat_ops(a, updates, v[0], v[1], v[2], k, View(Space.SPM, flat, I32, (4, 0)))
            ops.append(Gather(queue=Queue.VPU, shape=(updates,), row=1, rows=rows, idx=View(Space.SPM, flat, I32, (4,)),
                              table=View(Space.SPM, t, I32, (0,)), dst=View(Space.SPM, u, I32, (4, 4))))
        else:
            loads = [DmaCopy(queue=Queue.DMA_LD, shape=(1,), dst=View(Space.SPM, token + 64 * pipe.slot, I32, (4,)),
                             src=View(Space.DRAM, 0, I32, (4,), "K"))]   # (a token load: the ring's step)
        dst = View(Space.SPM, out + pipe.slot * _up(tr * 4), I32, (4, 0))
        e = View(Space.SPM, cmp, I32, (4 * updates, 4))
        s = (n, updates)
        ops += [VecBinary(op=BinOp.ADD, shape=(n,), dst=View(Space.SPM, rowid, I32, (4,)),
                          src0=View(Space.SPM, iota, I32, (4,)), imm=r0),
                VecBinary(op=BinOp.CMPEQ, shape=s, dst=e, src0=View(Space.SPM, rowid, I32, (4, 0)),
                          src1=View(Space.SPM, flat, I32, (0, 4))),
                VecBinary(op=BinOp.MUL, shape=s, dst=e, src0=e, src1=View(Space.SPM, w, I32, (0, 4))),
                VecBinary(op=BinOp.ADD, shape=s, dst=dst, src0=e, imm=-1, reduce=Reduce.MAX, zero=True)]
        store = DmaCopy(queue=Queue.DMA_ST, shape=(n,), src=dst.with_strides((4,)),
                        dst=View(Space.DRAM, r0 * 4, I32, (4,), "V"))
        pipe.step(loads, ops, [store])
    return pipe.program(vector_config(target.spm), (Region("I", 0, updates * r * 4), Region("K", 1, len(consts) * 4),
                                                    Region("V", 2, rows * 4)))


def scatter_constants(updates: int, a: Addressing, tr: int) -> np.ndarray:
    """Region K of :func:`scatter_inverse` for row tiles of ``tr``."""
    return np.concatenate([a.constants(updates), np.arange(1, updates + 1), np.arange(tr)]).astype(np.int32)


def scatter_tile(updates: int, a: Addressing, target: Target) -> int:
    """The rows per tile of :func:`scatter_inverse` (its region K ends with that many row offsets): as many as the
    SPM holds beside the indices, each row with its comparisons against every update, an id, two output slots and
    an offset; CompileError when the comparisons would be too many (:data:`MAX_PAIRS`), TilingError when one row's
    do not fit."""
    r, rows = a.r, a.rows
    if rows * updates > MAX_PAIRS:
        raise CompileError(f"ScatterND of {updates} updates into {rows} rows would compare {rows * updates} pairs "
                           f"(at most {MAX_PAIRS})")
    fixed = _up((3 * r + updates) * 4) + 3 * _up(updates * r * 4) + _up(updates * 4) + 128 + 6 * 64
    tr = (target.spm - fixed) // (4 * updates + 16)
    if tr < 1:
        raise TilingError(f"ScatterND's {updates} updates do not fit the SPM beside one row's comparisons")
    return min(tr, rows, MAX_EXTENT, max(64, -(-rows // 8)))


def scatter_select(rows: int, row: int, updates: int, dtype: DType, target: Target) -> Program:
    """``Y[q] = inv[q] >= 0 ? U[inv[q]] : D[q]`` per row of ``row`` elements, bit for bit: regions D (the data,
    ``rows`` rows), V (the inverse map, ``(rows,)`` i32), U (the updates, ``updates`` rows), Y."""
    es = dtype.size
    it = INT_OF_SIZE[es]
    tn, chunk = _row_tiles(rows, row, es, target.spm // 8)
    islot, dslot = _up(tn * 4), _up(tn * chunk * es)
    mask = 2 * islot + 6 * dslot
    pipe = RingPipeline()
    for q0 in range(0, rows, tn):
        n = min(tn, rows - q0)
        for c0 in range(0, row, chunk):
            c = min(chunk, row - c0)
            inv = View(Space.SPM, pipe.slot * islot, I32, (4,))
            d = View(Space.SPM, 2 * islot + pipe.slot * dslot, it, (c * es, es))
            g = View(Space.SPM, 2 * islot + (2 + pipe.slot) * dslot, it, (c * es, es))
            y = View(Space.SPM, 2 * islot + (4 + pipe.slot) * dslot, it, (c * es, es))
            m = View(Space.SPM, mask, I32, (4, 0))
            loads = [DmaCopy(queue=Queue.DMA_LD, shape=(n, c), dst=d,
                             src=View(Space.DRAM, (q0 * row + c0) * es, it, (row * es, es), "D")),
                     DmaCopy(queue=Queue.DMA_LD, shape=(n,), dst=inv, src=View(Space.DRAM, q0 * 4, I32, (4,), "V")),
                     Gather(queue=Queue.DMA_LD, shape=(n,), row=c, rows=updates, dst=g, idx=inv,
                            table=View(Space.DRAM, c0 * es, it, (row * es,), "U"))]
            s = (n, c)
            ops = [VecBinary(op=BinOp.SHR, shape=(n,), dst=m.with_strides((4,)), src0=inv, imm=31),
                   VecBinary(op=BinOp.XOR, shape=(n,), dst=m.with_strides((4,)), src0=m.with_strides((4,)), imm=-1),
                   VecBinary(op=BinOp.XOR, shape=s, dst=y, src0=g, src1=d),
                   VecBinary(op=BinOp.AND, shape=s, dst=y, src0=y, src1=_mask_of(m, it)),
                   VecBinary(op=BinOp.XOR, shape=s, dst=y, src0=y, src1=d)]
            store = DmaCopy(queue=Queue.DMA_ST, shape=s, src=y,
                            dst=View(Space.DRAM, (q0 * row + c0) * es, it, (row * es, es), "Y"))
            pipe.step(loads, ops, [store])
    return pipe.program(vector_config(target.spm), (Region("D", 0, rows * row * es), Region("V", 1, rows * 4),
                                                    Region("U", 2, updates * row * es),
                                                    Region("Y", 3, rows * row * es)))


def _mask_of(m: View, it: DType) -> View:
    """The i32 mask (all ones or 0 per row) read as ``it`` over a row tile: i8/i16 read its lowest byte(s), which
    are all ones or 0 as well."""
    return View(Space.SPM, m.base, it, (4, 0))
