"""MaxPool and AveragePool on NHWC activations (vector unit, any window, strides, pads, dilations, ceil_mode), and
the maps of what an average divides by."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from compiler.errors import TilingError
from compiler.frontend.canonical import window_out
from compiler.kernels.common.halo import padded_load
from compiler.kernels.common.pipeline import RingPipeline, vector_config
from compiler.kernels.common.target import Target
from compiler.kernels.vector.streams import overlap_cap
from isa import Act, BinOp, DmaCopy, DType, Queue, Reduce, Region, Space, VecBinary, VecUnary, View

F32 = DType.F32


def _window_ints(value, n: int) -> tuple[int, ...]:
    """An int or a tuple of ``n`` ints as the tuple."""
    return (int(value),) * n if isinstance(value, (int, np.integer)) else tuple(int(v) for v in value)


def pool2d(kind: str, N: int, H: int, W: int, C: int, k: int | tuple[int, int], stride: int | tuple[int, int],
           pad: int | tuple[int, int, int, int], dtype: DType, target: Target, count_include_pad: bool = False,
           divide: bool = False, *, dilation: int | tuple[int, int] = 1, ceil: bool = False):
    """MaxPool / AveragePool on NHWC; regions X, Y (+ RC, the per-position 1/count map of an average whose count
    varies, or CNT, the counts, with ``divide``). Tiles cover ``toh`` output rows of ``tc`` channels.

    ``k``, ``stride`` and ``dilation`` per axis ``(h, w)`` and ``pad`` as ``(top, left, bottom, right)`` (an int for
    all). ``ceil``: ceil_mode, the output size of :func:`compiler.frontend.canonical.window_out` (a last window that
    would start in the end padding is dropped); windows reaching past the end padding read the fill value (-inf, or 0
    outside the count). The average counts the window's positions inside the input, or with ``count_include_pad`` inside
    the padded input (:func:`avgpool_counts`); a count that is the same everywhere is an immediate. ``divide``: divide
    the sum by the count (onnxruntime's rounding) instead of multiplying by its reciprocal."""
    (kh, kw), (sh, sw), (dh, dw) = _window_ints(k, 2), _window_ints(stride, 2), _window_ints(dilation, 2)
    pt, pl, pb, pr = _window_ints(pad, 4)
    OH, OW = window_out(H, kh, sh, pt, pb, dh, ceil), window_out(W, kw, sw, pl, pr, dw, ceil)
    counts = avgpool_counts(H, W, (kh, kw), (sh, sw), (pt, pl, pb, pr), (dh, dw), (OH, OW), count_include_pad) \
        if kind == "avg" else None
    pr = max(pr, (OW - 1) * sw + (kw - 1) * dw + 1 - W - pl)   # ceil_mode: the last window's columns past the pads
    uniform = counts is not None and bool((counts == counts.flat[0]).all())
    pool = _Pooling(kind, dtype, H, W, C, kh, kw, sh, sw, dh, dw, pt, pl, pr, OH, OW, counts, uniform, divide)
    spm = target.spm
    # the most channels for which one output row fits twice, then as many rows as fit
    tc = next((c for c in range(C, 0, -1) if 2 * sum(pool.slots(1, c)) <= spm), 0)
    if not tc:
        raise TilingError(f"a {kh}x{kw} pooling window over {pool.Wp} padded columns does not fit the SPM")
    toh = max(t for t in range(1, OH + 1) if 2 * sum(pool.slots(t, tc)) <= spm)
    toh = min(toh, overlap_cap(N * OH * -(-C // tc), 1))
    pipe = RingPipeline()
    for b in range(N):
        for oh0 in range(0, OH, toh):
            for c0 in range(0, C, tc):
                pool.step(pipe, b, oh0, c0, toh, tc)
    es = dtype.size
    regions = (Region("X", 0, N * H * W * C * es), Region("Y", 1, N * OH * OW * C * es))
    if kind == "avg" and not pool.uniform:
        regions += (Region("CNT" if divide else "RC", 2, OH * OW * 4),)
    return pipe.program(vector_config(spm), regions)


@dataclass(frozen=True)
class _Pooling:
    """One pooling of :func:`pool2d`: its window per axis (kernel, stride, dilation), the pads it reads (top, left,
    right: ``pr`` widened for ceil_mode), its output size and what an average divides by."""

    kind: str
    dtype: DType
    H: int
    W: int
    C: int
    kh: int
    kw: int
    sh: int
    sw: int
    dh: int
    dw: int
    pt: int
    pl: int
    pr: int
    OH: int
    OW: int
    counts: np.ndarray | None
    """An average's count per output position (:func:`avgpool_counts`); None for max."""
    uniform: bool
    """An average divides every output by one count (an immediate)."""
    divide: bool

    @property
    def Wp(self) -> int:
        """Columns of a padded input row."""
        return self.W + self.pl + self.pr

    def slots(self, toh: int, tc: int) -> tuple[int, int, int, int]:
        """Bytes of a ring slot's input rows, f32 sums, output and 1/count map for ``toh`` rows of ``tc`` channels."""
        es, OW = self.dtype.size, self.OW
        return ((toh - 1) * self.sh + (self.kh - 1) * self.dh + 1) * self.Wp * tc * es, toh * OW * tc * 4, \
            toh * OW * tc * es, toh * OW * 4

    def step(self, pipe: RingPipeline, b: int, oh0: int, c0: int, toh: int, tc: int) -> None:
        """The pipeline step of output rows ``oh0..`` (``toh`` at most), channels ``c0..`` (``tc``) of image ``b``."""
        es, H, W, C, OW, dtype = self.dtype.size, self.H, self.W, self.C, self.OW, self.dtype
        t = min(toh, self.OH - oh0)
        th = (t - 1) * self.sh + (self.kh - 1) * self.dh + 1
        ih0 = oh0 * self.sh - self.pt
        top, bottom = max(0, -ih0), max(0, ih0 + th - H)
        c = min(tc, C - c0)
        row, pix = self.Wp * c * es, c * es
        in_slot, sum_slot, out_slot, rc_slot = self.slots(toh, tc)
        base = pipe.slot * (in_slot + sum_slot + out_slot + rc_slot)
        fill = (-math.inf if dtype.is_float else {DType.I8: -128, DType.U8: 0}.get(dtype, -(2**31))) \
            if self.kind == "max" else 0
        loads = padded_load((th, self.Wp, c), View(Space.SPM, base, dtype, (row, pix, es)),
                            View(Space.DRAM, (((b * H + max(ih0, 0)) * W) * C + c0) * es, dtype,
                                 (W * C * es, C * es, es), "X"), ((top, bottom), (self.pl, self.pr)), fill)
        y = View(Space.SPM, base + in_slot + sum_slot, dtype, (OW * c * es, c * es, es))
        # channels innermost: each beat of lanes reads consecutive words of one window position
        window = View(Space.SPM, base, dtype, (self.sh * row, self.sw * pix, self.dh * row, self.dw * pix, es))
        shape = (t, OW, self.kh, self.kw, c)
        if self.kind == "max":
            compute = [VecUnary(fn=Act.MOV, reduce=Reduce.MAX, zero=True, shape=shape,
                                dst=y.with_strides((OW * c * es, c * es, 0, 0, es)), src=window)]
        else:
            s = View(Space.SPM, base + in_slot, F32, (OW * c * 4, c * 4, 4))
            compute = [VecUnary(fn=Act.MOV, reduce=Reduce.SUM, zero=True, shape=shape,
                                dst=s.with_strides((OW * c * 4, c * 4, 0, 0, 4)), src=window)]
            compute.append(self._average(loads, s, y, base + in_slot + sum_slot + out_slot, oh0, t, c))
        store = DmaCopy(queue=Queue.DMA_ST, shape=(t, OW, c), src=y,
                        dst=View(Space.DRAM, (((b * self.OH + oh0) * OW) * C + c0) * es, dtype,
                                 (OW * C * es, C * es, es), "Y"))
        pipe.step(loads, compute, [store])

    def _average(self, loads: list, s: View, y: View, rc_at: int, oh0: int, t: int, c: int) -> VecBinary:
        """The instruction that turns the f32 window sums ``s`` into averages ``y``: by an immediate count, or by the
        per-position map loaded (appended to ``loads``) at SPM byte ``rc_at``."""
        OW, n = self.OW, int(self.counts.flat[0])
        if self.uniform and self.divide:
            return VecBinary(op=BinOp.DIV, shape=(t, OW, c), dst=y, src0=s, imm=n)
        if self.uniform:
            return VecBinary(op=BinOp.MUL, shape=(t, OW, c), dst=y, src0=s, imm=1.0 / n)
        rc = View(Space.SPM, rc_at, F32, (OW * 4, 4, 0))
        loads.append(DmaCopy(queue=Queue.DMA_LD, shape=(t, OW), dst=rc.with_strides((OW * 4, 4)),
                             src=View(Space.DRAM, oh0 * OW * 4, F32, (OW * 4, 4), "CNT" if self.divide else "RC")))
        return VecBinary(op=BinOp.DIV if self.divide else BinOp.MUL, shape=(t, OW, c), dst=y, src0=s, src1=rc)


def avgpool_counts(H: int, W: int, k: tuple[int, int], stride: tuple[int, int], pads: tuple[int, int, int, int],
                   dilation: tuple[int, int], out: tuple[int, int], include_pad: bool) -> np.ndarray:
    """``[OH][OW]`` f32 map of the positions an average pool's window divides by, as onnxruntime counts them: those
    inside the input, or with ``include_pad`` inside the padded input (positions a ceil_mode window reaches past the
    end padding never count)."""
    def axis(size, kern, s, d, lo, hi, n):
        pos = np.arange(n)[:, None] * s - lo + np.arange(kern)[None, :] * d
        inside = (pos >= (-lo if include_pad else 0)) & (pos < size + (hi if include_pad else 0))
        return inside.sum(1)

    ch = axis(H, k[0], stride[0], dilation[0], pads[0], pads[2], out[0])
    cw = axis(W, k[1], stride[1], dilation[1], pads[1], pads[3], out[1])
    return np.outer(ch, cw).astype(np.float32)


def avgpool_reciprocals(H: int, W: int, k: int, stride: int, pad: int) -> np.ndarray:
    """``[OH][OW]`` f32 map of 1 / (window elements inside the image), for AveragePool(count_include_pad=0) with a
    square window, equal strides and symmetric pads (:func:`avgpool_counts` in general)."""
    OH, OW = (H + 2 * pad - k) // stride + 1, (W + 2 * pad - k) // stride + 1
    return (1.0 / avgpool_counts(H, W, (k, k), (stride, stride), (pad,) * 4, (1, 1), (OH, OW), False)).astype(
        np.float32)
