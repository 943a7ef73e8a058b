"""GridSample on the NPU: Sample2D by row gathers from DRAM, then one depthwise weighting pass
(docs/perception.md#gridsample).

The image ``X (N, H, W, C)`` stays channels-last in DRAM, so a source pixel is one row of C channels and a sample's
taps are ``dma.ld.gather`` rows (``rows = H*W``, row stride ``C*4``): no bounding box, so any grid (rotations, flows,
grids reaching outside the image) costs the same per point. Per point ``T`` taps (1 nearest, 4 linear: ``p11, p12,
p21, p22``) are read by index, ``-1`` for a tap onnxruntime reads as 0 (``padding_mode=zeros``; the gather writes
``fill = 0``); border and reflection padding give every tap an index inside the image.

- **Class 2** (constant grid): :func:`grid_taps` computes the indices and weights at compile time in numpy float32
  in onnxruntime's order (``grid_sample.cc``; docs/perception.md#gridsample-numerics).
- **Class 3** (run-time grid): :func:`grid_coordinates` computes the same indices and weights on the vector unit,
  bit for bit: the unnormalisation in onnxruntime's order, ``floor`` as ``t = cvt(u)`` (half to even), ``x1 = t -
  (f32(t) > u)``, ``nearbyint`` as the cvt itself, masks from ``cmpgt``, ``idx = (lin + 1) * inside - 1``. It stores
  them to DRAM (``32`` bytes per point) for the sampling program. Reflection padding of a run-time grid stays on the
  host.

:func:`sample_points` is the sampling program of both classes: per step ``pt`` points of ``cb`` channels, ``dma.ld``
of their indices and weights, one ``dma.ld.gather`` of all taps, the weighting
(:func:`compiler.kernels.resample.weighting`: ``product`` on onnxruntime's fast path, linear + zeros + align_corners=0,
``separable`` elsewhere), ``dma.st``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.errors import CompileError, TilingError
from compiler.kernels.common.pipeline import RingPipeline, vector_config
from compiler.kernels.common.target import Target
from compiler.kernels.resample import ES, pixel_pitch, weighting
from isa import Act, BinOp, DmaCopy, DType, Gather, Program, Queue, Region, Space, Sync, VecBinary, VecUnary, View
from isa.instructions import MAX_TABLE_ROWS
from isa.view import MAX_EXTENT

F32, I32 = DType.F32, DType.I32
ONE, TWO = np.float32(1), np.float32(2)
MODES = ("nearest", "linear")
PADDINGS = ("zeros", "border", "reflection")


@dataclass(frozen=True)
class GridSpec:
    """One 2-D GridSample: ``X (n, c, h, w)`` sampled at ``(n, ho, wo)`` points."""

    n: int
    c: int
    h: int
    w: int
    ho: int
    wo: int
    mode: str
    padding: str
    align_corners: int

    @property
    def points(self) -> int:
        return self.ho * self.wo

    @property
    def taps(self) -> int:
        return 4 if self.mode == "linear" else 1

    @property
    def order(self) -> str:
        """onnxruntime's combination order: the product form on its fast path, separable elsewhere."""
        return "product" if self.padding == "zeros" and not self.align_corners else "separable"


# ------------------------------------------------------------------------------------------ class 2: numpy taps

def _unnormalise(g: np.ndarray, length: int, align_corners: int) -> np.ndarray:
    if align_corners:
        return (g + ONE) / TWO * np.float32(length - 1)
    return ((g + ONE) * np.float32(length) - ONE) / TWO


def _reflect(i: np.ndarray, lo: float, hi: float) -> np.ndarray:
    f, lo, hi = i.astype(np.float32), np.float32(lo), np.float32(hi)
    r = hi - lo
    with np.errstate(divide="ignore", invalid="ignore"):
        below, above = lo - f, f - hi
        nb, na = np.trunc(below / r), np.trunc(above / r)
        rb, ra = below - nb * r, above - na * r
    out = np.where(f < lo, np.where(nb % 2 == 0, lo + rb, hi - rb),
                   np.where(f > hi, np.where(na % 2 == 0, hi - ra, lo + ra), f))
    return out.astype(np.int64)


def _index(i: np.ndarray, length: int, spec: GridSpec) -> tuple[np.ndarray, np.ndarray]:
    """(index inside the image, tap reads the image) of integer indices ``i`` under the padding mode."""
    if spec.padding == "zeros":
        return np.clip(i, 0, length - 1), (i >= 0) & (i < length)
    if spec.padding == "reflection":
        lo, hi = (0.0, length - 1.0) if spec.align_corners else (-0.5, length - 0.5)
        i = _reflect(i, lo, hi)
    return np.clip(i, 0, length - 1), np.ones(i.shape, bool)


def grid_taps(spec: GridSpec, grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Indices ``(n, points, taps)`` i32 (``y*w + x`` in the image, -1 for a tap that reads 0) and weights ``(n,
    points, 4)`` f32 of a constant ``grid (n, ho, wo, 2)``: ``(w11, w12, w21, w22)`` for the product order,
    ``(dx2, dx1, dy2, dy1)`` for the separable one (zeros for nearest)."""
    g = np.asarray(grid, np.float32).reshape(spec.n, spec.points, 2)
    u = _unnormalise(g[..., 0], spec.w, spec.align_corners)
    v = _unnormalise(g[..., 1], spec.h, spec.align_corners)

    def tap(yi: np.ndarray, xi: np.ndarray) -> np.ndarray:
        (yc, yin), (xc, xin) = _index(yi, spec.h, spec), _index(xi, spec.w, spec)
        return np.where(yin & xin, yc * spec.w + xc, -1)

    with np.errstate(invalid="ignore"):
        if spec.mode == "nearest":
            idx = tap(np.rint(v).astype(np.int64), np.rint(u).astype(np.int64))[..., None]
            return idx.astype(np.int32), np.zeros((spec.n, spec.points, 4), np.float32)
        x1, y1 = np.floor(u), np.floor(v)
        dx1, dx2, dy1, dy2 = u - x1, (x1 + ONE) - u, v - y1, (y1 + ONE) - v
        xi, yi = x1.astype(np.int64), y1.astype(np.int64)
    idx = np.stack([tap(yi, xi), tap(yi, xi + 1), tap(yi + 1, xi), tap(yi + 1, xi + 1)], -1)
    w = [dx2 * dy2, dx1 * dy2, dx2 * dy1, dx1 * dy1] if spec.order == "product" else [dx2, dx1, dy2, dy1]
    return idx.astype(np.int32), np.stack(w, -1).astype(np.float32)


# ---------------------------------------------------------------------------------------------- the sampling

def _points_per_step(per_point: int, points: int, spm: int, words: int) -> int:
    """Points per ring step: what two slots of ``per_point`` bytes fit in ``spm``, at most ``MAX_EXTENT // words``
    (a step moves ``words`` elements per point in one flat transfer, whose extent is bounded)."""
    fit = (spm // 2) // per_point
    if fit < 1:
        raise TilingError(f"one GridSample point needs {2 * per_point} B of SPM for two ring slots, the target "
                          f"has {spm} B")
    return max(1, min(fit, MAX_EXTENT // words, max(16, -(-points // 4)), points))


def _up(n: int, a: int) -> int:
    return -(-n // a) * a


def sample_points(spec: GridSpec, target: Target, cb: int | None = None, pt: int | None = None) -> Program:
    """The sampling program: regions X ``(n, h, w, c)``, I ``(n, points, taps)`` i32, Wt ``(n, points, 4)`` f32,
    Y ``(n, ho, wo, c)``, all channels-last f32. ``cb`` channels and ``pt`` points per step (None: chosen)."""
    if spec.h * spec.w > MAX_TABLE_ROWS:
        raise CompileError(f"an image of {spec.h * spec.w} pixels is more than a gather table's {MAX_TABLE_ROWS} rows")
    t, line = spec.taps, target.bank_row
    cb = cb or min(spec.c, MAX_EXTENT)
    while True:
        tp = pixel_pitch(cb, (1,), target)
        per = _up(t * 4, 4) + (16 if t > 1 else 0) + (t * tp if t > 1 else 0) + tp
        if 2 * (per + 4 * line) <= target.spm or cb <= target.lanes:
            break
        cb = max(target.lanes, _up(cb // 2, target.lanes))
    pt = pt or _points_per_step(per + 1, spec.points, target.spm - 8 * line, max(t, 4) if t > 1 else 1)
    idx_at, wts_at = 0, _up(pt * t * 4, line)
    taps_at = wts_at + (_up(pt * 16, line) if t > 1 else 0)
    out_at = taps_at + (_up(pt * t * tp, line) if t > 1 else 0)
    slot = out_at + _up(pt * tp, line)
    if 2 * slot > target.spm:
        raise TilingError(f"GridSample steps of {pt} points x {cb} channels need {2 * slot} B of SPM, the target has "
                          f"{target.spm} B")
    pipe = RingPipeline()
    pix, img = spec.c * ES, spec.h * spec.w * spec.c * ES
    for b in range(spec.n):
        for p0 in range(0, spec.points, pt):
            np_ = min(pt, spec.points - p0)
            for c0 in range(0, spec.c, cb):
                cw = min(cb, spec.c - c0)
                base = pipe.slot * slot
                idx = View(Space.SPM, base + idx_at, I32, (t * 4, 4))
                loads = [DmaCopy(queue=Queue.DMA_LD, shape=(np_ * t,), dst=View(Space.SPM, base + idx_at, I32, (4,)),
                                 src=View(Space.DRAM, (b * spec.points + p0) * t * 4, I32, (4,), "I"))]
                if t > 1:
                    loads.append(DmaCopy(queue=Queue.DMA_LD, shape=(np_ * 4,),
                                         dst=View(Space.SPM, base + wts_at, F32, (ES,)),
                                         src=View(Space.DRAM, (b * spec.points + p0) * 16, F32, (ES,), "Wt")))
                out = View(Space.SPM, base + out_at, F32, (tp, ES))
                taps = View(Space.SPM, base + taps_at, F32, (t * tp, tp, ES)) if t > 1 else out
                loads.append(Gather(queue=Queue.DMA_LD, shape=(np_, t) if t > 1 else (np_,), row=cw,
                                    rows=spec.h * spec.w, dst=taps if t > 1 else out, fill=0.0,
                                    table=View(Space.DRAM, b * img + c0 * ES, F32, (pix,), "X"),
                                    idx=idx if t > 1 else idx.with_strides((4,))))
                if t > 1:
                    compute = weighting((np_,), cw, out, taps, View(Space.SPM, base + wts_at, F32, (16, 4)),
                                        spec.order)
                else:   # nearest is the gather alone: the vector stage only hands the tile on
                    compute = [Sync(on=Queue.VPU)]
                store = DmaCopy(queue=Queue.DMA_ST, shape=(np_, cw), src=out,
                                dst=View(Space.DRAM, (b * spec.points + p0) * pix + c0 * ES, F32, (pix, ES), "Y"))
                pipe.step(loads, compute, [store])
    regions = (Region("X", 0, spec.n * img), Region("I", 1, spec.n * spec.points * t * 4),
               Region("Wt", 2, spec.n * spec.points * 16 if t > 1 else 16), Region("Y", 3, spec.n * spec.points * pix))
    return pipe.program(vector_config(target.spm), regions)


# ------------------------------------------------------------------------------- class 3: on-chip coordinates

def grid_constants(spec: GridSpec) -> np.ndarray:
    """Region K of :func:`grid_coordinates` (8 words): ``[W, H]`` f32 scale of the unnormalisation (``W-1, H-1``
    with align_corners), ``[W, H]`` i32, ``[W-1, H-1]`` i32, ``[0, 1]`` i32."""
    s = (spec.w - 1, spec.h - 1) if spec.align_corners else (spec.w, spec.h)
    ints = np.array([spec.w, spec.h, spec.w - 1, spec.h - 1, 0, 1], np.int32)
    return np.concatenate([np.array(s, np.float32), ints.view(np.float32)])


def _spm(at: int, strides: tuple[int, ...], dt: DType = F32) -> View:
    return View(Space.SPM, at, dt, strides)


def _bin(op: BinOp, shape: tuple[int, ...], dst: View, a: View, b: View | None = None, imm: float = 0) -> VecBinary:
    return VecBinary(op=op, shape=shape, dst=dst, src0=a, src1=b, imm=imm)


def coordinate_ops(spec: GridSpec, pt: int, g: int, k: int, out_i: int, out_w: int, tmp: int) -> list:
    """The vector instructions computing ``pt`` points' tap indices (at SPM byte ``out_i``) and bilinear weights (at
    ``out_w``) from their grid tile at ``g`` (``[pt][x, y]`` f32, overwritten); ``k`` the SPM byte address of
    :func:`grid_constants`, ``tmp`` a scratch area of 96 bytes per point. Shared with the deformable attention's
    sampling (:mod:`compiler.kernels.msda`)."""
    s2 = (pt, 2)
    u = _spm(g, (8, 4))
    ops = [_bin(BinOp.ADD, s2, u, u, imm=1.0)]
    if spec.align_corners:
        ops += [_bin(BinOp.DIV, s2, u, u, imm=2.0), _bin(BinOp.MUL, s2, u, u, _spm(k, (0, 4)))]
    else:
        ops += [_bin(BinOp.MUL, s2, u, u, _spm(k, (0, 4))), _bin(BinOp.SUB, s2, u, u, imm=1.0),
                _bin(BinOp.DIV, s2, u, u, imm=2.0)]
    ti = _spm(tmp, (8, 4), I32)                                                       # [pt][2] each
    ops.append(VecUnary(fn=Act.MOV, shape=s2, dst=ti, src=u))                       # t = nearbyint(u)
    if spec.mode == "nearest":
        return ops + _nearest_ops(spec, pt, k, out_i, tmp)
    return ops + _bilinear_ops(spec, pt, u, k, out_i, out_w, tmp)


def _nearest_ops(spec: GridSpec, pt: int, k: int, out_i: int, tmp: int) -> list:
    """Nearest: the index ``y*W + x`` of the rounded coordinates (at ``tmp``), clamped (border) or -1 outside."""
    s2, w = (pt, 2), spec.w
    t_at, c_at, m_at = tmp, tmp + 16 * pt, tmp + 48 * pt
    ti, li, lm1 = _spm(t_at, (8, 4), I32), _spm(k + 8, (0, 4), I32), _spm(k + 16, (0, 4), I32)
    idx = _spm(out_i, (4,), I32)
    tx, ty = _spm(t_at, (8,), I32), _spm(t_at + 4, (8,), I32)
    if spec.padding == "border":
        return [_bin(BinOp.MAX, s2, ti, ti, imm=0), _bin(BinOp.MIN, s2, ti, ti, lm1),
                _bin(BinOp.MUL, (pt,), idx, ty, imm=w), _bin(BinOp.ADD, (pt,), idx, idx, tx)]
    ok, m = _spm(c_at, (8, 4), I32), _spm(m_at, (8, 4), I32)
    return [_bin(BinOp.CMPGT, s2, ok, ti, imm=-1), _bin(BinOp.CMPGT, s2, m, li, ti),
            _bin(BinOp.MUL, s2, ok, ok, m),
            _bin(BinOp.MUL, (pt,), idx, ty, imm=w), _bin(BinOp.ADD, (pt,), idx, idx, tx),
            _bin(BinOp.ADD, (pt,), idx, idx, imm=1),
            _bin(BinOp.MUL, (pt,), _spm(m_at, (4,), I32), _spm(c_at, (8,), I32), _spm(c_at + 4, (8,), I32)),
            _bin(BinOp.MUL, (pt,), idx, idx, _spm(m_at, (4,), I32)),
            _bin(BinOp.SUB, (pt,), idx, idx, imm=1)]


def _bilinear_ops(spec: GridSpec, pt: int, u: View, k: int, out_i: int, out_w: int, tmp: int) -> list:
    """Bilinear: the four taps' indices (clamped, or -1 outside) and weights (in ``spec.order``) of the coordinates
    ``u`` rounded at ``tmp``."""
    s2, s3, w = (pt, 2), (pt, 2, 2), spec.w
    t_at, f_at, c_at = tmp, tmp + 8 * pt, tmp + 16 * pt           # [pt][2] each
    xk_at, m_at, d_at = tmp + 32 * pt, tmp + 48 * pt, tmp + 64 * pt  # [pt][2][2] each
    ly_at, k01 = tmp + 24 * pt, k + 24
    ti = _spm(t_at, (8, 4), I32)
    tf, gi = _spm(f_at, (8, 4)), _spm(c_at, (8, 4), I32)
    dd = d_at if spec.order == "product" else out_w                                  # [pt][x|y][dx2|dx1]
    ops = [VecUnary(fn=Act.MOV, shape=s2, dst=tf, src=ti),                           # f32(t), exact
           _bin(BinOp.CMPGT, s2, gi, tf, u),                                         # rounded up?
           _bin(BinOp.SUB, s2, ti, ti, gi),                                          # x1 = floor(u)
           VecUnary(fn=Act.MOV, shape=s2, dst=tf, src=ti),                           # f32(x1)
           _bin(BinOp.SUB, s2, _spm(dd + 4, (16, 8)), u, tf),                        # dx1 = u - x1
           _bin(BinOp.ADD, s2, tf, tf, imm=1.0),                                     # x2 = x1 + 1
           _bin(BinOp.SUB, s2, _spm(dd, (16, 8)), tf, u)]                            # dx2 = x2 - u
    if spec.order == "product":   # w[ky][kx] = d[y][ky] * d[x][kx]: (dy2*dx2, dy2*dx1, dy1*dx2, dy1*dx1)
        ops.append(_bin(BinOp.MUL, s3, _spm(out_w, (16, 8, 4)), _spm(dd + 8, (16, 4, 0)), _spm(dd, (16, 0, 4))))
    xk = _spm(xk_at, (16, 8, 4), I32)                                                # [pt][x|y][k] = x1 + k
    ops.append(_bin(BinOp.ADD, s3, xk, _spm(t_at, (8, 4, 0), I32), _spm(k01, (0, 0, 4), I32)))
    idx = _spm(out_i, (16, 8, 4), I32)                                               # [pt][ky][kx]
    ly = _spm(ly_at, (8, 4), I32)
    lin = [_bin(BinOp.MUL, s2, ly, _spm(xk_at + 8, (16, 4), I32), imm=w),            # y_k * W
           _bin(BinOp.ADD, s3, idx, _spm(ly_at, (8, 4, 0), I32), _spm(xk_at, (16, 0, 4), I32))]
    if spec.padding == "border":
        return ops + [_bin(BinOp.MAX, s3, xk, xk, imm=0), _bin(BinOp.MIN, s3, xk, xk, _spm(k + 16, (0, 4, 0), I32)),
                      *lin]
    ok, m = _spm(m_at, (16, 8, 4), I32), _spm(c_at, (16, 8, 4), I32)   # m reuses c_at..c_at+16*pt (gi is dead)
    return ops + [_bin(BinOp.CMPGT, s3, ok, xk, imm=-1), _bin(BinOp.CMPGT, s3, m, _spm(k + 8, (0, 4, 0), I32), xk),
                  _bin(BinOp.MUL, s3, ok, ok, m), *lin,
                  _bin(BinOp.ADD, s3, idx, idx, imm=1),
                  _bin(BinOp.MUL, s3, m, _spm(m_at + 8, (16, 4, 0), I32), _spm(m_at, (16, 0, 4), I32)),
                  _bin(BinOp.MUL, s3, idx, idx, m),
                  _bin(BinOp.SUB, s3, idx, idx, imm=1)]


def grid_coordinates(spec: GridSpec, target: Target, pt: int | None = None) -> Program:
    """Class 3's coordinate program: regions G (the grid ``(n, ho, wo, 2)`` f32), K (:func:`grid_constants`) in;
    I ``(n, points, taps)`` i32 and Wt ``(n, points, 4)`` f32 out, equal to :func:`grid_taps` bit for bit.
    CompileError for reflection padding (it stays on the host)."""
    if spec.padding == "reflection":
        raise CompileError("reflection padding of a run-time grid is not computed on chip")
    t, line = spec.taps, target.bank_row
    per = 8 + t * 4 + 16 + 80                  # grid, indices, weights, temporaries: bytes per point
    pt = pt or _points_per_step(per, spec.points, target.spm - 10 * line, max(t, 4))
    g_at, i_at = 0, _up(8 * pt, line)
    w_at = i_at + _up(t * 4 * pt, line)
    tmp = w_at + _up(16 * pt, line)
    slot = tmp + _up(80 * pt, line)
    if 2 * slot + line > target.spm or pt * max(t, 4) > MAX_EXTENT:
        raise TilingError(f"GridSample coordinates of {pt} points need {2 * slot + line} B of SPM (the target has "
                          f"{target.spm} B) and {max(t, 4)} words per point in one transfer (at most {MAX_EXTENT})")
    k = 2 * slot
    pipe = RingPipeline()
    for b in range(spec.n):
        for p0 in range(0, spec.points, pt):
            np_ = min(pt, spec.points - p0)
            base = pipe.slot * slot
            loads = [] if pipe.steps else [DmaCopy(queue=Queue.DMA_LD, shape=(8,), dst=View(Space.SPM, k, F32, (ES,)),
                                                   src=View(Space.DRAM, 0, F32, (ES,), "K"))]
            loads.append(DmaCopy(queue=Queue.DMA_LD, shape=(np_ * 2,), dst=View(Space.SPM, base + g_at, F32, (ES,)),
                                 src=View(Space.DRAM, (b * spec.points + p0) * 8, F32, (ES,), "G")))
            compute = coordinate_ops(spec, np_, base + g_at, k, base + i_at, base + w_at, base + tmp)
            first = (b * spec.points + p0)
            stores = [DmaCopy(queue=Queue.DMA_ST, shape=(np_ * t,), src=View(Space.SPM, base + i_at, I32, (4,)),
                              dst=View(Space.DRAM, first * t * 4, I32, (4,), "I"))]
            if t > 1:
                stores.append(DmaCopy(queue=Queue.DMA_ST, shape=(np_ * 4,), src=View(Space.SPM, base + w_at, F32, (4,)),
                                      dst=View(Space.DRAM, first * 16, F32, (ES,), "Wt")))
            pipe.step(loads, compute, stores)
    wbytes = spec.n * spec.points * 16 if t > 1 else 16
    regions = (Region("G", 0, spec.n * spec.points * 8), Region("K", 1, 32),
               Region("I", 2, spec.n * spec.points * t * 4), Region("Wt", 3, wbytes))
    return pipe.program(vector_config(target.spm), regions)
