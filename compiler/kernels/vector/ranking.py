"""ArgMax, ArgMin and TopK on the vector unit, in onnxruntime's results (indices as i32, the NPU's int64).

The tensor is ``(pre, L, post)`` row-major with the ranked axis ``L``; a tile is a ``(tp, L, tq)`` box (the whole
axis) and every instruction covers the tile, its reductions along ``L`` (destination stride 0) giving a ``tp x tq``
cross-section. An index is found without a select: ``e = (x == best)`` (0/1), then ``min over l of (e * (l - L) +
L)`` is the first ``l`` where ``e`` holds (``max of (e * (l + 1) - 1)`` the last), with the per-position constants
loaded once.

NaN follows onnxruntime. ArgMax/ArgMin scan with ``>`` (``>=`` for the last index) from the first element: a NaN is
never taken after it and is kept if it is first. So the best value is found over the tile with NaN made -inf (+inf
for ArgMin) bitwise, ``x == best`` excludes NaN by itself, and a row whose first element is NaN answers 0. TopK
orders as a sort does: NaN above +inf, -0.0 equal to +0.0, ties by lower index; it ranks integer keys, the float
bits made monotonic (after ``x + 0``, which makes every NaN the canonical one and -0.0 +0.0), k rounds of find the
best, record it, and push it below every key.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from compiler.errors import CompileError, TilingError
from compiler.kernels.common.pipeline import RingPipeline, vector_config
from compiler.kernels.common.target import Target
from isa import Act, BinOp, DmaCopy, DType, Instr, Program, Queue, Reduce, Region, Space, VecBinary, VecUnary, View
from isa.view import MAX_EXTENT

I32 = DType.I32
MIN_CROSS = 64
"""Cross-section elements a tile keeps however many tiles that makes (fewer would spend the instructions' latency
on little work)."""
NEG_INF_BITS = -8388608            # 0xFF800000
POS_INF_BITS = 0x7F800000
INT_MIN, INT_MAX = -(2**31), 2**31 - 1


@dataclass(frozen=True)
class Ranked:
    """A ranking over the middle axis of ``(pre, L, post)``: its tile ``(tp, L, tq)`` and the SPM bytes of its
    buffers (``x``: two input slots; ``a``, ``b``: i32 scratch tiles; ``best``: the cross-section; ``out``: two
    output slots of ``outs`` i32 cross-sections each, per output; ``k``: the per-position constants)."""

    pre: int
    length: int
    post: int
    tp: int
    tq: int
    x: int
    a: int
    b: int
    best: int
    out: int
    k: int
    out_slot: int
    x_slot: int


def _layout(shape: tuple[int, int, int], es: int, outs: int, n_out: int, target: Target) -> Ranked:
    """The tile with the widest cross-section that fits the SPM: per cross-section element two input slots of ``L``
    elements, two i32 scratch tiles, the best value, and ``n_out`` outputs of ``outs`` i32 in two slots; TilingError
    when one row does not fit."""
    pre, length, post = shape
    consts = 2 * length * 4
    per = 2 * length * es + 2 * length * 4 + 4 + 2 * n_out * outs * 4
    cross = (target.spm - consts - 256) // per
    if cross < 1:
        raise TilingError(f"ranking along an axis of {length} elements needs {consts + per + 256} bytes of SPM, "
                          f"more than the {target.spm} there are")
    cross = min(cross, max(MIN_CROSS, -(-pre * post // 8)), pre * post)   # (at least 8 tiles when there is work)
    tq = min(post, cross, MAX_EXTENT)
    tp = min(pre, max(1, cross // tq), MAX_EXTENT)
    c = tp * tq
    x_slot, out_slot = _up(c * length * es), _up(c * outs * 4)
    x = 0
    a = x + 2 * x_slot
    b = a + _up(c * length * 4)
    best = b + _up(c * length * 4)
    out = best + _up(c * 4)
    k = out + 2 * n_out * out_slot
    return Ranked(pre, length, post, tp, tq, x, a, b, best, out, k, out_slot, x_slot)


def _up(n: int) -> int:
    return -(-n // 64) * 64


class _Tile:
    """The views of one tile of ``cp x L x cq`` (of a ``tp x L x tq`` layout)."""

    def __init__(self, lay: Ranked, cp: int, cq: int, slot: int):
        self.lay, self.shape, self.cross = lay, (cp, lay.length, cq), (cp, cq)
        self.slot = slot

    def full(self, base: int, dtype: DType) -> View:   # a (tp, L, tq) buffer
        lay, es = self.lay, dtype.size
        return View(Space.SPM, base, dtype, (lay.length * lay.tq * es, lay.tq * es, es))

    def flat(self, base: int, dtype: DType, stride_l: int = 0) -> View:   # a (tp, tq) buffer seen over the tile
        return View(Space.SPM, base, dtype, (self.lay.tq * dtype.size, stride_l, dtype.size))

    def per_position(self, base: int) -> View:   # an (L,) i32 constant seen over the tile
        return View(Space.SPM, base, I32, (0, 4, 0))

    def row(self, base: int, dtype: DType) -> View:   # position l = 0 of a full buffer, as a (tp, 1, tq) view
        return self.flat(base, dtype).with_strides((self.lay.length * self.lay.tq * dtype.size, 0, dtype.size))

    def out(self, n: int, r: int, outs: int) -> View:   # output n's cross-section r of this slot, (tp, 1, tq)
        lay = self.lay
        base = lay.out + (2 * n + self.slot) * lay.out_slot + r * lay.tq * 4
        return View(Space.SPM, base, I32, (outs * lay.tq * 4, 0, 4))


def _bin(op: BinOp, shape, dst: View, a: View, b: View | None = None, imm=0, reduce=Reduce.NONE,
         zero=False) -> VecBinary:
    return VecBinary(op=op, shape=shape, dst=dst, src0=a, src1=b, imm=imm, reduce=reduce, zero=zero)


def _as(view: View, dtype: DType) -> View:
    return View(view.space, view.base, dtype, view.strides, view.region)


def _index_ops(t: _Tile, e: View, last: bool, dst: View) -> list[Instr]:
    """``dst`` (a cross-section) = the first (``last``: the last) position where the 0/1 tile ``e`` holds, with
    the weights ``l - L`` (``l + 1``) at SPM ``t.lay.k``."""
    s = t.shape
    return [_bin(BinOp.MUL, s, e, e, t.per_position(t.lay.k)),
            _bin(BinOp.ADD, s, dst, e, imm=-1 if last else t.lay.length, reduce=Reduce.MAX if last else Reduce.MIN,
                 zero=True)]


def _arg_ops(t: _Tile, dtype: DType, largest: bool, last: bool, x: View) -> list[Instr]:
    """ArgMax/ArgMin of one tile into output 0's cross-section."""
    lay, s = t.lay, t.shape
    a, b = t.full(lay.a, I32), t.full(lay.b, I32)
    best = t.flat(lay.best, dtype)
    red = Reduce.MAX if largest else Reduce.MIN
    dst = t.out(0, 0, 1)
    if not dtype.is_float:
        return [VecUnary(fn=Act.MOV, shape=s, dst=best, src=x, reduce=red, zero=True),
                _bin(BinOp.CMPEQ, s, a, x, best), *_index_ops(t, a, last, dst)]
    xi = _as(x, I32)
    worst = NEG_INF_BITS if largest else POS_INF_BITS
    return [_bin(BinOp.CMPEQ, s, a, x, x), _bin(BinOp.ADD, s, a, a, imm=-1),          # a: all ones at NaN
            _bin(BinOp.XOR, s, b, xi, imm=worst), _bin(BinOp.AND, s, b, b, a),
            _bin(BinOp.XOR, s, b, b, xi),                                               # b: x, NaN made -inf/+inf
            VecUnary(fn=Act.MOV, shape=s, dst=best, src=_as(b, DType.F32), reduce=red, zero=True),
            _bin(BinOp.CMPEQ, s, a, x, best), *_index_ops(t, a, last, dst),
            # a first element that is NaN is kept: the index is 0 there (and-ed with 0), else unchanged (with -1)
            _bin(BinOp.CMPEQ, t.cross + (1,), _flat3(t, lay.best, I32), _row3(t, x), _row3(t, x)),
            _bin(BinOp.MUL, t.cross + (1,), _flat3(t, lay.best, I32), _flat3(t, lay.best, I32), imm=-1),
            _bin(BinOp.AND, t.cross + (1,), _out3(dst), _out3(dst), _flat3(t, lay.best, I32))]


def _flat3(t: _Tile, base: int, dtype: DType) -> View:   # a (tp, tq) buffer as a (tp, tq, 1) view
    return View(Space.SPM, base, dtype, (t.lay.tq * dtype.size, dtype.size, 0))


def _row3(t: _Tile, x: View) -> View:   # position 0 of the input tile as (tp, tq, 1)
    return View(Space.SPM, x.base, x.dtype, (x.strides[0], x.strides[2], 0))


def _out3(v: View) -> View:   # an output cross-section (tp, 1, tq) view as (tp, tq, 1)
    return View(Space.SPM, v.base, v.dtype, (v.strides[0], v.strides[2], 0))


def argext(shape: tuple[int, int, int], dtype: DType, target: Target, largest: bool = True,
           last: bool = False) -> Program:
    """ArgMax (``largest``) or ArgMin over the middle axis of ``shape = (pre, L, post)``: regions X (``dtype``), K
    (:func:`arg_constants`) and Y (``(pre, post)`` i32). ``last``: the last index of the best value (ONNX's
    select_last_index), else the first."""
    lay = _layout(shape, dtype.size, 1, 1, target)
    return _program(lay, dtype, target, 1, lambda t, x: _arg_ops(t, dtype, largest, last, x),
                    arg_constants(shape[1], last), ("Y",))


def arg_constants(length: int, last: bool) -> np.ndarray:
    """Region K of :func:`argext`: the per-position weights, ``l + 1`` (last index) or ``l - L`` (first)."""
    pos = np.arange(length, dtype=np.int32)
    return pos + 1 if last else pos - length


def topk_constants(length: int) -> np.ndarray:
    """Region K of :func:`topk`: the weights ``l - L``, then the positions ``l``."""
    pos = np.arange(length, dtype=np.int32)
    return np.concatenate([pos - length, pos])


def _topk_ops(t: _Tile, k: int, largest: bool, x: View) -> list[Instr]:
    """TopK of one tile: integer keys in place of x, then k rounds; values into output 0, indices into output 1."""
    lay, s = t.lay, t.shape
    key, a = _as(x, I32), t.full(lay.a, I32)
    best = t.flat(lay.best, I32)
    ops: list[Instr] = [_bin(BinOp.ADD, s, x, x, imm=0.0),                    # canonical NaN, -0.0 made +0.0
                        _bin(BinOp.SHR, s, a, key, imm=31), _bin(BinOp.AND, s, a, a, imm=INT_MAX),
                        _bin(BinOp.XOR, s, key, key, a)]                       # monotonic keys
    if not largest:
        ops.append(_bin(BinOp.XOR, s, key, key, imm=-1))                       # the smallest first
    iota = View(Space.SPM, lay.k + 4 * lay.length, I32, (0, 4, 0))
    for r in range(k):
        idx = t.out(1, r, k)
        ops += [VecUnary(fn=Act.MOV, shape=s, dst=best, src=key, reduce=Reduce.MAX, zero=True),
                _bin(BinOp.CMPEQ, s, a, key, best), *_index_ops(t, a, False, idx),
                _bin(BinOp.CMPEQ, s, a, iota, idx),                             # the chosen position
                _bin(BinOp.MUL, s, a, a, imm=-1), _bin(BinOp.XOR, s, a, a, imm=INT_MAX),
                _bin(BinOp.MIN, s, key, key, a)]                                # pushed below every key
        val = t.out(0, r, k)
        v3, b3 = _out3(val), _flat3(t, lay.best, I32)
        c = t.cross + (1,)
        ops += ([_bin(BinOp.XOR, c, b3, b3, imm=-1)] if not largest else []) + [
            _bin(BinOp.SHR, c, v3, b3, imm=31), _bin(BinOp.AND, c, v3, v3, imm=INT_MAX),
            _bin(BinOp.XOR, c, v3, v3, b3)]                                     # the key back to float bits
    return ops


def topk(shape: tuple[int, int, int], k: int, target: Target, largest: bool = True) -> Program:
    """TopK of f32 values over the middle axis of ``shape = (pre, L, post)``, sorted (best first, ties by lower
    index, NaN above +inf): regions X, K (:func:`topk_constants`), V (``(pre, k, post)`` f32) and I (the same,
    i32)."""
    if not 1 <= k <= shape[1]:
        raise CompileError(f"TopK needs 1 <= k <= {shape[1]} (the axis), not k={k}")
    lay = _layout(shape, 4, k, 2, target)
    return _program(lay, DType.F32, target, k, lambda t, x: _topk_ops(t, k, largest, x), topk_constants(shape[1]),
                    ("V", "I"))


def _program(lay: Ranked, dtype: DType, target: Target, outs: int, ops, consts: np.ndarray,
             out_regions: tuple[str, ...]) -> Program:
    """The ring pipeline over the tiles: load a tile (and the constants first), its instructions, store each
    output's ``(cp, outs, cq)`` box."""
    pre, length, post, es = lay.pre, lay.length, lay.post, dtype.size
    pipe = RingPipeline()
    for p0 in range(0, pre, lay.tp):
        for q0 in range(0, post, lay.tq):
            cp, cq = min(lay.tp, pre - p0), min(lay.tq, post - q0)
            t = _Tile(lay, cp, cq, pipe.slot)
            x = t.full(lay.x + pipe.slot * lay.x_slot, dtype)
            loads = [] if pipe.steps else [DmaCopy(queue=Queue.DMA_LD, shape=(consts.size,),
                                                   dst=View(Space.SPM, lay.k, I32, (4,)),
                                                   src=View(Space.DRAM, 0, I32, (4,), "K"))]
            loads.append(DmaCopy(queue=Queue.DMA_LD, shape=(cp, length, cq), dst=x,
                                 src=View(Space.DRAM, (p0 * length * post + q0) * es, dtype,
                                          (length * post * es, post * es, es), "X")))
            stores = []
            for n, region in enumerate(out_regions):
                src = t.out(n, 0, outs)
                oes = 4
                stores.append(DmaCopy(queue=Queue.DMA_ST, shape=(cp, outs, cq),
                                      src=View(Space.SPM, src.base, src.dtype, (outs * lay.tq * oes, lay.tq * oes,
                                                                                oes)),
                                      dst=View(Space.DRAM, (p0 * outs * post + q0) * oes, src.dtype,
                                               (outs * post * oes, post * oes, oes), region)))
            pipe.step(loads, ops(t, x), stores)
    regions = [Region("X", 0, pre * length * post * es), Region("K", 1, consts.size * 4)]
    regions += [Region(name, 2 + n, max(1, pre * outs * post * 4)) for n, name in enumerate(out_regions)]
    return pipe.program(vector_config(target.spm), tuple(regions))


def ranked_shape(shape: tuple[int, ...], axis: int) -> tuple[int, int, int]:
    """``shape`` as ``(pre, L, post)`` around ``axis``."""
    return math.prod(shape[:axis]), shape[axis], math.prod(shape[axis + 1:])
