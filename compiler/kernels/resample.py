"""Sample2D + depthwise weighting: Resize (nearest, linear) on the NPU (docs/perception.md#sample2d).

Every output pixel of a 2-D resample reads at most four source pixels ``(y1|y2, x1|x2)`` of an NHWC image and
weights them; with C innermost a "pixel" is a row of C channels, so both stages run on whole channel rows:

1. **Sample2D** fetches the taps. For Resize the source indices are per axis and known at compile time
   (:func:`resize_axis`, onnxruntime's float32 coordinate arithmetic). Where an axis' map is *affine by phase*
   (output ``o = s*t + phi`` reads ``x1 = d*t + a_phi`` with weights constant per phase: power-of-two Resize with
   half_pixel / pytorch_half_pixel / asymmetric, integer down-sampling) the taps are plain strided SPM views of the
   input window (:func:`affine_runs`: class 1, no gather); the border outputs whose coordinate onnxruntime clamps
   are runs of their own with onnxruntime's clamped weights, never edge replication with interior weights. Every
   other Resize (class 2) loads the same source box into a gather table (pixel pitch :func:`gather_pitch`, whole
   SRAM lines) and ``vpu.gather``s its taps by index: a tap's row in the box is the sum of a per-output-row and a
   per-output-column constant (one ``vpu.add``), its weight the product of a row and a column weight (one
   ``vpu.mul``), both from region Wt.
2. **Weighting** on the vector unit, onnxruntime's product order bit for bit:
   ``((w11*p11 + w12*p12) + w21*p21) + w22*p22`` as ``vpu.mul`` (tap 11) then ``vpu.mul.sum`` without ``.z`` (tap
   12: no reduction dimension, ``dst += w*p``) and ``vpu.mul.sum`` over the two taps of row y2 (a reduction of 2 in
   row-major order); ``w11 = wy1*wx1`` etc. are float32 products computed at compile time as onnxruntime computes
   them. Nearest is the sample alone (``vpu.act.mov`` of the tap view).

Outputs outside tf_crop_and_resize's region (``extrapolation_value``) form a frame around a rectangle: the program
fills it in DRAM first (``dma.st.fill``) and samples only the rectangle.

The program is one :class:`~compiler.kernels.common.pipeline.RingPipeline` over output tiles ``[toh, tow, cb]``:
``dma.ld`` brings the tile's source box ``[rows, cols, cb]`` (the bounding box of its taps), the vector unit samples and
weights, and ``dma.st`` writes the tile to Y. DRAM regions: ``X`` (N, H, W, C), ``Y`` (N, Ho, Wo, C) f32 and ``Wt`` (the
weight table, :class:`ResizePlan`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from compiler.errors import CompileError, TilingError
from compiler.kernels.common.pipeline import RingPipeline, vector_config
from compiler.kernels.common.target import Target
from isa import (
    Act,
    BinOp,
    DmaCopy,
    DmaFill,
    DType,
    Gather,
    Program,
    Queue,
    Reduce,
    Region,
    Space,
    VecBinary,
    VecUnary,
    View,
)
from isa.view import MAX_EXTENT

F32 = DType.F32
ES = 4
HALF, ONE, TWO = np.float32(0.5), np.float32(1), np.float32(2)
TIE = np.float32(1e-6)
"""onnxruntime 1.32 takes a coordinate within this of ``i + 0.5`` as a tie for the round_prefer_* nearest modes."""
COORDINATE_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                    "tf_crop_and_resize", "tf_half_pixel_for_nn")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
RUN_BYTES = 128
"""Tiling cost of one contiguous DRAM run, in bytes moved."""
DMA_BYTES = 1024
"""Tiling cost of one DMA instruction, in bytes moved."""
INSTR_BYTES = 64
"""Tiling cost of one vector instruction (its pipeline latency), in bytes moved."""
FILL = 0.25
"""Tiling cost of the pipeline's fill and drain, as a fraction of one step's traffic."""


def _up(n: int, a: int = 64) -> int:
    return -(-n // a) * a


# ---------------------------------------------------------------------------------------------- per-axis taps

@dataclass(frozen=True, eq=False)
class AxisTaps:
    """Where each output index ``o`` of one resampled axis reads: source ``i1[o]`` with weight ``w1[o]`` and
    ``i2[o]`` with ``w2[o]`` (float32); nearest has ``i2 == i1`` and no weights. Outputs outside ``valid`` (a
    contiguous range ``[lo, hi)``) are the extrapolation value."""

    i1: np.ndarray
    i2: np.ndarray
    w1: np.ndarray | None
    w2: np.ndarray | None
    lo: int
    hi: int

    @property
    def linear(self) -> bool:
        return self.w1 is not None

    def box(self, o0: int, o1: int) -> tuple[int, int]:
        """[first, last + 1) of the source indices outputs ``o0..o1-1`` read."""
        return int(min(self.i1[o0:o1].min(), self.i2[o0:o1].min())), int(max(self.i1[o0:o1].max(),
                                                                          self.i2[o0:o1].max())) + 1


def source_coordinate(mode: str, out: int, length: int, scale: float, roi: tuple[float, float]) -> np.ndarray:
    """The float32 source coordinate of output indices ``0..out-1`` (onnxruntime's
    ``GetOriginalCoordinateFromResizedCoordinate``; docs/perception.md#resize-numerics)."""
    xr = np.arange(out, dtype=np.float32)
    s, lo, lr = np.float32(scale), np.float32(length), np.float32(out)
    if mode in ("half_pixel", "pytorch_half_pixel"):
        return (xr + HALF) / s - HALF if out > 1 or mode == "half_pixel" else np.zeros(out, np.float32)
    if mode == "asymmetric":
        return xr / s
    if mode == "tf_half_pixel_for_nn":
        return (xr + HALF) / s
    if mode == "align_corners":
        return xr * (lo - ONE) / (lr - ONE) if out > 1 else np.zeros(out, np.float32)
    if mode == "half_pixel_symmetric":
        offset = np.float64(lo / TWO * (ONE - lr / (s * lo)))
        return (offset + (xr.astype(np.float64) + 0.5) / np.float64(s) - 0.5).astype(np.float32)
    if mode == "tf_crop_and_resize":
        a, b = np.float32(roi[0]), np.float32(roi[1])
        if out > 1:
            return a * (lo - ONE) + xr * (b - a) * (lo - ONE) / (lr - ONE)
        return np.full(out, np.float32(0.5 * np.float64(a + b) * np.float64(lo - ONE)), np.float32)
    raise CompileError(f"unknown coordinate_transformation_mode {mode!r}")


def _round_nearest(x: np.ndarray, mode: str) -> np.ndarray:
    a = np.abs(x)
    frac = a - np.floor(a)
    away = np.copysign(np.floor(a) + (frac >= HALF), x)
    tie = np.abs(frac - HALF) <= TIE
    return {"round_prefer_floor": lambda: np.where(tie, np.floor(x), away),
            "round_prefer_ceil": lambda: np.where(tie, np.ceil(x), away),
            "floor": lambda: np.floor(x), "ceil": lambda: np.ceil(x)}[mode]()


def resize_axis(mode: str, ctm: str, nearest_mode: str, out: int, length: int, scale: float,
                roi: tuple[float, float] = (0.0, 1.0)) -> AxisTaps:
    """The taps of one Resize axis as onnxruntime computes them. An axis of scale 1 reads ``x = o`` whatever the
    mode (linear still pairs it with ``o + 1`` at weight 0, as onnxruntime does). CompileError when
    tf_crop_and_resize's in-range outputs are not one contiguous range."""
    if scale == 1.0:
        if out != length:
            raise CompileError(f"an axis of scale 1 maps {length} inputs to {length} outputs, not {out}")
        x = np.arange(out, dtype=np.float32)
    else:
        x = source_coordinate(ctm, out, length, scale, roi)
    valid = ~((x < 0) | (x > np.float32(length - 1))) if ctm == "tf_crop_and_resize" and scale != 1.0 else \
        np.ones(out, bool)
    where = np.flatnonzero(valid)
    lo, hi = (int(where[0]), int(where[-1]) + 1) if where.size else (0, 0)
    if where.size and where.size != hi - lo:
        raise CompileError("tf_crop_and_resize's in-range outputs are not contiguous")
    if mode == "nearest":
        i = np.arange(out) if scale == 1.0 else np.clip(_round_nearest(x, nearest_mode).astype(np.int64), 0,
                                                         length - 1)
        return AxisTaps(i, i, None, None, lo, hi)
    xc = np.maximum(np.float32(0), np.minimum(x, np.float32(length - 1)))
    i1 = np.minimum(xc.astype(np.int64), length - 1)
    i2 = np.minimum(i1 + 1, length - 1)
    same = i1 == i2
    dx1 = np.where(same, HALF, np.abs(xc - i1.astype(np.float32))).astype(np.float32)
    dx2 = np.where(same, HALF, np.abs(xc - i2.astype(np.float32))).astype(np.float32)
    return AxisTaps(i1, i2, dx2, dx1, lo, hi)   # i1 is weighted by dx2, i2 by dx1


# --------------------------------------------------------------------------------------------- affine runs

@dataclass(frozen=True)
class Run:
    """Outputs ``o + step*k`` (k < n) of one axis reading ``i1 = i + di*k`` and ``i2 = i1 + delta``, with the same
    weights ``w`` (float32 (w1, w2); None for nearest)."""

    o: int
    step: int
    n: int
    i: int
    di: int
    delta: int
    w: tuple[float, float] | None


def _same_w(axis: AxisTaps, a: int, b: int) -> bool:
    if not axis.linear:
        return True
    return axis.w1[a].view(np.int32) == axis.w1[b].view(np.int32) and \
        axis.w2[a].view(np.int32) == axis.w2[b].view(np.int32)


def affine_runs(axis: AxisTaps, o0: int, o1: int, period: int) -> list[Run]:
    """Outputs ``o0..o1-1`` of ``axis`` cut into runs of one phase of ``period`` whose source index advances by a
    constant and whose weights stay the same; single outputs next to each other with one (delta, weights) are then
    merged into a step-1 run (the clamped border bands)."""
    runs: list[Run] = []
    for phi in range(min(period, o1 - o0)):
        idx = np.arange(o0 + phi, o1, period)
        k = 0
        while k < idx.size:
            a = int(idx[k])
            delta = int(axis.i2[a] - axis.i1[a])
            di = int(axis.i1[idx[k + 1]] - axis.i1[a]) if k + 1 < idx.size else 0
            j = k + 1
            while j < idx.size and int(axis.i1[idx[j]] - axis.i1[idx[j - 1]]) == di and \
                    int(axis.i2[idx[j]] - axis.i1[idx[j]]) == delta and _same_w(axis, a, int(idx[j])):
                j += 1
            runs.append(Run(a, period, j - k, int(axis.i1[a]), di if j - k > 1 else 0, delta, _weights(axis, a)))
            k = j
    runs.sort(key=lambda r: r.o)
    merged: list[Run] = []
    for r in runs:
        p = merged[-1] if merged else None
        if p is not None and r.n == 1 and (p.n == 1 or p.step == 1) and r.o == p.o + (p.n - 1) * p.step + 1 and \
                r.delta == p.delta and r.w == p.w and (p.n == 1 or r.i - (p.i + (p.n - 1) * p.di) == p.di):
            merged[-1] = Run(p.o, 1, p.n + 1, p.i, r.i - p.i if p.n == 1 else p.di, p.delta, p.w)
        else:
            merged.append(r)
    return merged


def _weights(axis: AxisTaps, o: int) -> tuple[float, float] | None:
    return (float(axis.w1[o]), float(axis.w2[o])) if axis.linear else None


def axis_period(out: int, length: int) -> int:
    """The output period of an axis' phases: the integer up-sampling factor, else 1."""
    return out // length if out >= length and out % length == 0 else 1


def is_affine(axis: AxisTaps, out: int, length: int) -> bool:
    """Whether ``axis`` is affine by phase over its valid outputs (class 1): at most ``period + 4`` runs."""
    s = axis_period(out, length)
    return axis.hi <= axis.lo or len(affine_runs(axis, axis.lo, axis.hi, s)) <= s + 4


# ---------------------------------------------------------------------------------------------- the plan

@dataclass(frozen=True, eq=False)
class ResizePlan:
    """One 2-D Resize of an NHWC f32 image: ``(n, h, w, c) -> (n, ho, wo, c)`` by the taps of both axes."""

    n: int
    c: int
    h: int
    w: int
    ho: int
    wo: int
    ty: AxisTaps
    tx: AxisTaps
    fill: float = 0.0
    """The extrapolation value outside the valid rectangle."""
    py: int = field(init=False)
    px: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "py", axis_period(self.ho, self.h))
        object.__setattr__(self, "px", axis_period(self.wo, self.w))

    @property
    def linear(self) -> bool:
        return self.ty.linear

    @property
    def affine(self) -> bool:
        """Both axes affine by phase: class 1 applies."""
        return is_affine(self.ty, self.ho, self.h) and is_affine(self.tx, self.wo, self.w)

    @cached_property
    def weight_pairs(self) -> tuple[dict, dict]:
        """The distinct (w1, w2) pairs of each axis, by value, numbered in order of first use."""
        def pairs(a: AxisTaps) -> dict:
            if not a.linear:
                return {None: 0}
            seen: dict = {}
            for p in zip(a.w1.tolist(), a.w2.tolist()):
                seen.setdefault(p, len(seen))
            return seen
        return pairs(self.ty), pairs(self.tx)

    def weight_table(self) -> np.ndarray:
        """Region Wt: for every (y pair, x pair) the four float32 products ``(wy1*wx1, wy1*wx2, wy2*wx1, wy2*wx2)``
        (onnxruntime's ``dx2*dy2``, ``dx1*dy2``, ``dx2*dy1``, ``dx1*dy1``)."""
        py, px = self.weight_pairs
        if None in py:
            return np.zeros(1, np.float32)
        wy = np.array(list(py), np.float32)   # (ny, 2)
        wx = np.array(list(px), np.float32)
        return (wy[:, None, :, None] * wx[None, :, None, :]).astype(np.float32).ravel()

    def weight_offset(self, ry: Run, rx: Run) -> int:
        py, px = self.weight_pairs
        return (py[ry.w] * len(px) + px[rx.w]) * 4 * ES if self.linear else 0


# --------------------------------------------------------------------------------------------------- tiling

METHODS = ("affine", "gather")
"""How a Resize fetches its taps: ``affine`` (class 1, strided views of the source box) or ``gather`` (class 2, a
``vpu.gather`` of the source box by the constant per-axis index tables)."""


def pixel_pitch(cb: int, steps: tuple[int, ...], target: Target, count: int = 64) -> int:
    """Bytes per pixel of an SPM tile of ``cb``-channel f32 pixels that vector views walk ``steps`` pixels at a time
    (a phase of an up-sampled output, every other source pixel): ``cb*4`` padded by whole banks
    (docs/perception.md#layouts-and-halos) to the first pitch whose views stream ``count`` pixels with no bank conflict
    (the fewest conflict cycles if none is free)."""
    from isa.cost import bank_cycles

    best = None
    for k in range(target.arch.spm.banks):
        pitch = cb * ES + k * target.bank_width
        conflict = 0
        for step in set(steps):
            view = View(Space.SPM, 0, F32, (step * pitch, ES))
            actual, ideal = bank_cycles(view, (count, cb), target.arch.spm, target.lanes)
            conflict += actual - ideal
        if best is None or conflict < best[0]:
            best = conflict, pitch
        if conflict == 0:
            break
    return best[1]


def gather_pitch(cb: int, target: Target) -> int:
    """Bytes per pixel of a gather table: ``cb*4`` rounded up to whole SRAM lines, or to the power of two that
    divides a line when a pixel is shorter, so no table row straddles a line (the gather's row-stride rule,
    docs/perception.md#row-gather): the table reads then cost ``ceil(cb*4 / line)`` cycles per row, whatever the
    indices."""
    line, b = target.bank_row, cb * ES
    return -(-b // line) * line if b >= line else 1 << (b - 1).bit_length()


@dataclass(frozen=True)
class Layout:
    """Pixel pitches (bytes) of one channel block: ``src`` source box, ``out`` output tile, ``taps`` gathered taps."""

    src: int
    out: int
    taps: int = 0


def _layout(plan: ResizePlan, cb: int, method: str, target: Target) -> Layout:
    if method == "gather":
        return Layout(gather_pitch(cb, target), pixel_pitch(cb, (1,), target), pixel_pitch(cb, (1,), target))
    runs = affine_runs(plan.tx, plan.tx.lo, plan.tx.hi, plan.px) if plan.tx.hi > plan.tx.lo else []
    src = tuple({max(1, abs(r.di)) for r in runs} | {1})
    return Layout(pixel_pitch(cb, src, target), pixel_pitch(cb, (plan.px, 1), target))


@dataclass(frozen=True)
class SampleTiling:
    """One step: ``toh`` x ``tow`` output pixels of ``cb`` channels."""

    toh: int
    tow: int
    cb: int


def _sizes(n: int) -> list[int]:
    return sorted({-(-n // k) for k in range(1, n + 1)}, reverse=True) if n else [1]


def _channel_blocks(c: int, lanes: int) -> list[int]:
    out = [c]
    for nb in range(2, -(-c // max(1, lanes)) + 1):
        per = -(-c // nb)
        cb = -(-per // lanes) * lanes
        if cb < out[-1]:
            out.append(cb)
    return out


def _axis_boxes(axis: AxisTaps, t: int) -> tuple[int, int, int]:
    """(tiles, sum of their source spans, largest span) of the valid outputs of ``axis`` cut into tiles of ``t``."""
    spans = [axis.box(o0, min(o0 + t, axis.hi)) for o0 in range(axis.lo, axis.hi, t)]
    lens = [b - a for a, b in spans]
    return len(lens), sum(lens), max(lens)


@dataclass(frozen=True)
class Slot:
    """Byte offsets inside one ring slot (every part starts on an SRAM line) and the slot's size."""

    src: int
    idx: int
    wts: int
    taps: int
    out: int
    size: int


def _slot(plan: ResizePlan, method: str, t: SampleTiling, rows: int, cols: int, lay: Layout, line: int) -> Slot:
    """The parts of a ring slot: the source box (``rows`` x ``cols`` pixels), for gathers the index tile (4 or 1 i32
    per output), the weight tile (4 f32 per output) and the gathered taps, then the output tile."""
    up = lambda n: _up(n, line)   # noqa: E731
    pts = t.toh * t.tow
    src = up(rows * cols * lay.src)
    taps = 4 if plan.linear else 1
    idx = up(pts * taps * 4) if method == "gather" else 0
    wts = up(pts * 4 * ES) if method == "gather" and plan.linear else 0
    tap = up(pts * 4 * lay.taps) if method == "gather" and plan.linear else 0
    out = up(pts * lay.out)
    return Slot(0, src, src + idx, src + idx + wts, src + idx + wts + tap, src + idx + wts + tap + out)


def _resident(plan: ResizePlan, method: str) -> int:
    """Bytes of the constants kept in SPM for the whole program (the weight table, or the gather's axis tables)."""
    if method == "affine":
        return plan.weight_table().nbytes if plan.linear else 0
    return (plan.ho + plan.wo) * (16 if plan.linear else 4)


def choose_tiling(plan: ResizePlan, target: Target, method: str = "affine") -> SampleTiling:
    """The tiling of least estimated cost (DRAM bytes moved, plus :data:`RUN_BYTES` per contiguous run,
    :data:`DMA_BYTES` per DMA and :data:`INSTR_BYTES` per vector instruction) whose two ring slots and the resident
    constants fit the SPM."""
    line = target.bank_row
    spm = target.spm - _up(_resident(plan, method), line)
    vh, vw = plan.ty.hi - plan.ty.lo, plan.tx.hi - plan.tx.lo
    rows = {t: _axis_boxes(plan.ty, t) for t in _sizes(vh)}
    cols = {t: _axis_boxes(plan.tx, t) for t in _sizes(vw)}
    best: tuple[float, SampleTiling] | None = None
    for cb in _channel_blocks(plan.c, target.lanes):
        if best is not None and cb * ES < RUN_BYTES:
            break
        nb = -(-plan.c // cb)
        lay = _layout(plan, cb, method, target)
        for toh, (ry, rsum, rmax) in rows.items():
            for tow, (cx, csum, cmax) in cols.items():
                t = SampleTiling(toh, tow, cb)
                if 2 * _slot(plan, method, t, rmax, cmax, lay, line).size > spm or \
                        max(rmax, cmax, toh, tow, cb, toh * tow * 4) > MAX_EXTENT:
                    continue
                steps = plan.n * nb * ry * cx
                moved = plan.n * nb * rsum * csum * cb * ES + plan.n * vh * vw * plan.c * ES
                whole = cb == plan.c
                runs = plan.n * nb * (rsum * (cx if whole else csum) + vh * (cx if whole else vw))
                per_step = 5 if method == "gather" else (3 if plan.linear else 1) * min(toh, plan.py + 2) * \
                    min(tow, plan.px + 2)
                cost = (moved + RUN_BYTES * runs + DMA_BYTES * 2 * steps + INSTR_BYTES * per_step * steps) * \
                    (1 + FILL / steps)
                if best is None or cost < best[0]:
                    best = cost, t
    if best is None:
        raise TilingError(f"no Resize tiling fits {target.spm} B of SPM: one output pixel of "
                          f"{min(plan.c, target.lanes)} channels and its source box need more")
    return best[1]


# -------------------------------------------------------------------------------------------------- program

@dataclass(frozen=True)
class SampleProgram:
    """A Resize program and the image of its constant region ``Wt``."""

    program: Program
    consts: np.ndarray
    method: str
    tiling: SampleTiling


def _fills(plan: ResizePlan) -> list[DmaFill]:
    """dma.st.fill of the output frame outside the valid rectangle (extrapolation_value), per batch image."""
    (y0, y1), (x0, x1) = (plan.ty.lo, plan.ty.hi), (plan.tx.lo, plan.tx.hi)
    pix, row = plan.c * ES, plan.wo * plan.c * ES
    boxes = [(0, y0, 0, plan.wo), (y1, plan.ho, 0, plan.wo), (y0, y1, 0, x0), (y0, y1, x1, plan.wo)] \
        if y1 > y0 and x1 > x0 else [(0, plan.ho, 0, plan.wo)]
    out = []
    for n in range(plan.n):
        for r0, r1, c0, c1 in boxes:
            if r1 > r0 and c1 > c0:
                base = ((n * plan.ho + r0) * plan.wo + c0) * pix
                out.append(DmaFill(queue=Queue.DMA_ST, shape=(r1 - r0, c1 - c0, plan.c), value=plan.fill,
                                   dst=View(Space.DRAM, base, F32, (row, pix, ES), "Y")))
    return out


def _affine_compute(plan: ResizePlan, oy: tuple[int, int], ox: tuple[int, int], box: tuple[int, int, int],
                    cb: int, win: int, out: int, tow: int, wtab: int, lay: Layout) -> list:
    """The vector instructions of one class-1 tile: per (row run, column run) block, the taps are views of the
    window at ``win`` (``[rows][box_cols][cb]`` at pixel pitch ``lay.src``, first source row/column
    ``box[0]``/``box[1]``) written into the tile at ``out`` (``[toh][tow][cb]`` at pixel pitch ``lay.out``)."""
    ry0, rx0, bw = box
    pix, opix = lay.src, lay.out
    instrs = []
    for ry in affine_runs(plan.ty, *oy, plan.py):
        for rx in affine_runs(plan.tx, *ox, plan.px):
            shape = (ry.n, rx.n, cb)
            dst = View(Space.SPM, out + ((ry.o - oy[0]) * tow + (rx.o - ox[0])) * opix, F32,
                       (ry.step * tow * opix, rx.step * opix, ES))
            base = win + ((ry.i - ry0) * bw + (rx.i - rx0)) * pix
            strides = (ry.di * bw * pix, rx.di * pix, ES)
            if not plan.linear:
                instrs.append(VecUnary(fn=Act.MOV, shape=shape, dst=dst, src=View(Space.SPM, base, F32, strides)))
                continue
            dy, dx = ry.delta * bw * pix, rx.delta * pix
            w = wtab + plan.weight_offset(ry, rx)
            instrs += [
                VecBinary(op=BinOp.MUL, shape=shape, dst=dst, src0=View(Space.SPM, base, F32, strides),
                          src1=View(Space.SPM, w, F32, (0, 0, 0))),
                VecBinary(op=BinOp.MUL, reduce=Reduce.SUM, shape=shape, dst=dst,
                          src0=View(Space.SPM, base + dx, F32, strides), src1=View(Space.SPM, w + ES, F32, (0, 0, 0))),
                VecBinary(op=BinOp.MUL, reduce=Reduce.SUM, shape=(ry.n, rx.n, 2, cb),
                          dst=dst.with_strides((*dst.strides[:2], 0, ES)),
                          src0=View(Space.SPM, base + dy, F32, (*strides[:2], dx, ES)),
                          src1=View(Space.SPM, w + 2 * ES, F32, (0, 0, ES, 0))),
            ]
    return instrs


def weighting(pts: tuple[int, ...], cb: int, out: View, taps: View, wts: View, order: str = "product"
              ) -> list[VecBinary]:
    """The depthwise weighting (docs/perception.md#depthwise-weighting) over points of shape ``pts``: ``taps`` holds 4
    rows of ``cb`` values per point (``p11, p12, p21, p22``; its strides: the points', then the tap stride), ``wts`` 4
    f32 per point (its strides: the points', then 4 bytes apart), ``out`` the result rows (the points' strides).

    ``product``: ``wts = (w11, w12, w21, w22)``, ``vpu.mul`` of tap 0 then ``vpu.mul.sum`` (no ``.z``) over taps 1-3
    in order: ``((w11*p11 + w12*p12) + w21*p21) + w22*p22``. ``separable``: ``wts = (dx2, dx1, dy2, dy1)``; ``taps``
    rows are then reused for the horizontal pass ``h_k = dx2*p_k1 + dx1*p_k2`` written over ``p_k1``, and ``out =
    dy2*h_1 + dy1*h_2``."""
    *ps, tap = taps.strides[:-1]
    nd = len(pts)
    if order == "product":
        return [VecBinary(op=BinOp.MUL, shape=(*pts, cb), dst=out, src0=taps.with_strides((*ps, ES)),
                          src1=wts.with_strides((*wts.strides[:nd], 0))),
                VecBinary(op=BinOp.MUL, reduce=Reduce.SUM, shape=(*pts, 3, cb),
                          dst=out.with_strides((*out.strides[:nd], 0, ES)),
                          src0=View(Space.SPM, taps.base + tap, F32, (*ps, tap, ES)),
                          src1=View(Space.SPM, wts.base + ES, F32, (*wts.strides[:nd], ES, 0)))]
    w = wts.strides[:nd]
    h = View(Space.SPM, taps.base, F32, (*ps, 2 * tap, ES))          # h_k over p_k1 (row k's first tap)
    return [VecBinary(op=BinOp.MUL, shape=(*pts, 2, cb), dst=h, src0=h,
                      src1=View(Space.SPM, wts.base, F32, (*w, 0, 0))),
            VecBinary(op=BinOp.MUL, reduce=Reduce.SUM, shape=(*pts, 2, cb), dst=h,
                      src0=View(Space.SPM, taps.base + tap, F32, (*ps, 2 * tap, ES)),
                      src1=View(Space.SPM, wts.base + ES, F32, (*w, 0, 0))),
            VecBinary(op=BinOp.MUL, shape=(*pts, cb), dst=out, src0=h.with_strides((*ps, ES)),
                      src1=View(Space.SPM, wts.base + 2 * ES, F32, (*w, 0))),
            VecBinary(op=BinOp.MUL, reduce=Reduce.SUM, shape=(*pts, cb), dst=out,
                      src0=View(Space.SPM, taps.base + 2 * tap, F32, (*ps, ES)),
                      src1=View(Space.SPM, wts.base + 3 * ES, F32, (*w, 0)))]


def _gather_compute(plan: ResizePlan, oy: tuple[int, int], ox: tuple[int, int], rows: int, cb: int,
                    base: int, sl: Slot, lay: Layout, res: dict[str, int]) -> list:
    """The vector instructions of one class-2 tile: indices (row part + column part, one ``vpu.add``), one
    ``vpu.gather`` of every tap from the source box (rows of ``res['cmax']`` pixels), the weights (``wy * wx``,
    one ``vpu.mul``) and the weighting."""
    th, tw = oy[1] - oy[0], ox[1] - ox[0]
    i32 = DType.I32
    table = View(Space.SPM, base + sl.src, F32, (lay.src,))
    nrows = rows * res["cmax"]
    idx = base + sl.idx
    out = View(Space.SPM, base + sl.out, F32, (tw * lay.out, lay.out, ES))
    if not plan.linear:
        return [VecBinary(op=BinOp.ADD, shape=(th, tw), dst=View(Space.SPM, idx, i32, (tw * 4, 4)),
                          src0=View(Space.SPM, res["rows"] + oy[0] * 4, i32, (4, 0)),
                          src1=View(Space.SPM, res["cols"] + ox[0] * 4, i32, (0, 4))),
                Gather(queue=Queue.VPU, shape=(th, tw), row=cb, rows=nrows, dst=out, table=table,
                       idx=View(Space.SPM, idx, i32, (tw * 4, 4)))]
    tp = lay.taps
    taps = View(Space.SPM, base + sl.taps, F32, (tw * 4 * tp, 4 * tp, tp, ES))
    wts = View(Space.SPM, base + sl.wts, F32, (tw * 16, 16, 4))
    idx_v = View(Space.SPM, idx, i32, (2 * tw * 8, tw * 8, 8, 4))       # [toh][ty][tow][tx]
    return [VecBinary(op=BinOp.ADD, shape=(th, 2, tw, 2), dst=idx_v,
                      src0=View(Space.SPM, res["rows"] + oy[0] * 8, i32, (8, 4, 0, 0)),
                      src1=View(Space.SPM, res["cols"] + ox[0] * 8, i32, (0, 0, 8, 4))),
            Gather(queue=Queue.VPU, shape=(th, 2, tw, 2), row=cb, rows=nrows, table=table, idx=idx_v,
                   dst=View(Space.SPM, taps.base, F32, (tw * 4 * tp, 2 * tp, 4 * tp, tp, ES))),
            VecBinary(op=BinOp.MUL, shape=(th, tw, 2, 2), dst=View(Space.SPM, wts.base, F32, (tw * 16, 16, 8, 4)),
                      src0=View(Space.SPM, res["wy"] + oy[0] * 8, F32, (8, 0, 4, 0)),
                      src1=View(Space.SPM, res["wx"] + ox[0] * 8, F32, (0, 8, 0, 4))),
            *weighting((th, tw), cb, out, taps, wts)]


def _gather_tables(plan: ResizePlan, t: SampleTiling, cmax: int) -> np.ndarray:
    """Region Wt of the gather method: per output row ``(wy1, wy2)`` and per column ``(wx1, wx2)`` (f32), then
    per output row ``(y_k - box row) * cmax`` and per column ``x_k - box column`` (i32), ``k`` the tap (one of each
    for nearest): a tap's row in its tile's source box is their sum."""
    def rel(a: AxisTaps, size: int, scale: int) -> np.ndarray:
        taps = np.stack([a.i1, a.i2], axis=1) if plan.linear else a.i1[:, None]
        first = np.zeros(len(a.i1), np.int64)
        for o0 in range(a.lo, a.hi, size):
            first[o0:o0 + size] = a.box(o0, min(o0 + size, a.hi))[0]
        return ((taps - first[:, None]) * scale).astype(np.int32)
    parts = []
    if plan.linear:
        parts += [np.stack([plan.ty.w1, plan.ty.w2], 1).astype(np.float32),
                  np.stack([plan.tx.w1, plan.tx.w2], 1).astype(np.float32)]
    parts += [rel(plan.ty, t.toh, cmax).view(np.float32), rel(plan.tx, t.tow, 1).view(np.float32)]
    return np.concatenate([p.ravel() for p in parts])


def resize_program(plan: ResizePlan, target: Target, method: str | None = None,
                   tiling: SampleTiling | None = None) -> SampleProgram:
    """The program of ``plan`` (regions X, Y, Wt) and its constants. ``method``: ``affine`` (class 1; CompileError
    unless both axes are affine by phase) or ``gather`` (class 2, any Resize); None picks affine when it applies."""
    method = method or ("affine" if plan.affine else "gather")
    if method not in METHODS:
        raise CompileError(f"method must be one of {', '.join(METHODS)}, not {method!r}")
    if method == "affine" and not plan.affine:
        raise CompileError("this Resize is not affine by phase on both axes (class 1); it needs index tables")
    empty = plan.ty.hi <= plan.ty.lo or plan.tx.hi <= plan.tx.lo
    t = tiling or (SampleTiling(1, 1, plan.c) if empty else choose_tiling(plan, target, method))
    line = target.bank_row
    vy, vx = ((0, 0), (0, 0)) if empty else ((plan.ty.lo, plan.ty.hi), (plan.tx.lo, plan.tx.hi))
    rmax = max((b - a for a, b in (plan.ty.box(o, min(o + t.toh, vy[1])) for o in range(*vy, t.toh))), default=1)
    cmax = max((b - a for a, b in (plan.tx.box(o, min(o + t.tow, vx[1])) for o in range(*vx, t.tow))), default=1)
    lay = _layout(plan, t.cb, method, target)
    sl = _slot(plan, method, t, rmax, cmax, lay, line)
    consts = (plan.weight_table() if plan.linear else np.zeros(1, np.float32)) if method == "affine" else \
        _gather_tables(plan, t, cmax)
    if 2 * sl.size + _up(consts.nbytes, line) > target.spm:
        raise TilingError(f"Resize tiling {t} needs {2 * sl.size + _up(consts.nbytes, line)} B of SPM for two ring "
                          f"slots and its constants, more than {target.spm} B")
    steps = _ResizeSteps(plan, method, t, lay, sl, 2 * sl.size, consts.size, cmax, vy, vx)
    pipe = RingPipeline()
    pipe.instrs += _fills(plan)
    for n in range(plan.n):
        for c0 in range(0, plan.c, t.cb):
            for oy0 in range(*vy, t.toh):
                for ox0 in range(*vx, t.tow):
                    steps.step(pipe, n, c0, oy0, ox0)
    regions = (Region("X", 0, plan.n * plan.h * plan.w * plan.c * ES),
               Region("Y", 1, plan.n * plan.ho * plan.wo * plan.c * ES), Region("Wt", 2, consts.nbytes))
    return SampleProgram(pipe.program(vector_config(target.spm), regions), consts, method, t)


@dataclass(frozen=True)
class _ResizeSteps:
    """The pipeline steps of one :func:`resize_program`: its plan, method, tiling, SPM layout and slot; the constants
    (``consts`` f32 values) at SPM byte ``res_at`` above the two ring slots; ``cmax`` the most input columns a tile
    reads; ``vy``, ``vx`` the output rows and columns the taps compute (the rest is filled)."""

    plan: ResizePlan
    method: str
    t: SampleTiling
    lay: Layout
    sl: Slot
    res_at: int
    consts: int
    cmax: int
    vy: tuple[int, int]
    vx: tuple[int, int]

    @cached_property
    def res(self) -> dict[str, int]:
        """Gather: the SPM byte of each table of :func:`_gather_tables` (``wy``, ``wx``, ``rows``, ``cols``), and
        ``cmax``."""
        plan, res, off = self.plan, {}, self.res_at
        if self.method == "gather":
            k = 2 if plan.linear else 1
            for name, count in (("wy", plan.ho * 2 if plan.linear else 0), ("wx", plan.wo * 2 if plan.linear else 0),
                                ("rows", plan.ho * k), ("cols", plan.wo * k)):
                res[name], off = off, off + count * 4
            res["cmax"] = self.cmax
        return res

    def step(self, pipe: RingPipeline, n: int, c0: int, oy0: int, ox0: int) -> None:
        """The step of image ``n``, channels ``c0..``, output rows ``oy0..`` and columns ``ox0..``."""
        plan, t, lay, sl = self.plan, self.t, self.lay, self.sl
        cb = min(t.cb, plan.c - c0)
        oy, ox = (oy0, min(oy0 + t.toh, self.vy[1])), (ox0, min(ox0 + t.tow, self.vx[1]))
        (ry0, ry1), (rx0, rx1) = plan.ty.box(*oy), plan.tx.box(*ox)
        base = pipe.slot * sl.size
        need_consts = self.method == "gather" or plan.linear
        loads = [] if pipe.steps or not need_consts else [
            DmaCopy(queue=Queue.DMA_LD, shape=(self.consts,), dst=View(Space.SPM, self.res_at, F32, (ES,)),
                    src=View(Space.DRAM, 0, F32, (ES,), "Wt"))]
        bh, bw = ry1 - ry0, rx1 - rx0
        pitch_row = (self.cmax if self.method == "gather" else bw) * lay.src
        pix, row_in, row_out = plan.c * ES, plan.w * plan.c * ES, plan.wo * plan.c * ES
        loads.append(DmaCopy(queue=Queue.DMA_LD, shape=(bh, bw, cb),
                             dst=View(Space.SPM, base + sl.src, F32, (pitch_row, lay.src, ES)),
                             src=View(Space.DRAM, ((n * plan.h + ry0) * plan.w + rx0) * pix + c0 * ES,
                                      F32, (row_in, pix, ES), "X")))
        th, tw = oy[1] - oy[0], ox[1] - ox[0]
        if self.method == "affine":
            compute = _affine_compute(plan, oy, ox, (ry0, rx0, bw), cb, base + sl.src, base + sl.out, tw,
                                      self.res_at, lay)
        else:
            compute = _gather_compute(plan, oy, ox, bh, cb, base, sl, lay, self.res)
        store = DmaCopy(queue=Queue.DMA_ST, shape=(th, tw, cb),
                        src=View(Space.SPM, base + sl.out, F32, (tw * lay.out, lay.out, ES)),
                        dst=View(Space.DRAM, ((n * plan.ho + oy[0]) * plan.wo + ox[0]) * pix + c0 * ES,
                                 F32, (row_out, pix, ES), "Y"))
        pipe.step(loads, compute, [store])


# ------------------------------------------------------------------------------------------------ AffineGrid

def affine_base(k: int, align_corners: int) -> np.ndarray:
    """AffineGrid's base coordinates along an axis of ``k`` as onnxruntime computes them: Eigen's ``LinSpaced(k, -1,
    1)`` (``-1 + i*(2/(k-1))``, the last one exactly 1; 1 alone when k = 1), times ``(k-1)/k`` unless
    align_corners."""
    if k == 1:
        return np.full(1, ONE if align_corners else np.float32(0), np.float32)
    v = np.float32(-1) + np.arange(k, dtype=np.float32) * (TWO / np.float32(k - 1))
    v[-1] = ONE
    return v if align_corners else (v * np.float32(k - 1) / np.float32(k)).astype(np.float32)


def affine_grid_values(theta: np.ndarray, h: int, w: int, align_corners: int) -> np.ndarray:
    """The grid ``(N, h, w, 2)`` of AffineGrid (opset 20, 2-D) for ``theta (N, 2, 3)``: ``(t0*x + t1*y) + t2`` in
    float32, onnxruntime's order (constant folding uses it; :func:`affine_grid` computes the same on chip)."""
    t = np.asarray(theta, np.float32)[:, :, :, None, None]
    bx, by = affine_base(w, align_corners)[None, None, :], affine_base(h, align_corners)[None, :, None]
    return np.stack([(t[:, k, 0] * bx + t[:, k, 1] * by) + t[:, k, 2] for k in (0, 1)], axis=-1).astype(np.float32)


def affine_grid(n: int, h: int, w: int, align_corners: int, target: Target) -> Program:
    """AffineGrid of a run-time ``theta`` on the vector unit: per image and block of grid rows, ``vpu.mul`` (t0*x),
    ``vpu.mul.sum`` without ``.z`` (+ t1*y, no reduction dimension) and ``vpu.add`` (+ t2), both grid components
    at once (theta's row stride 12 B is the component stride). Regions T ``(N, 2, 3)``, B (the base x then y
    coordinates, :func:`affine_base`) and G ``(N, h, w, 2)``, all f32."""
    row = w * 2 * ES
    res = _up(2 * row + (w + h) * ES)       # the two tiles are below it; then the base coordinates
    per = max(1, min(h, (target.spm - res) // (2 * _up(row)), MAX_EXTENT))
    per = min(per, -(-h // min(h, 8)))      # at least a few steps, so loads, compute and stores overlap
    if 2 * _up(per * row) + _up((w + h) * ES) + 2 * 64 > target.spm:
        raise TilingError(f"one AffineGrid row of {w} points does not fit {target.spm} B of SPM")
    slot = _up(per * row) + 64
    bx = 2 * slot
    by = bx + w * ES
    pipe = RingPipeline()
    for b in range(n):
        for r0 in range(0, h, per):
            rows = min(per, h - r0)
            base = pipe.slot * slot
            th = base + _up(per * row)   # this step's theta (6 floats)
            loads = [] if pipe.steps else [DmaCopy(queue=Queue.DMA_LD, shape=(w + h,),
                                                   dst=View(Space.SPM, bx, F32, (ES,)),
                                                   src=View(Space.DRAM, 0, F32, (ES,), "B"))]
            loads.append(DmaCopy(queue=Queue.DMA_LD, shape=(6,), dst=View(Space.SPM, th, F32, (ES,)),
                                 src=View(Space.DRAM, b * 6 * ES, F32, (ES,), "T")))
            shape = (rows, w, 2)
            tile = View(Space.SPM, base, F32, (w * 2 * ES, 2 * ES, ES))
            coef = [View(Space.SPM, th + j * ES, F32, (0, 0, 3 * ES)) for j in range(3)]   # theta[b, :, j]
            compute = [
                VecBinary(op=BinOp.MUL, shape=shape, dst=tile, src0=coef[0], src1=View(Space.SPM, bx, F32, (0, ES, 0))),
                VecBinary(op=BinOp.MUL, reduce=Reduce.SUM, shape=shape, dst=tile, src0=coef[1],
                          src1=View(Space.SPM, by + r0 * ES, F32, (ES, 0, 0))),
                VecBinary(op=BinOp.ADD, shape=shape, dst=tile, src0=tile, src1=coef[2]),
            ]
            store = DmaCopy(queue=Queue.DMA_ST, shape=shape, src=tile,
                            dst=View(Space.DRAM, (b * h + r0) * row, F32, (row, 2 * ES, ES), "G"))
            pipe.step(loads, compute, [store])
    regions = (Region("T", 0, n * 6 * ES), Region("B", 1, (w + h) * ES), Region("G", 2, n * h * row))
    return pipe.program(vector_config(target.spm), regions)
