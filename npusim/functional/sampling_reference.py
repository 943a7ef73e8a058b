"""Numpy references of the ONNX sampling ops: Resize, GridSample, AffineGrid (float32, NCHW).

What the simulator's Resize/GridSample lowerings are checked against: onnxruntime's CPU kernels written out in numpy
float32, operation for operation, so that the result equals onnxruntime's bit for bit
(``tests/functional/test_sampling_reference.py`` sweeps every mode against onnxruntime 1.32;
docs/perception.md#numerics states the orders):

- coordinates: each axis maps an output index to a source coordinate in float32 by the op's formula
  (:func:`source_coordinate` for Resize, :func:`grid_coordinate` for GridSample);
- nearest: one source index per axis (``nearest_mode`` for Resize; round half to even for GridSample);
- linear: two neighbours per axis ``(x1, x2)`` with weights ``(dx2, dx1)`` for ``(x1, x2)``, combined in one of two
  orders: ``"product"``, ``((w11*p11 + w12*p12) + w21*p21) + w22*p22`` with ``w11 = dx2*dy2`` etc. (onnxruntime's
  Resize and its GridSample fast path: linear, zeros, align_corners=0; PyTorch's CPU grid_sample), or
  ``"separable"``, ``dy2*(dx2*p11 + dx1*p12) + dy1*(dx2*p21 + dx1*p22)`` (onnxruntime's other GridSample cases; the
  structure of PyTorch's CPU upsample_bilinear2d). ``order=None`` picks what onnxruntime does.

Resize's nearest modes decide ties with a tolerance (:data:`TIE`), as onnxruntime 1.32 does. AffineGrid follows
onnxruntime's Eigen code: base coordinates from ``LinSpaced`` scaled by ``(n-1)/n``, then ``(t0*x + t1*y) + t2``
(bit-exact in the tests). Cubic modes, antialias and exclude_outside are not modelled (they run on the host).
"""

from __future__ import annotations

import numpy as np

from isa import SimulationError

F32 = np.float32
ONE, HALF, TWO = F32(1), F32(0.5), F32(2)

COORDINATE_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                    "tf_crop_and_resize", "tf_half_pixel_for_nn")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
PADDING_MODES = ("zeros", "border", "reflection")
ORDERS = ("product", "separable")
TIE = F32(1e-6)
"""A Resize coordinate within this of ``i + 0.5`` is a tie for the round_prefer_* nearest modes (onnxruntime 1.32
decides ties with this tolerance, so ``(xr + 0.5) / scale - 0.5`` landing one ulp off ``i + 0.5`` still counts)."""


# ------------------------------------------------------------------------------------------------------ Resize

def source_coordinate(mode: str, out: int, length: int, scale: float, roi: tuple[float, float] = (0.0, 1.0)
                      ) -> np.ndarray:
    """The float32 source coordinate of every output index ``0..out-1`` of one Resize axis (``length`` input
    elements, ``scale`` the axis' float32 scale), as onnxruntime's ``GetOriginalCoordinateFromResizedCoordinate``
    computes it (half_pixel_symmetric and the ``out == 1`` case of tf_crop_and_resize in double, then rounded)."""
    xr = np.arange(out, dtype=F32)
    s, lo, lr = F32(scale), F32(length), F32(out)
    if mode == "half_pixel":
        return (xr + HALF) / s - HALF
    if mode == "asymmetric":
        return xr / s
    if mode == "pytorch_half_pixel":
        return (xr + HALF) / s - HALF if out > 1 else np.zeros(out, F32)
    if mode == "tf_half_pixel_for_nn":
        return (xr + HALF) / s
    if mode == "align_corners":
        return xr * (lo - ONE) / (lr - ONE) if out > 1 else np.zeros(out, F32)
    if mode == "half_pixel_symmetric":
        adjustment = lr / (s * lo)
        offset = np.float64(lo / TWO * (ONE - adjustment))
        return (offset + (xr.astype(np.float64) + 0.5) / np.float64(s) - 0.5).astype(F32)
    if mode == "tf_crop_and_resize":
        start, end = F32(roi[0]), F32(roi[1])
        if out > 1:
            return start * (lo - ONE) + xr * (end - start) * (lo - ONE) / (lr - ONE)
        return np.full(out, F32(0.5 * np.float64(start + end) * np.float64(lo - ONE)), F32)
    raise SimulationError(f"coordinate_transformation_mode must be one of {', '.join(COORDINATE_MODES)}, not {mode!r}")


def nearest_index(x: np.ndarray, mode: str, length: int) -> np.ndarray:
    """Source indices (int64, clamped to ``[0, length-1]``) of coordinates ``x`` under ``nearest_mode``, as
    onnxruntime 1.32 rounds them: a coordinate whose fraction is within :data:`TIE` of 0.5 is a tie (down for
    round_prefer_floor, up for round_prefer_ceil); any other rounds half away from zero."""
    x = np.asarray(x, F32)
    a = np.abs(x)
    frac = a - np.floor(a)
    tie = np.abs(frac - HALF) <= TIE
    away = np.copysign(np.floor(a) + (frac >= HALF), x)
    if mode == "round_prefer_floor":
        idx = np.where(tie, np.floor(x), away)
    elif mode == "round_prefer_ceil":
        idx = np.where(tie, np.ceil(x), away)
    elif mode == "floor":
        idx = np.floor(x)
    elif mode == "ceil":
        idx = np.ceil(x)
    else:
        raise SimulationError(f"nearest_mode must be one of {', '.join(NEAREST_MODES)}, not {mode!r}")
    return np.clip(idx.astype(np.int64), 0, length - 1)


def linear_taps(x: np.ndarray, length: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(x1, x2, dx1, dx2)`` of one Resize axis as onnxruntime's ``SetupUpsampleBilinear``: ``x`` clamped to
    ``[0, length-1]``, ``x1 = min(int(x), length-1)``, ``x2 = min(x1+1, length-1)``, ``dx1 = |x - x1|``, ``dx2 =
    |x - x2|``, both 0.5 where ``x1 == x2``. The weight of ``x1`` is ``dx2``, that of ``x2`` is ``dx1``."""
    xc = np.maximum(F32(0), np.minimum(x, F32(length - 1)))
    x1 = np.minimum(xc.astype(np.int64), length - 1)
    x2 = np.minimum(x1 + 1, length - 1)
    same = x1 == x2
    dx1 = np.where(same, HALF, np.abs(xc - x1.astype(F32))).astype(F32)
    dx2 = np.where(same, HALF, np.abs(xc - x2.astype(F32))).astype(F32)
    return x1, x2, dx1, dx2


def resize_output_shape(shape: tuple[int, ...], scales=None, sizes=None, axes=None,
                        keep_aspect_ratio_policy: str = "stretch") -> tuple[tuple[int, ...], tuple[float, ...]]:
    """(output shape, float32 scale per axis) of a Resize as onnxruntime computes them: from ``scales``, out =
    ``int(scale * in)``; from ``sizes``, scale = ``out / in`` (after ``keep_aspect_ratio_policy``, which rounds).
    ``axes`` (opset 18) names the axes ``scales``/``sizes`` give; the others keep scale 1."""
    rank = len(shape)
    axes = list(range(rank)) if axes is None else [a % rank for a in axes]
    if (scales is None) == (sizes is None):
        raise SimulationError("Resize takes exactly one of scales and sizes")
    if scales is not None:
        full = [F32(1)] * rank
        for a, s in zip(axes, np.asarray(scales, F32)):
            full[a] = F32(s)
        out = [int(F32(s) * F32(n)) for s, n in zip(full, shape)]
        return tuple(out), tuple(float(s) for s in full)
    out = list(shape)
    for a, s in zip(axes, np.asarray(sizes, np.int64)):
        out[a] = int(s)
    full = [F32(F32(o) / F32(n)) if n else F32(1) for o, n in zip(out, shape)]
    if keep_aspect_ratio_policy != "stretch":
        pick = min if keep_aspect_ratio_policy == "not_larger" else max
        s = pick(full[a] for a in axes)
        for a in range(rank):
            full[a] = s if a in axes else F32(1)
            out[a] = int(np.floor(np.float64(F32(s) * F32(shape[a])) + 0.5)) if a in axes else shape[a]
    return tuple(out), tuple(float(s) for s in full)


def resize(x: np.ndarray, scales=None, sizes=None, *, mode: str = "nearest",
           coordinate_transformation_mode: str = "half_pixel", nearest_mode: str = "round_prefer_floor",
           roi=None, extrapolation_value: float = 0.0, axes=None, keep_aspect_ratio_policy: str = "stretch",
           order: str | None = None) -> np.ndarray:
    """ONNX Resize of float32 ``x`` as onnxruntime computes it, bit for bit (opsets 11-19; nearest on any rank,
    linear on 4-D NCHW with the first two scales 1). ``roi`` is the tf_crop_and_resize region (starts then ends,
    one pair per axis of ``axes``). ``order``: how linear combines its four taps (``"product"``, onnxruntime's, the
    default; ``"separable"``)."""
    x = np.asarray(x, F32)
    out, scale = resize_output_shape(x.shape, scales, sizes, axes, keep_aspect_ratio_policy)
    rank, ctm = x.ndim, coordinate_transformation_mode
    axes_n = list(range(rank)) if axes is None else [a % rank for a in axes]
    starts, ends = [0.0] * rank, [1.0] * rank
    if roi is not None and len(roi):
        r = np.asarray(roi, F32)
        for k, a in enumerate(axes_n):
            starts[a], ends[a] = float(r[k]), float(r[len(axes_n) + k])
    extrapolate = ctm == "tf_crop_and_resize"

    def coord(a: int) -> np.ndarray:
        if scale[a] == 1.0:   # an unscaled axis maps each index to itself, whatever the mode
            return np.arange(out[a], dtype=F32)
        return source_coordinate(ctm, out[a], x.shape[a], scale[a], (starts[a], ends[a]))

    def outside(a: int, c: np.ndarray) -> np.ndarray:
        return (c < 0) | (c > F32(x.shape[a] - 1)) if extrapolate and scale[a] != 1.0 else np.zeros(c.shape, bool)

    if mode == "nearest":
        y, mask = x, np.zeros(out, bool)
        for a in range(rank):
            c = coord(a)
            idx = np.arange(out[a]) if scale[a] == 1.0 else nearest_index(c, nearest_mode, x.shape[a])
            y = np.take(y, idx, axis=a)
            mask |= outside(a, c).reshape([-1 if k == a else 1 for k in range(rank)])
        return np.where(mask, F32(extrapolation_value), y).astype(F32)
    if mode != "linear":
        raise SimulationError(f"the reference models Resize modes nearest and linear, not {mode!r}")
    if rank != 4 or scale[0] != 1.0 or scale[1] != 1.0:
        raise SimulationError(f"the reference models linear Resize of 4-D NCHW tensors (scales 1 on N and C), not "
                              f"rank {rank} with scales {scale}")
    cy, cx = coord(2), coord(3)
    y1, y2, dy1, dy2 = linear_taps(cy, x.shape[2])
    x1, x2, dx1, dx2 = linear_taps(cx, x.shape[3])
    p = [x[:, :, ya][:, :, :, xb] for ya in (y1, y2) for xb in (x1, x2)]   # p11, p12, p21, p22
    y = combine(p, dx1[None, :], dx2[None, :], dy1[:, None], dy2[:, None], order or "product")
    mask = outside(2, cy)[:, None] | outside(3, cx)[None, :]
    return np.where(mask, F32(extrapolation_value), y).astype(F32)


def combine(p: list[np.ndarray], dx1, dx2, dy1, dy2, order: str) -> np.ndarray:
    """The bilinear value of taps ``p = [p11, p12, p21, p22]`` (``p12`` is row y1, column x2) in float32, in
    ``order`` (``"product"`` or ``"separable"``, module docstring)."""
    if order == "product":
        return ((dx2 * dy2) * p[0] + (dx1 * dy2) * p[1] + (dx2 * dy1) * p[2] + (dx1 * dy1) * p[3]).astype(F32)
    if order == "separable":
        return (dy2 * (dx2 * p[0] + dx1 * p[1]) + dy1 * (dx2 * p[2] + dx1 * p[3])).astype(F32)
    raise SimulationError(f"order must be one of {', '.join(ORDERS)}, not {order!r}")


# -------------------------------------------------------------------------------------------------- GridSample

def grid_coordinate(g: np.ndarray, length: int, align_corners: int) -> np.ndarray:
    """onnxruntime's ``GsDenormalize`` in float32: ``(g + 1) / 2 * (length - 1)`` with align_corners, else
    ``((g + 1) * length - 1) / 2``."""
    g = np.asarray(g, F32)
    if align_corners:
        return (g + ONE) / TWO * F32(length - 1)
    return ((g + ONE) * F32(length) - ONE) / TWO


def reflect(i: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """onnxruntime's ``GsReflect`` of integer indices ``i`` into ``[lo, hi]`` in float32, truncated to int64."""
    f, lo, hi = np.asarray(i).astype(F32), F32(lo), F32(hi)
    r = hi - lo
    with np.errstate(divide="ignore", invalid="ignore"):
        below, above = lo - f, f - hi
        nb, na = np.trunc(below / r), np.trunc(above / r)
        rb, ra = below - nb * r, above - na * r
    out = np.where(f < lo, np.where(nb % 2 == 0, lo + rb, hi - rb),
                   np.where(f > hi, np.where(na % 2 == 0, hi - ra, lo + ra), f))
    return out.astype(np.int64)


def grid_index(i: np.ndarray, length: int, padding_mode: str, align_corners: int) -> tuple[np.ndarray, np.ndarray]:
    """(index clamped into the image, inside mask) of integer neighbour indices ``i`` on an axis of ``length``
    under ``padding_mode``: zeros reads 0 outside (the mask), border clamps, reflection reflects."""
    if padding_mode == "zeros":
        return np.clip(i, 0, length - 1), (i >= 0) & (i < length)
    if padding_mode == "border":
        return np.clip(i, 0, length - 1), np.ones(i.shape, bool)
    if padding_mode == "reflection":
        lo, hi = (0.0, length - 1.0) if align_corners else (-0.5, length - 0.5)
        return np.clip(reflect(i, lo, hi), 0, length - 1), np.ones(i.shape, bool)
    raise SimulationError(f"padding_mode must be one of {', '.join(PADDING_MODES)}, not {padding_mode!r}")


def grid_sample(x: np.ndarray, grid: np.ndarray, *, mode: str = "linear", padding_mode: str = "zeros",
                align_corners: int = 0, order: str | None = None) -> np.ndarray:
    """ONNX GridSample (opsets 16/20/22) of float32 ``x (N, C, H, W)`` at ``grid (N, Ho, Wo, 2)`` as onnxruntime
    computes it, bit for bit. ``mode``: nearest, linear (bilinear is opset 16's name for it). ``order``: None for
    onnxruntime's choice (product on its fast path: linear, zeros, align_corners=0; separable elsewhere)."""
    x, grid = np.asarray(x, F32), np.asarray(grid, F32)
    if x.ndim != 4 or grid.ndim != 4 or grid.shape[-1] != 2 or grid.shape[0] != x.shape[0]:
        raise SimulationError(f"the reference models 2-D GridSample: X (N, C, H, W) and grid (N, Ho, Wo, 2), not "
                              f"{x.shape} and {grid.shape}")
    mode = {"bilinear": "linear"}.get(mode, mode)
    n, c, h, w = x.shape
    gx = grid_coordinate(grid[..., 0], w, align_corners)   # (N, Ho, Wo)
    gy = grid_coordinate(grid[..., 1], h, align_corners)
    batch = np.arange(n)[:, None, None]

    def pixels(yi: np.ndarray, xi: np.ndarray) -> np.ndarray:
        (yc, yin), (xc, xin) = (grid_index(yi, h, padding_mode, align_corners),
                                grid_index(xi, w, padding_mode, align_corners))
        v = x[batch, :, yc, xc]                              # (N, Ho, Wo, C)
        return np.where((yin & xin)[..., None], v, F32(0)).transpose(0, 3, 1, 2)

    if mode == "nearest":
        return pixels(np.rint(gy).astype(np.int64), np.rint(gx).astype(np.int64))
    if mode != "linear":
        raise SimulationError(f"the reference models GridSample modes nearest and linear, not {mode!r}")
    x1, y1 = np.floor(gx), np.floor(gy)
    x2, y2 = x1 + ONE, y1 + ONE
    dx1, dx2, dy1, dy2 = gx - x1, x2 - gx, gy - y1, y2 - gy
    i1, i2, j1, j2 = (v.astype(np.int64) for v in (x1, x2, y1, y2))
    p = [pixels(ya, xb) for ya in (j1, j2) for xb in (i1, i2)]
    fast = padding_mode == "zeros" and not align_corners
    return combine(p, *(v[:, None] for v in (dx1, dx2, dy1, dy2)), order or ("product" if fast else "separable"))


# -------------------------------------------------------------------------------------------------- AffineGrid

def affine_grid(theta: np.ndarray, size, align_corners: int = 0) -> np.ndarray:
    """ONNX AffineGrid (opset 20), 2-D: the grid ``(N, H, W, 2)`` of ``theta (N, 2, 3)`` for ``size (N, C, H, W)``:
    base coordinates ``-1 + (2i + 1)/W`` (align_corners=0) or ``-1 + 2i/(W-1)`` as Eigen's ``LinSpaced(W, -1, 1)``
    rounds them (``-1 + i*(2/(W-1))``, the last one 1; times ``(W-1)/W`` for align_corners=0), then ``theta @ [x, y,
    1]`` evaluated as ``(t0*x + t1*y) + t2`` in float32, as onnxruntime computes it."""
    theta = np.asarray(theta, F32)
    n, _, h, w = (int(s) for s in size)
    if theta.shape != (n, 2, 3):
        raise SimulationError(f"AffineGrid of size {tuple(size)} needs theta of shape {(n, 2, 3)}, not {theta.shape}")

    def base(k: int) -> np.ndarray:   # Eigen's LinSpaced(k, -1, 1) (low + i*step, the last one high), scaled
        if k == 1:
            return np.full(1, ONE if align_corners else F32(0), F32)
        v = F32(-1) + np.arange(k, dtype=F32) * (TWO / F32(k - 1))
        v[-1] = ONE
        return v if align_corners else v * F32(k - 1) / F32(k)

    bx, by = base(w)[None, None, :], base(h)[None, :, None]
    t = theta[:, :, :, None, None]
    gx = (t[:, 0, 0] * bx + t[:, 0, 1] * by) + t[:, 0, 2]
    gy = (t[:, 1, 0] * bx + t[:, 1, 1] * by) + t[:, 1, 2]
    return np.stack([gx, gy], axis=-1).astype(F32)


# --------------------------------------------------------------------------- multi-scale deformable attention

def ms_deform_attn(values, grids, attention: np.ndarray) -> np.ndarray:
    """Multi-scale deformable attention (docs/perception.md#deformable-attention) in the order of the fused lowering
    and of the CUDA kernel (Deformable-DETR / mmcv ``ms_deformable_im2col``): ``values[l] (N, D, H_l, W_l)``,
    ``grids[l] (N, Q, P, 2)`` (the graph's ``2*loc - 1``), ``attention (N, Q, L*P)`` (level-major); each sample is
    GridSample's (linear, zeros, align_corners=0: onnxruntime's product order, :func:`grid_sample`), times its
    attention weight, summed sequentially over levels then points starting from the first product (``acc =
    s_0*a_0; acc = acc + s_k*a_k``), every operation rounded to float32. Returns ``(N, D, Q)``."""
    values, grids, attention = list(values), list(grids), np.asarray(attention, F32)
    if len(values) != len(grids) or not values:
        raise SimulationError(f"one grid per level: {len(values)} values and {len(grids)} grids")
    s = np.concatenate([grid_sample(v, g) for v, g in zip(values, grids)], axis=-1)   # (N, D, Q, L*P)
    if attention.shape != (s.shape[0], s.shape[2], s.shape[3]):
        raise SimulationError(f"attention must have shape {(s.shape[0], s.shape[2], s.shape[3])} (N, Q, L*P), not "
                              f"{attention.shape}")
    a = attention[:, None]
    acc = s[..., 0] * a[..., 0]
    for k in range(1, s.shape[-1]):
        acc = acc + s[..., k] * a[..., k]
    return acc.astype(F32)


def ms_deform_attn_mmcv(value: np.ndarray, levels, sampling_locations: np.ndarray,
                        attention_weights: np.ndarray) -> np.ndarray:
    """:func:`ms_deform_attn` on the inputs of mmcv's ``multi_scale_deformable_attn_pytorch`` (``value (bs, sum H*W,
    heads, D)``, ``sampling_locations (bs, Q, heads, L, P, 2)``, ``attention_weights (bs, Q, heads, L, P)``), the
    grid computed as the exported graph does (``2*loc`` then ``- 1`` in float32). Returns ``(bs, Q, heads*D)``."""
    value, loc, aw = (np.asarray(t, F32) for t in (value, sampling_locations, attention_weights))
    bs, _, heads, d = value.shape
    _, q, _, n_l, p, _ = loc.shape
    grid = loc * TWO - ONE
    starts = np.cumsum([0] + [h * w for h, w in levels])
    vals = [value[:, starts[i]:starts[i + 1]].transpose(0, 2, 3, 1).reshape(bs * heads, d, h, w)
            for i, (h, w) in enumerate(levels)]
    grids = [grid[:, :, :, i].transpose(0, 2, 1, 3, 4).reshape(bs * heads, q, p, 2) for i in range(n_l)]
    attn = aw.transpose(0, 2, 1, 3, 4).reshape(bs * heads, q, n_l * p)
    out = ms_deform_attn(vals, grids, attn)                                   # (bs*heads, D, Q)
    return out.reshape(bs, heads * d, q).transpose(0, 2, 1)


def ms_deform_attn_bound(values, grids, attention: np.ndarray) -> np.ndarray:
    """The bound on ``|onnxruntime - reference|`` (docs/perception.md#msda-error-bound) per output ``(N, D, Q)``:
    ``2*(L*P) * 2^-24 * sum_k |s_k * a_k|`` (two summation orders, each within ``(n-1)*u*sum|t|`` of the exact sum)."""
    s = np.concatenate([grid_sample(v, g) for v, g in zip(values, grids)], axis=-1)
    terms = np.abs(s.astype(np.float64) * np.asarray(attention, np.float64)[:, None])
    return 2 * s.shape[-1] * 2.0 ** -24 * terms.sum(-1)
