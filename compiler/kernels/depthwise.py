"""Depthwise convolution (``groups == C``, channel multiplier ``mult = K / C``) on the vector unit.

DRAM: X as NHWC in the operand dtype; Wd as ``[kh][kw][K]`` (:func:`pack_depthwise`; output channel ``k = c*mult
+ j`` reads input channel ``c``); Y as NHWC in the accumulator type (f32 for float operands, i32 for i8/u8, as
:func:`compiler.kernels.conv2d.conv2d`).

One step computes a tile of ``toh`` x ``tow`` output pixels of ``cb`` input channels (all of them unless they do
not fit): ``dma.ld`` brings the tile's input window ``[th][tw][cb]`` with its halo padding inserted by the DMA, one
vector instruction

    vpu.mul.sum.z shape[toh, tow, kh, kw, cb]  dst=out{tow*cb*4, cb*4, 0, 0, 4}
                  src0=window{s*row, s*pix, d*row, d*pix, es}  src1=weights{0, 0, S*K*es, K*es, es}

multiplies every window element by its tap's weight (the weights broadcast over the output pixels) and sums the
``R*S`` taps of each output element in (kh, kw) order into an f32 (i32) SPM tile, and ``dma.st`` writes the tile to
Y. Channels are innermost so each ``lanes``-wide vector reads runs of consecutive channels (the order ``[.., cb, kh,
kw]`` would gather scattered taps into every vector and conflict on the SPM banks: 3x the vector cycles on edge16);
the two tap dimensions are reductions (dst stride 0) between the pixel and channel dimensions. With ``mult > 1`` it is
either one instruction per filter ``j`` (dst and weight channel stride ``mult``) or one per output row over
``[tow, kh, kw, cb, mult]`` (the window broadcast over ``mult``), whichever needs fewer instructions.

Float operands compute their products in f32 and sum them sequentially in f32 (one rounding per product and per
addition); integer operands compute in i64 and the sum saturates to i32 when written, exact for 8-bit operands
(``R*S*255*255 < 2**31`` for ``R*S <= 33025``).

Two ring slots (input window + output tile, + the weights of the channel block when they do not all stay resident)
fit half the SPM; the weights (``R*S*K`` elements) are loaded once, by the first step, into the other half when they
fit there. The tile shape is the one of least estimated DRAM traffic (:func:`tiling_cost`: halo re-reads, short
runs, DMA count, pipeline fill). Loads, vector work and stores overlap through
:class:`~compiler.kernels.common.pipeline.RingPipeline`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

import numpy as np

from compiler.errors import CompileError, TilingError
from compiler.kernels.common.halo import padded_load
from compiler.kernels.common.pipeline import RingPipeline, vector_config
from compiler.kernels.common.search import Ranking, SearchRule, TilingSearch
from compiler.kernels.common.target import Target
from compiler.kernels.conv2d import ConvShape
from compiler.kernels.gemm import ACC_TYPE
from isa import (
    BinOp,
    DmaCopy,
    DType,
    Program,
    Queue,
    Reduce,
    Region,
    Space,
    VecBinary,
    View,
)
from isa.view import MAX_EXTENT

ALIGN = 64
RUN_BYTES = 128
"""Tiling cost of one contiguous DRAM run (a burst sequence, often a DRAM row miss), in bytes moved."""
DMA_BYTES = 1024
"""Tiling cost of one DMA instruction (setup and DRAM latency), in bytes moved."""
FILL = 0.25
"""Tiling cost of filling and draining the pipeline, as a fraction of one step's traffic."""


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _up(x: int) -> int:
    return _cdiv(x, ALIGN) * ALIGN


@dataclass(frozen=True)
class DepthwiseTiling:
    """One step: ``toh`` x ``tow`` output pixels of ``cb`` input channels; ``resident``: the weights are loaded once
    for the whole program instead of per step."""

    toh: int
    tow: int
    cb: int
    resident: bool


def is_depthwise(channels: int, filters: int, groups: int) -> bool:
    """Whether a convolution of ``channels`` inputs, ``filters`` outputs and ``groups`` is depthwise (one input
    channel per group, a whole channel multiplier): the vector unit's job rather than the array's."""
    return groups == channels and filters % channels == 0


def mult_of(cs: ConvShape) -> int:
    """The channel multiplier ``K / C`` of a depthwise convolution; CompileError if ``cs`` is not depthwise."""
    if not is_depthwise(cs.C, cs.K, cs.groups):
        raise CompileError(f"a depthwise convolution needs groups == C and K a multiple of C, not groups={cs.groups} "
                           f"C={cs.C} K={cs.K} (use compiler.kernels.conv2d.conv2d)")
    return cs.K // cs.C


def _span(cs: ConvShape, t: int, axis: int) -> int:
    """Input indices ``t`` consecutive outputs of spatial ``axis`` (0: rows, 1: columns) read (padding included)."""
    return (t - 1) * cs.stride[axis] + ((cs.R, cs.S)[axis] - 1) * cs.dilation[axis] + 1


def _slot(cs: ConvShape, es: int, t: DepthwiseTiling) -> tuple[int, int, int]:
    """Bytes of one ring slot's input window, per-step weights (0 if resident) and output tile."""
    m = cs.K // cs.C
    return (_up(_span(cs, t.toh, 0) * _span(cs, t.tow, 1) * t.cb * es),
            0 if t.resident else _up(cs.R * cs.S * t.cb * m * es), _up(t.toh * t.tow * t.cb * m * 4))


def _fits(cs: ConvShape, es: int, t: DepthwiseTiling, spm: int) -> bool:
    """Two ring slots fit half the SPM, and resident weights the rest."""
    ring = 2 * sum(_slot(cs, es, t))
    return ring <= spm // 2 and ring + (_up(cs.R * cs.S * cs.K * es) if t.resident else 0) <= spm


def _pads(i0: int, t: int, n: int) -> tuple[int, int, int]:
    """(lo, inside, hi) of a window of ``t`` indices from ``i0`` over an axis of ``n``: fill, source, fill."""
    lo = min(t, max(0, -i0))
    inside = max(0, min(i0 + t, n) - max(i0, 0))
    return lo, inside, t - lo - inside


@lru_cache(maxsize=4096)
def _axis(cs: ConvShape, t: int, axis: int) -> tuple[int, int]:
    """(tiles, source indices read by all of them) of output ``axis`` (0: rows, 1: columns) cut into tiles of
    ``t``."""
    out, n, pad = (cs.OH, cs.H, cs.pad[0]) if axis == 0 else (cs.OW, cs.W, cs.pad[1])
    reads = sum(_pads(o0 * cs.stride[axis] - pad, _span(cs, min(t, out - o0), axis), n)[1] for o0 in range(0, out, t))
    return _cdiv(out, t), reads


def _sizes(n: int) -> list[int]:
    """The distinct tile sizes ``ceil(n / k)`` that cut an axis of ``n`` into k nearly equal tiles."""
    return sorted({_cdiv(n, k) for k in range(1, n + 1)}, reverse=True)


def _channel_blocks(C: int, lanes: int) -> list[int]:
    """Channel block sizes, largest first: all C, then multiples of ``lanes`` splitting C nearly evenly."""
    out = [C]
    for nb in range(2, _cdiv(C, max(1, lanes)) + 1):
        cb = _cdiv(_cdiv(C, nb), lanes) * lanes
        if cb < out[-1]:
            out.append(cb)
    return out


def tiling_cost(cs: ConvShape, dtype: DType, t: DepthwiseTiling) -> float:
    """The tiling model: DRAM bytes moved, plus :data:`RUN_BYTES` per contiguous run and :data:`DMA_BYTES` per DMA
    instruction, plus :data:`FILL` of one step's share for the pipeline's fill and drain (what no other step
    overlaps)."""
    es = dtype.size
    rt, rows = _axis(cs, t.toh, 0)
    ct, cols = _axis(cs, t.tow, 1)
    nb = _cdiv(cs.C, t.cb)
    steps = cs.N * nb * rt * ct
    whole = t.cb == cs.C    # a window row (an output tile row) is one contiguous run
    runs = cs.N * nb * (rows * (ct if whole else cols) + cs.OH * (ct if whole else cs.OW))
    w = cs.R * cs.S * cs.K * es
    moved = cs.N * rows * cols * cs.C * es + cs.N * cs.OH * cs.OW * cs.K * 4 + (w if t.resident else w * steps // nb)
    dmas = steps * (2 if t.resident else 3)
    return (moved + RUN_BYTES * runs + DMA_BYTES * dmas) * (1 + FILL / steps)


@dataclass(frozen=True)
class DepthwiseSearch(TilingSearch[DepthwiseTiling]):
    """:func:`choose_depthwise_tiling`'s search (:mod:`compiler.kernels.common.search`): its rank is the price
    (:func:`tiling_cost`, nothing is priced apart), the least wins, ties to the first offered."""

    cs: ConvShape
    dtype: DType
    target: Target
    rule: ClassVar[SearchRule] = SearchRule(priced=0)

    def rank(self, ranking: Ranking[DepthwiseTiling]) -> None:
        """Offer every tiling whose two ring slots fit half the SPM: channel blocks largest first (short channel
        runs only while nothing longer fits), then every width and height; TilingError when none fits."""
        cs, dtype, spm, lanes = self.cs, self.dtype, self.target.spm, self.target.lanes
        mult_of(cs)
        es = dtype.size
        resident = _up(cs.R * cs.S * cs.K * es) <= spm - spm // 2 and cs.K <= MAX_EXTENT
        for cb in _channel_blocks(cs.C, lanes):
            if ranking and cb * es < RUN_BYTES:
                break   # short channel runs only when nothing longer fits
            for tow in _sizes(cs.OW):
                for toh in _sizes(cs.OH):
                    t = DepthwiseTiling(toh, tow, cb, resident)
                    if _fits(cs, es, t, spm):
                        ranking.offer(tiling_cost(cs, dtype, t), t)
        if not ranking:
            raise TilingError(f"no depthwise tiling of {cs} fits: one output pixel of {min(lanes, cs.C)} channels "
                              f"needs two {cs.R}x{cs.S}-tap input windows (and weights) within half of {spm} B of SPM")

    def price(self, candidate: DepthwiseTiling, bound: float | None) -> float:
        return tiling_cost(self.cs, self.dtype, candidate)


def choose_depthwise_tiling(cs: ConvShape, dtype: DType, target: Target) -> DepthwiseTiling:
    """The tiling of least :func:`tiling_cost` whose two ring slots fit half the SPM (:class:`DepthwiseSearch`).

    Output tiles of ``toh`` x ``tow`` pixels, all channels or blocks of a multiple of the vector lanes of them; the
    weights stay resident when they fit in the other half of the SPM.
    """
    return DepthwiseSearch(cs, dtype, target).choose()


def pack_depthwise(w: np.ndarray, cs: ConvShape) -> np.ndarray:
    """OIHW depthwise weights ``(C*mult, 1, R, S)`` as the flat ``[kh][kw][K]`` array region Wd holds."""
    mult_of(cs)
    if w.shape != (cs.K, 1, cs.R, cs.S):
        raise CompileError(f"depthwise weights must have shape {(cs.K, 1, cs.R, cs.S)}, not {w.shape}")
    return np.ascontiguousarray(w.reshape(cs.K, cs.R, cs.S).transpose(1, 2, 0)).ravel()


def _compute(cs: ConvShape, dtype: DType, toh: int, tow: int, cb: int, x: View, w: View, out: int) -> list[VecBinary]:
    """The vector instructions of one step: ``toh`` x ``tow`` output pixels of ``cb`` channels from the input window
    ``x`` (``[row][pixel]`` strides), weights ``w`` (``[kh][kw]`` strides, channels contiguous), into the output tile
    ``[toh][tow][cb*mult]`` at SPM ``out``."""
    es, at, m = dtype.size, ACC_TYPE[dtype], cs.K // cs.C
    (sh, sw), (dh, dw) = cs.stride, cs.dilation
    row, pix = x.strides
    wk, wtap = w.strides
    opix = cb * m * 4

    def mul(shape, dst, src0, src1):
        return VecBinary(op=BinOp.MUL, reduce=Reduce.SUM, zero=True, shape=shape, dst=dst, src0=src0, src1=src1)

    if m == 1 or toh > m:   # [toh, tow, kh, kw, cb], once per filter j
        return [mul((toh, tow, cs.R, cs.S, cb),
                    View(Space.SPM, out + j * 4, at, (tow * opix, opix, 0, 0, m * 4)),
                    View(Space.SPM, x.base, dtype, (sh * row, sw * pix, dh * row, dw * pix, es)),
                    View(Space.SPM, w.base + j * es, dtype, (0, 0, wk, wtap, m * es)))
                for j in range(m)]
    return [mul((tow, cs.R, cs.S, cb, m),   # [tow, kh, kw, cb, mult], once per output row
                View(Space.SPM, out + r * tow * opix, at, (opix, 0, 0, m * 4, 4)),
                View(Space.SPM, x.base + r * sh * row, dtype, (sw * pix, dh * row, dw * pix, es, 0)),
                View(Space.SPM, w.base, dtype, (0, wk, wtap, m * es, es)))
            for r in range(toh)]


def depthwise2d(cs: ConvShape, dtype: DType, target: Target, tiling: DepthwiseTiling | None = None) -> Program:
    """The program of one depthwise convolution; regions X (NHWC), Wd (:func:`pack_depthwise`), Y (NHWC, f32/i32).

    The vector unit's lanes are the granule of channel blocks when all channels do not fit one step.
    """
    m, spm = mult_of(cs), target.spm
    if dtype not in ACC_TYPE:
        raise CompileError(f"depthwise convolution takes {', '.join(d.text for d in ACC_TYPE)} operands, "
                           f"not {dtype.text}")
    t = tiling or choose_depthwise_tiling(cs, dtype, target)
    es, at, K = dtype.size, ACC_TYPE[dtype], cs.K
    if not _fits(cs, es, t, spm):
        raise TilingError(f"depthwise tiling {t} does not fit {spm} B of SPM (two ring slots in half of it)")
    th_max, tw_max = _span(cs, t.toh, 0), _span(cs, t.tow, 1)
    if max(th_max, tw_max, t.cb * m, cs.R * cs.S, K if t.resident else 0) > MAX_EXTENT:
        raise TilingError(f"depthwise tiling {t} of {cs} needs an instruction extent above {MAX_EXTENT}")
    in_slot, w_slot, out_slot = _slot(cs, es, t)
    slot = in_slot + w_slot + out_slot
    w_res = 2 * slot   # (resident weights, after the two ring slots)
    (sh, sw), (pt, pl, _, _) = cs.stride, cs.pad
    pipe = RingPipeline()
    for b in range(cs.N):
        for c0 in range(0, cs.C, t.cb):
            cb = min(t.cb, cs.C - c0)
            for oh0 in range(0, cs.OH, t.toh):
                toh = min(t.toh, cs.OH - oh0)
                th = _span(cs, toh, 0)
                top, hin, bottom = _pads(oh0 * sh - pt, th, cs.H)
                for ow0 in range(0, cs.OW, t.tow):
                    tow = min(t.tow, cs.OW - ow0)
                    tw = _span(cs, tow, 1)
                    left, win, right = _pads(ow0 * sw - pl, tw, cs.W)
                    base = pipe.slot * slot
                    loads, w = _weights(cs, dtype, t, c0, cb, w_res if t.resident else base + in_slot,
                                        pipe.steps == 0)
                    x = View(Space.SPM, base, dtype, (tw * cb * es, cb * es, es))
                    ih, iw = max(0, oh0 * sh - pt), max(0, ow0 * sw - pl)
                    loads += padded_load((th, tw, cb), x, View(Space.DRAM, (((b * cs.H + ih) * cs.W + iw) * cs.C + c0)
                                                               * es, dtype, (cs.W * cs.C * es, cs.C * es, es), "X"),
                                         ((top, bottom), (left, right)), 0)   # (a fill when wholly in the padding)
                    out = base + in_slot + w_slot
                    store = DmaCopy(queue=Queue.DMA_ST, shape=(toh, tow, cb * m),
                                    src=View(Space.SPM, out, at, (tow * cb * m * 4, cb * m * 4, 4)),
                                    dst=View(Space.DRAM, (((b * cs.OH + oh0) * cs.OW + ow0) * K + c0 * m) * 4, at,
                                             (cs.OW * K * 4, K * 4, 4), "Y"))
                    pipe.step(loads, _compute(cs, dtype, toh, tow, cb, x.with_strides(x.strides[:2]), w, out),
                              [store])
    regions = (Region("X", 0, cs.N * cs.H * cs.W * cs.C * es), Region("Wd", 1, cs.R * cs.S * K * es),
               Region("Y", 2, cs.N * cs.OH * cs.OW * K * 4))
    return pipe.program(vector_config(spm), regions)


def _weights(cs: ConvShape, dtype: DType, t: DepthwiseTiling, c0: int, cb: int, at: int,
             first_step: bool) -> tuple[list, View]:
    """The weight loads of the step on channels ``[c0, c0 + cb)`` and the view of its weights (``[kh][kw]``
    strides, channels contiguous) at SPM byte ``at``: resident weights (all ``K`` channels there) are loaded once, by
    the first step; otherwise each step loads its block's into its ring slot."""
    m, es, K = cs.K // cs.C, dtype.size, cs.K
    if t.resident:
        loads = [DmaCopy(queue=Queue.DMA_LD, shape=(cs.R * cs.S, K), dst=View(Space.SPM, at, dtype, (K * es, es)),
                         src=View(Space.DRAM, 0, dtype, (K * es, es), "Wd"))] if first_step else []
        return loads, View(Space.SPM, at + c0 * m * es, dtype, (cs.S * K * es, K * es))
    return ([DmaCopy(queue=Queue.DMA_LD, shape=(cs.R * cs.S, cb * m), dst=View(Space.SPM, at, dtype, (cb * m * es, es)),
                     src=View(Space.DRAM, c0 * m * es, dtype, (K * es, es), "Wd"))],
            View(Space.SPM, at, dtype, (cs.S * cb * m * es, cb * m * es)))


def depthwise_inputs(cs: ConvShape, dtype: DType, seed: int = 0) -> tuple[dict, np.ndarray, np.ndarray]:
    """Seeded random NCHW input and OIHW weights (standard normal floats, full-range integers); the DRAM inputs
    (X as NHWC, Wd packed)."""
    rng = np.random.default_rng(seed)

    def draw(shape):
        if dtype.is_float:
            v = rng.standard_normal(shape).astype(np.float32)
            return v if dtype is DType.F32 else v.astype(np.float16) if dtype is DType.F16 else \
                (v.view(np.uint32) >> 16).astype(np.uint16)
        info = np.iinfo(dtype.storage)
        return rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype.storage)

    x, w = draw((cs.N, cs.C, cs.H, cs.W)), draw((cs.K, 1, cs.R, cs.S))
    return {"X": np.ascontiguousarray(x.transpose(0, 2, 3, 1)), "Wd": pack_depthwise(w, cs)}, x, w
