"""Direct 2-D convolution (no im2col in DRAM) as a double-buffered ISA program: ``Y = conv(X, W)``, any strides,
pads and dilations per axis (a 1-D convolution is one row), any groups.

DRAM: X as NHWC in the operand dtype; W pre-blocked offline into array tiles ``[g][nb][kh][kw][cb][k][n]`` (k input
channels x n output channels, each tile in a full ``rows x cols`` slot); Y as NHWC in the accumulator type (or the
epilogue's requantized type).

One output tile is ``toh x tow`` pixels of ``tnb`` output-channel blocks (:class:`ConvTiling`). ``dma.ld`` brings the
tile's input window (the halo padding is inserted by the DMA, :func:`compiler.kernels.common.halo.padded_load`), once
for all the tile's channel blocks when every input channel fits one step, and the weights, once per convolution when all
of them fit the SPM. Each ``mxu.mm`` loops ``[nb, kh, kw, cb, oh]`` with ``oh`` innermost, so a weight tile stays in the
array while all the tile's pixels stream, and one ``dma.st`` writes the tile's pixels with all their channels. Input
slots, weight chunks and accumulator tiles are rings of 2, so loads, matrix work, the vector epilogue (bias, activation,
requantization) and stores overlap.
With ``im2col`` the DMA also gathers each pixel's ``R x S x C`` patch in SPM, so a few-channel input (a stem's RGB)
fills the array's rows. With ``pack`` P consecutive output pixels share one array row (block-diagonal weights), so
channels that fill at most half of the array stream P times fewer rows; with ``gpack`` G consecutive groups share
one array tile (block-diagonal weights again), so groups of few channels do not each stream every pixel through a
corner of the array. :func:`search_conv_tiling` picks the tiling by the simulator's own cost formulas.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cached_property, lru_cache
from typing import ClassVar, NamedTuple

import numpy as np

from compiler.errors import CompileError, TilingError, UnsupportedOpError
from compiler.frontend.canonical import window_out
from compiler.ir import Node
from compiler.kernels.common.blocks import equal_blocks, tile_extents
from compiler.kernels.common.epilogue import NO_EPILOGUE, Epilogue, epilogue_ops, synced_epilogue
from compiler.kernels.common.halo import padded_load
from compiler.kernels.common.matmul_nest import MatMulNest, MatMulNests
from compiler.kernels.common.pipeline import sem_op
from compiler.kernels.common.search import (
    Ranking,
    SearchRule,
    TilingSearch,
    check_program_max,
    loads_constants,
    on_array_blocks,
    tiling_price,
    under_program_max,
)
from compiler.kernels.common.sink import EstimateSink, PriceMemo, ProgramSink, Sink
from compiler.kernels.common.target import Target
from compiler.kernels.gemm import ACC_TYPE
from isa import DmaCopy, DType, Halt, Program, Queue, Region, SemDecl, Space, View
from isa.arch import Arch
from isa.units import Role


def axis_values(value: int | tuple[int, ...], n: int, what: str) -> tuple[int, ...]:
    """``value`` as a tuple of ``n`` ints (one int repeated); CompileError naming ``what`` for another count (a
    shape's per-axis strides, pads, dilations)."""
    out = (int(value),) * n if isinstance(value, (int, np.integer)) else tuple(int(v) for v in value)
    if len(out) != n:
        raise CompileError(f"{what} needs 1 or {n} values, not {value!r}")
    return out


@dataclass(frozen=True)
class ConvShape:
    """A convolution: batch N, C input channels of H x W, K filters of R x S, strides, pads, dilations, groups.

    ``stride`` and ``dilation`` are per axis ``(h, w)``, ``pad`` is ONNX's ``(top, left, bottom, right)``; one int
    stands for all of them (they are stored as tuples). A 1-D convolution is one with ``H = R = 1`` (and no
    vertical padding)."""

    N: int
    C: int
    H: int
    W: int
    K: int
    R: int
    S: int
    stride: tuple[int, int] = 1
    pad: tuple[int, int, int, int] = 0
    dilation: tuple[int, int] = 1
    groups: int = 1

    def __post_init__(self) -> None:
        for name, n in (("stride", 2), ("pad", 4), ("dilation", 2)):
            object.__setattr__(self, name, axis_values(getattr(self, name), n, name))
        if min(self.stride + self.dilation) < 1 or min(self.pad) < 0:
            raise CompileError(f"strides and dilations must be >= 1 and pads >= 0, not stride={self.stride} "
                               f"dilation={self.dilation} pad={self.pad}")
        if self.C % self.groups or self.K % self.groups:
            raise CompileError(f"groups={self.groups} must divide C={self.C} and K={self.K}")
        if self.OH < 1 or self.OW < 1:
            raise CompileError(f"a {self.R}x{self.S} filter (dilation {_text(self.dilation)}) does not fit the "
                               f"padded {self.H}x{self.W} input")

    @cached_property   # (the searches read them for every tiling they size and price)
    def OH(self) -> int:
        return window_out(self.H, self.R, self.stride[0], self.pad[0], self.pad[2], self.dilation[0])

    @cached_property
    def OW(self) -> int:
        return window_out(self.W, self.S, self.stride[1], self.pad[1], self.pad[3], self.dilation[1])

    @property
    def Cg(self) -> int:
        return self.C // self.groups

    @property
    def Kg(self) -> int:
        return self.K // self.groups

    @property
    def macs(self) -> int:
        return self.N * self.OH * self.OW * self.K * self.Cg * self.R * self.S

    @property
    def text(self) -> str:
        """Strides, pads, dilation and groups in a few words (one number when all of its values are equal)."""
        return (f"stride {_text(self.stride)} pad {_text(self.pad)} dilation {_text(self.dilation)} "
                f"groups {self.groups}")


def _text(values: tuple[int, ...]) -> str:
    return str(values[0]) if len(set(values)) == 1 else "x".join(map(str, values))


@lru_cache(maxsize=256)
def grouped(cs: ConvShape, gpack: int) -> ConvShape:
    """The convolution that :attr:`ConvTiling.gpack` = ``gpack`` computes: ``gpack`` consecutive groups as one, with
    block-diagonal weights (:func:`pack_weights`), so each array tile holds ``gpack`` groups' channels."""
    if gpack == 1:
        return cs
    if cs.groups % gpack:
        raise TilingError(f"gpack={gpack} must divide groups={cs.groups}")
    return replace(cs, groups=cs.groups // gpack)


def pack_weights(w: np.ndarray, shape: ConvShape, rows: int, cols: int, im2col: bool = False,
                 pack: int = 1, gpack: int = 1) -> np.ndarray:
    """OIHW weights ``(K, C/g, R, S)`` blocked into array tiles ``[g][nb][kh][kw][cb][k][n]`` (zero-filled slots).

    im2col (:attr:`ConvTiling.im2col`): the weights of the equivalent 1x1 convolution over ``R * S * C`` channels in
    patch order (kh, kw, c). pack (:attr:`ConvTiling.pack`): the block-diagonal weights (``pack`` copies of the
    ``C x K`` block) of the equivalent convolution over ``pack * C`` input and ``pack * K`` output channels. gpack
    (:attr:`ConvTiling.gpack`): each run of ``gpack`` groups as one group with block-diagonal weights
    (:func:`grouped`); applied first."""
    cs = shape
    if gpack > 1:
        g2, G, Kg, Cg = cs.groups // gpack, gpack, cs.Kg, cs.Cg
        diag = np.zeros((g2, G, Kg, G, Cg, cs.R, cs.S), dtype=w.dtype)
        blocks = w.reshape(g2, G, Kg, Cg, cs.R, cs.S)
        for j in range(G):
            diag[:, j, :, j] = blocks[:, j]
        return pack_weights(diag.reshape(cs.K, G * Cg, cs.R, cs.S), grouped(cs, gpack), rows, cols, im2col, pack)
    if im2col:
        K, C, R, S = w.shape
        return pack_weights(w.transpose(0, 2, 3, 1).reshape(K, R * S * C, 1, 1), _im2col_shape(cs), rows, cols,
                            pack=pack)
    if pack > 1:
        K, C, R, S = w.shape
        diag = np.zeros((pack * K, pack * C, R, S), dtype=w.dtype)
        for i in range(pack):
            diag[i * K:(i + 1) * K, i * C:(i + 1) * C] = w
        return pack_weights(diag, replace(cs, C=pack * cs.C, K=pack * cs.K), rows, cols)
    G, Kg, Cg, R, S = cs.groups, cs.Kg, cs.Cg, cs.R, cs.S
    out = np.zeros((G, -(-Kg // cols), R, S, -(-Cg // rows), rows * cols), dtype=w.dtype)
    wg = w.reshape(G, Kg, Cg, R, S)
    # whole blocks, then the last partial block of each axis: a k x n tile is packed densely (row stride n)
    for n0, n1, n in _block_runs(Kg, cols):
        for c0, c1, k in _block_runs(Cg, rows):
            blk = wg[:, n0:n1, c0:c1].reshape(G, (n1 - n0) // n, n, (c1 - c0) // k, k, R, S)
            out[:, n0 // cols: -(-n1 // cols), :, :, c0 // rows: -(-c1 // rows), : k * n] = \
                blk.transpose(0, 1, 5, 6, 3, 4, 2).reshape(G, (n1 - n0) // n, R, S, (c1 - c0) // k, k * n)
    return out.ravel()


def _block_runs(size: int, block: int) -> list[tuple[int, int, int]]:
    """``size`` cut into ``block``-long pieces as (start, end, piece length) runs: the whole pieces, then the last."""
    whole = size - size % block
    return [r for r in ((0, whole, block), (whole, size, size - whole)) if r[1] > r[0]]


@dataclass(frozen=True)
class ConvTiling:
    """Output tile: toh rows x tow columns (tow <= matrix.max_rows) of tnb output-channel blocks (of ``cols``
    channels) at once in the accumulators; tcb input-channel blocks (of ``rows`` channels) per step, so the reduction
    over channels is split across steps when the weights do not fit."""

    toh: int
    tow: int
    tcb: int = 1 << 16
    tnb: int = 1
    x_all: bool = False
    """The input window holds all of a group's channels and is loaded once per tile even when the reduction is split
    over steps of tcb blocks (implied when tcb covers every block)."""
    acc_bufs: int = 2
    """Accumulator tiles in the ring: 2 overlaps a tile's store with the next tile's matrix work, 1 lets a tile be
    twice as large (fewer re-reads of inputs and weights) at the price of that overlap."""
    im2col: bool = False
    """The DMA gathers each tile's ``R x S x C`` patches in SPM (from its loaded window) and the array reduces them as
    one ``R * S * C``-channel 1x1 convolution: full array rows when C is much smaller than ``rows`` (a stem's RGB
    input). One group, no dilation; weights packed by ``pack_weights(..., im2col=True)``."""
    pack: int = 1
    """Output pixels per array row (pixel packing, when ``pack * K <= cols``): each streamed row reads ``pack``
    consecutive pixels' channels side by side and block-diagonal weights (``pack_weights(..., pack=pack)``) give their
    outputs side by side, so ``pack`` times fewer rows stream through each weight tile. One group, a stride of 1 after
    the subsampled load (or im2col) and tiles whose width is a multiple of ``pack``; the window holds every channel."""
    gpack: int = 1
    """Groups per array tile (group packing, a divisor of ``groups``): ``gpack`` consecutive groups run as one group
    of ``gpack * C/groups`` input and ``gpack * K/groups`` output channels with block-diagonal weights
    (``pack_weights(..., gpack=gpack)``), so a grouped convolution with few channels per group fills the array's rows
    and columns instead of streaming every pixel once per group through a ``C/g x K/g`` corner of it. All the other
    fields apply to that convolution (:func:`grouped`)."""


def _im2col_shape(cs: ConvShape) -> ConvShape:
    """The 1x1 convolution over ``R * S * C`` patch channels that an im2col tiling computes (output-sized input)."""
    return ConvShape(cs.N, cs.R * cs.S * cs.C, cs.OH, cs.OW, cs.K, 1, 1)


def im2col_allowed(cs: ConvShape) -> bool:
    """Whether :attr:`ConvTiling.im2col` can lower ``cs``: one group, no horizontal dilation (a patch row is one run
    of ``S * C`` channels), a kernel larger than 1x1."""
    return cs.groups == 1 and cs.dilation[1] == 1 and cs.R * cs.S > 1


def pack_allowed(cs: ConvShape, pack: int, tow: int, cols: int, im2col: bool = False) -> bool:
    """Whether :attr:`ConvTiling.pack` = ``pack`` can lower ``cs`` with tiles ``tow`` pixels wide: one group, the
    packed outputs in one column block, consecutive output pixels reading consecutive (loaded) input pixels, and
    every column tile (``tow`` and the last one) a multiple of ``pack`` pixels."""
    if pack == 1:
        return True
    dense = im2col or cs.stride[1] == _skip(cs)[1]
    return (cs.groups == 1 and pack * cs.K <= cols and dense and tow % pack == 0
            and cs.OW % tow % pack == 0)


class ConvPlan(NamedTuple):
    """What a tiling implies on one convolution (bytes, blocks): the SRAM it takes and how often things load.

    x_all: the window holds every input channel, so it is loaded once per (tile, group) and reused by every step and
    output-channel block (one slot when the convolution has a single window, else two). resident: all weight chunks
    fit the SPM next to the input slots, so each is loaded once for the whole convolution instead of once per output
    tile."""

    th: int
    tw: int
    kc: int             # channels per pixel the matrix unit reduces per filter tap (R * S * C with im2col);
                        # packing reduces pack * kc of them at once, and cbs, nbs count blocks of the packed sizes
    taps: int           # filter taps it loops over (1 with im2col)
    tcb: int
    tnb: int
    cbs: int
    nbs: int
    x_slot: int
    w_chunk: int
    chunks: int
    resident: bool
    acc_tile: int
    x_all: bool
    x_slots: int        # 1 or 2 input windows
    p_slot: int = 0     # im2col: one tile's patches (the matrix operand, 2 slots); the window then has a single slot

    @property
    def x_bytes(self) -> int:
        """SPM bytes of the input window slot(s) and patch slots."""
        return self.x_slots * self.x_slot + 2 * self.p_slot

    @property
    def spm(self) -> int:
        """SPM bytes of the input slots and the weight buffers."""
        return self.x_bytes + (self.chunks if self.resident else 2) * self.w_chunk


def conv_plan(cs: ConvShape, t: ConvTiling, es: int, rows: int, cols: int, spm: int) -> ConvPlan:
    """The plan of tiling ``t`` of ``cs`` (``es``: operand bytes) on a ``rows x cols`` array with ``spm`` bytes of
    SPM for its slots."""
    return _PlanSizes(cs, t, es, rows, cols, spm).plan(t.tcb)


class _PlanSizes:
    """What the plan of a tiling is made of besides its input-channel blocks per step (tcb), worked out once (the
    search tries every tcb of many tilings): :meth:`plan` for any tcb, and the :meth:`most` tcb that fits."""

    __slots__ = ("th", "tw", "kc", "taps", "cbs", "nbs", "tnb", "p_slot", "acc_tile", "packed", "window", "row_block",
                 "block", "groups", "single", "im2col", "spm")

    def __init__(self, cs: ConvShape, t: ConvTiling, es: int, rows: int, cols: int, spm: int) -> None:
        cs = grouped(cs, t.gpack)
        self.th, self.tw = _window(cs, t.toh, t.tow)
        self.kc, self.taps = (cs.R * cs.S * cs.Cg, 1) if t.im2col else (cs.Cg, cs.R * cs.S)   # channels per tap
        self.cbs, self.nbs = -(-t.pack * self.kc // rows), -(-t.pack * cs.Kg // cols)
        self.tnb = tnb = min(t.tnb, self.nbs)
        windows = cs.N * cs.groups * -(-cs.OH // t.toh) * -(-cs.OW // t.tow)
        self.p_slot = t.toh * t.tow * self.kc * es if t.im2col else 0
        self.acc_tile = t.toh * t.tow * (cs.Kg if t.pack > 1 else tnb * cols) * 4   # (elements per output pixel)
        self.packed = t.x_all or t.im2col or t.pack > 1
        self.window, self.row_block = self.th * self.tw * cs.Cg * es, self.th * self.tw * rows * es   # bytes
        self.block = tnb * self.taps * rows * cols * es
        self.groups = cs.groups * -(-self.nbs // tnb)   # chunks per input-channel step
        self.single = 1 if t.im2col or windows == 1 else 2   # input slots when the window holds every channel
        self.im2col, self.spm = t.im2col, spm

    def plan(self, tcb: int) -> ConvPlan:
        """The plan with ``tcb`` input-channel blocks per step."""
        tcb = min(tcb, self.cbs)
        x_all = self.packed or tcb >= self.cbs
        x_slot = self.window if x_all else tcb * self.row_block
        x_slots = self.single if x_all else 1 if self.im2col else 2
        w_chunk = tcb * self.block
        chunks = self.groups * -(-self.cbs // tcb)
        resident = x_slots * x_slot + 2 * self.p_slot + chunks * w_chunk <= self.spm    # (x_bytes + every chunk)
        return ConvPlan(self.th, self.tw, self.kc, self.taps, tcb, self.tnb, self.cbs, self.nbs, x_slot, w_chunk,
                        chunks, resident, self.acc_tile, x_all, x_slots, self.p_slot)

    def most(self) -> int:
        """The most tcb whose SPM bytes fit (all or none with im2col), or 0. Below cbs a step's chunks (two or more)
        cannot all be resident, so a tcb fits iff its input slots and two weight chunks do: linear in tcb."""
        if self.plan(self.cbs).spm <= self.spm:
            return self.cbs
        if self.im2col:
            return 0
        room = self.spm - (self.single * self.window if self.packed else 0)
        return max(0, min(self.cbs - 1, room // (2 * self.block + (0 if self.packed else 2 * self.row_block))))


def tiling_fits(cs: ConvShape, t: ConvTiling, es: int, rows: int, cols: int, spm: int, acc: int) -> bool:
    """Whether the input slots and the weight buffers (two chunks, or all of them) fit ``spm`` bytes and the
    accumulator tiles ``acc`` bytes (and an im2col tiling reduces every patch channel in one step)."""
    p = conv_plan(cs, t, es, rows, cols, spm)
    return p.spm <= spm and t.acc_bufs * p.acc_tile <= acc and (not t.im2col or p.tcb >= p.cbs)


def choose_conv_tiling(cs: ConvShape, dtype: DType, target: Target) -> ConvTiling:
    """The tallest output tile (full width up to max_rows, one output-channel block) that fits, with as many
    input-channel blocks per step as fit (all of them when possible: no split reduction). Binary searches (see
    :func:`_largest`): O(log OH * log C) fit checks, the result of trying every height and block count."""
    rows, cols, spm, acc = target.rows, target.cols, target.spm, target.acc
    tow, cbs = min(cs.OW, target.max_rows), -(-cs.Cg // rows)

    def fits(tcb: int, toh: int) -> bool:
        return tiling_fits(cs, ConvTiling(toh, tow, tcb), dtype.size, rows, cols, spm, acc)

    tcb = _largest(cbs, lambda b: fits(b, cs.OH) or fits(b, 1))   # some height fits iff the full or the lowest does
    if tcb:
        return ConvTiling(_largest(cs.OH, lambda h: fits(tcb, h)), tow, tcb)
    raise TilingError(f"no tiling of {cs} fits {spm} B of SPM and {acc} B of ACC (one output row of one channel "
                      f"block needs more)")


def _largest(top: int, fits: Callable[[int], bool]) -> int:
    """The largest v in [1, top] with ``fits(v)``, or 0: ``top`` itself, else by binary search below it.

    Exact for :func:`tiling_fits` over tile heights and over input-channel blocks per step: below the top both only grow
    the SRAM a tile needs (window rows, accumulator rows; channels per window and weight chunk), so the fitting
    values are an initial segment [1, v]. Only the top can break the order: a tile as tall as the output needs one
    input slot instead of two, a step over every channel block keeps one weight chunk and the whole window.
    """
    if fits(top):
        return top
    lo, hi = 0, top - 1                 # fits(lo) holds (0 stands for "none"); the answer is in [lo, hi]
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def fit_tcb(cs: ConvShape, t: ConvTiling, es: int, rows: int, cols: int, spm: int, acc: int) -> int:
    """The most input-channel blocks per step with which tiling ``t`` (its ``tcb`` aside) fits, or 0: the largest tcb
    for which :func:`tiling_fits` holds (the SPM bytes alone in closed form, :meth:`_PlanSizes.most`; the
    accumulators once)."""
    plans = _PlanSizes(cs, t, es, rows, cols, spm)
    if t.acc_bufs * plans.plan(1 << 16).acc_tile > acc:   # (the accumulator tiles do not depend on tcb)
        return 0
    return plans.most()


def conv_shape(n: Node, x_shape: tuple[int, ...], w_shape: tuple[int, ...]) -> ConvShape:
    """The ConvShape of Conv-like node ``n`` (canonical attrs) on an NCHW input and OIHW weights, or an NCL input
    and OIL weights (a 1-D convolution: H = R = 1); UnsupportedOpError for other ranks."""
    a = n.attrs
    if len(x_shape) == 3 and len(w_shape) == 3:   # 1-D: the 2-D convolution of one row
        (s,), (d,), (p0, p1) = a["strides"], a["dilations"], a["pads"]
        (N, C, L), (K, _, S) = x_shape, w_shape
        return ConvShape(N, C, 1, L, K, 1, S, (1, s), (0, p0, 0, p1), (1, d), a["group"])
    if len(x_shape) != 4 or len(w_shape) != 4:
        raise UnsupportedOpError(n.name, n.op, f"only 1-D and 2-D convolutions (NCL or NCHW inputs), not rank "
                                 f"{len(x_shape)}")
    N, C, H, W = x_shape
    return ConvShape(N, C, H, W, w_shape[0], w_shape[2], w_shape[3], tuple(a["strides"]), tuple(a["pads"]),
                     tuple(a["dilations"]), a["group"])


def live_taps(cs: ConvShape) -> tuple[ConvShape, slice, slice]:
    """``cs`` without the leading and trailing filter taps that read only padding at every output (a dilation
    wider than the map: DeepLabV3's rate-36 ASPP conv on an 8x8 map keeps its centre tap alone), and the filter rows
    and columns it keeps (``w[:, :, rows, cols]`` are its weights). The smaller convolution is exact: a dropped tap
    multiplies only padding (zero, or the zero point it is corrected for), its pads shrink by the dropped taps'
    span (a tap is dropped only while the pad covers it, so no pad goes below 0) and its outputs are the same; an
    axis left with one tap has dilation 1. ``cs`` itself when every tap touches data."""
    r0, r1 = _live_axis(cs.H, cs.R, cs.stride[0], cs.dilation[0], cs.pad[0], cs.pad[2], cs.OH)
    c0, c1 = _live_axis(cs.W, cs.S, cs.stride[1], cs.dilation[1], cs.pad[1], cs.pad[3], cs.OW)
    if (r0, r1, c0, c1) == (0, cs.R, 0, cs.S):
        return cs, slice(0, cs.R), slice(0, cs.S)
    (dh, dw), (pt, pl, pb, pr) = cs.dilation, cs.pad
    pad = (pt - r0 * dh, pl - c0 * dw, pb - (cs.R - r1) * dh, pr - (cs.S - c1) * dw)
    dilation = (dh if r1 - r0 > 1 else 1, dw if c1 - c0 > 1 else 1)
    return replace(cs, R=r1 - r0, S=c1 - c0, pad=pad, dilation=dilation), slice(r0, r1), slice(c0, c1)


def _live_axis(size: int, k: int, s: int, d: int, lo: int, hi: int, out: int) -> tuple[int, int]:
    """The taps ``[first, end)`` of one axis to keep: tap ``r`` reads ``o*s + r*d - lo`` for outputs ``o < out``; a
    leading tap that reads only the ``lo`` padding, or a trailing one only the ``hi`` padding, goes while the pad
    covers it (at least one tap stays)."""
    first = 0
    while first < k - 1 and (out - 1) * s + first * d - lo < 0 and (first + 1) * d <= lo:
        first += 1
    end = k
    while end > first + 1 and (end - 1) * d - lo >= size and (k - end + 1) * d <= hi:
        end -= 1
    return first, end


def _skip(cs: ConvShape) -> tuple[int, int]:
    """Input rows and columns an unpadded axis of one filter tap skips between outputs (its stride, else 1): the
    loads read only the pixels such an axis uses."""
    (sh, sw), (pt, pl, pb, pr) = cs.stride, cs.pad
    return sh if cs.R == 1 and pt == pb == 0 else 1, sw if cs.S == 1 and pl == pr == 0 else 1


def _window(cs: ConvShape, toh: int, tow: int) -> tuple[int, int]:
    """Input rows x columns one output tile loads into SPM."""
    (sh, sw), (dh, dw), (kh, kw) = cs.stride, cs.dilation, _skip(cs)
    return (toh if kh > 1 else (toh - 1) * sh + (cs.R - 1) * dh + 1,
            tow if kw > 1 else (tow - 1) * sw + (cs.S - 1) * dw + 1)


SEARCH_PRICED = 10
"""Candidates per accumulator ring depth, best by :func:`rough_cycles`, that :func:`search_conv_tiling` prices."""
PRICE_MAX = 20_000
"""Instructions (by :func:`conv_instructions`) of the best-ranked candidate above which the search does not build
and price candidates, but takes that one: building 2 * SEARCH_PRICED programs of a layer that large would take
minutes (no layer of the zoo models comes within a factor of five)."""


@dataclass(frozen=True)
class ConvSearch(TilingSearch[ConvTiling]):
    """:func:`search_conv_tiling`'s search (:mod:`compiler.kernels.common.search`): the candidates of
    :meth:`rank` (the best ``SEARCH_PRICED`` of each accumulator depth by :func:`rough_cycles`), each bounded below by
    its plan (:func:`plan_floor`) and its floor estimate before it is priced (:func:`conv_estimate`, with the
    search's :class:`~compiler.kernels.common.sink.PriceMemo`); the least (price, rank) wins."""

    cs: ConvShape
    dtype: DType
    target: Target
    epilogue: Epilogue = NO_EPILOGUE
    hidden_constants: bool = False
    group_packing: bool = True
    memo: PriceMemo = field(default_factory=PriceMemo, compare=False)
    plans: dict = field(default_factory=dict, compare=False, repr=False)   # candidate -> its plan
    rule: ClassVar[SearchRule] = SearchRule(SEARCH_PRICED)
    groups: ClassVar[tuple[int, ...]] = (2, 1)   # accumulator ring depths

    @cached_property
    def spm(self) -> int:
        """SPM bytes the slots may take (the epilogue's constants take the rest)."""
        return self.target.spm - epilogue_spm_bytes(self.cs, self.epilogue, self.dtype.size)

    def rank(self, ranking: Ranking) -> None:
        """Offer every tiling (see :func:`search_conv_tiling`) that fits, as its fields (:meth:`candidate`), ranked by
        :func:`rough_cycles`, grouped by accumulator depth; TilingError when none fits."""
        cs, dtype, target, spm = self.cs, self.dtype, self.target, self.spm
        r, c, refused = target.rows, target.cols, None
        for gpack in group_packs(cs, r, c) if self.group_packing else (1,):
            gs = grouped(cs, gpack)
            try:
                tallest = choose_conv_tiling(gs, dtype, target.with_spm(spm))
            except TilingError as e:   # no full-width direct tile fits: narrower or im2col ones still may (a stem)
                refused = refused or e
                tallest = ConvTiling(1, min(gs.OW, target.max_rows))
            heights = {tallest.toh} | {-(-gs.OH // n) for n in range(1, 9)} | {h for h in (1, 2, 4) if h < gs.OH}
            widths = {-(-tallest.tow // n) for n in (1, 2, 4)}
            nbs = -(-gs.Kg // c)
            blocks = {nbs} | {1 << i for i in range(nbs.bit_length()) if 1 << i < nbs}
            modes = (False, True) if im2col_allowed(gs) else (False,)
            packs = [1] + [k for k in (2, 4) if gs.groups == 1 and k * gs.K <= c]   # (pack_allowed's first tests)
            tilings = sorted(itertools.product(heights, widths, blocks, modes, packs), reverse=True)
            ranking.offer_all(rank_tilings(gs, gpack, tilings, dtype.size, target, spm))
        if not ranking:
            raise refused or TilingError(f"no tiling of {cs} fits {spm} B of SPM and {target.acc} B of ACC")

    def candidate(self, offered: tuple) -> ConvTiling:
        return ConvTiling(*offered)

    def plan(self, t: ConvTiling) -> ConvPlan:
        """The plan of candidate ``t`` (once per candidate and search)."""
        plan = self.plans.get(t)
        if plan is None:
            plan = self.plans[t] = conv_plan(self.cs, t, self.dtype.size, self.target.rows, self.target.cols, self.spm)
        return plan

    def affordable(self, best: ConvTiling) -> bool:
        """Whether a layer whose best-ranked tiling is ``best`` is small enough to price (``PRICE_MAX``)."""
        t = self.target
        return conv_instructions(self.cs, best, self.dtype.size, t.rows, t.cols, self.spm) <= PRICE_MAX

    def program_key(self, candidate: ConvTiling) -> tuple:
        """A tiling's plan and the fields conv2d reads besides it (x_all and tnb only reach the program through the
        plan): candidates with one key emit one program."""
        t = candidate
        return self.plan(t), t.toh, t.tow, t.acc_bufs, t.im2col, t.pack, t.gpack

    @property
    def floors(self) -> tuple:
        return self.plan_floor, self.floor_estimate

    def plan_floor(self, t: ConvTiling, bound: float | None) -> float:
        """:func:`plan_floor` of candidate ``t``."""
        cs, dtype, target = self.cs, self.dtype, self.target
        return plan_floor(grouped(cs, t.gpack), t, self.plan(t), target.arch, dtype.size,
                          (self.epilogue.out or ACC_TYPE[dtype]).size, self.epilogue, self.hidden_constants,
                          (target.rows, target.cols))

    def floor_estimate(self, t: ConvTiling, bound: float | None) -> int:
        """:func:`conv_estimate` of candidate ``t`` with ``floor=True``."""
        return conv_estimate(self.cs, self.dtype, self.target, t, self.epilogue, self.hidden_constants, self.memo,
                             bound, floor=True)

    def price(self, t: ConvTiling, bound: float | None) -> int:
        return conv_estimate(self.cs, self.dtype, self.target, t, self.epilogue, self.hidden_constants, self.memo,
                             bound)


@lru_cache(maxsize=512)
def search_conv_tiling(cs: ConvShape, dtype: DType, target: Target, epilogue: Epilogue | None = None,
                       hidden_constants: bool = False, group_packing: bool = True) -> ConvTiling:
    """The tiling with the fewest predicted cycles on ``target``, from the simulator's own formulas
    (:class:`ConvSearch`).

    Candidates: output heights that split OH evenly into 1 to 8 tiles, 1, 2 and 4 rows, and the tallest tile that
    fits; the widest tile and its halves and quarters; 1, 2, 4, ... or all output-channel blocks per accumulator tile;
    direct or im2col; 1, 2 or 4 pixels per array row where :func:`pack_allowed`; the window with only each step's
    channels or all of them; one or two accumulator tiles; each with the most input-channel blocks per step that
    fit; all of it for each number of groups per array tile (:func:`group_packs`). All are ranked by
    :func:`rough_cycles`; the best ``SEARCH_PRICED`` of each accumulator depth are priced by :func:`conv_estimate`
    (:func:`isa.cost.program_estimate` of the program, a single accumulator tile serializing matrix work, epilogue
    and store). Ties go to the earlier (larger) candidate.

    hidden_constants: the program's leading loads of constants (weights, bias, scale) overlap the previous layer
    (cross-layer prefetch, :func:`compiler.link.linker.link`), so the pricing does not count them. group_packing=False:
    one group per array tile only (``gpack=1``; for comparisons).

    The winner is the candidate of least (price, rank) of :func:`conv_candidates`; it is found without pricing most
    of them: each is bounded below first (by :func:`plan_floor`, then by its floor, ``conv_estimate(floor=True)``),
    and only a candidate whose bound can still beat the best so far is priced.
    """
    return ConvSearch(cs, dtype, target, epilogue or Epilogue(), hidden_constants, group_packing).choose()


def conv_on_array(cs: ConvShape, dtype: DType, target: Target, epilogue: Epilogue | None = None,
                  hidden_constants: bool = False, blocks: bool = True) -> tuple[Target, ConvTiling]:
    """The target the program and :func:`pack_weights` are built for, and the tiling: :func:`search_conv_tiling`'s
    on ``target`` or, when no tiling fits its whole array (and ``blocks``), on the block of the array that
    :func:`~compiler.kernels.common.search.on_array_blocks` finds (smaller channel blocks and weight tiles, priced by
    :func:`conv_estimate`). TilingError when not even a 1 x 1 block fits."""
    return on_array_blocks(target, lambda t: search_conv_tiling(cs, dtype, t, epilogue, hidden_constants),
                           lambda t, tiling: conv_estimate(cs, dtype, t, tiling, epilogue, hidden_constants), blocks)


def conv_candidates(cs: ConvShape, dtype: DType, target: Target, epilogue: Epilogue | None = None,
                    group_packing: bool = True) -> list[ConvTiling]:
    """The tilings :func:`search_conv_tiling` prices, in rank order (see there); only the best-ranked one when the
    convolution is too large to price (``PRICE_MAX``). TilingError when none fits."""
    return ConvSearch(cs, dtype, target, epilogue or Epilogue(), group_packing=group_packing).candidates()


def rough_dram(arch: Arch) -> tuple[int, float]:
    """What the rough ranks (:func:`rough_cycles`, :func:`rank_tilings`, the transposed convolution's) charge for
    DRAM: the cycles every DMA pays besides its bytes (its setup, the DRAM latency and a first row activation; banks
    hide the later ones) and the bus's bytes per cycle."""
    t = arch.dram_timing
    return arch.dma.setup_latency + t.latency + t.row_miss, float(t.bytes_per_cycle)


class _RankTarget(NamedTuple):
    """What :func:`rank_tilings` reads of the target and the grouped convolution, worked out once per call."""

    r: int
    c: int
    acc: int
    mr: int
    mc: int
    per_dma: int      # every DMA pays its setup, its latency and its first row activation
    bw: float
    setup: int
    line: int         # bytes of one SPM line (all banks)
    y_bytes: int
    spm: int
    es: int
    gpack: int
    Cg: int           # the grouped convolution's input and output channels per group, and groups
    Kg: int
    G: int


def rank_tilings(gs: ConvShape, gpack: int, tilings: list[tuple[int, int, int, bool, int]], es: int,
                 target: Target, spm: int) -> list[tuple[float, int, tuple]]:
    """The search's ranking of the tilings (toh, tow, tnb, im2col, pack) of the grouped shape ``gs``, in order: each
    with x_all False and True (direct, unpacked only) and the most input-channel blocks that fit
    (:meth:`_PlanSizes.most`), as (:func:`rough_cycles`, acc_bufs, ConvTiling fields) for each accumulator depth
    that fits (a :class:`~compiler.kernels.common.search.Ranking` offer: rank, group, candidate). The sums of
    :func:`conv_plan`, the most blocks and :func:`rough_cycles`, written out once for both x_all and both depths (the
    search ranks thousands of tilings)."""
    arch = target.arch
    ctx = _RankTarget(target.rows, target.cols, target.acc, arch.matrix.rows, arch.matrix.cols,
                      *rough_dram(arch), arch.dma.setup_latency, arch.spm.banks * arch.spm.bank_width,
                      gs.N * gs.OH * gs.OW * gs.K * 4, spm, es, gpack, gs.Cg, gs.Kg, gs.groups)
    geometry: dict = {}
    out: list = []
    for toh, tow, tnb, im2col, pack in tilings:
        if pack > 1 and (tnb > 1 or not pack_allowed(gs, pack, tow, ctx.c, im2col)):
            continue
        g = geometry.get((toh, tow))
        if g is None:
            th, tw = _window(gs, toh, tow)
            windows = gs.N * gs.groups * -(-gs.OH // toh) * -(-gs.OW // tow)
            g = geometry[toh, tow] = (th, tw, windows, windows)   # (tiles and windows: one per group and tile)
        _rank_tiling(out, gs, ctx, g, toh, tow, tnb, im2col, pack)
    return out


def _rank_tiling(out: list, gs: ConvShape, ctx: _RankTarget, g: tuple, toh: int, tow: int, tnb: int, im2col: bool,
                 pack: int) -> None:
    """:func:`rank_tilings` of one tiling (window rows and columns, tiles and windows ``g``), appended to ``out``."""
    (th, tw, tiles, windows), (r, c, acc, mr, mc, per_dma, bw, setup, line, y_bytes, spm, es, gpack, Cg, Kg, G) = \
        g, ctx
    kc, taps = (gs.R * gs.S * Cg, 1) if im2col else (Cg, gs.R * gs.S)
    cbs, nbs = -(-pack * kc // r), -(-pack * Kg // c)
    nb = min(tnb, nbs)   # (the plan's tnb)
    p_slot = toh * tow * kc * es if im2col else 0
    acc_tile = toh * tow * (Kg if pack > 1 else nb * c) * 4
    window, row_block, block = th * tw * Cg * es, th * tw * r * es, nb * taps * r * c * es
    groups = G * -(-nbs // nb)
    single = 1 if im2col or windows == 1 else 2
    nbg, s = -(-nbs // nb), toh * tow // pack
    gather = tiles * (p_slot / line + setup)
    for x_all in (False, True) if not im2col and pack == 1 else (False,):
        packed = x_all or im2col or pack > 1
        x = single * window + 2 * p_slot   # (_PlanSizes.most: tcb = cbs first)
        w_all = groups * cbs * block
        if x + (w_all if x + w_all <= spm else 2 * cbs * block) <= spm:
            tcb = cbs
        elif im2col:
            continue
        else:
            room = spm - (single * window if packed else 0)
            tcb = max(0, min(cbs - 1, room // (2 * block + (0 if packed else 2 * row_block))))
            if not tcb:
                continue
        whole = packed or tcb >= cbs   # (the plan's x_all)
        x_slot = window if whole else tcb * row_block
        csteps = -(-cbs // tcb)
        if not under_program_max(tiles * nbg * csteps):
            continue
        chunks = groups * csteps
        resident = (single if whole else 1 if im2col else 2) * x_slot + 2 * p_slot + chunks * tcb * block <= spm
        mm = tiles * nbg * csteps * (nb * taps * tcb * max(s, mr) + 2 * mr + mc)
        x_loads = tiles * (1 if whole else nbg * csteps)
        w_loads = chunks if resident else tiles * nbg * csteps
        x_bytes, w_bytes = x_loads * x_slot, w_loads * tcb * block
        ld = (x_bytes + w_bytes) / bw + (x_loads + w_loads) * per_dma + gather
        st = y_bytes / bw + tiles * nbg * per_dma
        bus = (x_bytes + w_bytes + y_bytes) / bw
        for bufs in (2, 1):
            if bufs * acc_tile <= acc:
                out.append((max(mm + st if bufs == 1 else mm, ld, st, bus), bufs,
                            (toh, tow, tcb, tnb, x_all, bufs, im2col, pack, gpack)))


def plan_floor(cs: ConvShape, t: ConvTiling, p: ConvPlan, arch: Arch, es: int, eo: int, epilogue: Epilogue,
                hidden_constants: bool = False, block: tuple[int, int] | None = None) -> float:
    """A lower bound of a tiling's price (cycles) from its plan alone (``cs`` grouped by ``t.gpack``): the stores,
    the weight loads and the residual's loads each take a DMA's setup and latency, the first row activation and
    their bytes over the bandwidth (:func:`isa.cost.dram_floor`: the bus window is at least that), every input
    window load at least a setup and the bytes it reads over the bandwidth; the bus holds all their windows; the
    matrix unit is busy at least :func:`_mxu_floor`, the vector unit (if the epilogue uses it) a latency per stored
    tile and every output element's share of a vector, the store queue a setup per bias copy into an accumulator
    tile; a queue's busy cycles and the bus (with one accumulator tile: the matrix, vector and store work) bound the
    price from below,
    and program_estimate adds its head (the loads before the first matrix instruction: the first tile's input window
    and residual's tile and, unless ``hidden_constants``, the bias, the scale and the first weight chunk) and its
    tail (the last tile's last store and, if the epilogue uses the vector unit, at least one vector instruction over
    that store's tile). ``es``, ``eo``: operand and output element bytes; ``block``: the rows x cols of the array
    the plan's weight tiles take (:meth:`~compiler.kernels.common.target.Target.with_array`; None: all of it)."""
    dt, dma, v, residual = arch.dram_timing, arch.dma, arch.vector, epilogue.residual
    rows, cols = block or (arch.matrix.rows, arch.matrix.cols)
    act, bw = dt.row_miss if arch.dram.model == "rowbuffer" else 0, float(dt.bytes_per_cycle)
    tiles = cs.N * cs.groups * -(-cs.OH // t.toh) * -(-cs.OW // t.tow)
    nbg, csteps = -(-p.nbs // p.tnb), -(-p.cbs // p.tcb)
    out, stores = cs.N * cs.OH * cs.OW * cs.K, tiles * nbg
    weights = cs.groups * p.nbs * p.taps * p.cbs * rows * cols * es   # every block once
    w_bytes, w_loads = (weights, p.chunks) if p.resident else (weights * (tiles // cs.groups), tiles * nbg * csteps)
    r_bytes, r_loads = (out * 4, stores) if residual else (0, 0)
    x_bytes = cs.N * cs.groups * _window_reads(cs, t.toh, t.tow) * cs.Cg * es * (1 if p.x_all else nbg)
    per = dma.setup_latency + dt.latency + act
    st = stores * per + out * eo / bw
    ld = (w_loads + r_loads) * per + (w_bytes + r_bytes + x_bytes) / bw \
        + tiles * (1 if p.x_all else nbg * csteps) * dma.setup_latency
    bus = (out * eo + w_bytes + r_bytes + x_bytes) / bw + (stores + w_loads + r_loads) * act
    mm = _mxu_floor(cs, t, p, arch) if arch.matrix.dataflow == "ws" else 0
    # the head and the tail: DMAs of the first and the last tile (each one copy, isa.cost.dma_floor)
    toh, tow = min(t.toh, cs.OH), min(t.tow, cs.OW)
    ng = min(p.tnb * cols, cs.Kg)   # (the first output-channel group)
    x_first = _window_reads(cs, toh, tow, True) * (cs.Cg if p.x_all else min(cs.Cg, p.tcb * rows)) * es
    head = (per + int(x_first / bw) if x_first else 0) \
        + (per + int(toh * tow * ng * 4 / bw) if residual else 0) \
        + (0 if hidden_constants else per + int(p.tnb * p.taps * min(p.tcb, p.cbs) * rows * cols * es / bw)
           + (epilogue.bias + (epilogue.out is not None)) * (per + int(cs.K * 4 / bw)))
    last_h, last_w = cs.OH - (cs.OH - 1) // t.toh * t.toh, cs.OW - (cs.OW - 1) // t.tow * t.tow
    last = last_h * last_w * (cs.Kg - (p.nbs - 1) // p.tnb * p.tnb * cols)   # elements of the last store
    tail = per + int(last * eo / bw)
    vpu = 0   # every output element passes the vector unit once, each stored tile at least one latency
    if epilogue.act is not None or epilogue.out is not None or epilogue.divisor is not None or residual and \
            epilogue.bias:   # (a bias alone starts the accumulators: no vector work)
        latency, interval = min(v.alu_latency, v.mul_latency, v.special_latency), \
            min(v.alu_interval, v.mul_interval, v.special_interval)
        tail += latency + -(-last // v.lanes) * interval
        vpu = stores * latency + out / v.lanes * interval
    if epilogue.bias and not residual:   # the bias copies into each accumulator tile, on the store queue
        st += stores * dma.setup_latency
    return max(max(mm, st, ld, bus, vpu) + head + tail, mm + st + vpu if t.acc_bufs == 1 else 0)


def _mxu_floor(cs: ConvShape, t: ConvTiling, p: ConvPlan, arch: Arch) -> int:
    """A lower bound of the matrix unit's busy cycles (weight-stationary, ``cs`` grouped by ``t.gpack``): every tile
    streams its ``toh * tow / pack`` rows through each of its ``groups * nbs * taps * cbs`` weight tiles (folds), a
    fold taking at least ``max(rows streamed, array rows)`` cycles (:func:`isa.cost.mxu_cycles`), and each step's
    first ``mxu.mm`` at least the array's fill and drain, ``R + C - 2``."""
    r, c = arch.matrix.rows, arch.matrix.cols
    heights = [(n, h) for n, h in ((cs.OH // t.toh, t.toh), (1, cs.OH % t.toh)) if n and h] if t.toh < cs.OH \
        else [(1, cs.OH)]
    widths = [(n, w) for n, w in ((cs.OW // t.tow, t.tow), (1, cs.OW % t.tow)) if n and w] if t.tow < cs.OW \
        else [(1, cs.OW)]
    streams = sum(nh * nw * max(h * (w // t.pack), r) for nh, h in heights for nw, w in widths)
    steps = -(-cs.OH // t.toh) * -(-cs.OW // t.tow) * -(-p.nbs // p.tnb) * -(-p.cbs // p.tcb)
    return cs.N * cs.groups * (p.nbs * p.taps * p.cbs * streams + steps * (r + c - 2))


@lru_cache(maxsize=1024)
def _window_reads(cs: ConvShape, toh: int, tow: int, first: bool = False) -> int:
    """Input pixels that the window loads of one image's tiles read from DRAM (their halo padding is filled in):
    every row tile's rows times every column tile's columns (see :meth:`ConvLayout.geometry`); ``first``: of the
    first tile only."""
    (sh, sw), (pt, pl, _, _), (skip_h, skip_w) = cs.stride, cs.pad, _skip(cs)

    def reads(n: int, tile: int, stride: int, lo: int, skip: int, size: int, axis: int) -> int:
        total = 0
        for o0 in range(0, 1 if first else n, tile):
            extent = _window(cs, min(tile, n - o0), min(tile, n - o0))[axis]
            i0 = o0 * stride - lo
            total += max(0, extent - max(0, -i0) - max(0, i0 + (extent - 1) * skip + 1 - size))
        return total
    return reads(cs.OH, toh, sh, pt, skip_h, cs.H, 0) * reads(cs.OW, tow, sw, pl, skip_w, cs.W, 1)


def conv_instructions(cs: ConvShape, t: ConvTiling, es: int, rows: int, cols: int, spm: int) -> int:
    """At least how many instructions :func:`conv2d` emits for tiling ``t``: two per step (a load and a matmul; 2.3
    to 3.3 measured), a step being one tile's output-channel block group and input-channel step."""
    p, gs = conv_plan(cs, t, es, rows, cols, spm), grouped(cs, t.gpack)
    tiles = gs.N * gs.groups * -(-gs.OH // t.toh) * -(-gs.OW // t.tow)
    return 2 * tiles * -(-p.nbs // p.tnb) * -(-p.cbs // p.tcb)


def group_packs(cs: ConvShape, rows: int, cols: int) -> tuple[int, ...]:
    """The groups per array tile (:attr:`ConvTiling.gpack`) the search tries: 1, the most (a divisor of groups)
    whose input channels fit the array's rows, and the most whose input and output channels fit its rows and
    columns. Fewer never stream fewer rows: every pixel streams once per array tile of channels."""
    divisors = [g for g in range(2, cs.groups + 1) if cs.groups % g == 0 and g * cs.Cg <= rows]
    both = [g for g in divisors if g * cs.Kg <= cols]
    return tuple(dict.fromkeys((1, *divisors[-1:], *both[-1:])))


def rough_cycles(cs: ConvShape, t: ConvTiling, p: ConvPlan, arch: Arch) -> float:
    """A quick lower-bound-like estimate (cycles) that ranks tilings before the exact pricing: the busiest of the
    matrix unit (folds of ``toh * tow / pack`` streamed rows), the load and store queues (bytes over the bandwidth plus
    each DMA's setup, latency and first row activation) and the DRAM bus. ``cs``: the grouped shape
    (:func:`grouped` by ``t.gpack``), ``p`` the tiling's plan. The search ranks by :func:`rank_tilings`, the same sums
    written out for many tilings at once (tested equal)."""
    r, c = arch.matrix.rows, arch.matrix.cols
    tiles = cs.N * -(-cs.OH // t.toh) * -(-cs.OW // t.tow) * cs.groups
    nbg, csteps = -(-p.nbs // p.tnb), -(-p.cbs // p.tcb)
    s = t.toh * t.tow // t.pack
    mm = tiles * nbg * csteps * (p.tnb * p.taps * p.tcb * max(s, r) + 2 * r + c)
    x_loads = tiles * (1 if p.x_all else nbg * csteps)
    w_loads = p.chunks if p.resident else tiles * nbg * csteps
    x_bytes = x_loads * p.x_slot
    w_bytes = w_loads * p.w_chunk
    y_bytes = cs.N * cs.OH * cs.OW * cs.K * 4
    per_dma, bw = rough_dram(arch)
    gather = tiles * (p.p_slot / (arch.spm.banks * arch.spm.bank_width) + arch.dma.setup_latency)
    ld = (x_bytes + w_bytes) / bw + (x_loads + w_loads) * per_dma + gather
    st = y_bytes / bw + tiles * nbg * per_dma
    if t.acc_bufs == 1:   # each tile's matrix work waits for the previous tile's store
        mm += st
    return max(mm, ld, st, (x_bytes + w_bytes + y_bytes) / bw)


def epilogue_spm_bytes(cs: ConvShape, epilogue: Epilogue, es: int) -> int:
    """SPM bytes the epilogue's per-channel constants take after the slots (+ word alignment)."""
    return cs.K * epilogue.spm_bytes + (3 if epilogue.spm_bytes and es % 4 else 0)


class TileState:
    """What conv2d's tiles advance: input windows, weight chunks and accumulator tiles used so far (their ring slots
    follow), whether the next tile is the first, and where the last tile store is in the program (or None)."""

    __slots__ = ("xs", "ws", "accs", "first_tile", "last_store_at")

    def __init__(self) -> None:
        self.xs = self.ws = self.accs = 0
        self.first_tile, self.last_store_at = True, None

    def advance(self, delta: tuple[int, int, int]) -> None:
        """Count ``delta`` more (input windows, weight chunks, accumulator tiles)."""
        self.xs, self.ws, self.accs = self.xs + delta[0], self.ws + delta[1], self.accs + delta[2]


class TileGeometry(NamedTuple):
    """One output tile: its batch and first output row and column, its rows and columns (the last tiles' may be
    fewer), its input window's rows and columns, that window's halo padding ``((top, bottom), (left, right))`` and
    the DRAM offsets (bytes) of its input window (X, the halo aside) and of its output (Y, R)."""

    b: int
    oh0: int
    ow0: int
    toh: int
    tow: int
    th: int
    tw: int
    pads: tuple[tuple[int, int], tuple[int, int]]
    x_src: int
    y_base: int


class ChannelGroup(NamedTuple):
    """One run of ``tnb`` output-channel blocks of a tile (from block ``nb0`` of group ``g``; the ``gi``-th run):
    its blocks and channels, its accumulator tile (ACC bytes), its output's offset in Y and R and its channels'
    offset in the bias and scale (bytes), and the weight chunk of its first input-channel step."""

    g: int
    gi: int
    nb0: int
    nbn: int
    ng: int
    acc_base: int
    y_off: int
    ch: int
    cid: int


class InputStep(NamedTuple):
    """One input-channel step of a :class:`ChannelGroup` (the ``si``-th, from block ``cb_first``): its blocks and
    channels (from ``c0``), whether it loads a new input window (and uses it for the last time), the window's ring
    slot and channels (``xc`` from ``xc0``), its weight chunk (and whether it loads it), and whether it starts or
    finishes the accumulator tile."""

    si: int
    cb_first: int
    ncb: int
    c0: int
    tc: int
    x_new: bool
    x_last: bool
    slot: int
    xc: int
    xc0: int
    cid: int
    w_new: bool
    first: bool
    last: bool


class ConvLayout(NamedTuple):
    """:func:`conv2d`'s fixed choices for one convolution and tiling (:meth:`of`): the convolution as the array runs
    it (``cs``, grouped by the tiling's gpack), its plan, where everything lives in SPM and ACC and the strides the
    instructions use (bytes), and the output tiles in order."""

    cs: ConvShape
    dtype: DType
    target: Target
    t: ConvTiling
    p: ConvPlan
    epilogue: Epilogue
    pad_value: int | float
    yt: DType            # the output's type (the accumulator's, or the requantized one)
    bias_init: bool      # the bias starts each accumulator tile (copied by the store queue); the vector unit does
    vector: Epilogue     # the rest of the epilogue
    w_base0: int         # the first weight chunk
    bias_base: int       # the bias, then the scale (f32), after the slots, word-aligned
    scale_base: int
    taps: tuple[int, int]    # filter taps the matrix unit loops over (rows, columns; 1 x 1 with im2col)
    tile: int            # one packed weight tile
    chunk: int           # the packed weights of one (group, output block)
    nb_stride: int       # one output block in a weight chunk
    row_bytes: int       # one accumulator pixel (tnb * cols, or Kg if packed, elements)
    skip: tuple[int, int]    # input rows and columns a subsampled load skips (:func:`_skip`)
    step: tuple[int, int]    # the stride between output pixels in the matrix unit's operand
    c_steps: tuple[int, ...]     # first input-channel block of each step
    step_channels: tuple[tuple[int, int, int, int, int, int], ...]
    """Per input-channel step: its first block, blocks, first channel, channels, and the window's channels and first
    channel (all of a group's when the window holds them all)."""
    nb_groups: tuple[int, ...]   # first output-channel block of each channel group
    tiles: tuple[tuple[int, int, int], ...]   # (batch, first row, first column) of every output tile, in order

    @classmethod
    def of(cls, cs: ConvShape, dtype: DType, target: Target, tiling: ConvTiling | None, epilogue: Epilogue,
           pad_value: int | float) -> ConvLayout:
        """The layout of ``conv2d(cs, dtype, target, tiling, epilogue, pad_value)``; TilingError or CompileError
        when it cannot take them (``tiling`` defaults to :func:`choose_conv_tiling`'s)."""
        es, rows, cols, spm = dtype.size, target.rows, target.cols, target.spm
        bias_bytes = epilogue_spm_bytes(cs, epilogue, es)
        t = tiling or choose_conv_tiling(cs, dtype, target.with_spm(spm - bias_bytes))
        p = conv_plan(cs, t, es, rows, cols, spm - bias_bytes)
        cs = grouped(cs, t.gpack)   # from here on, packed groups are one group
        _check_layout(cs, t, p, bias_bytes, target, epilogue)
        bias_init = epilogue.bias and not epilogue.residual   # (a residual takes the accumulators first)
        bias_base = -(-p.spm // 4) * 4
        tile = rows * cols * es
        skip = _skip(cs)   # subsampled load: the SPM tile is dense, the conv then has stride 1 on that axis
        win = (cs.stride[0] // skip[0], cs.stride[1] // skip[1])   # the stride between output pixels in the window
        c_steps = tuple(range(0, p.cbs, p.tcb))
        return cls(cs, dtype, target, t, p, epilogue, pad_value, epilogue.out or ACC_TYPE[dtype], bias_init,
                   replace(epilogue, bias=False) if bias_init else epilogue, p.x_bytes, bias_base,
                   bias_base + cs.K * 4 * epilogue.bias, (1, 1) if t.im2col else (cs.R, cs.S), tile,
                   p.taps * p.cbs * tile, p.taps * p.tcb * tile, p.acc_tile // (t.toh * t.tow), skip,
                   (1, 1) if t.im2col else win, c_steps, _step_channels(cs, t, p, rows, c_steps),
                   tuple(range(0, p.nbs, p.tnb)),
                   tuple((b, oh0, ow0) for b in range(cs.N) for oh0 in range(0, cs.OH, t.toh)
                         for ow0 in range(0, cs.OW, t.tow)))

    @property
    def acc_empty(self) -> str:
        """The semaphore of free accumulator tiles (1 or 2)."""
        return "acc_empty" if self.t.acc_bufs == 2 else "acc1_empty"

    @property
    def ready(self) -> str:
        """The semaphore a store waits for: the epilogue's, or the matrix unit's when there is none."""
        return "out_full" if self.vector.active else "acc_full"

    @property
    def scope(self) -> tuple:
        """The tiling as the estimates' memos see it: the two accumulator depths share their runs (whose keys hold
        the accumulator bases)."""
        t = self.t
        return ("conv2d", t.toh, t.tow, t.tcb, t.tnb, t.x_all, t.im2col, t.pack, t.gpack, self.p.resident)

    def geometry(self, b: int, oh0: int, ow0: int) -> TileGeometry:
        """The tile at (b, oh0, ow0)."""
        cs, t, es = self.cs, self.t, self.dtype.size
        toh, tow = min(t.toh, cs.OH - oh0), min(t.tow, cs.OW - ow0)
        th, tw = _window(cs, toh, tow)
        ih0, iw0 = oh0 * cs.stride[0] - cs.pad[0], ow0 * cs.stride[1] - cs.pad[1]
        pads = ((max(0, -ih0), max(0, ih0 + (th - 1) * self.skip[0] + 1 - cs.H)),
                (max(0, -iw0), max(0, iw0 + (tw - 1) * self.skip[1] + 1 - cs.W)))
        return TileGeometry(b, oh0, ow0, toh, tow, th, tw, pads,
                            ((b * cs.H + max(ih0, 0)) * cs.W + max(iw0, 0)) * cs.C * es,
                            ((b * cs.OH + oh0) * cs.OW + ow0) * cs.K * self.yt.size)

    def tile_key(self, geo: TileGeometry, state: TileState, modulus: int) -> tuple:
        """What the costs of the tile's instructions depend on: its geometry, its DRAM offsets modulo ``modulus``
        (:func:`isa.cost.dram_window` reads no more), the ring slots it starts in and the accumulator depth."""
        return ("tile", geo.toh, geo.tow, geo.pads, geo.x_src % modulus, geo.y_base % modulus, state.xs % 2,
                state.ws % 2, state.accs % 2, state.first_tile, self.t.acc_bufs)

    def channel_group(self, geo: TileGeometry, g: int, gi: int, nb0: int, state: TileState) -> ChannelGroup:
        """The ``gi``-th run of output-channel blocks (from ``nb0``) of group ``g`` of the tile."""
        cs, p, cols = self.cs, self.p, self.target.cols
        nbn = min(p.tnb, p.nbs - nb0)
        return ChannelGroup(g, gi, nb0, nbn, min(nbn * cols, cs.Kg - nb0 * cols),
                            (state.accs % self.t.acc_bufs) * p.acc_tile,
                            geo.y_base + (g * cs.Kg + nb0 * cols) * self.yt.size, (g * cs.Kg + nb0 * cols) * 4,
                            (g * len(self.nb_groups) + gi) * len(self.c_steps))

    def input_step(self, grp: ChannelGroup, si: int, state: TileState) -> InputStep:
        """The ``si``-th input-channel step of ``grp`` (the ring positions from ``state``)."""
        p, last = self.p, si == len(self.c_steps) - 1
        cb_first, ncb, c0, tc, xc, xc0 = self.step_channels[si]
        x_new = not p.x_all or (grp.gi == 0 and si == 0)
        return InputStep(si, cb_first, ncb, c0, tc, x_new, not p.x_all or (last and grp.gi == len(self.nb_groups) - 1),
                         state.xs % 2 if x_new else (state.xs - 1) % 2, xc, xc0, grp.cid + si,
                         state.first_tile or not p.resident, si == 0, last)

    def x_base(self, st: InputStep) -> int:
        """SPM offset of the step's input window."""
        return 0 if self.t.im2col else st.slot % self.p.x_slots * self.p.x_slot

    def w_base(self, st: InputStep, state: TileState) -> int:
        """SPM offset of the step's weight chunk."""
        return self.w_base0 + (st.cid if self.p.resident else state.ws % 2) * self.p.w_chunk

    def prologue(self) -> list:
        """The loads of the bias and the scale that start the program."""
        cs, at, out = self.cs, ACC_TYPE[self.dtype], []
        if self.epilogue.bias:
            out.append(DmaCopy(queue=Queue.DMA_LD, shape=(cs.K,), dst=View(Space.SPM, self.bias_base, at, (4,)),
                               src=View(Space.DRAM, 0, at, (4,), "Bias"),
                               signals=(sem_op("bias_init" if self.bias_init else "bias_ready"),)))
        if self.epilogue.out is not None:
            out.append(DmaCopy(queue=Queue.DMA_LD, shape=(cs.K,), dst=View(Space.SPM, self.scale_base, DType.F32,
                                                                             (4,)),
                               src=View(Space.DRAM, 0, DType.F32, (4,), "Scale"), signals=(sem_op("bias_ready"),)))
        return out

    def program(self, instrs: list) -> Program:
        """The Program of the instructions ``instrs``: its regions and semaphores."""
        cs, t, p, ep, es = self.cs, self.t, self.p, self.epilogue, self.dtype.size
        sems = (SemDecl("x_full", 0), SemDecl("x_empty", 2), SemDecl("w_full", 0), SemDecl("acc_full", 0))
        sems += (SemDecl("bias_init", 0), SemDecl("init_full", 0)) if self.bias_init \
            else (SemDecl(self.acc_empty, t.acc_bufs),)
        sems += () if p.resident else (SemDecl("w_empty", 2),)
        sems += (SemDecl("out_full", 0),) if self.vector.active else ()
        sems += (SemDecl("bias_ready", 0),) if self.vector.bias or self.vector.out else ()
        sems += (SemDecl("res_full", 0),) if ep.residual else ()
        regions = (Region("X", 0, cs.N * cs.H * cs.W * cs.C * es), Region("Wt", 1, cs.groups * p.nbs * self.chunk),
                   Region("Y", 2, cs.N * cs.OH * cs.OW * cs.K * self.yt.size))
        regions += (Region("Bias", 3, cs.K * 4),) if ep.bias else ()
        regions += (Region("Scale", 3 + ep.bias, cs.K * 4),) if ep.out is not None else ()
        regions += (Region("R", len(regions), cs.N * cs.OH * cs.OW * cs.K * 4),) if ep.residual else ()
        return Program(config=self.target.config, regions=regions, sems=sems, instrs=tuple(instrs))


def _step_channels(cs: ConvShape, t: ConvTiling, p: ConvPlan, rows: int,
                   c_steps: tuple[int, ...]) -> tuple[tuple[int, int, int, int, int, int], ...]:
    """:attr:`ConvLayout.step_channels` (``cs`` grouped)."""
    out = []
    for cb_first in c_steps:
        ncb = min(p.tcb, p.cbs - cb_first)
        c0, tc = cb_first * rows, min(t.pack * p.kc - cb_first * rows, ncb * rows)
        out.append((cb_first, ncb, c0, tc) + ((cs.Cg, 0) if p.x_all else (tc, c0)))
    return tuple(out)


def _check_layout(cs: ConvShape, t: ConvTiling, p: ConvPlan, bias_bytes: int, target: Target,
                  epilogue: Epilogue) -> None:
    """TilingError when tiling ``t`` (plan ``p``) of the grouped ``cs`` does not fit ``target`` or cannot pack or
    gather as it says; CompileError for an epilogue conv2d cannot fuse."""
    if p.spm + bias_bytes > target.spm or t.acc_bufs * p.acc_tile > target.acc or t.acc_bufs not in (1, 2):
        raise TilingError(f"tiling {t} needs {p.spm + bias_bytes} B of SPM and {t.acc_bufs * p.acc_tile} B of ACC "
                          f"(1 or 2 accumulator tiles)")
    check_program_max(cs.N * cs.groups * -(-cs.OH // t.toh) * -(-cs.OW // t.tow) * -(-p.nbs // p.tnb)
                      * -(-p.cbs // p.tcb), t, cs)
    if not pack_allowed(cs, t.pack, t.tow, target.cols, t.im2col):
        raise TilingError(f"tiling {t} cannot pack {t.pack} pixels per array row of {cs}: that needs one group, "
                          f"pack * K <= {target.cols} columns, stride 1 (or a subsampled 1x1, or im2col) and tile "
                          f"widths (tow and OW % tow) that are multiples of pack; use pack=1")
    if t.im2col and not im2col_allowed(cs):
        raise TilingError(f"tiling {t} cannot gather patches of {cs}: im2col needs one group (after gpack), no "
                          f"horizontal dilation and a kernel larger than 1x1")
    if epilogue.residual and epilogue.out is not None:
        raise CompileError("a residual is added in the accumulator type: it cannot be fused with requantization")


class _PriceKeys:
    """What the costs of a run of conv2d's instructions read, for an estimating sink's memo (:class:`ConvEmitter`):
    shapes, flags, SRAM bases modulo the bank width and DRAM offsets modulo what the DRAM cost reads (``dram``)."""

    def __init__(self, layout: ConvLayout, dram: int) -> None:
        arch = layout.target.arch
        self.L, self.dram, self.spm, self.acc = layout, dram, arch.spm.bank_width, arch.acc.bank_width

    def group(self, geo: TileGeometry, grp: ChannelGroup, state: TileState) -> tuple:
        """A channel group's steps, epilogue and store, as one: what all their keys read."""
        L, dram, spm = self.L, self.dram, self.spm
        p, es = L.p, L.dtype.size
        return ("group", geo.toh, geo.tow, geo.th, geo.tw, geo.pads, grp.ng, grp.nbn, grp.gi == 0, grp.cid == 0,
                state.first_tile, state.xs % 2, (L.w_base0 + grp.cid * p.w_chunk) % spm if p.resident
                else state.ws % 2, (geo.x_src + grp.g * L.cs.Cg * es) % dram, (grp.g * p.nbs + grp.nb0) * L.chunk
                % dram, grp.acc_base % self.acc, grp.y_off % dram, (L.bias_base + grp.ch) % spm,
                (L.scale_base + grp.ch) % spm, state.accs == 0)

    def step(self, geo: TileGeometry, grp: ChannelGroup, st: InputStep, w_base: int, state: TileState) -> tuple:
        """An input-channel step (a matrix instruction's cost reads no base: only the loads' and the init's)."""
        L, dram, spm, es = self.L, self.dram, self.spm, self.L.dtype.size
        w_src = (grp.g * L.p.nbs + grp.nb0) * L.chunk + st.cb_first * L.tile
        return ("step", geo.toh, geo.tow, geo.th, geo.tw, geo.pads, st.xc, st.tc, grp.ng, grp.nbn, st.ncb, st.x_new,
                st.w_new, st.first, state.first_tile and st.cid == 0, st.slot,
                st.x_new and (L.x_base(st) % spm, (geo.x_src + (grp.g * L.cs.Cg + st.xc0) * es) % dram),
                st.w_new and (w_src % dram, w_base % spm),
                st.first and (grp.acc_base % self.acc, L.epilogue.residual and grp.y_off % dram,
                              L.bias_init and (L.bias_base + grp.ch) % spm))

    def x_loads(self, geo: TileGeometry, grp: ChannelGroup, st: InputStep) -> tuple:
        """A step's input window (and, with im2col, patch) loads; keys shared by the search's tilings."""
        L, es = self.L, self.L.dtype.size
        p = L.p
        return ("x", geo.th, geo.tw, st.xc, geo.pads, L.x_base(st) % self.spm,
                (geo.x_src + (grp.g * L.cs.Cg + st.xc0) * es) % self.dram,
                L.t.im2col and (geo.toh, geo.tow, p.kc, (p.x_slot + st.slot * p.p_slot) % self.spm))

    def w_load(self, grp: ChannelGroup, st: InputStep, w_base: int) -> tuple:
        """A step's weight chunk load (shared by the search's tilings)."""
        L = self.L
        p, w_src = L.p, (grp.g * L.p.nbs + grp.nb0) * L.chunk + st.cb_first * L.tile
        return ("w", grp.nbn, p.taps, st.ncb, p.tcb, p.cbs, w_base % self.spm, w_src % self.dram)

    def acc_start(self, geo: TileGeometry, grp: ChannelGroup) -> tuple:
        """An accumulator tile's start: its bias init or residual load (shared by the search's tilings)."""
        L = self.L
        src = (L.bias_base + grp.ch) % self.spm if L.bias_init else grp.y_off % self.dram
        return ("acc", L.bias_init, geo.toh, geo.tow, grp.ng, L.t.tow, L.row_bytes, grp.acc_base % self.acc, src)

    def drain(self, geo: TileGeometry, grp: ChannelGroup, state: TileState) -> tuple:
        """A channel group's epilogue and store."""
        L = self.L
        return ("drain", geo.toh, geo.tow, grp.ng, grp.acc_base % self.acc, (L.bias_base + grp.ch) % self.spm,
                (L.scale_base + grp.ch) % self.spm, grp.y_off % self.dram, state.accs == 0)


class ConvEmitter:
    """:func:`conv2d`'s instructions for one :class:`ConvLayout`, emitted into a sink
    (:mod:`compiler.kernels.common.sink`): a program sink gets the program, an estimating sink its price.

    Per output tile (toh x tow pixels, tnb channel blocks): the input window is loaded once when it holds all its
    channels (``x_all``, else with each step's weights), the weights once per convolution when they all fit the SPM
    (else per step, ring of 2); the accumulators start from the residual's tile (region R, by dma.ld), the bias (from
    SPM, by dma.st after the store that freed the tile) or zero; one ``mxu.mm`` per run of equal blocks loops
    ``[nb, kh, kw, cb, oh]`` so that each weight tile stays in the array while all ``toh x tow`` pixels stream, and
    one ``dma.st`` writes the tile's pixels with all their tnb * cols channels.

    What makes it fast: a program sink gets a tile of a kind seen before (:meth:`ConvLayout.tile_key`) as a copy of
    that tile's instructions with its own DRAM offsets (:class:`_TileCopy`), steps alike share their matrix
    instructions and weight loads share a template; an estimating sink prices each tile kind, channel group, step
    and epilogue once per key (:class:`_PriceKeys`), and a loop nest of matrix instructions as its first times its
    size."""

    def __init__(self, layout: ConvLayout) -> None:
        self.L = layout
        self._nests: dict[tuple, MatMulNests] = {}   # a step's matrix instructions, by what they read
        self._w_loads: dict[tuple, DmaCopy] = {}   # weight loads by shape and SPM slot (any DRAM offset)
        self._keys: _PriceKeys | None = None

    def emit(self, sink: Sink) -> None:
        """The whole program, in order, into ``sink`` (none of it after an estimating sink stops)."""
        sink.extend(self.L.prologue())
        if sink.pricing:
            self._keys = _PriceKeys(self.L, sink.dram_modulus)
            self._priced_tiles(sink)
        else:
            self._copied_tiles(sink)
        if not sink.stopped:
            sink.extend([Halt()])

    def _priced_tiles(self, sink: Sink) -> None:
        """Every tile, each kind priced once; the first tile's matrix work times the tiles like it (a tile's matrix
        instructions depend only on its height and width) bounds the price from below."""
        L, state = self.L, TileState()
        cs, t = L.cs, L.t
        for i, (b, oh0, ow0) in enumerate(L.tiles):
            geo = L.geometry(b, oh0, ow0)
            key = L.tile_key(geo, state, sink.dram_modulus)
            advance = sink.recall(key)
            if advance is not None:
                state.advance(advance)
                state.first_tile = False
            else:
                start = (state.xs, state.ws, state.accs)
                sink.begin()
                self.tile(sink, geo, state)
                parts = sink.end(key, (state.xs - start[0], state.ws - start[1], state.accs - start[2]))
                if i == 0:
                    sink.at_least(cs.N * _count_equal(cs.OH, t.toh) * _count_equal(cs.OW, t.tow)
                                  * parts.busy_of(Role.MATRIX))
            if sink.check():
                return

    def _copied_tiles(self, sink: ProgramSink) -> None:
        """Every tile; a tile of a kind seen before is that tile's copy (:class:`_TileCopy`)."""
        L, state = self.L, TileState()
        kinds: dict[tuple, _TileCopy] = {}
        for b, oh0, ow0 in L.tiles:
            geo = L.geometry(b, oh0, ow0)
            key = L.tile_key(geo, state, 1)
            kind = kinds.get(key)
            if kind is not None:
                kind.replay(sink.instrs, (geo.x_src, geo.y_base), state)
                continue
            kind = _TileCopy.record(self, sink, geo, state)
            if kind is not None:
                kinds[key] = kind

    def tile(self, sink: Sink, geo: TileGeometry, state: TileState) -> None:
        """The instructions of one tile, advancing ``state``."""
        for g in range(self.L.cs.groups):
            for gi, nb0 in enumerate(self.L.nb_groups):
                self._group(sink, geo, self.L.channel_group(geo, g, gi, nb0, state), state)
        state.first_tile = False

    def _group(self, sink: Sink, geo: TileGeometry, grp: ChannelGroup, state: TileState) -> None:
        """A channel group: its input-channel steps, then its epilogue and store."""
        key = self._keys.group(geo, grp, state) if self._keys is not None else None
        if key is not None:
            advance = sink.recall(key)
            if advance is not None:
                state.advance(advance)
                return
            sink.begin()
        start = (state.xs, state.ws)
        for si in range(len(self.L.c_steps)):
            self._step(sink, geo, grp, self.L.input_step(grp, si, state), state)
        self._drain(sink, geo, grp, state)
        state.accs += 1
        if key is not None:
            sink.end(key, (state.xs - start[0], state.ws - start[1], 1))

    def _step(self, sink: Sink, geo: TileGeometry, grp: ChannelGroup, st: InputStep, state: TileState) -> None:
        """One input-channel step: its input window and weight loads (the first chunk ahead of the first window:
        prefetch), the accumulators' start and the matrix work."""
        L, keys = self.L, self._keys
        w_base = L.w_base(st, state)
        key = keys.step(geo, grp, st, w_base, state) if keys is not None else None
        if key is not None:
            if sink.recall(key) is not None:
                state.xs, state.ws = state.xs + st.x_new, state.ws + st.w_new
                return
            sink.begin()
        w_front = st.w_new and state.first_tile and st.cid == 0
        if w_front:
            sink.group(keys and keys.w_load(grp, st, w_base), self._w_load, grp, st, w_base)
        if st.x_new:
            sink.group(keys and keys.x_loads(geo, grp, st), self._x_loads, geo, grp, st)
            state.xs += 1
        if st.w_new and not w_front:
            sink.group(keys and keys.w_load(grp, st, w_base), self._w_load, grp, st, w_base)
        state.ws += st.w_new
        if st.first and (L.bias_init or L.epilogue.residual):   # (after the store that freed the tile: two back)
            at = None if state.last_store_at is None or L.t.acc_bufs == 1 or not L.bias_init else state.last_store_at
            sink.place(at, keys and keys.acc_start(geo, grp), self._acc_start, geo, grp, state)
        waits = ("x_full",) * st.x_new + ("w_full",) * st.w_new + (
            "res_full" if L.epilogue.residual else "init_full" if L.bias_init else L.acc_empty,) * st.first
        signals = ("x_empty",) * st.x_last + ("w_empty",) * (not L.p.resident) + ("acc_full",) * st.last
        sink.nests(self._matmuls(geo, grp, st, w_base), waits, signals)
        if key is not None:
            sink.end(key)

    def _x_loads(self, geo: TileGeometry, grp: ChannelGroup, st: InputStep) -> list:
        """The step's input window (halo padding inserted by the DMA) and, with im2col, its gathered patches."""
        L = self.L
        cs, es, dtype, t, p = L.cs, L.dtype.size, L.dtype, L.t, L.p
        pix = st.xc * es
        row = geo.tw * pix
        sync = {} if t.im2col else dict(waits=(sem_op("x_empty"),), signals=(sem_op("x_full"),))
        out = padded_load((geo.th, geo.tw, st.xc), View(Space.SPM, L.x_base(st), dtype, (row, pix, es)),
                          View(Space.DRAM, geo.x_src + (grp.g * cs.Cg + st.xc0) * es, dtype,
                               (L.skip[0] * cs.W * cs.C * es, L.skip[1] * cs.C * es, es), "X"),
                          geo.pads, L.pad_value, **sync)
        if t.im2col:   # gather the (kh, kw, c) patch of every pixel behind each other
            win_h, win_w = cs.stride[0] // L.skip[0], cs.stride[1] // L.skip[1]
            out.append(DmaCopy(queue=Queue.DMA_LD, shape=(geo.toh, geo.tow, cs.R, cs.S * cs.C),
                               dst=View(Space.SPM, p.x_slot + st.slot * p.p_slot, dtype,
                                        (geo.tow * p.kc * es, p.kc * es, cs.S * cs.C * es, es)),
                               src=View(Space.SPM, 0, dtype, (win_h * row, win_w * pix, cs.dilation[0] * row, es)),
                               waits=(sem_op("x_empty"),), signals=(sem_op("x_full"),)))
        return out

    def _w_load(self, grp: ChannelGroup, st: InputStep, w_base: int) -> list[DmaCopy]:
        """The step's weight chunk load (a template per shape and SPM slot, moved to the chunk's DRAM offset)."""
        L = self.L
        dtype, p, es = L.dtype, L.p, L.dtype.size
        tile, inner = tile_extents(L.target.rows, L.target.cols, es)
        strides = (L.chunk, p.cbs * L.tile, L.tile, *inner)
        template = self._w_loads.get((grp.nbn, st.ncb, w_base))
        if template is None:
            template = self._w_loads[grp.nbn, st.ncb, w_base] = DmaCopy(
                queue=Queue.DMA_LD, shape=(grp.nbn, p.taps, st.ncb, *tile),
                dst=View(Space.SPM, w_base, dtype, (L.nb_stride, p.tcb * L.tile, L.tile, *inner)),
                src=View(Space.DRAM, 0, dtype, strides, "Wt"),
                waits=() if p.resident else (sem_op("w_empty"),), signals=(sem_op("w_full"),))
        return [template.resynced(template.waits, template.signals, src=View(
            Space.DRAM, (grp.g * p.nbs + grp.nb0) * L.chunk + st.cb_first * L.tile, dtype, strides, "Wt"))]

    def _acc_start(self, geo: TileGeometry, grp: ChannelGroup, state: TileState) -> list[DmaCopy]:
        """What the accumulator tile starts from: the bias (copied from SPM by the store queue) or the residual's
        tile (loaded from region R); without either the first product zeroes it."""
        L = self.L
        at, row_bytes = ACC_TYPE[L.dtype], L.row_bytes
        dst = View(Space.ACC, grp.acc_base, at, (L.t.tow * row_bytes, row_bytes, 4))
        if L.bias_init:
            return [DmaCopy(queue=Queue.DMA_ST, shape=(geo.toh, geo.tow, grp.ng), dst=dst,
                            src=View(Space.SPM, L.bias_base + grp.ch, at, (0, 0, 4)),
                            waits=(sem_op("bias_init"),) * (state.accs == 0), signals=(sem_op("init_full"),))]
        cs = L.cs
        return [DmaCopy(queue=Queue.DMA_LD, shape=(geo.toh, geo.tow, grp.ng), dst=dst,
                        src=View(Space.DRAM, grp.y_off, at, (cs.OW * cs.K * 4, cs.K * 4, 4), "R"),
                        waits=(sem_op(L.acc_empty),), signals=(sem_op("res_full"),))]

    def _matmuls(self, geo: TileGeometry, grp: ChannelGroup, st: InputStep, w_base: int) -> MatMulNests:
        """The step's matrix work, one loop nest ``[nb, kh, kw, cb, oh]`` per run of equal blocks; packed: each
        streamed row is ``pack`` consecutive pixels, their channels side by side (steps alike in what these read, in
        this tile or another, share them)."""
        L = self.L
        es, t, p, rows, cols = L.dtype.size, L.t, L.p, L.target.rows, L.target.cols
        if t.im2col:   # the matrix unit reads the patches: a 1x1 convolution over kc channels
            x_base, pix = p.x_slot + st.slot * p.p_slot, p.kc * es
            row = geo.tow * pix
        else:
            x_base, pix = L.x_base(st), st.xc * es
            row = geo.tw * pix
        zero = st.first and not (L.epilogue.residual or L.bias_init)   # (else the init takes the tile)
        key = (geo.toh, geo.tow, grp.ng, st.tc, zero, grp.acc_base, x_base + (st.c0 - st.xc0) * es, w_base, pix, row)
        nests = self._nests.get(key)
        if nests is None:
            (dh, dw), (kr, ks), pk, tile, nb_stride = L.cs.dilation, L.taps, t.pack, L.tile, L.nb_stride
            at, dtype = ACC_TYPE[L.dtype], L.dtype
            nests = self._nests[key] = MatMulNests(
                MatMulNest.of(((nbc, cols * 4, 0, nb_stride), (kr, 0, dh * row, ks * p.tcb * tile),
                            (ks, 0, dw * pix, p.tcb * tile), (cbc, 0, rows * es, tile),
                            (geo.toh, t.tow * L.row_bytes, L.step[0] * row, 0)),
                           grp.acc_base + nbi * cols * 4, x_base + (st.c0 - st.xc0 + cb0 * rows) * es,
                           w_base + nbi * nb_stride + cb0 * tile, at, dtype,
                           geo.tow // pk, k, n, zero and cb0 == 0, pk * L.row_bytes, pk * L.step[1] * pix)
                for nbi, nbc, n in equal_blocks(pk * grp.ng, cols) for cb0, cbc, k in equal_blocks(st.tc, rows))
        return nests

    def _drain(self, sink: Sink, geo: TileGeometry, grp: ChannelGroup, state: TileState) -> None:
        """The channel group's epilogue (the vector unit's) and its store (all its pixels and channels)."""
        L = self.L
        key = self._keys.drain(geo, grp, state) if self._keys is not None else None
        if key is not None:
            if sink.recall(key) is not None:
                return
            sink.begin()
        cs, at, yt, eo = L.cs, ACC_TYPE[L.dtype], L.yt, L.yt.size
        tile_view = out_view = View(Space.ACC, grp.acc_base, at, (L.t.tow * L.row_bytes, L.row_bytes, 4))
        if L.vector.active:
            ops = epilogue_ops(L.vector, (geo.toh, geo.tow, grp.ng), tile_view,
                               View(Space.SPM, L.bias_base + grp.ch, at, (0, 0, 4)),
                               View(Space.SPM, L.scale_base + grp.ch, DType.F32, (0, 0, 4)))
            sink.extend(synced_epilogue(L.vector, ops, first=state.accs == 0) if sink.semaphores else ops)
            if L.epilogue.out is not None:   # the requantized tile, packed at the tile's base
                out_view = View(Space.ACC, grp.acc_base, yt, (geo.tow * grp.ng * eo, grp.ng * eo, eo))
        state.last_store_at = sink.mark()
        sink.extend([DmaCopy(queue=Queue.DMA_ST, shape=(geo.toh, geo.tow, grp.ng),
                             dst=View(Space.DRAM, grp.y_off, yt, (cs.OW * cs.K * eo, cs.K * eo, eo), "Y"),
                             src=out_view, waits=(sem_op(L.ready),),
                             signals=() if L.bias_init else (sem_op(L.acc_empty),))])
        if key is not None:
            sink.end(key)


class _TileCopy(NamedTuple):
    """One tile's instructions as :class:`ConvEmitter` copies them to later tiles of the same kind (the same
    :meth:`ConvLayout.tile_key` but its DRAM offsets): those the tile inserted before the previous tile's last
    instruction (its first bias init, before the store that frees the accumulator tile), those it appended, which of
    them move with the tile (``moves``: (role, view, whether it is the input window's) of each instruction's DRAM
    view in X, Y or R, else None), the tile's DRAM bases (input window, output), the ring positions it advanced and
    where its last store is (from the previous tile's last instruction, or None)."""

    before: list
    after: list
    moves: list
    bases: tuple[int, int]
    advance: tuple[int, int, int]
    last_store: int | None

    @classmethod
    def record(cls, emitter: ConvEmitter, sink: ProgramSink, geo: TileGeometry, state: TileState) -> _TileCopy | None:
        """Emit the tile ``geo`` and keep it as a copy (None for the first tile, whose instructions differ from
        every later one's)."""
        prog = sink.instrs
        first, at = state.first_tile, len(prog) - 1
        last, start = prog[at] if prog else None, (state.xs, state.ws, state.accs)
        emitter.tile(sink, geo, state)
        if first:
            return None
        k = 0 if prog[at] is last else 1   # (one bias init, or none, goes before the previous tile's last instruction)
        new = prog[at:]
        moves = [next(((role, v, v.region == "X") for role, v, _ in i.views() if v.space is Space.DRAM and v.region
                       in ("X", "Y", "R")), None) if type(i) is DmaCopy else None for i in new]
        return cls(new[:k], new[k + 1:], moves[:k] + moves[k + 1:], (geo.x_src, geo.y_base),
                   (state.xs - start[0], state.ws - start[1], state.accs - start[2]),
                   None if state.last_store_at is None else state.last_store_at - at)

    def replay(self, prog: list, bases: tuple[int, int], state: TileState) -> None:
        """Append (and insert) this kind's instructions for the tile at DRAM ``bases``, advancing ``state``: the
        instructions the tile's own emission gives (its operands differ only in their X, Y and R bases)."""
        dx, dy = bases[0] - self.bases[0], bases[1] - self.bases[1]
        moved = [i if m is None else i.resynced(i.waits, i.signals, **{m[0]: View(
            Space.DRAM, m[1].base + (dx if m[2] else dy), m[1].dtype, m[1].strides, m[1].region)})
            for i, m in zip(self.before + self.after, self.moves)]
        at, n = len(prog) - 1, len(self.before)
        prog[at:at] = moved[:n]
        prog += moved[n:]
        state.advance(self.advance)
        state.last_store_at = None if self.last_store is None else at + self.last_store


def conv2d(cs: ConvShape, dtype: DType, target: Target, tiling: ConvTiling | None = None,
           epilogue: Epilogue = NO_EPILOGUE, pad_value: int | float = 0) -> Program:
    """The program for one convolution (:class:`ConvEmitter` into a program sink); regions X (NHWC input), Wt
    (:func:`pack_weights`), Y (NHWC output), and Bias, Scale and R when the epilogue uses them. The halo padding
    reads ``pad_value`` (a quantized input's zero point); ``tiling`` defaults to :func:`choose_conv_tiling`'s."""
    layout = ConvLayout.of(cs, dtype, target, tiling, epilogue, pad_value)
    sink = ProgramSink()
    ConvEmitter(layout).emit(sink)
    return layout.program(sink.instrs)


def conv_estimate(cs: ConvShape, dtype: DType, target: Target, tiling: ConvTiling,
                  epilogue: Epilogue | None = None, hidden_constants: bool = False, memo: PriceMemo | None = None,
                  bound: int | None = None, floor: bool = False) -> int:
    """:func:`compiler.kernels.common.search.program_price` of ``conv2d(cs, dtype, target, tiling, epilogue)``
    without building that program (cycles): :class:`ConvEmitter` run into an estimating sink, which prices one tile
    of each kind (geometry, DRAM offsets modulo what the DRAM cost reads, starting ring slots), one channel group,
    input-channel step and epilogue of each key, and a loop nest of matrix instructions as its first times its size
    (:func:`compiler.kernels.common.search.tiling_price`: less the leading constant loads if ``hidden_constants``;
    with one accumulator tile, at least the work of every unit but the loads).

    ``memo``: the search's :class:`~compiler.kernels.common.sink.PriceMemo` (the estimates of a tiling with either
    accumulator depth share their runs); ``bound`` (a search's best price so far): the exact price when it is below
    ``bound``, else some value at least ``bound`` (``bound`` itself when the emission stops as soon as the price is
    known to reach it: its busiest unit or bus plus its head, or the first tile's matrix work times the tiles like
    it). ``floor``: a lower bound of the price instead, cheaper: the same sums of :func:`isa.cost.instr_floor`
    terms (DRAM windows at their bytes over the bandwidth, whatever their offsets, so tiles differing only in those
    are one kind)."""
    layout = ConvLayout.of(cs, dtype, target, tiling, epilogue or Epilogue(), 0)
    sink = EstimateSink(target.arch, memo, layout.scope, floor, loads_constants if hidden_constants else None, bound)
    ConvEmitter(layout).emit(sink)
    return bound if sink.stopped else tiling_price(sink.estimate, tiling.acc_bufs == 1)


def _count_equal(size: int, tile: int) -> int:
    """How many of the tiles of ``size`` cut into ``tile``-long pieces are as long as the first."""
    return size // tile if tile <= size else 1


def conv_inputs(cs: ConvShape, dtype: DType, rows: int, cols: int, seed: int = 0,
                im2col: bool = False, pack: int = 1, gpack: int = 1) -> tuple[dict, np.ndarray, np.ndarray]:
    """Seeded random NCHW input and OIHW weights in ``dtype``'s storage; the DRAM inputs (X as NHWC, packed Wt)."""
    from compiler.kernels.gemm import gemm_inputs

    rng = np.random.default_rng(seed)
    x = gemm_inputs(cs.N * cs.C * cs.H, 1, cs.W, dtype, int(rng.integers(2**31)))["A"].reshape(cs.N, cs.C, cs.H, cs.W)
    w = gemm_inputs(cs.K * cs.Cg * cs.R, 1, cs.S, dtype, int(rng.integers(2**31)))["A"].reshape(cs.K, cs.Cg, cs.R,
                                                                                                   cs.S)
    wt = pack_weights(w, cs, rows, cols, im2col, pack, gpack)
    return {"X": np.ascontiguousarray(x.transpose(0, 2, 3, 1)), "Wt": wt}, x, w


def conv_reference(x: np.ndarray, w: np.ndarray, cs: ConvShape) -> np.ndarray:
    """numpy convolution, NCHW in and out: exact int64 for integers, float64 for floats."""
    wide = np.int64 if np.issubdtype(x.dtype, np.integer) else np.float64
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = cs.stride, cs.dilation, cs.pad
    xp = np.pad(x.astype(wide), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    y = np.zeros((cs.N, cs.K, cs.OH, cs.OW), wide)
    for g in range(cs.groups):
        xs = xp[:, g * cs.Cg:(g + 1) * cs.Cg]
        ws = w[g * cs.Kg:(g + 1) * cs.Kg].astype(wide)
        for kh in range(cs.R):
            for kw in range(cs.S):
                h0, w0 = kh * dh, kw * dw
                patch = xs[:, :, h0: h0 + sh * (cs.OH - 1) + 1: sh, w0: w0 + sw * (cs.OW - 1) + 1: sw]
                y[:, g * cs.Kg:(g + 1) * cs.Kg] += np.einsum("nchw,kc->nkhw", patch, ws[:, :, kh, kw])
    return y
