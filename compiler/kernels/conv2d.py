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

import heapq
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cached_property, lru_cache
from typing import NamedTuple

import numpy as np

from compiler.errors import CompileError, TilingError, UnsupportedOpError
from compiler.frontend.canonical import window_out
from compiler.ir import Node
from compiler.kernels.common.blocks import equal_blocks
from compiler.kernels.common.epilogue import NO_EPILOGUE, Epilogue, epilogue_ops, synced_epilogue
from compiler.kernels.common.halo import padded_load
from compiler.kernels.common.pipeline import synced
from compiler.kernels.common.target import Target
from compiler.kernels.gemm import ACC_TYPE
from compiler.link.linker import is_constant_load, leading_constants
from isa import (
    DmaCopy,
    DType,
    Halt,
    MatMul,
    Program,
    Queue,
    Region,
    SemDecl,
    SemOp,
    Space,
    View,
)
from isa.arch import Arch
from isa.cost import copy_cost_key, instr_cost, instr_costs, matmul_cost_key, program_estimate
from isa.instructions import MAX_PAD, Pad


def _ints(value: int | tuple[int, ...], n: int, what: str) -> tuple[int, ...]:
    """``value`` as a tuple of ``n`` ints (one int repeated)."""
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
            object.__setattr__(self, name, _ints(getattr(self, name), n, name))
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


class _Plan(NamedTuple):
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


def _plan(cs: ConvShape, t: ConvTiling, es: int, rows: int, cols: int, spm: int) -> _Plan:
    return _plans(cs, t, es, rows, cols, spm).plan(t.tcb)


class _PlanOf(NamedTuple):
    """:func:`_plans`: the plan of a tiling with any tcb, and the most tcb whose SPM bytes fit."""

    plan: Callable[[int], _Plan]
    most: Callable[[], int]   # the most tcb whose SPM bytes fit ``spm`` (all or none with im2col), or 0


def _plans(cs: ConvShape, t: ConvTiling, es: int, rows: int, cols: int, spm: int) -> _PlanOf:
    """``tcb -> _plan(cs, replace(t, tcb=tcb), ...)``, what does not depend on tcb worked out once (the search tries
    every tcb of many tilings)."""
    cs = grouped(cs, t.gpack)
    toh, tow, tnb, x_all, im2col, pack = t.toh, t.tow, t.tnb, t.x_all, t.im2col, t.pack
    th, tw = _window(cs, toh, tow)
    kc, taps = (cs.R * cs.S * cs.Cg, 1) if im2col else (cs.Cg, cs.R * cs.S)  # reduced channels per tap
    cbs, nbs = -(-pack * kc // rows), -(-pack * cs.Kg // cols)
    tnb = min(tnb, nbs)
    windows = cs.N * cs.groups * -(-cs.OH // toh) * -(-cs.OW // tow)
    p_slot = toh * tow * kc * es if im2col else 0
    pixel = cs.Kg if pack > 1 else tnb * cols    # accumulator elements per output pixel
    acc_tile = toh * tow * pixel * 4
    packed = x_all or im2col or pack > 1
    window, row_block, block = th * tw * cs.Cg * es, th * tw * rows * es, tnb * taps * rows * cols * es  # bytes
    groups = cs.groups * -(-nbs // tnb)   # chunks per input-channel step
    single = 1 if im2col or windows == 1 else 2   # input slots when the window holds every channel

    def plan(tcb: int) -> _Plan:
        tcb = min(tcb, cbs)
        x_all = packed or tcb >= cbs
        x_slot = window if x_all else tcb * row_block
        x_slots = single if x_all else 1 if im2col else 2
        w_chunk = tcb * block
        chunks = groups * -(-cbs // tcb)
        resident = x_slots * x_slot + 2 * p_slot + chunks * w_chunk <= spm    # (x_bytes + every chunk)
        return _Plan(th, tw, kc, taps, tcb, tnb, cbs, nbs, x_slot, w_chunk, chunks, resident, acc_tile, x_all, x_slots,
                     p_slot)

    def most() -> int:   # below cbs a step's chunks (two or more) cannot all be resident, so a tcb fits iff its
        if plan(cbs).spm <= spm:           # input slots and two weight chunks do: linear in tcb
            return cbs
        if im2col:
            return 0
        room = spm - (single * window if packed else 0)
        return max(0, min(cbs - 1, room // (2 * block + (0 if packed else 2 * row_block))))

    return _PlanOf(plan, most)


def _fits(cs: ConvShape, t: ConvTiling, es: int, rows: int, cols: int, spm: int, acc: int) -> bool:
    """Whether the input slots and the weight buffers (two chunks, or all of them) fit ``spm`` bytes and the
    accumulator tiles ``acc`` bytes (and an im2col tiling reduces every patch channel in one step)."""
    p = _plan(cs, t, es, rows, cols, spm)
    return p.spm <= spm and t.acc_bufs * p.acc_tile <= acc and (not t.im2col or p.tcb >= p.cbs)


def choose_conv_tiling(cs: ConvShape, dtype: DType, target: Target) -> ConvTiling:
    """The tallest output tile (full width up to max_rows, one output-channel block) that fits, with as many
    input-channel blocks per step as fit (all of them when possible: no split reduction). Binary searches (see
    :func:`_largest`): O(log OH * log C) fit checks, the result of trying every height and block count."""
    rows, cols, spm, acc = target.rows, target.cols, target.spm, target.acc
    tow, cbs = min(cs.OW, target.max_rows), -(-cs.Cg // rows)

    def fits(tcb: int, toh: int) -> bool:
        return _fits(cs, ConvTiling(toh, tow, tcb), dtype.size, rows, cols, spm, acc)

    tcb = _largest(cbs, lambda b: fits(b, cs.OH) or fits(b, 1))   # some height fits iff the full or the lowest does
    if tcb:
        return ConvTiling(_largest(cs.OH, lambda h: fits(tcb, h)), tow, tcb)
    raise TilingError(f"no tiling of {cs} fits {spm} B of SPM and {acc} B of ACC (one output row of one channel "
                      f"block needs more)")


def _largest(top: int, fits: Callable[[int], bool]) -> int:
    """The largest v in [1, top] with ``fits(v)``, or 0: ``top`` itself, else by binary search below it.

    Exact for :func:`_fits` over tile heights and over input-channel blocks per step: below the top both only grow
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


def _fit_tcb(cs: ConvShape, t: ConvTiling, es: int, rows: int, cols: int, spm: int, acc: int) -> int:
    """The most input-channel blocks per step with which tiling ``t`` (its ``tcb`` aside) fits, or 0: the largest tcb
    for which :func:`_fits` holds (the SPM bytes alone in closed form, :attr:`_PlanOf.most`; the accumulators once)."""
    plans = _plans(cs, t, es, rows, cols, spm)
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


@lru_cache(maxsize=512)
def search_conv_tiling(cs: ConvShape, dtype: DType, target: Target, epilogue: Epilogue | None = None,
                       hidden_constants: bool = False, group_packing: bool = True) -> ConvTiling:
    """The tiling with the fewest predicted cycles on ``target``, from the simulator's own formulas.

    Candidates: output heights that split OH evenly into 1 to 8 tiles, 1, 2 and 4 rows, and the tallest tile that
    fits; the widest tile and its halves and quarters; 1, 2, 4, ... or all output-channel blocks per accumulator tile;
    direct or im2col; 1, 2 or 4 pixels per array row where :func:`pack_allowed`; the window with only each step's
    channels or all of them; one or two accumulator tiles; each with the most input-channel blocks per step that
    fit; all of it for each number of groups per array tile (:func:`group_packs`). All are ranked by
    :func:`_rough_cycles`; the best ``SEARCH_PRICED`` of each accumulator depth are built and priced with
    :func:`isa.cost.program_estimate` (a single accumulator tile serializes matrix work, epilogue and store). Ties go
    to the earlier (larger) candidate.

    hidden_constants: the program's leading loads of constants (weights, bias, scale) overlap the previous layer
    (cross-layer prefetch, :func:`compiler.link.linker.link`), so the pricing does not count them. group_packing=False:
    one group per array tile only (``gpack=1``; for comparisons).

    The winner is the candidate of least (price, rank) of :func:`conv_candidates`; it is found without pricing most
    of them: each is bounded below first (by :func:`_plan_floor`, then by its floor, ``conv_estimate(floor=True)``),
    and only a candidate whose bound can still beat the best so far is priced.
    """
    epilogue = epilogue or Epilogue()
    priced = conv_candidates(cs, dtype, target, epilogue, group_packing)
    return priced[0] if len(priced) == 1 else _search(priced, cs, dtype, target, epilogue, hidden_constants)


def conv_candidates(cs: ConvShape, dtype: DType, target: Target, epilogue: Epilogue | None = None,
                    group_packing: bool = True) -> list[ConvTiling]:
    """The tilings :func:`search_conv_tiling` prices, in rank order (see there); only the best-ranked one when the
    convolution is too large to price (``PRICE_MAX``). TilingError when none fits."""
    epilogue = epilogue or Epilogue()
    r, c, es = target.rows, target.cols, dtype.size
    spm = target.spm - _epilogue_bytes(cs, epilogue, es)
    fitting, refused = [], None
    for gpack in group_packs(cs, r, c) if group_packing else (1,):
        gs = grouped(cs, gpack)
        try:
            tallest = choose_conv_tiling(gs, dtype, target.with_spm(spm))
        except TilingError as e:   # no full-width direct tile fits: narrower or im2col ones still may (a C=3 stem)
            refused = refused or e
            tallest = ConvTiling(1, min(gs.OW, target.max_rows))
        heights = {tallest.toh} | {-(-gs.OH // n) for n in range(1, 9)} | {h for h in (1, 2, 4) if h < gs.OH}
        widths = {-(-tallest.tow // n) for n in (1, 2, 4)}
        nbs = -(-gs.Kg // c)
        blocks = {nbs} | {1 << i for i in range(nbs.bit_length()) if 1 << i < nbs}
        modes = (False, True) if im2col_allowed(gs) else (False,)
        packs = [1] + [k for k in (2, 4) if gs.groups == 1 and k * gs.K <= c]   # (pack_allowed's first tests)
        _rank(gs, gpack, sorted(itertools.product(heights, widths, blocks, modes, packs), reverse=True), es, target,
              spm, fitting)
    if not fitting:
        raise refused or TilingError(f"no tiling of {cs} fits {spm} B of SPM and {target.acc} B of ACC")
    fitting.sort(key=lambda e: e[0])
    best = ConvTiling(*fitting[0][2])
    if conv_instructions(cs, best, es, r, c, spm) > PRICE_MAX:
        return [best]    # too large to price every candidate: the best rough estimate
    return [ConvTiling(*f) for bufs in (2, 1) for f in [f for _, b, f in fitting if b == bufs][:SEARCH_PRICED]]


def _rank(gs: ConvShape, gpack: int, tilings: list[tuple[int, int, int, bool, int]], es: int, target: Target,
          spm: int, fitting: list) -> None:
    """:func:`conv_candidates`' ranking of the tilings (toh, tow, tnb, im2col, pack) of the grouped shape ``gs``, in
    order: each with x_all False and True (direct, unpacked only) and the most input-channel blocks that fit
    (:attr:`_PlanOf.most`), appended to ``fitting`` as (:func:`_rough_cycles`, acc_bufs, ConvTiling fields) for each
    accumulator depth that fits. The sums of :func:`_plans`, :func:`_PlanOf.most` and :func:`_rough_cycles`,
    written out once for both x_all and both depths (the search ranks thousands of tilings)."""
    arch, r, c, acc = target.arch, target.rows, target.cols, target.acc
    mr, mc = arch.matrix.rows, arch.matrix.cols
    per_dma = arch.dma.setup_latency + arch.dram.latency + arch.dram.row_miss_latency
    bw, setup, line = arch.dram.bandwidth, arch.dma.setup_latency, arch.spm.banks * arch.spm.bank_width
    y_bytes = gs.N * gs.OH * gs.OW * gs.K * 4
    Cg, Kg, G = gs.Cg, gs.Kg, gs.groups
    nbs0 = {pack: -(-pack * Kg // c) for pack in (1, 2, 4)}
    geometry: dict = {}
    for toh, tow, tnb, im2col, pack in tilings:
        if pack > 1 and (tnb > 1 or not pack_allowed(gs, pack, tow, c, im2col)):
            continue
        g = geometry.get((toh, tow))
        if g is None:
            th, tw = _window(gs, toh, tow)
            tiles = gs.N * -(-gs.OH // toh) * -(-gs.OW // tow) * G
            g = geometry[toh, tow] = (th, tw, tiles, gs.N * G * -(-gs.OH // toh) * -(-gs.OW // tow))
        th, tw, tiles, windows = g
        kc, taps = (gs.R * gs.S * Cg, 1) if im2col else (Cg, gs.R * gs.S)
        cbs, nbs = -(-pack * kc // r), nbs0[pack]
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
            x = single * window + 2 * p_slot   # (_PlanOf.most: tcb = cbs first)
            w_chunk = cbs * block
            w_all = groups * w_chunk
            if x + (w_all if x + w_all <= spm else 2 * w_chunk) <= spm:
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
            x_slots = single if whole else 1 if im2col else 2
            w_chunk = tcb * block
            csteps = -(-cbs // tcb)
            chunks = groups * csteps
            resident = x_slots * x_slot + 2 * p_slot + chunks * w_chunk <= spm
            mm = tiles * nbg * csteps * (nb * taps * tcb * max(s, mr) + 2 * mr + mc)
            x_loads = tiles * (1 if whole else nbg * csteps)
            w_loads = chunks if resident else tiles * nbg * csteps
            x_bytes = x_loads * x_slot
            w_bytes = w_loads * w_chunk
            ld = (x_bytes + w_bytes) / bw + (x_loads + w_loads) * per_dma + gather
            st = y_bytes / bw + tiles * nbg * per_dma
            bus = (x_bytes + w_bytes + y_bytes) / bw
            for bufs in (2, 1):
                if bufs * acc_tile <= acc:
                    fitting.append((max(mm + st if bufs == 1 else mm, ld, st, bus), bufs,
                                    (toh, tow, tcb, tnb, x_all, bufs, im2col, pack, gpack)))


def _search(priced: list[ConvTiling], cs: ConvShape, dtype: DType, target: Target, epilogue: Epilogue,
            hidden_constants: bool) -> ConvTiling:
    """:func:`search_conv_tiling`'s pricing of its candidates ``priced``."""
    arch, r, c, es = target.arch, target.rows, target.cols, dtype.size
    spm = target.spm - _epilogue_bytes(cs, epilogue, es)
    # a tiling whose program is an earlier one's (the same plan and the fields conv2d reads besides it: x_all and
    # tnb only reach the program through the plan) cannot win the tie: left out
    programs = {}
    for t in priced:
        programs.setdefault((_plan(cs, t, es, r, c, spm), t.toh, t.tow, t.acc_bufs, t.im2col, t.pack, t.gpack), t)
    # the lowest price wins, the earlier in `priced` on a tie. Each candidate's price is bounded below by its plan
    # (_plan_floor), more tightly by its floor (conv_estimate(floor=True)); the least bound goes first: a plan's bound
    # is replaced by the floor, a floor's candidate is priced, until the least bound cannot beat the best (price,
    # index) so far (a floor or a price stops as soon as it reaches what it has to stay below)
    priced, memos = list(programs.values()), _price_memos(cs, dtype, arch, epilogue)
    resident = {t: key[0].resident for key, t in programs.items()}
    eo = (epilogue.out or ACC_TYPE[dtype]).size

    def estimate(t: ConvTiling, floor: bool, bound: int | None = None) -> int:
        costs, steps = memos[floor]
        return conv_estimate(cs, dtype, target, t, epilogue, hidden_constants, costs, bound, steps.setdefault(
            (t.toh, t.tow, t.tcb, t.tnb, t.x_all, t.im2col, t.pack, t.gpack, resident[t]), {}), floor)
    bounds = [(_plan_floor(grouped(cs, t.gpack), t, key[0], arch, es, eo, epilogue, hidden_constants), i, False)
              for i, (key, t) in enumerate(programs.items())]
    heapq.heapify(bounds)
    best = None   # (price, index)
    while bounds:
        low, i, floored = heapq.heappop(bounds)
        if best is not None and (low, i) > best:
            break   # (and so are all the others)
        bound = None if best is None else best[0] + (i < best[1])   # what the price must stay below to win
        if not floored:
            floor = estimate(priced[i], True, bound)
            if bound is None or floor < bound:
                heapq.heappush(bounds, (max(floor, low), i, True))
            continue
        est = estimate(priced[i], False, bound)
        if best is None or (est, i) < best:
            best = (est, i)
    return priced[best[1]]


@lru_cache(maxsize=64)
def _price_memos(cs: ConvShape, dtype: DType, arch: Arch, epilogue: Epilogue) -> dict[bool, tuple[dict, dict]]:
    """The memos of :func:`_search`'s estimates of one convolution, floor -> (:func:`isa.cost.instr_costs` memo, step
    memos by tiling), shared by its searches for different SPM sizes (a layer searched again for half the SPM under
    prefetch) and either ``hidden_constants``: no cost reads the SPM size, and a tiling's steps depend on it only
    through whether its weights stay resident, which their memo's key holds (the steps' entries say which loads are
    constants; hiding them is the estimate's sum, not theirs)."""
    return {False: ({}, {}), True: ({}, {})}


def _plan_floor(cs: ConvShape, t: ConvTiling, p: _Plan, arch: Arch, es: int, eo: int, epilogue: Epilogue,
                hidden_constants: bool = False) -> float:
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
    that store's tile). ``es``, ``eo``: operand and output element bytes."""
    d, dma, v, residual = arch.dram, arch.dma, arch.vector, epilogue.residual
    act = d.row_miss_latency if d.model == "rowbuffer" else 0
    tiles = cs.N * cs.groups * -(-cs.OH // t.toh) * -(-cs.OW // t.tow)
    nbg, csteps = -(-p.nbs // p.tnb), -(-p.cbs // p.tcb)
    out, stores = cs.N * cs.OH * cs.OW * cs.K, tiles * nbg
    weights = cs.groups * p.nbs * p.taps * p.cbs * arch.matrix.rows * arch.matrix.cols * es   # every block once
    w_bytes, w_loads = (weights, p.chunks) if p.resident else (weights * (tiles // cs.groups), tiles * nbg * csteps)
    r_bytes, r_loads = (out * 4, stores) if residual else (0, 0)
    x_bytes = cs.N * cs.groups * _window_reads(cs, t.toh, t.tow) * cs.Cg * es * (1 if p.x_all else nbg)
    per = dma.setup_latency + d.latency + act
    st = stores * per + out * eo / d.bandwidth
    ld = (w_loads + r_loads) * per + (w_bytes + r_bytes + x_bytes) / d.bandwidth \
        + tiles * (1 if p.x_all else nbg * csteps) * dma.setup_latency
    bus = (out * eo + w_bytes + r_bytes + x_bytes) / d.bandwidth + (stores + w_loads + r_loads) * act
    mm = _mxu_floor(cs, t, p, arch) if arch.matrix.dataflow == "ws" else 0
    # the head and the tail: DMAs of the first and the last tile (each one copy, isa.cost.dma_floor)
    rows, cols = arch.matrix.rows, arch.matrix.cols
    toh, tow = min(t.toh, cs.OH), min(t.tow, cs.OW)
    ng = min(p.tnb * cols, cs.Kg)   # (the first output-channel group)
    x_first = _window_reads(cs, toh, tow, True) * (cs.Cg if p.x_all else min(cs.Cg, p.tcb * rows)) * es
    head = (per + int(x_first / d.bandwidth) if x_first else 0) \
        + (per + int(toh * tow * ng * 4 / d.bandwidth) if residual else 0) \
        + (0 if hidden_constants else per + int(p.tnb * p.taps * min(p.tcb, p.cbs) * rows * cols * es / d.bandwidth)
           + (epilogue.bias + (epilogue.out is not None)) * (per + int(cs.K * 4 / d.bandwidth)))
    last_h, last_w = cs.OH - (cs.OH - 1) // t.toh * t.toh, cs.OW - (cs.OW - 1) // t.tow * t.tow
    last = last_h * last_w * (cs.Kg - (p.nbs - 1) // p.tnb * p.tnb * cols)   # elements of the last store
    tail = per + int(last * eo / d.bandwidth)
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


def _mxu_floor(cs: ConvShape, t: ConvTiling, p: _Plan, arch: Arch) -> int:
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
    every row tile's rows times every column tile's columns (see :func:`_conv_parts`' geometry); ``first``: of the
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


def program_price(prog: Program, arch: Arch, tiling: ConvTiling, hidden_constants: bool = False) -> int:
    """The search's price of ``prog``, a conv2d program with ``tiling`` (cycles): :func:`isa.cost.program_estimate`,
    less the leading constant loads when they are hidden (``hidden_constants``), and with one accumulator tile at
    least the matrix work, epilogue and stores one after the other (they take turns on that tile)."""
    est = program_estimate(prog, arch) - (leading_constants(prog, arch, _CONSTANTS) if hidden_constants else 0)
    if tiling.acc_bufs == 1:
        est = max(est, sum(instr_cost(i, arch).cycles for i in prog.instrs if i.queue is not Queue.DMA_LD))
    return est


def conv_estimate(cs: ConvShape, dtype: DType, target: Target, tiling: ConvTiling,
                  epilogue: Epilogue | None = None, hidden_constants: bool = False, costs: dict | None = None,
                  bound: int | None = None, steps: dict | None = None, floor: bool = False) -> int:
    """:func:`program_price` of ``conv2d(cs, dtype, target, tiling, epilogue)`` without building that program
    (cycles): the same sums of the same :func:`isa.cost.instr_cost` terms, with the instructions of only one tile of
    each kind built and priced. Tiles whose geometry, DRAM offsets (modulo what the DRAM cost reads) and starting
    ring slots agree have equal costs, so each kind's per-queue busy cycles and bus window are counted once and
    multiplied. program_estimate's other terms come from the first tile (the loads before the first matrix
    instruction, the leading constants) and the last (the epilogue and stores after the last one). ``costs``: an
    :func:`isa.cost.instr_costs` memo to share with other estimates on the same target.

    ``bound`` (a search's best price so far): the exact price when it is below ``bound``, else some value at least
    ``bound`` (``bound`` itself when the walk stops as soon as the price is known to reach it). The price is at
    least the busiest queue and the bus (the head and tail add to them; the hidden constants are part of the head),
    and the matrix unit's busy cycles are at least those of the first tile times the tiles of its height and width
    (a tile's matrix instructions depend only on them).

    ``steps``: the memo of built steps (see :func:`_conv_parts`) to share with the estimates of the same tiling with
    the other accumulator ring depth (``acc_bufs``): its steps' costs depend on the ring only through the
    accumulator bases, which their keys hold.

    ``floor``: a lower bound of the price instead, cheaper: the same sums of :func:`isa.cost.instr_floor` terms
    (DRAM windows at their bytes over the bandwidth, whatever their offsets, so tiles differing only in those are one
    kind). The price only grows with each instruction's cycles and bus window (the hidden constants are the head's
    first loads: the head less them is a sum of costs too). ``costs`` and ``steps`` then hold floors: keep them apart
    from the exact estimates' memos."""
    costs = {} if costs is None else costs
    bound = math.inf if bound is None else bound
    arch = target.arch
    parts = _conv_parts(cs, dtype, target, tiling, epilogue or Epilogue(), 0)
    modulus = 1 if floor else arch.dram.page_bytes if arch.dram.model == "rowbuffer" else arch.dma.burst_bytes
    busy: dict[Queue, int] = {}
    bus = 0
    kinds: dict[tuple, tuple] = {}   # tile key -> (busy per queue, bus window, state change, what it reads)
    state, n = _TileState(), len(parts.tiles)
    memo = _StepMemo({} if steps is None else steps, costs, modulus, arch.spm.bank_width, arch.acc.bank_width, floor)
    first = last = None
    for i, (b, oh0, ow0) in enumerate(parts.tiles):
        key = parts.key(b, oh0, ow0, state, modulus)
        kind = None if i == 0 else kinds.get(key)
        if kind is None:
            entries: list = []
            state.last_store_at = None   # (an index into the program, which is not built)
            before = (state.xs, state.ws, state.accs)
            parts.emit(entries, b, oh0, ow0, state, memo)
            tb: dict[Queue, int] = {}
            window = 0
            for q, cycles, w, _ in entries:
                tb[q] = tb.get(q, 0) + cycles
                window += w
            kind = kinds[key] = (tb, window, (state.xs - before[0], state.ws - before[1], state.accs - before[2]),
                                 entries)
            if i == 0:
                first = entries
                alike = cs.N * _count_equal(cs.OH, tiling.toh) * _count_equal(cs.OW, tiling.tow)   # (grouped: ==)
                if alike * tb.get(Queue.MXU, 0) >= bound:
                    return bound
        else:
            dx, dw, da = kind[2]
            state.xs, state.ws, state.accs, state.first_tile = state.xs + dx, state.ws + dw, state.accs + da, False
        if i == n - 1:
            last = kind[3]
        for q, c in kind[0].items():
            busy[q] = busy.get(q, 0) + c
        bus += kind[1]
        if bus >= bound or max(busy.values()) >= bound:
            return bound
    pro = _entries(parts.prologue, arch, costs, floor)
    for q, cycles, w, _ in pro:
        busy[q] = busy.get(q, 0) + cycles
        bus += w
    busy.pop(Queue.CTRL, None)
    # program_estimate's head: the loads before the first compute instruction (in the first tile)
    start = pro + first
    k0 = next(k for k, e in enumerate(start) if e[0] in (Queue.MXU, Queue.VPU))
    head = sum(e[1] for e in start[:k0] if e[0] is Queue.DMA_LD)
    # its tail: the stores and vector work after the last matrix instruction (in the last tile)
    k1 = max(k for k, e in enumerate(last) if e[0] is Queue.MXU)
    tail = sum(e[1] for e in last[k1 + 1:] if e[0] in (Queue.DMA_ST, Queue.VPU))
    est = max(max(busy.values(), default=0), bus) + head + tail
    if hidden_constants:
        for e in start:
            if not e[3]:
                break
            est -= e[1]
    if tiling.acc_bufs == 1:
        est = max(est, sum(c for q, c in busy.items() if q is not Queue.DMA_LD))
    return est


def _count_equal(size: int, tile: int) -> int:
    """How many of the tiles of ``size`` cut into ``tile``-long pieces are as long as the first."""
    return size // tile if tile <= size else 1


def _entries(instrs: list, arch: Arch, costs: dict, floor: bool = False) -> list[tuple[Queue, int, int, bool]]:
    """What :func:`conv_estimate` reads of each instruction: (queue, cycles, DRAM bus window, whether it is a load of
    constants that prefetch may hide), in program order; costs (or floors) by :func:`isa.cost.instr_costs` with memo
    ``costs``."""
    return [(i.queue, c.cycles, c.dram_window, is_constant_load(i, _CONSTANTS))
            for i, c in zip(instrs, instr_costs(instrs, arch, costs, floor))]


def _priced(memo: _StepMemo, key: tuple, build: Callable[[], list], arch: Arch):
    """The cost (or floor) of the instruction whose :func:`isa.cost.instr_costs` memo key is ``key``: from the memo,
    else ``build()`` it (with any others of the same key) and price it there. A key that is not the one instr_costs
    gives the built instruction fails here (KeyError)."""
    c = memo.costs.get(key)
    if c is None:
        instr_costs(build(), arch, memo.costs, memo.floor)
        c = memo.costs[key]
    return c


_CONSTANTS = {"Wt": ("W", 0), "Bias": ("W", 0), "Scale": ("W", 0)}   # conv2d's constants, as a model binds them
SEARCH_PRICED = 10   # candidates per accumulator ring depth, best by :func:`_rough_cycles`, priced exactly
PRICE_MAX = 20_000
"""Instructions (by :func:`conv_instructions`) of the best-ranked candidate above which the search does not build
and price candidates, but takes that one: building 2 * SEARCH_PRICED programs of a layer that large would take
minutes (no layer of the zoo models comes within a factor of five)."""


def conv_instructions(cs: ConvShape, t: ConvTiling, es: int, rows: int, cols: int, spm: int) -> int:
    """At least how many instructions :func:`conv2d` emits for tiling ``t``: two per step (a load and a matmul; 2.3
    to 3.3 measured), a step being one tile's output-channel block group and input-channel step."""
    p, gs = _plan(cs, t, es, rows, cols, spm), grouped(cs, t.gpack)
    tiles = gs.N * gs.groups * -(-gs.OH // t.toh) * -(-gs.OW // t.tow)
    return 2 * tiles * -(-p.nbs // p.tnb) * -(-p.cbs // p.tcb)


def group_packs(cs: ConvShape, rows: int, cols: int) -> tuple[int, ...]:
    """The groups per array tile (:attr:`ConvTiling.gpack`) the search tries: 1, the most (a divisor of groups)
    whose input channels fit the array's rows, and the most whose input and output channels fit its rows and
    columns. Fewer never stream fewer rows: every pixel streams once per array tile of channels."""
    divisors = [g for g in range(2, cs.groups + 1) if cs.groups % g == 0 and g * cs.Cg <= rows]
    both = [g for g in divisors if g * cs.Kg <= cols]
    return tuple(dict.fromkeys((1, *divisors[-1:], *both[-1:])))


def _rough_cycles(cs: ConvShape, t: ConvTiling, p: _Plan, arch: Arch) -> float:
    """A quick lower-bound-like estimate (cycles) that ranks tilings before the exact pricing: the busiest of the
    matrix unit (folds of ``toh * tow / pack`` streamed rows), the load and store queues (bytes over the bandwidth plus
    each DMA's setup, latency and first row activation) and the DRAM bus. ``cs``: the grouped shape
    (:func:`grouped` by ``t.gpack``), ``p`` the tiling's plan. The search ranks by :func:`_rank`, the same sums
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
    # every DMA pays its setup, its latency and its first row activation; banks hide the later ones
    per_dma = arch.dma.setup_latency + arch.dram.latency + arch.dram.row_miss_latency
    bw = arch.dram.bandwidth
    gather = tiles * (p.p_slot / (arch.spm.banks * arch.spm.bank_width) + arch.dma.setup_latency)
    ld = (x_bytes + w_bytes) / bw + (x_loads + w_loads) * per_dma + gather
    st = y_bytes / bw + tiles * nbg * per_dma
    if t.acc_bufs == 1:   # each tile's matrix work waits for the previous tile's store
        mm += st
    return max(mm, ld, st, (x_bytes + w_bytes + y_bytes) / bw)


def _epilogue_bytes(cs: ConvShape, epilogue: Epilogue, es: int) -> int:
    """SPM bytes the epilogue's per-channel constants take after the slots (+ word alignment)."""
    return cs.K * epilogue.spm_bytes + (3 if epilogue.spm_bytes and es % 4 else 0)


class _TileState:
    """What conv2d's tiles advance: input windows, weight chunks and accumulator tiles used so far (their ring slots
    follow), whether the next tile is the first, and where the last tile store is in the program (or None)."""

    __slots__ = ("xs", "ws", "accs", "first_tile", "last_store_at")

    def __init__(self, xs: int = 0, ws: int = 0, accs: int = 0, first_tile: bool = True) -> None:
        self.xs, self.ws, self.accs, self.first_tile, self.last_store_at = xs, ws, accs, first_tile, None


class _StepMemo(NamedTuple):
    """:func:`conv_estimate`'s memo of priced steps (key -> :func:`_entries`), its :func:`isa.cost.instr_costs` memo,
    and the moduli of the keys' bases: the DRAM offset modulus of :func:`isa.cost.dram_window` and the SPM and ACC
    bank widths (:func:`isa.cost.bank_cycles`)."""

    steps: dict
    costs: dict
    dram: int
    spm: int
    acc: int
    floor: bool = False   # costs by isa.cost.instr_floor (dram = 1: no DRAM base counts)


class _ConvParts(NamedTuple):
    """One convolution's program in pieces (:func:`_conv_parts`): the constant loads that start it, the output tiles
    in order, a function appending one tile's instructions, one giving what a tile's instruction costs depend on
    besides the tiling, and one wrapping the instructions into the Program."""

    prologue: list
    tiles: list[tuple[int, int, int]]
    emit: Callable[..., None]
    key: Callable[[int, int, int, _TileState, int], tuple]
    program: Callable[[list], Program]
    bases: Callable[[int, int, int], tuple[int, int]]   # a tile's input window and output DRAM offsets (bytes)


def conv2d(cs: ConvShape, dtype: DType, target: Target, tiling: ConvTiling | None = None,
           epilogue: Epilogue = NO_EPILOGUE, pad_value: int | float = 0) -> Program:
    """The program for one convolution; regions X (NHWC input), Wt (:func:`pack_weights`), Y (NHWC output), and Bias,
    Scale and R when the epilogue uses them. The halo padding reads ``pad_value`` (a quantized input's zero point).

    Per output tile (toh x tow pixels, tnb channel blocks): the input window is loaded once when it holds all its
    channels (``x_all``, else with each step's weights), the weights once per convolution when they all fit the SPM
    (else per step, ring of 2); the accumulators start from the residual's tile (region R, by dma.ld), the bias (from
    SPM, by dma.st after the store that freed the tile) or zero; one ``mxu.mm`` per run of equal blocks loops
    ``[nb, kh, kw, cb, oh]`` so that each weight tile stays in the array while all ``toh x tow`` pixels stream, and
    one ``dma.st`` writes the tile's pixels with all their tnb * cols channels (accumulator rows of ``tnb * cols``
    elements, so DRAM runs are that long)."""
    parts = _conv_parts(cs, dtype, target, tiling, epilogue, pad_value)
    prog, state = list(parts.prologue), _TileState()
    kinds: dict[tuple, _TileKind] = {}
    for b, oh0, ow0 in parts.tiles:
        key = parts.key(b, oh0, ow0, state, 1)
        kind = kinds.get(key)
        if kind is None:
            kind = _emit_tile(parts, prog, b, oh0, ow0, state)
            if kind is not None:
                kinds[key] = kind
        else:
            kind.replay(prog, parts.bases(b, oh0, ow0), state)
    return parts.program(prog + [Halt()])


class _TileKind(NamedTuple):
    """One tile's instructions as :func:`conv2d` copies them to later tiles of the same kind (the same
    :attr:`_ConvParts.key` but its DRAM offsets): those the tile inserted before the previous tile's last instruction
    (its first bias init, before the store that frees the accumulator tile), those it appended, which of them move
    with the tile (``moves``: (role, view, whether it is the input window's) of each instruction's DRAM view in X, Y
    or R, else None), the tile's DRAM bases (:attr:`_ConvParts.bases`), the ring positions it advanced and where its
    last store is (from the previous tile's last instruction, or None)."""

    before: list
    after: list
    moves: list
    bases: tuple[int, int]
    advance: tuple[int, int, int]
    last_store: int | None

    def replay(self, prog: list, bases: tuple[int, int], state: _TileState) -> None:
        """Append (and insert) this kind's instructions for the tile at DRAM ``bases``, advancing ``state``: the
        instructions the tile's own emission gives (its operands differ only in their X, Y and R bases)."""
        dx, dy = bases[0] - self.bases[0], bases[1] - self.bases[1]
        moved = [i if m is None else i.resynced(i.waits, i.signals, **{m[0]: View(
            Space.DRAM, m[1].base + (dx if m[2] else dy), m[1].dtype, m[1].strides, m[1].region)})
            for i, m in zip(self.before + self.after, self.moves)]
        at, n = len(prog) - 1, len(self.before)
        prog[at:at] = moved[:n]
        prog += moved[n:]
        state.xs, state.ws, state.accs = (s + d for s, d in zip((state.xs, state.ws, state.accs), self.advance))
        state.last_store_at = None if self.last_store is None else at + self.last_store


def _emit_tile(parts: _ConvParts, prog: list, b: int, oh0: int, ow0: int, state: _TileState) -> _TileKind | None:
    """``parts.emit`` of the tile at (b, oh0, ow0), and its :class:`_TileKind` (None for the first tile, whose
    instructions differ from every later one's)."""
    first, at = state.first_tile, len(prog) - 1
    last, start = prog[at] if prog else None, (state.xs, state.ws, state.accs)
    parts.emit(prog, b, oh0, ow0, state)
    if first:
        return None
    k = 0 if prog[at] is last else 1   # (one bias init, or none, goes before the previous tile's last instruction)
    new = prog[at:]
    moves = [next(((role, v, v.region == "X") for role, v, _ in i.views() if v.space is Space.DRAM and v.region in
                   ("X", "Y", "R")), None) if type(i) is DmaCopy else None for i in new]
    return _TileKind(new[:k], new[k + 1:], moves[:k] + moves[k + 1:], parts.bases(b, oh0, ow0),
                     (state.xs - start[0], state.ws - start[1], state.accs - start[2]),
                     None if state.last_store_at is None else state.last_store_at - at)


def _conv_parts(cs: ConvShape, dtype: DType, target: Target, tiling: ConvTiling | None, epilogue: Epilogue,
                pad_value: int | float) -> _ConvParts:
    """:func:`conv2d` in pieces, so that :func:`conv_estimate` can price one tile of each kind."""
    es, at, arch = dtype.size, ACC_TYPE[dtype], target.arch
    rows, cols, spm, acc = target.rows, target.cols, target.spm, target.acc
    yt, eo = epilogue.out or at, (epilogue.out or at).size
    bias_bytes = _epilogue_bytes(cs, epilogue, es)
    t = tiling or choose_conv_tiling(cs, dtype, target.with_spm(spm - bias_bytes))
    p = _plan(cs, t, es, rows, cols, spm - bias_bytes)
    cs = grouped(cs, t.gpack)   # from here on, packed groups are one group
    if p.spm + bias_bytes > spm or t.acc_bufs * p.acc_tile > acc or t.acc_bufs not in (1, 2):
        raise TilingError(f"tiling {t} needs {p.spm + bias_bytes} B of SPM and {t.acc_bufs * p.acc_tile} B of ACC "
                          f"(1 or 2 accumulator tiles)")
    if not pack_allowed(cs, t.pack, t.tow, cols, t.im2col):
        raise TilingError(f"tiling {t} cannot pack {t.pack} pixels per array row of {cs}: that needs one group, "
                          f"pack * K <= {cols} columns, stride 1 (or a subsampled 1x1, or im2col) and tile widths "
                          f"(tow and OW % tow) that are multiples of pack; use pack=1")
    if t.im2col and not im2col_allowed(cs):
        raise TilingError(f"tiling {t} cannot gather patches of {cs}: im2col needs one group (after gpack), no "
                          f"horizontal dilation and a kernel larger than 1x1")
    acc_empty = "acc_empty" if t.acc_bufs == 2 else "acc1_empty"   # free accumulator tiles (1 or 2)
    w_base0 = p.x_bytes
    bias_base = -(-p.spm // 4) * 4    # the i32/f32 constants after the slots, word-aligned
    scale_base = bias_base + cs.K * 4 * epilogue.bias
    # a bias (without a residual, which takes the accumulators first) starts each accumulator tile: the store queue
    # copies it from SPM right after the store that frees the tile, so the vector unit only applies the activation
    bias_init = epilogue.bias and not epilogue.residual
    vector = replace(epilogue, bias=False) if bias_init else epilogue
    ready = "out_full" if vector.active else "acc_full"   # what the store waits for
    kr, ks = (1, 1) if t.im2col else (cs.R, cs.S)                        # filter taps the matrix unit loops over
    kc, pk = p.kc, t.pack
    tile, chunk = rows * cols * es, p.taps * p.cbs * rows * cols * es    # packed bytes of one (g, nb)
    nb_stride = p.taps * p.tcb * tile                                      # SPM bytes of one nb in a chunk
    row_bytes = p.acc_tile // (t.toh * t.tow)                 # one accumulator pixel (tnb * cols, or Kg if packed)
    (sh, sw), (dh, dw), (pt, pl, _, _) = cs.stride, cs.dilation, cs.pad
    skip_h, skip_w = _skip(cs)    # subsampled load: the SPM tile is dense, the conv then has stride 1 on that axis
    win_h, win_w = sh // skip_h, sw // skip_w     # the stride between output pixels in the loaded window
    step_h, step_w = (1, 1) if t.im2col else (win_h, win_w)   # im2col: the patches are dense
    c_steps = list(range(0, p.cbs, p.tcb))
    nb_groups = list(range(0, p.nbs, p.tnb))
    if epilogue.residual and epilogue.out is not None:
        raise CompileError("a residual is added in the accumulator type: it cannot be fused with requantization")
    prologue: list = []
    if epilogue.bias:
        prologue.append(DmaCopy(queue=Queue.DMA_LD, shape=(cs.K,), dst=View(Space.SPM, bias_base, at, (4,)),
                            src=View(Space.DRAM, 0, at, (4,), "Bias"),
                            signals=(SemOp("bias_init" if bias_init else "bias_ready"),)))
    if epilogue.out is not None:
        prologue.append(DmaCopy(queue=Queue.DMA_LD, shape=(cs.K,), dst=View(Space.SPM, scale_base, DType.F32, (4,)),
                            src=View(Space.DRAM, 0, DType.F32, (4,), "Scale"), signals=(SemOp("bias_ready"),)))
    tiles = [(b, oh0, ow0) for b in range(cs.N) for oh0 in range(0, cs.OH, t.toh) for ow0 in range(0, cs.OW, t.tow)]
    mm_steps: dict[tuple, list[MatMul]] = {}   # emit's matrix instructions of a step, by what they depend on
    w_loads: dict[tuple, DmaCopy] = {}         # emit's weight loads by shape and SPM slot (any DRAM offset)
    w_strides = (chunk, p.cbs * tile, tile, es)

    def geometry(b: int, oh0: int, ow0: int):
        """(toh, tow, th, tw, pads, x_src) of the tile at (b, oh0, ow0)."""
        toh, tow = min(t.toh, cs.OH - oh0), min(t.tow, cs.OW - ow0)
        th, tw = _window(cs, toh, tow)
        ih0, iw0 = oh0 * sh - pt, ow0 * sw - pl
        top, left = max(0, -ih0), max(0, -iw0)
        pads = ((top, max(0, ih0 + (th - 1) * skip_h + 1 - cs.H)),
                (left, max(0, iw0 + (tw - 1) * skip_w + 1 - cs.W)))
        x_src = ((b * cs.H + max(ih0, 0)) * cs.W + max(iw0, 0)) * cs.C * es
        return toh, tow, th, tw, pads, x_src

    def key(b: int, oh0: int, ow0: int, state: _TileState, modulus: int) -> tuple:
        """What the costs of the tile's instructions depend on: its geometry, its DRAM offsets modulo ``modulus``
        (cost.dram_window reads no more) and the ring slots it starts in."""
        toh, tow, th, tw, pads, x_src = geometry(b, oh0, ow0)
        y_base = ((b * cs.OH + oh0) * cs.OW + ow0) * cs.K * eo
        return (toh, tow, pads, x_src % modulus, y_base % modulus, state.xs % 2, state.ws % 2, state.accs % 2,
                state.first_tile)

    def bases(b: int, oh0: int, ow0: int) -> tuple[int, int]:
        """The DRAM offsets of the tile's input window (X, halo aside) and of its output (Y, R), bytes."""
        return geometry(b, oh0, ow0)[5], ((b * cs.OH + oh0) * cs.OW + ow0) * cs.K * eo

    def step_costs(memo: _StepMemo, g: int, toh: int, tow: int, th: int, tw: int, pads: tuple, x_src: int, xc: int,
                   xc0: int, x_new: bool, slot: int, x_base: int, nbn: int, ng: int, ncb: int, tc: int, c0: int,
                   w_src: int | bool, w_base: int, w_front: bool, first: bool, acc_base: int, y_off: int,
                   nb0: int) -> list:
        """:func:`_entries` of the step that :func:`emit` builds from these values (its semaphores aside; the matrix
        instructions as one entry), each instruction's cost looked up by its cost key (:func:`isa.cost.copy_cost_key`,
        :func:`isa.cost.matmul_cost_key`) and built and priced by :func:`isa.cost.instr_costs` only the first time
        the search meets that key. ``w_src``: the weights' DRAM offset, False when the step loads none."""
        costs, out, pix = memo.costs, [], xc * es
        row = tw * pix
        if x_new:
            x_dst = (row, pix, es)
            x_at, x_str = x_src + (g * cs.Cg + xc0) * es, (skip_h * cs.W * cs.C * es, skip_w * cs.C * es, es)

            def load() -> list:
                return padded_load((th, tw, xc), View(Space.SPM, x_base, dtype, x_dst),
                                   View(Space.DRAM, x_at, dtype, x_str, "X"), pads, pad_value)
            if all(lo + hi < e and max(lo, hi) <= MAX_PAD for e, (lo, hi) in zip((th, tw), pads)):   # one copy
                c = _priced(memo, copy_cost_key((th, tw, xc), tuple(Pad(d, lo, hi) for d, (lo, hi) in enumerate(pads)
                                                                     if lo or hi),
                                                 (Space.SPM, x_base % memo.spm, es, x_dst),
                                                 (Space.DRAM, x_at % memo.dram, es, x_str)), load, arch)
                out.append((Queue.DMA_LD, c.cycles, c.dram_window, False))
            else:   # fills too
                out += _entries(load(), arch, costs, memo.floor)
            if t.im2col:
                p_dst, p_src = (tow * kc * es, kc * es, cs.S * cs.C * es, es), (win_h * row, win_w * pix, dh * row, es)
                shape = (toh, tow, cs.R, cs.S * cs.C)
                c = _priced(memo, copy_cost_key(shape, (), (Space.SPM, (p.x_slot + slot * p.p_slot) % memo.spm, es,
                                                             p_dst), (Space.SPM, 0, es, p_src)),
                            lambda: [DmaCopy(queue=Queue.DMA_LD, shape=shape,
                                             dst=View(Space.SPM, p.x_slot + slot * p.p_slot, dtype, p_dst),
                                             src=View(Space.SPM, 0, dtype, p_src))], arch)
                out.append((Queue.DMA_LD, c.cycles, c.dram_window, False))
                x_base, pix = p.x_slot + slot * p.p_slot, kc * es
                row = tow * pix
        if w_src is not False:
            shape, w_dst = (nbn, p.taps, ncb, rows * cols), (nb_stride, p.tcb * tile, tile, es)
            c = _priced(memo, copy_cost_key(shape, (), (Space.SPM, w_base % memo.spm, es, w_dst),
                                             (Space.DRAM, w_src % memo.dram, es, w_strides)),
                        lambda: [DmaCopy(queue=Queue.DMA_LD, shape=shape, dst=View(Space.SPM, w_base, dtype, w_dst),
                                         src=View(Space.DRAM, w_src, dtype, w_strides, "Wt"))], arch)
            out.insert(0 if w_front else len(out), (Queue.DMA_LD, c.cycles, c.dram_window, True))
        acc_view = (t.tow * row_bytes, row_bytes, 4)
        if first and (bias_init or epilogue.residual):   # the bias init (dma.st) or the residual's tile (dma.ld)
            src, queue = ((Space.SPM, bias_base + (g * cs.Kg + nb0 * cols) * 4, (0, 0, 4)), Queue.DMA_ST) \
                if bias_init else ((Space.DRAM, y_off, (cs.OW * cs.K * 4, cs.K * 4, 4)), Queue.DMA_LD)
            mod = memo.spm if bias_init else memo.dram
            c = _priced(memo, copy_cost_key((toh, tow, ng), (), (Space.ACC, acc_base % memo.acc, at.size, acc_view),
                                             (src[0], src[1] % mod, at.size, src[2])),
                        lambda: [DmaCopy(queue=queue, shape=(toh, tow, ng), dst=View(Space.ACC, acc_base, at, acc_view),
                                         src=View(src[0], src[1], at, src[2], None if bias_init else "R"))], arch)
            out.append((queue, c.cycles, c.dram_window, False))
        zero, cycles = first and not (epilogue.residual or bias_init), 0
        for nbi, nbc, n in equal_blocks(pk * ng, cols):
            for cb0, cbc, k in equal_blocks(tc, rows):
                dims = ((nbc, cols * 4, 0, nb_stride), (kr, 0, dh * row, ks * p.tcb * tile),
                        (ks, 0, dw * pix, p.tcb * tile), (cbc, 0, rows * es, tile),
                        (toh, t.tow * row_bytes, step_h * row, 0))
                kept = tuple(d for d in dims if d[0] > 1) or (dims[-1],)   # one instruction per point of the others
                one = kept[-4:]

                def mm(dims=dims, k=k, n=n, nbi=nbi, cb0=cb0) -> list:   # (called at once, by _priced)
                    return _conv_mm(dims, m=tow // pk, k=k, n=n, zero=zero and cb0 == 0,
                                    acc=View(Space.ACC, acc_base + nbi * cols * 4, at, ()), acc_row=pk * row_bytes,
                                    a=View(Space.SPM, x_base + (c0 - xc0 + cb0 * rows) * es, dtype, ()),
                                    a_row=pk * step_w * pix, b=View(Space.SPM, w_base + nbi * nb_stride + cb0 * tile,
                                                                    dtype, ()))
                c = _priced(memo, matmul_cost_key(tuple(d[0] for d in one), tow // pk, k, n, tuple(d[1] for d in one),
                                                   tuple(d[2] for d in one), tuple(d[3] for d in one), es,
                                                   zero and cb0 == 0), mm, arch)
                cycles += math.prod(d[0] for d in kept[:-4]) * c.cycles
        out.append((Queue.MXU, cycles, 0, False))
        return out

    def emit(prog: list, b: int, oh0: int, ow0: int, state: _TileState, memo: _StepMemo | None = None) -> None:
        """Append the instructions of the tile at (b, oh0, ow0) to ``prog``, advancing ``state``.

        ``memo`` (pricing only): append, instead of instructions, the :func:`_entries` of each output-channel group,
        step (:func:`step_costs`) and epilogue with its store, each memoised by what its costs read (shapes, flags,
        on-chip bases modulo the bank period, DRAM offsets modulo what the DRAM cost reads); a step's bias init is
        priced with the step, not placed before the previous store (its place changes no price)."""
        toh, tow, th, tw, pads, x_src = geometry(b, oh0, ow0)
        for g in range(cs.groups):
            for gi, nb0 in enumerate(nb_groups):
                nbn = min(p.tnb, p.nbs - nb0)
                ng = min(nbn * cols, cs.Kg - nb0 * cols)          # output channels of this tile
                acc_base = (state.accs % t.acc_bufs) * p.acc_tile
                y_off = (((b * cs.OH + oh0) * cs.OW + ow0) * cs.K + g * cs.Kg + nb0 * cols) * eo   # the tile's Y, R
                ch = (g * cs.Kg + nb0 * cols) * 4   # its channels' bias and scale (bytes)
                if memo is not None:   # the group's steps, epilogue and store, as one: what all their keys read
                    cid = (g * len(nb_groups) + gi) * len(c_steps)
                    group = ("group", toh, tow, th, tw, pads, ng, nbn, gi == 0, cid == 0, state.first_tile,
                             state.xs % 2, (w_base0 + cid * p.w_chunk) % memo.spm if p.resident else state.ws % 2,
                             (x_src + g * cs.Cg * es) % memo.dram, (g * p.nbs + nb0) * chunk % memo.dram,
                             acc_base % memo.acc, y_off % memo.dram, (bias_base + ch) % memo.spm,
                             (scale_base + ch) % memo.spm, state.accs == 0)
                    done = memo.steps.get(group)
                    if done is not None:
                        prog += done[0]
                        state.xs, state.ws, state.accs = state.xs + done[1], state.ws + done[2], state.accs + 1
                        continue
                    group_at, xs0, ws0 = len(prog), state.xs, state.ws
                for si, cb_first in enumerate(c_steps):
                    ncb = min(p.tcb, p.cbs - cb_first)
                    c0, tc = cb_first * rows, min(pk * kc - cb_first * rows, ncb * rows)
                    x_new = not p.x_all or (gi == 0 and si == 0)
                    x_last = not p.x_all or (gi == len(nb_groups) - 1 and si == len(c_steps) - 1)
                    slot = state.xs % 2 if x_new else (state.xs - 1) % 2
                    x_base = 0 if t.im2col else slot % p.x_slots * p.x_slot
                    xc, xc0 = (cs.Cg, 0) if p.x_all else (tc, c0)     # the window's channels
                    pix = xc * es
                    row = tw * pix
                    x_at = len(prog)   # the first step loads its weights before its input (prefetch)
                    cid = (g * len(nb_groups) + gi) * len(c_steps) + si
                    w_new = state.first_tile or not p.resident
                    if memo is not None:
                        # (a matrix instruction's cost reads no base: only the loads' and the init's bases count)
                        m_d, m_s, first = memo.dram, memo.spm, si == 0
                        w_src = (g * p.nbs + nb0) * chunk + cb_first * tile
                        w_base = w_base0 + (cid if p.resident else state.ws % 2) * p.w_chunk
                        key = (toh, tow, th, tw, pads, xc, tc, ng, nbn, ncb, x_new, w_new, first,
                               state.first_tile and cid == 0, slot,
                               x_new and (x_base % m_s, (x_src + (g * cs.Cg + xc0) * es) % m_d),
                               w_new and (w_src % m_d, w_base % m_s),
                               first and (acc_base % memo.acc, epilogue.residual and y_off % m_d,
                                          bias_init and (bias_base + ch) % m_s))
                        done = memo.steps.get(key)
                        if done is None:
                            done = memo.steps[key] = step_costs(
                                memo, g, toh, tow, th, tw, pads, x_src, xc, xc0, x_new, slot, x_base, nbn, ng, ncb, tc,
                                c0, w_new and w_src, w_base, state.first_tile and cid == 0, first, acc_base, y_off, nb0)
                        prog += done
                        state.xs, state.ws = state.xs + x_new, state.ws + w_new
                        continue
                    if x_new:
                        sync = {} if t.im2col else dict(waits=(SemOp("x_empty"),), signals=(SemOp("x_full"),))
                        prog += padded_load((th, tw, xc), View(Space.SPM, x_base, dtype, (row, pix, es)),
                                            View(Space.DRAM, x_src + (g * cs.Cg + xc0) * es, dtype,
                                                 (skip_h * cs.W * cs.C * es, skip_w * cs.C * es, es), "X"),
                                            pads, pad_value, **sync)
                        if t.im2col:   # gather the (kh, kw, c) patch of every pixel behind each other
                            prog.append(DmaCopy(
                                queue=Queue.DMA_LD, shape=(toh, tow, cs.R, cs.S * cs.C),
                                dst=View(Space.SPM, p.x_slot + slot * p.p_slot, dtype,
                                         (tow * kc * es, kc * es, cs.S * cs.C * es, es)),
                                src=View(Space.SPM, 0, dtype, (win_h * row, win_w * pix, dh * row, es)),
                                waits=(SemOp("x_empty"),), signals=(SemOp("x_full"),)))
                        state.xs += 1
                    if t.im2col:   # the matrix unit reads the patches: a 1x1 convolution over kc channels
                        x_base, pix = p.x_slot + slot * p.p_slot, kc * es
                        row = tow * pix
                    w_base = w_base0 + (cid if p.resident else state.ws % 2) * p.w_chunk
                    if w_new:   # (the load of another chunk into the same slot, from this chunk's weights)
                        w_load = w_loads.get((nbn, ncb, w_base))
                        if w_load is None:
                            w_load = w_loads[nbn, ncb, w_base] = DmaCopy(
                                queue=Queue.DMA_LD, shape=(nbn, p.taps, ncb, rows * cols),
                                dst=View(Space.SPM, w_base, dtype, (nb_stride, p.tcb * tile, tile, es)),
                                src=View(Space.DRAM, 0, dtype, w_strides, "Wt"),
                                waits=() if p.resident else (SemOp("w_empty"),), signals=(SemOp("w_full"),))
                        prog.insert(x_at if state.first_tile and cid == 0 else len(prog), w_load.resynced(
                            w_load.waits, w_load.signals,
                            src=View(Space.DRAM, (g * p.nbs + nb0) * chunk + cb_first * tile, dtype, w_strides, "Wt")))
                        state.ws += 1
                    first, last = si == 0, si == len(c_steps) - 1
                    if first and bias_init:   # after the store that freed this tile (ring of 2: two back)
                        init = DmaCopy(queue=Queue.DMA_ST, shape=(toh, tow, ng),
                                       dst=View(Space.ACC, acc_base, at, (t.tow * row_bytes, row_bytes, 4)),
                                       src=View(Space.SPM, bias_base + ch, at, (0, 0, 4)),
                                       waits=(SemOp("bias_init"),) * (state.accs == 0),
                                       signals=(SemOp("init_full"),))
                        at_ = len(prog) if state.last_store_at is None or t.acc_bufs == 1 else state.last_store_at
                        prog.insert(at_, init)
                    if first and epilogue.residual:   # the sum starts from the residual's tile
                        prog.append(DmaCopy(
                            queue=Queue.DMA_LD, shape=(toh, tow, ng),
                            dst=View(Space.ACC, acc_base, at, (t.tow * row_bytes, row_bytes, 4)),
                            src=View(Space.DRAM, y_off, at, (cs.OW * cs.K * 4, cs.K * 4, 4), "R"),
                            waits=(SemOp(acc_empty),), signals=(SemOp("res_full"),)))
                    zero = first and not (epilogue.residual or bias_init)   # else init takes the tile
                    # packed: each streamed row is pk consecutive pixels, their channels side by side
                    # (steps alike in these values, in this tile or another, have the same matrix instructions)
                    mm_key = (toh, tow, ng, tc, zero, acc_base, x_base + (c0 - xc0) * es, w_base, pix, row)
                    mms = mm_steps.get(mm_key)
                    if mms is None:
                        mms = mm_steps[mm_key] = [
                            mm for nbi, nbc, n in equal_blocks(pk * ng, cols) for cb0, cbc, k in equal_blocks(tc, rows)
                            for mm in _conv_mm(((nbc, cols * 4, 0, nb_stride),
                                                (kr, 0, dh * row, ks * p.tcb * tile),
                                                (ks, 0, dw * pix, p.tcb * tile),
                                                (cbc, 0, rows * es, tile),
                                                (toh, t.tow * row_bytes, step_h * row, 0)),
                                               m=tow // pk, k=k, n=n, zero=zero and cb0 == 0,
                                               acc=View(Space.ACC, acc_base + nbi * cols * 4, at, ()),
                                               acc_row=pk * row_bytes,
                                               a=View(Space.SPM, x_base + (c0 - xc0 + cb0 * rows) * es, dtype, ()),
                                               a_row=pk * step_w * pix,
                                               b=View(Space.SPM, w_base + nbi * nb_stride + cb0 * tile, dtype, ()))]
                    waits = ("x_full",) * x_new + ("w_full",) * w_new + (
                        "res_full" if epilogue.residual else "init_full" if bias_init else acc_empty,) * first
                    signals = ("x_empty",) * x_last + ("w_empty",) * (not p.resident) + ("acc_full",) * last
                    prog += synced(mms, waits, signals)
                if memo is not None:
                    key = (toh, tow, ng, acc_base % memo.acc, (bias_base + ch) % memo.spm, (scale_base + ch) % memo.spm,
                           y_off % memo.dram, state.accs == 0)
                    done = memo.steps.get(key)
                if memo is not None and done is not None:
                    prog += done
                else:
                    start = len(prog)
                    tile_view = View(Space.ACC, acc_base, at, (t.tow * row_bytes, row_bytes, 4))
                    out_view = tile_view
                    if vector.active:
                        prog += synced_epilogue(vector, epilogue_ops(
                            vector, (toh, tow, ng), tile_view, View(Space.SPM, bias_base + ch, at, (0, 0, 4)),
                            View(Space.SPM, scale_base + ch, DType.F32, (0, 0, 4))), first=state.accs == 0)
                        if epilogue.out is not None:   # the requantized tile, packed at the tile's base
                            out_view = View(Space.ACC, acc_base, yt, (tow * ng * eo, ng * eo, eo))
                    state.last_store_at = len(prog)
                    prog.append(DmaCopy(queue=Queue.DMA_ST, shape=(toh, tow, ng),
                                        dst=View(Space.DRAM, y_off, yt, (cs.OW * cs.K * eo, cs.K * eo, eo), "Y"),
                                        src=out_view, waits=(SemOp(ready),),
                                        signals=() if bias_init else (SemOp(acc_empty),)))
                    if memo is not None:
                        prog[start:] = memo.steps[key] = _entries(prog[start:], arch, memo.costs, memo.floor)
                state.accs += 1
                if memo is not None:
                    memo.steps[group] = (prog[group_at:], state.xs - xs0, state.ws - ws0)
        state.first_tile = False

    def program(instrs: list) -> Program:
        sems = (SemDecl("x_full", 0), SemDecl("x_empty", 2), SemDecl("w_full", 0), SemDecl("acc_full", 0))
        sems += (SemDecl("bias_init", 0), SemDecl("init_full", 0)) if bias_init else (SemDecl(acc_empty, t.acc_bufs),)
        sems += () if p.resident else (SemDecl("w_empty", 2),)
        sems += (SemDecl("out_full", 0),) if vector.active else ()
        sems += (SemDecl("bias_ready", 0),) if vector.bias or vector.out else ()
        sems += (SemDecl("res_full", 0),) if epilogue.residual else ()
        regions = (Region("X", 0, cs.N * cs.H * cs.W * cs.C * es), Region("Wt", 1, cs.groups * p.nbs * chunk),
                   Region("Y", 2, cs.N * cs.OH * cs.OW * cs.K * yt.size))
        regions += (Region("Bias", 3, cs.K * 4),) if epilogue.bias else ()
        regions += (Region("Scale", 3 + epilogue.bias, cs.K * 4),) if epilogue.out is not None else ()
        regions += (Region("R", len(regions), cs.N * cs.OH * cs.OW * cs.K * 4),) if epilogue.residual else ()
        return Program(config=target.config, regions=regions, sems=sems, instrs=tuple(instrs))

    return _ConvParts(prologue, tiles, emit, key, program, bases)


def _conv_mm(dims: tuple[tuple[int, int, int, int], ...], acc: View, a: View, b: View, **kw) -> list[MatMul]:
    """``mxu.mm`` instructions looping over ``dims`` (extent, acc, a and b byte strides) from the given bases: unit
    dimensions dropped, then split on the outermost while more than a matmul's 4 remain."""
    dims = tuple(d for d in dims if d[0] > 1) or (dims[-1],)
    out: list[MatMul] = []
    _conv_mm_into(out, dims, acc, a, b, acc.base, a.base, b.base, kw)
    return out


def _conv_mm_into(out: list, dims: tuple[tuple[int, int, int, int], ...], acc: View, a: View, b: View, acc_base: int,
                  a_base: int, b_base: int, kw: dict) -> None:
    """:func:`_conv_mm`'s split, appending to ``out``; the views are built once per matmul (no dataclass copies)."""
    if len(dims) > 4:
        (e, sc, sa, sb), rest = dims[0], dims[1:]
        for i in range(e):
            _conv_mm_into(out, rest, acc, a, b, acc_base + i * sc, a_base + i * sa, b_base + i * sb, kw)
        return
    out.append(MatMul(shape=tuple(d[0] for d in dims),
                      acc=View(acc.space, acc_base, acc.dtype, tuple(d[1] for d in dims), acc.region),
                      a=View(a.space, a_base, a.dtype, tuple(d[2] for d in dims), a.region),
                      b=View(b.space, b_base, b.dtype, tuple(d[3] for d in dims), b.region), **kw))


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
