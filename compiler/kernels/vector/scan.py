"""Cumulative sums on the vector unit (ONNX CumSum), in onnxruntime's order: ``y[0] = x[0]``, ``y[i] = y[i-1] +
x[i]`` (exclusive: ``y[0] = 0``, ``y[i] = y[i-1] + x[i-1]``; reverse: the same from the end), each step rounded to
the type, so float results are bit for bit.

The tensor is ``(pre, L, post)`` row-major with the scan along ``L``. A tile is a ``(tp, tl, tq)`` box loaded into
SPM; each scan position of it is one vector instruction over its ``tp x tq`` cross-section (every row of the tile
advances at once), so a tile's cross-section is made as large as the SPM allows before its length along ``L``. When
``L`` does not fit one tile, the running sum is carried from tile to tile in a small SPM buffer. Loads, compute and
stores overlap through the ring pipeline.
"""

from __future__ import annotations

import itertools
import math

from compiler.kernels.common.pipeline import RingPipeline, vector_config
from compiler.kernels.common.target import Target
from compiler.kernels.vector.streams import overlap_cap
from isa import Act, BinOp, DmaCopy, DType, Instr, Program, Queue, Region, Space, VecBinary, VecUnary, View
from isa.view import MAX_EXTENT

INT_OF_SIZE = {1: DType.I8, 2: DType.I16, 4: DType.I32}
"""The integer type whose bytes a float of the same size is cleared through (``and 0`` gives +0.0 whatever the
value; a multiply by 0 would keep NaN)."""


MIN_CROSS_BEATS = 8
"""Vector beats a scan instruction's cross-section should span (where the tensor has that many elements beside the
scanned axis), so the instruction's latency is a small part of its cycles."""


def scan_tile(pre: int, length: int, post: int, dtype: DType, target: Target) -> tuple[int, int, int]:
    """The ``(tp, tl, tq)`` box of a scan: a cross-section ``tp x tq`` of at least :data:`MIN_CROSS_BEATS` beats of
    lanes (or all there is), then as much of ``L`` as fits (each tile but the last adds one carry instruction), then
    the widest cross-section the rest allows (fewest instructions). A box holds at most a fifth of the SPM (two ring
    slots of X and of Y, and the carry), and the scan makes at least a few tiles
    (:func:`~compiler.kernels.vector.streams.overlap_cap`)."""
    limit = max(1, target.spm // (5 * dtype.size))
    limit = min(limit, overlap_cap(pre * length * post, 4096))
    cross = min(pre * post, MIN_CROSS_BEATS * target.lanes, limit)
    tl = min(length, max(1, limit // cross), MAX_EXTENT)
    tq = min(post, max(1, limit // tl), MAX_EXTENT)
    tp = min(pre, max(1, limit // (tl * tq)), MAX_EXTENT)
    return tp, tl, tq


def cumsum(shape: tuple[int, int, int], dtype: DType, target: Target, exclusive: bool = False,
           reverse: bool = False, tile: tuple[int, int, int] | None = None) -> Program:
    """``Y = cumsum(X)`` along the middle axis of ``shape = (pre, L, post)`` (row-major, ``dtype``); regions X, Y.
    ``tile``: the ``(tp, tl, tq)`` box (default :func:`scan_tile`). Integers compute in i64 and saturate to
    ``dtype`` at each step; floats round to ``dtype`` at each step."""
    pre, length, post = shape
    tp, tl, tq = tile or scan_tile(pre, length, post, dtype, target)
    es = dtype.size
    slot = tp * tl * tq * es
    carry = View(Space.SPM, 4 * slot, dtype, (tq * es, es))
    dram = (length * post * es, post * es, es)
    pipe = RingPipeline()
    chunks = list(range(0, length, tl))
    for p0, q0 in itertools.product(range(0, pre, tp), range(0, post, tq)):
        cp, cq = min(tp, pre - p0), min(tq, post - q0)
        for k, l0 in enumerate(reversed(chunks) if reverse else chunks):
            cl = min(tl, length - l0)
            base = (p0 * length * post + l0 * post + q0) * es
            box = (cp, cl, cq)
            x = View(Space.SPM, pipe.slot * slot, dtype, (tl * tq * es, tq * es, es))
            y = View(Space.SPM, (2 + pipe.slot) * slot, dtype, x.strides)
            load = DmaCopy(queue=Queue.DMA_LD, shape=box, dst=x, src=View(Space.DRAM, base, dtype, dram, "X"))
            store = DmaCopy(queue=Queue.DMA_ST, shape=box, src=y, dst=View(Space.DRAM, base, dtype, dram, "Y"))
            steps = _scan_steps(x, y, carry, (cp, cq), cl, dtype, exclusive, reverse, first=k == 0,
                                last=k == len(chunks) - 1)
            pipe.step([load], steps, [store])
    n = max(1, pre * length * post * es)
    return pipe.program(vector_config(target.spm), (Region("X", 0, n), Region("Y", 1, n)))


def _scan_steps(x: View, y: View, carry: View, cross: tuple[int, int], cl: int, dtype: DType, exclusive: bool,
                reverse: bool, first: bool, last: bool) -> list[Instr]:
    """The vector instructions of one tile: one per scan position (``cl`` of them, in scan order), the first
    starting from the carry (or from nothing in the first tile), and the carry for the next tile."""
    def at(view: View, t: int) -> View:   # position t of the tile: a (tp, tq) view
        return View(Space.SPM, view.base + t * view.strides[1], view.dtype, (view.strides[0], view.strides[2]))

    order = list(range(cl - 1, -1, -1)) if reverse else list(range(cl))
    t0 = order[0]
    if exclusive and first:   # y = +0 (through the integer view: 0 whatever x holds)
        it = INT_OF_SIZE[dtype.size] if dtype.is_float else dtype
        out: list[Instr] = [VecBinary(op=BinOp.AND, shape=cross, dst=_as(at(y, t0), it), src0=_as(at(x, t0), it),
                                      imm=0)]
    elif exclusive:
        out = [VecUnary(fn=Act.MOV, shape=cross, dst=at(y, t0), src=carry)]
    elif first:
        out = [VecUnary(fn=Act.MOV, shape=cross, dst=at(y, t0), src=at(x, t0))]
    else:
        out = [VecBinary(op=BinOp.ADD, shape=cross, dst=at(y, t0), src0=carry, src1=at(x, t0))]
    for prev, t in zip(order, order[1:]):
        out.append(VecBinary(op=BinOp.ADD, shape=cross, dst=at(y, t), src0=at(y, prev),
                             src1=at(x, prev if exclusive else t)))
    if not last:
        t1 = order[-1]
        out.append(VecBinary(op=BinOp.ADD, shape=cross, dst=carry, src0=at(y, t1), src1=at(x, t1)) if exclusive else
                   VecUnary(fn=Act.MOV, shape=cross, dst=carry, src=at(y, t1)))
    return out


def _as(view: View, dtype: DType) -> View:
    return View(view.space, view.base, dtype, view.strides, view.region)


def cumsum_shape(shape: tuple[int, ...], axis: int) -> tuple[int, int, int]:
    """``shape`` as ``(pre, L, post)`` around ``axis``."""
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])
