"""Transposed 2-D convolution (ONNX ConvTranspose) by weight-pattern (phase) splitting, and the two input-swelling
baselines it is measured against (docs/perception.md#convtranspose).

Per spatial axis (input I, kernel k, stride s, dilation d, pads p_b/p_e, output_padding op) an output ``o`` lies in
the *uncropped* output at ``u = o + p_b``; its **phase** is ``phi = u mod s`` and its coarse position ``q = u // s``.
Phase phi's taps are the kernel indices ``k`` with ``k*d = phi (mod s)``; tap k reads input ``q + a_k`` with the
integer offset ``a_k = (phi - k*d) / s <= 0`` (:func:`axis_phases`). So each phase is a stride-1 correlation of the
*un-dilated* input with a sub-kernel of the flipped weights, and the ``s_h x s_w`` phases together use each of the
``kH x kW`` taps once: the weights are the same bytes rearranged offline (:func:`pack_transposed_weights`). A phase
with no taps (``gcd(d, s) > 1``) is the bias alone.

:func:`conv_transpose2d` runs all phases of an output tile from one input window: a tile is ``toh x tow`` coarse
positions, i.e. an ``s_h*toh x s_w*tow`` block of outputs. One DMA loads the window every phase needs (halo zeros
inserted by the DMA); per phase and run of taps one ``mxu.mm`` reads that window at the phase's offsets and
accumulates at the phase's interleaved accumulator positions (accumulator row and pixel strides multiplied by s), so
the accumulator tile *is* the output block in NHWC order and one ``dma.st`` writes it (cropped at the borders) in
full-width runs: the interleave (pixel shuffle) costs nothing. ``k == s`` is the degenerate case of one 1x1 tap per
phase and no halo: one GEMM whose column blocks are the phases, stored depth-to-space.

Baselines (``mode``): ``swell_spm`` is the same generator with one phase over a window the DMA zero-inserts into SPM
(fill, then a strided copy; the kernel rotated 180 degrees), i.e. the swelled convolution without the DRAM buffer
(Ethos-U's TRANSPOSE resampling); ``swell_dram`` (:func:`swell_input` + :func:`compiler.kernels.conv2d.conv2d`) writes
the zero-inserted, padded input to DRAM first and runs today's direct convolution on it with the rotated kernel (what
TVM and VTA do).

DRAM: X as NHWC in the operand dtype; Wt packed by :func:`pack_transposed_weights`; Y as NHWC in the accumulator type
(or the epilogue's requantized type); Bias, Scale as for :func:`compiler.kernels.conv2d.conv2d` (Bias per phase with
``phase_bias``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import ClassVar, NamedTuple

import numpy as np

from compiler.errors import CompileError, TilingError
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
from compiler.kernels.conv2d import (
    ConvPlan,
    ConvShape,
    axis_values,
    group_packs,
    pack_weights,
    rough_dram,
)
from compiler.kernels.gemm import ACC_TYPE
from compiler.kernels.staged_copy import Box, Operand, staged_copy
from isa import DmaCopy, DmaFill, DType, Halt, Program, Queue, Region, SemDecl, SemOp, Space, View
from isa.arch import Arch

MODES = ("split", "swell_spm", "swell_dram")
"""How a ConvTranspose is lowered: phase splitting (the default), or input swelling in SPM or in DRAM (baselines)."""


@dataclass(frozen=True)
class ConvTransposeShape:
    """A transposed convolution: batch N, C input channels of H x W, K output channels, R x S kernel, per-axis
    ``stride`` and ``dilation`` ``(h, w)``, ONNX's ``pad`` ``(top, left, bottom, right)``, ``output_padding``
    ``(h, w)`` and ``groups`` (one int stands for all values). ONNX's weights are ``(C, K/groups, R, S)``. A 1-D one
    has ``H = R = 1``."""

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
    output_padding: tuple[int, int] = 0
    groups: int = 1

    def __post_init__(self) -> None:
        for name, n in (("stride", 2), ("pad", 4), ("dilation", 2), ("output_padding", 2)):
            object.__setattr__(self, name, axis_values(getattr(self, name), n, name))
        if min(self.N, self.C, self.H, self.W, self.K, self.R, self.S, self.groups) < 1:
            raise CompileError(f"every size of a transposed convolution must be >= 1: {self}")
        if min(self.stride + self.dilation) < 1 or min(self.pad + self.output_padding) < 0:
            raise CompileError(f"strides and dilations must be >= 1, pads and output_padding >= 0, not "
                               f"stride={self.stride} dilation={self.dilation} pad={self.pad} "
                               f"output_padding={self.output_padding}")
        if self.C % self.groups or self.K % self.groups:
            raise CompileError(f"groups={self.groups} must divide C={self.C} and K={self.K}")
        if self.OH < 1 or self.OW < 1:
            raise CompileError(f"pads {self.pad} crop the whole {self.OH}x{self.OW} output of a transposed "
                               f"convolution of {self.H}x{self.W} by {self.R}x{self.S}")

    @property
    def OH(self) -> int:
        return _out(self.H, self.R, self.stride[0], self.dilation[0], self.pad[0], self.pad[2], self.output_padding[0])

    @property
    def OW(self) -> int:
        return _out(self.W, self.S, self.stride[1], self.dilation[1], self.pad[1], self.pad[3], self.output_padding[1])

    @property
    def Cg(self) -> int:
        return self.C // self.groups

    @property
    def Kg(self) -> int:
        return self.K // self.groups

    @property
    def macs(self) -> int:
        """Useful multiply-accumulates: every tap of every phase for every output of that phase (the split's count;
        border taps reading the zero halo included; docs/perception.md#phase-splitting)."""
        h, w = (sum(p.count * len(p.taps) for p in phases) for phases in (self.phases_h, self.phases_w))
        return self.N * self.K * self.Cg * h * w

    @property
    def swelled_macs(self) -> int:
        """Multiply-accumulates of the zero-inserted convolution: every output times every tap."""
        return self.N * self.OH * self.OW * self.K * self.Cg * self.R * self.S

    @property
    def phases_h(self) -> tuple[AxisPhase, ...]:
        return axis_phases(self.H, self.R, self.stride[0], self.dilation[0], self.pad[0], self.OH)

    @property
    def phases_w(self) -> tuple[AxisPhase, ...]:
        return axis_phases(self.W, self.S, self.stride[1], self.dilation[1], self.pad[1], self.OW)

    @property
    def text(self) -> str:
        return (f"stride {_text(self.stride)} pad {_text(self.pad)} dilation {_text(self.dilation)} output_padding "
                f"{_text(self.output_padding)} groups {self.groups}")

    def grouped(self, gpack: int) -> ConvTransposeShape:
        """``gpack`` consecutive groups as one with block-diagonal weights (:attr:`ConvTiling.gpack`)."""
        if gpack == 1:
            return self
        if self.groups % gpack:
            raise TilingError(f"gpack={gpack} must divide groups={self.groups}")
        return replace(self, groups=self.groups // gpack)


def _text(values: tuple[int, ...]) -> str:
    return str(values[0]) if len(set(values)) == 1 else "x".join(map(str, values))


def _out(size: int, k: int, s: int, d: int, pb: int, pe: int, op: int) -> int:
    """ONNX's output length ``s*(I-1) + op + (k-1)*d + 1 - p_b - p_e``."""
    return s * (size - 1) + op + (k - 1) * d + 1 - pb - pe


def transpose_pads(size: int, k: int, s: int, d: int, op: int, out: int, auto_pad: str) -> tuple[int, int]:
    """(p_b, p_e) giving output length ``out`` (ONNX: ``output_shape``, or ``size * s`` under auto_pad SAME_*):
    ``total = s*(size-1) + op + (k-1)*d + 1 - out`` split in half, the odd one at the end for SAME_UPPER and at the
    beginning otherwise (SAME_LOWER, and NOTSET with ``output_shape``), as ONNX defines it. CompileError when the
    output is longer than the uncropped one (negative padding)."""
    total = s * (size - 1) + op + (k - 1) * d + 1 - out
    if total < 0:
        raise CompileError(f"output length {out} exceeds the {out + total} a transposed convolution of {size} "
                           f"(kernel {k}, stride {s}, dilation {d}, output_padding {op}) gives")
    small = total // 2
    return (small, total - small) if auto_pad == "SAME_UPPER" else (total - small, small)


# -------------------------------------------------------------------------------------------------- the phases
@dataclass(frozen=True)
class AxisPhase:
    """One phase of one axis: the outputs ``o = first + s*j`` (``j < count``) whose uncropped position ``o + p_b`` is
    ``phase`` mod s; each is ``sum_i X[(o + p_b - phase)/s + offsets[i]] * W[taps[i]]`` (X outside [0, I) is 0)."""

    phase: int
    first: int
    count: int
    taps: tuple[int, ...]
    """Kernel indices, by increasing offset (decreasing index); empty: the outputs are the bias alone."""
    offsets: tuple[int, ...]
    """``a_k = (phase - k*d) / s <= 0`` of each tap."""


@lru_cache(maxsize=1024)
def axis_phases(size: int, k: int, s: int, d: int, pb: int, out: int) -> tuple[AxisPhase, ...]:
    """The ``s`` phases of one axis of a transposed convolution (input ``size``, kernel ``k``, stride ``s``,
    dilation ``d``, leading pad ``pb``, output length ``out``); see :class:`AxisPhase`."""
    phases = []
    for phi in range(s):
        taps = tuple(t for t in range(k - 1, -1, -1) if (t * d - phi) % s == 0)
        first = (phi - pb) % s
        phases.append(AxisPhase(phi, first, max(0, -(-(out - first) // s)), taps,
                                tuple((phi - t * d) // s for t in taps)))
    return tuple(phases)


def conv_transpose_reference(x: np.ndarray, w: np.ndarray, ct: ConvTransposeShape) -> np.ndarray:
    """The definition (docs/perception.md#convtranspose-semantics) as a scatter: every input pixel times every tap added
    at ``o = i*s + k*d - p_b``; NCHW in and out, ONNX's ``(C, K/g, R, S)`` weights; exact int64 for integers, float64
    for floats."""
    wide = np.int64 if np.issubdtype(x.dtype, np.integer) else np.float64
    (sh, sw), (dh, dw), (pt, pl, _, _) = ct.stride, ct.dilation, ct.pad
    y = np.zeros((ct.N, ct.K, ct.OH, ct.OW), wide)
    x, w = x.astype(wide), w.astype(wide)
    for g in range(ct.groups):
        xs, ws = x[:, g * ct.Cg:(g + 1) * ct.Cg], w[g * ct.Cg:(g + 1) * ct.Cg]
        for kh in range(ct.R):
            oh = np.arange(ct.H) * sh + kh * dh - pt
            vh = (oh >= 0) & (oh < ct.OH)
            for kw in range(ct.S):
                ow = np.arange(ct.W) * sw + kw * dw - pl
                vw = (ow >= 0) & (ow < ct.OW)
                part = np.einsum("nchw,cm->nmhw", xs[:, :, vh][:, :, :, vw], ws[:, :, kh, kw])
                y[:, g * ct.Kg:(g + 1) * ct.Kg, oh[vh][:, None], ow[vw][None, :]] += part
    return y


# --------------------------------------------------------------------------------------------------- the plans
@dataclass(frozen=True)
class PhaseTaps:
    """How one phase runs in a tile: its accumulator row (column) within a coarse position's ``expand`` rows, the
    window row of its first tap relative to the tile's window, the window rows between taps and the kernel index of
    each tap."""

    acc: int
    first: int
    step: int
    kernel: tuple[int, ...]


@dataclass(frozen=True)
class AxisPlan:
    """One axis of :func:`conv_transpose2d`'s tiling space. Tiles are runs of ``coarse`` positions; coarse position
    q holds accumulator rows ``expand*q .. expand*q + expand - 1``, and accumulator row r is output ``r - crop``. The
    tile of coarse positions ``[q0, q0 + t)`` reads the window positions ``[start + q0, start + q0 + t + halo)``, in
    which input element i sits at ``insert*i + shift`` (the others read zero)."""

    size: int
    out: int
    coarse: int
    expand: int
    crop: int
    start: int
    halo: int
    insert: int
    shift: int
    phases: tuple[PhaseTaps, ...]

    def window(self, q0: int, t: int) -> tuple[int, int, int, int]:
        """(first input element, elements, window position of the first, window length) of the tile at ``q0``."""
        x0, length = self.start + q0, t + self.halo
        i0 = max(0, -(-(x0 - self.shift) // self.insert))
        i1 = min(self.size - 1, (x0 + length - 1 - self.shift) // self.insert)
        return i0, max(0, i1 - i0 + 1), self.insert * i0 + self.shift - x0, length

    def stored(self, q0: int, t: int) -> tuple[int, int, int]:
        """(first accumulator row, rows, first output) the tile at ``q0`` stores: the rows inside the output."""
        r0 = max(0, self.crop - self.expand * q0)
        r1 = min(self.expand * t, self.out + self.crop - self.expand * q0)
        return r0, r1 - r0, self.expand * q0 + r0 - self.crop


def split_axis(size: int, k: int, s: int, d: int, pb: int, out: int) -> AxisPlan:
    """Phase splitting: coarse positions ``q = u // s`` of the uncropped output, all phases from one window of the
    un-dilated input."""
    phases = axis_phases(size, k, s, d, pb, out)
    a_min = min(a for p in phases for a in p.offsets)
    q_lo = pb // s
    taps = tuple(PhaseTaps(p.phase, p.offsets[0] - a_min if p.taps else 0,
                           p.offsets[1] - p.offsets[0] if len(p.taps) > 1 else 1, p.taps) for p in phases)
    return AxisPlan(size, out, (pb + out - 1) // s - q_lo + 1, s, pb - s * q_lo, q_lo + a_min, -a_min, 1, 0, taps)


def swell_axis(size: int, k: int, s: int, d: int, pb: int, out: int) -> AxisPlan:
    """Input swelling: one phase, the rotated kernel over the zero-inserted input padded by ``(k-1)*d - p_b`` in
    front (what :func:`swell_input` writes to DRAM, here inserted by the window DMA)."""
    return AxisPlan(size, out, out, 1, 0, 0, (k - 1) * d, s, (k - 1) * d - pb,
                    (PhaseTaps(0, 0, d, tuple(range(k - 1, -1, -1))),))


def plans(ct: ConvTransposeShape, mode: str = "split") -> tuple[AxisPlan, AxisPlan]:
    """The (h, w) axis plans of ``ct`` under ``mode`` (``split`` or ``swell_spm``)."""
    if mode not in ("split", "swell_spm"):
        raise CompileError(f"conv_transpose2d mode must be 'split' or 'swell_spm', not {mode!r}")
    axis = split_axis if mode == "split" else swell_axis
    return (axis(ct.H, ct.R, ct.stride[0], ct.dilation[0], ct.pad[0], ct.OH),
            axis(ct.W, ct.S, ct.stride[1], ct.dilation[1], ct.pad[1], ct.OW))


def _taps(ph: AxisPlan, pw: AxisPlan) -> list[tuple[PhaseTaps, PhaseTaps, int]]:
    """(h phase, w phase, index of its first tap in the packed weights) of every 2-D phase that has taps."""
    out, t = [], 0
    for a, b in itertools.product(ph.phases, pw.phases):
        if a.kernel and b.kernel:
            out.append((a, b, t))
            t += len(a.kernel) * len(b.kernel)
    return out


def tapless(ct: ConvTransposeShape, mode: str = "split") -> bool:
    """Whether some 2-D phase of ``ct`` has no taps (its outputs are the bias alone)."""
    ph, pw = plans(ct, mode)
    return any(not a.kernel or not b.kernel for a in ph.phases for b in pw.phases)


def pack_transposed_weights(w: np.ndarray, ct: ConvTransposeShape, rows: int, cols: int, mode: str = "split",
                            gpack: int = 1) -> np.ndarray:
    """ONNX's ``(C, K/g, R, S)`` weights as :func:`compiler.kernels.conv2d.pack_weights` blocks
    ``[g][nb][tap][cb][k][n]``, the taps of every phase in phase order (each phase's in the order its ``mxu.mm`` walks
    them): the same values rearranged (``swell_spm``: the kernel rotated 180 degrees)."""
    ph, pw = plans(ct, mode)
    taps = [(kh, kw) for a, b, _ in _taps(ph, pw) for kh in a.kernel for kw in b.kernel]
    kh, kw = np.array([t[0] for t in taps]), np.array([t[1] for t in taps])
    g, T = ct.groups, len(taps)
    wt = w.reshape(g, ct.Cg, ct.Kg, ct.R, ct.S)[:, :, :, kh, kw]                # (g, Cg, Kg, T)
    wt = wt.transpose(0, 2, 1, 3).reshape(ct.K, ct.Cg, T, 1)                    # as a conv's OIHW over T taps
    return pack_weights(wt, ConvShape(1, ct.C, T, 1, ct.K, T, 1, groups=g), rows, cols, gpack=gpack)


def phase_bias(bias: np.ndarray, ct: ConvTransposeShape, mode: str = "split") -> np.ndarray:
    """A per-channel bias as the per-phase table ``[phase_h][phase_w][K]`` :func:`conv_transpose2d` reads with
    ``phase_bias`` (the same values for every phase)."""
    ph, pw = plans(ct, mode)
    return np.ascontiguousarray(np.broadcast_to(bias, (ph.expand, pw.expand, ct.K))).ravel()


def phase_tap_sums(w: np.ndarray, ct: ConvTransposeShape, mode: str = "split") -> np.ndarray:
    """``[phase_h][phase_w][K]``: the sum of each output channel's weights over the taps of each phase (int64), what
    an input zero point contributes to that phase's outputs."""
    ph, pw = plans(ct, mode)
    wg = w.astype(np.int64).reshape(ct.groups, ct.Cg, ct.Kg, ct.R, ct.S).sum(1)    # (g, Kg, R, S)
    out = np.zeros((ph.expand, pw.expand, ct.K), np.int64)
    for a, b in itertools.product(ph.phases, pw.phases):
        if a.kernel and b.kernel:
            out[a.acc, b.acc] = wg[:, :, list(a.kernel)][:, :, :, list(b.kernel)].sum((2, 3)).ravel()
    return out


# ------------------------------------------------------------------------------------------- the tiling plan
@dataclass(frozen=True)
class TransposeTiling:
    """A tiling of :func:`conv_transpose2d`: output tiles of ``toh x tow`` coarse positions (``s_h*toh x s_w*tow``
    outputs under splitting; ``tow <= matrix.max_rows``) of ``tnb`` output-channel blocks (of ``cols`` channels) in
    the accumulators, ``tcb`` input-channel blocks (of ``rows`` channels) per step; ``x_all``, ``acc_bufs`` and
    ``gpack`` as :class:`compiler.kernels.conv2d.ConvTiling` has them.

    ``order``: ``"tile"`` walks the channel blocks inside each output tile (the window stays for all of them);
    ``"nb"`` walks the output tiles inside each run of ``tnb`` channel blocks, so that run's weights stay in SPM for
    the whole layer while the windows are read once per run (weight-stationary, as the GEMM's ``nm`` order: the
    better one when the weights do not all fit the SPM and are larger than the input)."""

    toh: int
    tow: int
    tcb: int = 1 << 16
    tnb: int = 1
    x_all: bool = False
    acc_bufs: int = 2
    gpack: int = 1
    order: str = "tile"


ORDERS = ("tile", "nb")


def _plan(ct: ConvTransposeShape, ph: AxisPlan, pw: AxisPlan, t: TransposeTiling, es: int, rows: int, cols: int,
          spm: int) -> ConvPlan:
    """What tiling ``t`` implies: window and weight bytes, blocks, residency (see
    :class:`compiler.kernels.conv2d.ConvPlan`)."""
    ct = ct.grouped(t.gpack)
    th, tw = t.toh + ph.halo, t.tow + pw.halo
    taps = sum(len(a.kernel) * len(b.kernel) for a, b, _ in _taps(ph, pw))
    cbs, nbs = -(-ct.Cg // rows), -(-ct.Kg // cols)
    tcb, tnb = min(t.tcb, cbs), min(t.tnb, nbs)
    x_all = t.x_all or tcb >= cbs
    x_slot = th * tw * (ct.Cg if x_all else tcb * rows) * es
    windows = ct.N * ct.groups * -(-ph.coarse // t.toh) * -(-pw.coarse // t.tow) * (-(-nbs // tnb) if t.order == "nb"
                                                                                      else 1)
    x_slots = 1 if x_all and windows == 1 else 2
    w_chunk = tnb * taps * tcb * rows * cols * es
    chunks = ct.groups * -(-nbs // tnb) * -(-cbs // tcb)
    acc_tile = ph.expand * t.toh * pw.expand * t.tow * tnb * cols * 4
    plan = ConvPlan(th, tw, ct.Cg, taps, tcb, tnb, cbs, nbs, x_slot, w_chunk, chunks, False, acc_tile, x_all, x_slots)
    return plan._replace(resident=plan.x_bytes + chunks * w_chunk <= spm)


def _const_bytes(ct: ConvTransposeShape, epilogue: Epilogue, phases: int) -> int:
    """SPM bytes of the per-channel constants after the slots (bias, per phase or not; scale) + word alignment."""
    return ct.K * 4 * (phases * epilogue.bias + (epilogue.out is not None)) + (3 if epilogue.spm_bytes else 0)


def _fits(ct, ph, pw, t: TransposeTiling, es: int, target: Target, spm: int) -> bool:
    p = _plan(ct, ph, pw, t, es, target.rows, target.cols, spm)
    return p.spm <= spm and t.acc_bufs * p.acc_tile <= target.acc and t.tow <= target.max_rows


def choose_tiling(ct: ConvTransposeShape, dtype: DType, target: Target, mode: str = "split",
                  const_bytes: int = 0) -> TransposeTiling:
    """The tallest tile (coarse positions; full width up to ``max_rows``) that fits, with as many input-channel
    blocks per step as fit; TilingError if not even one coarse position of one channel block fits."""
    ph, pw = plans(ct, mode)
    spm = target.spm - const_bytes
    for tow in dict.fromkeys((min(pw.coarse, target.max_rows), 1)):
        for tcb in range(-(-ct.Cg // target.rows), 0, -1):
            for toh in range(ph.coarse, 0, -1):
                t = TransposeTiling(toh, tow, tcb)
                if _fits(ct, ph, pw, t, dtype.size, target, spm):
                    return t
    raise TilingError(f"no tiling of the transposed convolution {ct} fits {spm} B of SPM and {target.acc} B of ACC "
                      f"(its weights for one tap group and channel block, or one window, are too large)")


def _fit_tcb(ct, ph, pw, t: TransposeTiling, es: int, target: Target, spm: int) -> int:
    """The most input-channel blocks per step with which ``t`` fits, or 0."""
    cbs = -(-ct.grouped(t.gpack).Cg // target.rows)
    return next((tcb for tcb in range(cbs, 0, -1) if _fits(ct, ph, pw, replace(t, tcb=tcb), es, target, spm)), 0)


def _loads(p: ConvPlan, t: TransposeTiling, tiles: int) -> tuple[int, int]:
    """(window loads, weight chunk loads) of a layer of ``tiles`` output tiles (per group) under plan ``p``."""
    nbg, csteps = -(-p.nbs // p.tnb), -(-p.cbs // p.tcb)
    x_loads = tiles * (nbg if t.order == "nb" else 1) * (1 if p.x_all else csteps) * \
        (1 if p.x_all or t.order == "nb" else nbg)
    once = p.resident or (t.order == "nb" and csteps == 1)
    return x_loads, p.chunks if once else tiles * nbg * csteps


def _steps_of(ct: ConvTransposeShape, ph: AxisPlan, pw: AxisPlan, t: TransposeTiling, p: ConvPlan) -> int:
    """Steps (a weight chunk's matrix work over one tile's channel group each) of tiling ``t`` with plan ``p``."""
    gs = ct.grouped(t.gpack)
    return gs.N * gs.groups * -(-ph.coarse // t.toh) * -(-pw.coarse // t.tow) * -(-p.nbs // p.tnb) * \
        -(-p.cbs // p.tcb)


def _rough_cycles(ct: ConvTransposeShape, ph: AxisPlan, pw: AxisPlan, t: TransposeTiling, p: ConvPlan,
                  arch: Arch) -> float:
    """A quick estimate (cycles) ranking tilings before the exact pricing: the busiest of the matrix unit (each
    phase's taps stream the tile's coarse pixels), the load and store queues and the DRAM bus."""
    r, c = arch.matrix.rows, arch.matrix.cols
    ct = ct.grouped(t.gpack)
    tiles = ct.N * ct.groups * -(-ph.coarse // t.toh) * -(-pw.coarse // t.tow)
    nbg, csteps = -(-p.nbs // p.tnb), -(-p.cbs // p.tcb)
    s = t.toh * t.tow
    mm = tiles * nbg * csteps * (p.tnb * p.taps * p.tcb * max(s, r) + len(_taps(ph, pw)) * (2 * r + c))
    x_loads, w_loads = _loads(p, t, tiles)
    x_bytes, w_bytes = x_loads * p.x_slot, w_loads * p.w_chunk
    y_bytes = ct.N * ct.OH * ct.OW * ct.K * 4
    per_dma, bw = rough_dram(arch)
    ld = (x_bytes + w_bytes) / bw + (x_loads + w_loads) * per_dma
    st = y_bytes / bw + tiles * nbg * per_dma
    if t.acc_bufs == 1:
        mm += st
    return max(mm, ld, st, (x_bytes + w_bytes + y_bytes) / bw)


SEARCH_PRICED = 6
"""Candidates per accumulator ring depth, best by :func:`_rough_cycles`, that the search prices."""


@dataclass(frozen=True)
class TransposeSearch(TilingSearch[TransposeTiling]):
    """:func:`search_conv_transpose_tiling`'s search (:mod:`compiler.kernels.common.search`): the best
    ``SEARCH_PRICED`` of each accumulator depth by :func:`_rough_cycles`, priced by :func:`transpose_estimate` with
    the search's :class:`~compiler.kernels.common.sink.PriceMemo`; the least (price, rank) wins."""

    ct: ConvTransposeShape
    dtype: DType
    target: Target
    epilogue: Epilogue = NO_EPILOGUE
    mode: str = "split"
    per_phase_bias: bool = False
    hidden_constants: bool = False
    memo: PriceMemo = field(default_factory=PriceMemo, compare=False)
    rule: ClassVar[SearchRule] = SearchRule(SEARCH_PRICED)
    groups: ClassVar[tuple[int, ...]] = (2, 1)   # accumulator ring depths

    def rank(self, ranking: Ranking[TransposeTiling]) -> None:
        """Offer every tiling (see :func:`search_conv_transpose_tiling`) that fits, ranked by :func:`_rough_cycles`,
        grouped by accumulator depth; TilingError when none fits."""
        ct, dtype, target = self.ct, self.dtype, self.target
        arch, r, c, es = target.arch, target.rows, target.cols, dtype.size
        ph, pw = plans(ct, self.mode)
        spm = target.spm - _const_bytes(ct, self.epilogue, ph.expand * pw.expand if self.per_phase_bias else 1)
        refused = None
        for gpack in group_packs(ConvShape(1, ct.C, 1, 1, ct.K, 1, 1, groups=ct.groups), r, c):
            gs = ct.grouped(gpack)
            try:
                tallest = choose_tiling(gs, dtype, target.with_spm(spm), self.mode)
            except TilingError as e:
                refused = refused or e
                continue
            heights = {tallest.toh} | {-(-ph.coarse // n) for n in range(1, 9)} | {h for h in (1, 2, 4)
                                                                                   if h < ph.coarse}
            widths = {-(-tallest.tow // n) for n in (1, 2, 4)}
            nbs = -(-gs.Kg // c)
            blocks = {nbs} | {1 << i for i in range(nbs.bit_length()) if 1 << i < nbs}
            for toh, tow, tnb, order in sorted(itertools.product(heights, widths, blocks, ORDERS), reverse=True):
                if order == "nb" and tnb >= nbs:   # one run of blocks: the same as tile order
                    continue
                for x_all, bufs in itertools.product((False, True), (2, 1)):
                    t = TransposeTiling(toh, tow, 1, tnb, x_all, bufs, gpack, order)
                    tcb = _fit_tcb(ct, ph, pw, t, es, target, spm)
                    if tcb:
                        t = replace(t, tcb=tcb)
                        plan = _plan(ct, ph, pw, t, es, r, c, spm)
                        if under_program_max(_steps_of(ct, ph, pw, t, plan)):
                            ranking.offer(_rough_cycles(ct, ph, pw, t, plan, arch), t, bufs)
        if not ranking:
            raise refused or TilingError(f"no tiling of the transposed convolution {ct} fits {spm} B of SPM")

    def price(self, t: TransposeTiling, bound: float | None) -> int:
        return transpose_estimate(self.ct, self.dtype, self.target, t, self.epilogue, self.mode, self.per_phase_bias,
                                  self.hidden_constants, self.memo, bound)


@lru_cache(maxsize=256)
def search_conv_transpose_tiling(ct: ConvTransposeShape, dtype: DType, target: Target,
                                 epilogue: Epilogue | None = None, mode: str = "split", per_phase_bias: bool = False,
                                 hidden_constants: bool = False) -> TransposeTiling:
    """The tiling of :func:`conv_transpose2d` with the fewest predicted cycles on ``target`` (:class:`TransposeSearch`).

    Candidates, drawn as :func:`compiler.kernels.conv2d.search_conv_tiling` draws them (in coarse positions): heights
    splitting the coarse rows into 1 to 8 tiles, 1, 2 and 4 rows, and the tallest that fits; the widest tile, its
    halves and quarters; 1, 2, 4, ... or all output-channel blocks per accumulator tile; both loop orders; the
    window with each step's channels or all of them; one or two accumulator tiles; each with the most input-channel
    blocks per step that fit; all of it for each number of groups per array tile. Ranked by :func:`_rough_cycles`,
    the best ``SEARCH_PRICED`` of each accumulator depth priced by :func:`transpose_estimate` (the program's
    :func:`isa.cost.program_estimate`; ``hidden_constants``: not counting the leading constant loads, which
    cross-layer prefetch hides); the least price wins, ties to the better-ranked."""
    return TransposeSearch(ct, dtype, target, epilogue or Epilogue(), mode, per_phase_bias, hidden_constants).choose()


def conv_transpose_on_array(ct: ConvTransposeShape, dtype: DType, target: Target, epilogue: Epilogue | None = None,
                            mode: str = "split", per_phase_bias: bool = False, hidden_constants: bool = False,
                            blocks: bool = True) -> tuple[Target, TransposeTiling]:
    """The target the program and :func:`pack_transposed_weights` are built for, and the tiling:
    :func:`search_conv_transpose_tiling`'s on ``target`` or, when no tiling fits its whole array (and ``blocks``), on
    the block of the array that :func:`~compiler.kernels.common.search.on_array_blocks` finds (priced by
    :func:`transpose_estimate`). TilingError when not even a 1 x 1 block fits."""
    return on_array_blocks(
        target, lambda t: search_conv_transpose_tiling(ct, dtype, t, epilogue, mode, per_phase_bias, hidden_constants),
        lambda t, tiling: transpose_estimate(ct, dtype, t, tiling, epilogue, mode, per_phase_bias, hidden_constants),
        blocks)


# -------------------------------------------------------------------------------------------- the program
def _window_load(ph: AxisPlan, pw: AxisPlan, q0h: int, q0w: int, toh: int, tow: int, channels: int, dst: View,
                 src: View, fill: int | float, waits: tuple[SemOp, ...], signals: tuple[SemOp, ...]) -> list:
    """The DMA(s) loading one tile's input window (rows, pixels, ``channels``) into ``dst``: one padded copy when
    nothing is zero-inserted, else a fill of the whole window and a strided copy of the input pixels in it. ``src``
    is X's view of the tile's first channel at pixel (0, 0) (strides: row, pixel, element)."""
    (ih, nh, dh, th), (iw, nw, dw, tw) = ph.window(q0h, toh), pw.window(q0w, tow)
    src = replace(src, base=src.base + ih * src.strides[0] + iw * src.strides[1])
    if ph.insert == pw.insert == 1:
        return padded_load((th, tw, channels), dst, src, ((dh, th - dh - nh), (dw, tw - dw - nw)), fill,
                           waits=waits, signals=signals)
    out = [DmaFill(queue=Queue.DMA_LD, shape=(th, tw, channels), dst=dst, value=fill, waits=waits)]
    if nh and nw:
        (row, pix, e), (zh, zw) = dst.strides, (ph.insert, pw.insert)
        out.append(DmaCopy(queue=Queue.DMA_LD, shape=(nh, nw, channels), src=src,
                           dst=View(Space.SPM, dst.base + dh * row + dw * pix, dst.dtype, (zh * row, zw * pix, e))))
    out[-1] = replace(out[-1], signals=signals)
    return out


@dataclass(frozen=True)
class _Step:
    """One step of the program: an output tile (batch b, coarse origin q0h, q0w), a group, a run of output-channel
    blocks from nb0, a run of input-channel blocks from cb0 (the si-th of its tile)."""

    b: int
    q0h: int
    q0w: int
    g: int
    nb0: int
    cb0: int
    si: int


def _steps(ct: ConvTransposeShape, ph: AxisPlan, pw: AxisPlan, t: TransposeTiling, p: ConvPlan) -> list[_Step]:
    """The steps in program order: channel runs inside tiles (order ``tile``) or tiles inside channel runs
    (``nb``); the input-channel steps innermost."""
    tiles = list(itertools.product(range(ct.N), range(0, ph.coarse, t.toh), range(0, pw.coarse, t.tow)))
    runs = list(itertools.product(range(ct.groups), range(0, p.nbs, p.tnb)))
    cs = list(enumerate(range(0, p.cbs, p.tcb)))
    pairs = [(tl, r) for r in runs for tl in tiles] if t.order == "nb" else [(tl, r) for tl in tiles for r in runs]
    return [_Step(*tl, *r, cb0, si) for tl, r in pairs for si, cb0 in cs]


class TransposeLayout(NamedTuple):
    """:func:`conv_transpose2d`'s fixed choices for one transposed convolution and tiling (:meth:`of`): the layer
    (``full``) and the convolution the array runs (``ct``, grouped by the tiling's gpack), the axis plans, the plan,
    the 2-D phases that have taps, where everything lives in SPM and ACC and the strides the instructions use
    (bytes), and the steps in order."""

    full: ConvTransposeShape
    ct: ConvTransposeShape
    dtype: DType
    target: Target
    t: TransposeTiling
    p: ConvPlan
    epilogue: Epilogue
    pad_value: int | float
    ph: AxisPlan
    pw: AxisPlan
    phases: list[tuple[PhaseTaps, PhaseTaps, int]]
    per_phase_bias: bool   # the bias holds a value per (phase_h, phase_w, channel)
    init: bool             # the accumulators start from the bias (the store queue copies it), or zeros when a phase
                           # has no taps
    vector: Epilogue       # what the vector unit does (the rest of the epilogue)
    yt: DType              # the output's type
    w_base0: int           # the first weight chunk
    bias_base: int         # the bias, then the scale, after the slots, word-aligned
    bias_len: int
    scale_base: int
    tile: int              # one packed weight tile
    chunk: int             # the packed weights of one (group, output block)
    nb_stride: int         # one output block in a weight chunk
    row_bytes: int         # one accumulator pixel
    acc_pix_row: int       # one accumulator row of pixels
    steps: list[_Step]

    @classmethod
    def of(cls, ct: ConvTransposeShape, dtype: DType, target: Target, tiling: TransposeTiling | None,
           epilogue: Epilogue, pad_value: int | float, mode: str, per_phase_bias: bool) -> TransposeLayout:
        """The layout of ``conv_transpose2d(ct, dtype, target, tiling, epilogue, pad_value, mode,
        per_phase_bias)``; TilingError or CompileError when it cannot take them."""
        es, rows, cols = dtype.size, target.rows, target.cols
        ph, pw = plans(ct, mode)
        nphase = ph.expand * pw.expand
        per_phase_bias = per_phase_bias and epilogue.bias
        const = _const_bytes(ct, epilogue, nphase if per_phase_bias else 1)
        t = tiling or choose_tiling(ct, dtype, target, mode, const)
        p = _plan(ct, ph, pw, t, es, rows, cols, target.spm - const)
        _check_layout(t, p, const, target, epilogue)
        check_program_max(_steps_of(ct, ph, pw, t, p), t, ct)
        gs, phases = ct.grouped(t.gpack), _taps(ph, pw)
        bias_base, bias_len = -(-p.spm // 4) * 4, gs.K * (nphase if per_phase_bias else 1)
        tile = rows * cols * es
        row_bytes = p.acc_tile // (ph.expand * t.toh * pw.expand * t.tow)
        return cls(ct, gs, dtype, target, t, p, epilogue, pad_value, ph, pw, phases, per_phase_bias,
                   epilogue.bias or len(phases) < nphase, replace(epilogue, bias=False),
                   epilogue.out or ACC_TYPE[dtype], p.x_bytes, bias_base, bias_len,
                   bias_base + bias_len * 4 * epilogue.bias, tile, p.taps * p.cbs * tile, p.taps * p.tcb * tile,
                   row_bytes, pw.expand * t.tow * row_bytes, _steps(gs, ph, pw, t, p))

    @property
    def acc_empty(self) -> str:
        """The semaphore of free accumulator tiles (1 or 2)."""
        return "acc_empty" if self.t.acc_bufs == 2 else "acc1_empty"

    def window(self, s: _Step) -> tuple:
        """What identifies the input window step ``s`` reads (steps with one read one load)."""
        return (s.b, s.q0h, s.q0w, s.g) + ((s.nb0,) * (self.t.order == "nb") if self.p.x_all else (s.nb0, s.cb0))

    def chunk_id(self, s: _Step) -> int:
        """The weight chunk step ``s`` multiplies by."""
        p = self.p
        return (s.g * -(-p.nbs // p.tnb) + s.nb0 // p.tnb) * -(-p.cbs // p.tcb) + s.si

    def prologue(self) -> list:
        """The loads of the bias and the scale that start the program."""
        ep, at, out = self.epilogue, ACC_TYPE[self.dtype], []
        if ep.bias:
            out.append(DmaCopy(queue=Queue.DMA_LD, shape=(self.bias_len,),
                               dst=View(Space.SPM, self.bias_base, at, (4,)), src=View(Space.DRAM, 0, at, (4,), "Bias"),
                               signals=(sem_op("bias_init"),)))
        if ep.out is not None:
            out.append(DmaCopy(queue=Queue.DMA_LD, shape=(self.ct.K,),
                               dst=View(Space.SPM, self.scale_base, DType.F32, (4,)),
                               src=View(Space.DRAM, 0, DType.F32, (4,), "Scale"), signals=(sem_op("bias_ready"),)))
        return out

    def program(self, instrs: list) -> Program:
        """The Program of the instructions ``instrs``: its regions and semaphores."""
        ct, full, t, p, ep, es = self.ct, self.full, self.t, self.p, self.epilogue, self.dtype.size
        sems = (SemDecl("x_full", 0), SemDecl("x_empty", 2), SemDecl("w_full", 0), SemDecl("acc_full", 0))
        sems += (SemDecl("init_full", 0),) + (SemDecl("bias_init", 0),) * ep.bias if self.init \
            else (SemDecl(self.acc_empty, t.acc_bufs),)
        sems += () if p.resident else (SemDecl("w_empty", 2),)
        sems += (SemDecl("out_full", 0),) if self.vector.active else ()
        sems += (SemDecl("bias_ready", 0),) if ep.out is not None else ()
        regions = (Region("X", 0, ct.N * ct.H * ct.W * ct.C * es), Region("Wt", 1, ct.groups * p.nbs * self.chunk),
                   Region("Y", 2, ct.N * full.OH * full.OW * ct.K * self.yt.size))
        regions += (Region("Bias", 3, self.bias_len * 4),) if ep.bias else ()
        regions += (Region("Scale", 3 + ep.bias, ct.K * 4),) if ep.out is not None else ()
        return Program(config=self.target.config, regions=regions, sems=sems, instrs=tuple(instrs))


def _check_layout(t: TransposeTiling, p: ConvPlan, const: int, target: Target, epilogue: Epilogue) -> None:
    """CompileError for a residual; TilingError when tiling ``t`` (plan ``p``, ``const`` bytes of constants) does
    not fit ``target``."""
    if epilogue.residual:
        raise CompileError("a transposed convolution takes no residual")
    if p.spm + const > target.spm or t.acc_bufs * p.acc_tile > target.acc or t.acc_bufs not in (1, 2) \
            or t.tow > target.max_rows or t.order not in ORDERS:
        raise TilingError(f"tiling {t} needs {p.spm + const} B of SPM and {t.acc_bufs * p.acc_tile} B of ACC (1 or 2 "
                          f"accumulator tiles, tiles at most {target.max_rows} wide, order one of {ORDERS})")


class _StepPlace(NamedTuple):
    """Where one step of :class:`TransposeEmitter` works: its tile's coarse rows and columns (and output rows and
    columns, window columns), its output-channel blocks and channels, accumulator tile (ACC bytes), input-channel
    blocks and channels (from ``c0``), whether it loads a new window (and uses it for the last time), the window's
    slot, base and channels (``xc`` from ``xc0``), its weight chunk (whether it loads it, uses it for the last time)
    and whether it starts or finishes the accumulator tile."""

    toh: int
    tow: int
    eh: int
    ew: int
    tw: int
    nbn: int
    ng: int
    acc_base: int
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
    w_last: bool
    first: bool
    last: bool


class _Rings:
    """What :class:`TransposeEmitter`'s steps advance: windows, weight chunks and accumulator tiles used so far, the
    resident chunks loaded and where the last tile store is (or None)."""

    __slots__ = ("xs", "ws", "accs", "loaded", "last_store_at")

    def __init__(self) -> None:
        self.xs = self.ws = self.accs = 0
        self.loaded: set[int] = set()
        self.last_store_at: int | None = None


class TransposeEmitter:
    """:func:`conv_transpose2d`'s instructions for one :class:`TransposeLayout`, emitted into a sink
    (:mod:`compiler.kernels.common.sink`): a program sink gets the program, an estimating sink its price.

    Per step (an output tile of ``toh x tow`` coarse positions, ``tnb`` output-channel blocks, ``tcb`` input-channel
    blocks; :class:`TransposeTiling` orders them): the window is loaded when the step needs another one (once per
    tile and run of output blocks with ``x_all``), a weight chunk when it needs another one (each once per layer when
    all fit the SPM, ring of 2 otherwise; the first ahead of the first window); the accumulator tile starts from the
    bias (copied from SPM by the store queue after the store that freed it), from zeros when some phase has no taps
    and there is no bias, else from the first product (``mxu.mm.z``). Per phase one ``mxu.mm`` per run of equal
    blocks loops ``[nb, kh, kw, cb, oh]`` over its taps, streaming the tile's coarse pixels into its interleaved
    accumulator positions; one ``dma.st`` writes the tile's outputs (the rows and columns inside the output) in NHWC
    order."""

    def __init__(self, layout: TransposeLayout) -> None:
        self.L = layout

    def emit(self, sink: Sink) -> None:
        """The whole program, in order, into ``sink`` (none of it after an estimating sink stops)."""
        steps, rings = self.L.steps, _Rings()
        sink.extend(self.L.prologue())
        for k, s in enumerate(steps):
            place = self._place(s, steps[k - 1] if k else None, steps[k + 1] if k + 1 < len(steps) else None, rings)
            self._step(sink, k == 0, s, place, rings)
            if sink.check():
                return
        sink.extend([Halt()])

    def _place(self, s: _Step, prev: _Step | None, nxt: _Step | None, rings: _Rings) -> _StepPlace:
        """Where step ``s`` works (between ``prev`` and ``nxt``, the ring positions from ``rings``)."""
        L = self.L
        ct, t, p, ph, pw, rows, cols = L.ct, L.t, L.p, L.ph, L.pw, L.target.rows, L.target.cols
        toh, tow = min(t.toh, ph.coarse - s.q0h), min(t.tow, pw.coarse - s.q0w)
        nbn, ncb = min(p.tnb, p.nbs - s.nb0), min(p.tcb, p.cbs - s.cb0)
        c0, tc = s.cb0 * rows, min(ct.Cg - s.cb0 * rows, ncb * rows)
        x_new = prev is None or L.window(prev) != L.window(s)
        cid = L.chunk_id(s)
        return _StepPlace(toh, tow, ph.expand * toh, pw.expand * tow, tow + pw.halo, nbn,
                          min(nbn * cols, ct.Kg - s.nb0 * cols), (rings.accs % t.acc_bufs) * p.acc_tile, ncb, c0, tc,
                          x_new, nxt is None or L.window(nxt) != L.window(s),
                          rings.xs % 2 if x_new else (rings.xs - 1) % 2, *((ct.Cg, 0) if p.x_all else (tc, c0)), cid,
                          cid not in rings.loaded if p.resident else prev is None or L.chunk_id(prev) != cid,
                          not p.resident and (nxt is None or L.chunk_id(nxt) != cid),
                          s.si == 0, s.si == -(-p.cbs // p.tcb) - 1)

    def _step(self, sink: Sink, first_step: bool, s: _Step, pl: _StepPlace, rings: _Rings) -> None:
        """One step: its window and weight loads, the accumulators' start, the matrix work and, when it finishes
        the accumulator tile, the epilogue and store."""
        L = self.L
        if pl.w_new and first_step:   # (the first chunk ahead of the first window: prefetch)
            self._w_load(sink, s, pl, rings)
        if pl.x_new:
            es, ct, dtype = L.dtype.size, L.ct, L.dtype
            pix = pl.xc * es
            sink.extend(_window_load(L.ph, L.pw, s.q0h, s.q0w, pl.toh, pl.tow, pl.xc,
                                     View(Space.SPM, pl.slot % L.p.x_slots * L.p.x_slot, dtype, (pl.tw * pix, pix, es)),
                                     View(Space.DRAM, (s.b * ct.H * ct.W * ct.C + s.g * ct.Cg + pl.xc0) * es, dtype,
                                          (ct.W * ct.C * es, ct.C * es, es), "X"),
                                     L.pad_value, (sem_op("x_empty"),), (sem_op("x_full"),)))
            rings.xs += 1
        if pl.w_new and not first_step:
            self._w_load(sink, s, pl, rings)
        if pl.first and L.init:   # (after the store that freed the tile: ring of 2, two back)
            sink.place(None if rings.last_store_at is None or L.t.acc_bufs == 1 else rings.last_store_at, None,
                       self._acc_start, s, pl, rings.accs)
        waits = ("x_full",) * pl.x_new + ("w_full",) * pl.w_new + ("init_full" if L.init else L.acc_empty,) * pl.first
        signals = ("x_empty",) * pl.x_last + ("w_empty",) * pl.w_last + ("acc_full",) * pl.last
        sink.nests(self._matmuls(pl, rings), waits, signals)
        if pl.last:
            self._drain(sink, s, pl, rings)

    def _w_load(self, sink: Sink, s: _Step, pl: _StepPlace, rings: _Rings) -> None:
        """The step's weight chunk load."""
        L = self.L
        p, dtype, es, tile = L.p, L.dtype, L.dtype.size, L.tile
        extents, inner = tile_extents(L.target.rows, L.target.cols, es)
        sink.extend([DmaCopy(
            queue=Queue.DMA_LD, shape=(pl.nbn, p.taps, pl.ncb, *extents),
            dst=View(Space.SPM, L.w_base0 + (pl.cid if p.resident else rings.ws % 2) * p.w_chunk, dtype,
                     (L.nb_stride, p.tcb * tile, tile, *inner)),
            src=View(Space.DRAM, (s.g * p.nbs + s.nb0) * L.chunk + s.cb0 * tile, dtype,
                     (L.chunk, p.cbs * tile, tile, *inner), "Wt"),
            waits=() if p.resident else (sem_op("w_empty"),), signals=(sem_op("w_full"),))])
        rings.loaded.add(pl.cid)
        rings.ws += 1

    def _acc_start(self, s: _Step, pl: _StepPlace, accs: int) -> list:
        """What the accumulator tile starts from: the bias (per phase or per channel), or zeros."""
        L = self.L
        ct, ph, pw, acc, row_bytes, ad = L.ct, L.ph, L.pw, L.acc_pix_row, L.row_bytes, ACC_TYPE[L.dtype]
        ch = s.g * ct.Kg + s.nb0 * L.target.cols
        dst = View(Space.ACC, pl.acc_base, ad, (acc, row_bytes, 4))
        sync = dict(waits=(sem_op("bias_init"),) * (accs == 0 and L.epilogue.bias), signals=(sem_op("init_full"),))
        if not L.epilogue.bias:
            return [DmaFill(queue=Queue.DMA_ST, shape=(pl.eh, pl.ew, pl.ng), dst=dst, value=0, **sync)]
        if L.per_phase_bias and ph.expand * pw.expand > 1:   # [phase_h][phase_w][K] onto the interleaved tile
            return [DmaCopy(queue=Queue.DMA_ST, shape=(pl.toh, ph.expand, pl.tow, pw.expand, pl.ng),
                            dst=View(Space.ACC, pl.acc_base, ad, (ph.expand * acc, acc, pw.expand * row_bytes,
                                                                  row_bytes, 4)),
                            src=View(Space.SPM, L.bias_base + ch * 4, ad, (0, pw.expand * ct.K * 4, 0, ct.K * 4, 4)),
                            **sync)]
        return [DmaCopy(queue=Queue.DMA_ST, shape=(pl.eh, pl.ew, pl.ng), dst=dst,
                        src=View(Space.SPM, L.bias_base + ch * 4, ad, (0, 0, 4)), **sync)]

    def _matmuls(self, pl: _StepPlace, rings: _Rings) -> MatMulNests:
        """The step's matrix work: per phase with taps, its loop nests (:func:`_phase_nests`)."""
        L = self.L
        p, es, tile, row_bytes, acc = L.p, L.dtype.size, L.tile, L.row_bytes, L.acc_pix_row
        pix = pl.xc * es
        row = pl.tw * pix
        x_base = pl.slot % p.x_slots * p.x_slot
        w_base = L.w_base0 + (pl.cid if p.resident else (rings.ws - 1) % 2) * p.w_chunk
        ad = ACC_TYPE[L.dtype]
        return MatMulNests(nest for a, b, tap0 in L.phases for nest in _phase_nests(
            a, b, pl.toh, pl.tow, pl.ng, pl.tc, pl.first and not L.init, L.target, es,
            View(Space.ACC, pl.acc_base + a.acc * acc + b.acc * row_bytes, ad, ()),
            (L.ph.expand * acc, L.pw.expand * row_bytes),
            View(Space.SPM, x_base + (pl.c0 - pl.xc0) * es + a.first * row + b.first * pix, L.dtype, (row, pix)),
            View(Space.SPM, w_base + tap0 * p.tcb * tile, L.dtype, ()), L.nb_stride, p.tcb * tile))

    def _drain(self, sink: Sink, s: _Step, pl: _StepPlace, rings: _Rings) -> None:
        """The finished accumulator tile's epilogue (the vector unit's) and its store: the rows and columns inside
        the output."""
        L = self.L
        ct, full, yt, eo, ad = L.ct, L.full, L.yt, L.yt.size, ACC_TYPE[L.dtype]
        tile_view = out_view = View(Space.ACC, pl.acc_base, ad, (L.acc_pix_row, L.row_bytes, 4))
        if L.vector.active:
            ch = (s.g * ct.Kg + s.nb0 * L.target.cols) * 4
            ops = epilogue_ops(L.vector, (pl.eh, pl.ew, pl.ng), tile_view,
                               View(Space.SPM, L.bias_base + ch, ad, (0, 0, 4)),
                               View(Space.SPM, L.scale_base + ch, DType.F32, (0, 0, 4)))
            sink.extend(synced_epilogue(L.vector, ops, first=rings.accs == 0) if sink.semaphores else ops)
            if L.epilogue.out is not None:
                out_view = View(Space.ACC, pl.acc_base, yt, (pl.ew * pl.ng * eo, pl.ng * eo, eo))
        (r0, nr, oh0), (q0, nc, ow0) = L.ph.stored(s.q0h, pl.toh), L.pw.stored(s.q0w, pl.tow)
        y_off = (((s.b * full.OH + oh0) * full.OW + ow0) * full.K + s.g * ct.Kg + s.nb0 * L.target.cols) * eo
        rings.last_store_at = sink.mark()
        sink.extend([DmaCopy(queue=Queue.DMA_ST, shape=(nr, nc, pl.ng),
                             dst=View(Space.DRAM, y_off, yt, (full.OW * full.K * eo, full.K * eo, eo), "Y"),
                             src=replace(out_view, base=out_view.base + r0 * out_view.strides[0]
                                         + q0 * out_view.strides[1]),
                             waits=(sem_op("out_full" if L.vector.active else "acc_full"),),
                             signals=() if L.init else (sem_op(L.acc_empty),))])
        rings.accs += 1


def conv_transpose2d(ct: ConvTransposeShape, dtype: DType, target: Target, tiling: TransposeTiling | None = None,
                     epilogue: Epilogue | None = None, pad_value: int | float = 0, mode: str = "split",
                     per_phase_bias: bool = False) -> Program:
    """The program for one transposed convolution (``mode`` ``split``, or ``swell_spm``: see the module
    docstring; :class:`TransposeEmitter` into a program sink); regions X (NHWC), Wt (:func:`pack_transposed_weights`
    with the tiling's gpack), Y (NHWC), Bias and Scale when the epilogue uses them. ``per_phase_bias``: Bias holds a
    value per (phase_h, phase_w, channel) (:func:`phase_bias`; the quantized path folds an input zero point per
    phase). The zero halo reads ``pad_value``."""
    layout = TransposeLayout.of(ct, dtype, target, tiling, epilogue or Epilogue(), pad_value, mode, per_phase_bias)
    sink = ProgramSink()
    TransposeEmitter(layout).emit(sink)
    return layout.program(sink.instrs)


def transpose_estimate(ct: ConvTransposeShape, dtype: DType, target: Target, tiling: TransposeTiling,
                       epilogue: Epilogue | None = None, mode: str = "split", per_phase_bias: bool = False,
                       hidden_constants: bool = False, memo: PriceMemo | None = None,
                       bound: int | None = None) -> int:
    """The search's price of ``conv_transpose2d(ct, dtype, target, tiling, epilogue, mode=mode,
    per_phase_bias=per_phase_bias)`` (cycles, :func:`compiler.kernels.common.search.tiling_price`: less its leading
    constant loads if ``hidden_constants``; with one accumulator tile, at least the work of every unit but the
    loads): :class:`TransposeEmitter` run into an estimating sink (``memo``: the search's). ``bound``: the exact
    price when it is below ``bound``, else some value at least ``bound``."""
    layout = TransposeLayout.of(ct, dtype, target, tiling, epilogue or Epilogue(), 0, mode, per_phase_bias)
    sink = EstimateSink(target.arch, memo, None, hidden=loads_constants if hidden_constants else None, bound=bound)
    TransposeEmitter(layout).emit(sink)
    return bound if sink.stopped else tiling_price(sink.estimate, tiling.acc_bufs == 1)


def _phase_nests(a: PhaseTaps, b: PhaseTaps, toh: int, tow: int, ng: int, tc: int, zero: bool, target: Target,
                 es: int, acc: View, acc_strides: tuple[int, int], x: View, w: View, nb_stride: int,
                 tap: int) -> list[MatMulNest]:
    """The ``mxu.mm`` loop nests of phase (a, b) over one step's channels: ``[nb, kh, kw, cb, oh]`` over its taps,
    the tile's ``tow`` coarse pixels streaming into accumulator pixels ``acc_strides[1]`` bytes apart and ``oh``
    innermost. ``x``: the window at the phase's first tap (strides row, pixel); ``w``: its first tap's weights
    (``tap`` bytes per tap, ``nb_stride`` per channel block)."""
    rows, cols = target.rows, target.cols
    (row, pix), tile = x.strides[:2], rows * cols * es
    return [MatMulNest.of(((nbc, cols * 4, 0, nb_stride), (len(a.kernel), 0, a.step * row, len(b.kernel) * tap),
                           (len(b.kernel), 0, b.step * pix, tap), (cbc, 0, rows * es, tile),
                           (toh, acc_strides[0], row, 0)),
                          acc.base + nbi * cols * 4, x.base + cb0 * rows * es, w.base + nbi * nb_stride + cb0 * tile,
                          acc.dtype, x.dtype, tow, k, n, zero and cb0 == 0, acc_strides[1], pix)
            for nbi, nbc, n in equal_blocks(ng, cols) for cb0, cbc, k in equal_blocks(tc, rows)]


def swell_shape(ct: ConvTransposeShape) -> ConvShape:
    """The convolution the ``swell_dram`` baseline runs: stride 1, no padding, ``ct``'s dilation and groups, over the
    zero-inserted input padded by ``(k-1)*d - p_b`` in front and ``(k-1)*d - p_e + op`` behind (TVM's
    ``bpad_top``/``bpad_bottom``; negative values crop)."""
    (dh, dw) = ct.dilation
    return ConvShape(ct.N, ct.C, ct.OH + (ct.R - 1) * dh, ct.OW + (ct.S - 1) * dw, ct.K, ct.R, ct.S, 1, 0,
                     ct.dilation, ct.groups)


def swell_weights(w: np.ndarray, ct: ConvTransposeShape) -> np.ndarray:
    """ONNX's ``(C, K/g, R, S)`` weights as the OIHW weights of :func:`swell_shape`'s convolution: output and input
    channels swapped within each group, the kernel rotated 180 degrees."""
    wg = w.reshape(ct.groups, ct.Cg, ct.Kg, ct.R, ct.S)[:, :, :, ::-1, ::-1]
    return np.ascontiguousarray(wg.transpose(0, 2, 1, 3, 4).reshape(ct.K, ct.Cg, ct.R, ct.S))


def swell_input(ct: ConvTransposeShape, dtype: DType, target: Target, fill: int | float = 0) -> Program:
    """The ``swell_dram`` baseline's first segment, DMA only (:func:`compiler.kernels.staged_copy.staged_copy`): region
    Xs (:func:`swell_shape`'s input, NHWC) filled with ``fill``, then every pixel of X (NHWC) copied to its place in
    it, ``stride`` apart and offset by the front padding."""
    cs, es = swell_shape(ct), dtype.size
    (sh, sw), (dh, dw), (pt, pl, _, _) = ct.stride, ct.dilation, ct.pad
    first, count = [], []
    for size, out, s, lead in ((ct.H, cs.H, sh, (ct.R - 1) * dh - pt), (ct.W, cs.W, sw, (ct.S - 1) * dw - pl)):
        i0 = max(0, -(lead // s))                       # the first input element inside the swelled buffer
        i1 = min(size - 1, (out - 1 - lead) // s)
        first.append((i0, s * i0 + lead))
        count.append(max(0, i1 - i0 + 1))
    (ih, oh), (iw, ow) = first
    C = ct.C
    boxes = [Box((ct.N * cs.H * cs.W * C,), Operand("Xs", 0, (1,)), fill=fill)]
    if min(count):
        boxes.append(Box((ct.N, count[0], count[1], C),
                         Operand("Xs", (oh * cs.W + ow) * C, (cs.H * cs.W * C, sh * cs.W * C, sw * C, 1)),
                         Operand("X", (ih * ct.W + iw) * C, (ct.H * ct.W * C, ct.W * C, C, 1))))
    return staged_copy(boxes, dtype, (Region("X", 0, ct.N * ct.H * ct.W * C * es),
                                      Region("Xs", 1, ct.N * cs.H * cs.W * C * es)), target)


def conv_transpose_inputs(ct: ConvTransposeShape, dtype: DType, rows: int, cols: int, seed: int = 0,
                          mode: str = "split", gpack: int = 1) -> tuple[dict, np.ndarray, np.ndarray]:
    """Seeded random NCHW input and ONNX ``(C, K/g, R, S)`` weights in ``dtype``'s storage; the DRAM inputs (X as
    NHWC, packed Wt)."""
    from compiler.kernels.gemm import gemm_inputs

    rng = np.random.default_rng(seed)
    x = gemm_inputs(ct.N * ct.C * ct.H, 1, ct.W, dtype, int(rng.integers(2**31)))["A"].reshape(ct.N, ct.C, ct.H, ct.W)
    w = gemm_inputs(ct.C * ct.Kg * ct.R, 1, ct.S, dtype, int(rng.integers(2**31)))["A"].reshape(ct.C, ct.Kg, ct.R,
                                                                                                   ct.S)
    wt = pack_transposed_weights(w, ct, rows, cols, mode, gpack)
    return {"X": np.ascontiguousarray(x.transpose(0, 2, 3, 1)), "Wt": wt}, x, w
