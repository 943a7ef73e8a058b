"""Patch-embedding convolutions (stride == kernel size, no padding or dilation, one group) as DMA im2col + GEMM.

The direct :func:`compiler.kernels.conv2d.conv2d` packs a full ``rows x cols`` weight tile per (kh, kw, channel block):
for ViT's 16x16 stride-16 embedding of 3 channels that is 256 nearly empty tiles (16 MiB on a 128x128 array) and no
tiling fits. Without overlap between windows the im2col matrix is no bigger than the input and, for one output row,
a pure strided view of it:

    P[(b, oh, ow), (kh, kw, c)] = X[b, oh*R + kh, ow*S + kw, c]      (X NHWC, P row-major [N*OH*OW][R*S*C])

and ``conv(X, W) = P @ B`` with B the OIHW weights reshaped to ``[R*S*C][K]`` in the same (kh, kw, c) order; the
GEMM's ``[N*OH*OW][K]`` result is the NHWC output. Two ways to run it:

- :func:`patch_matrix` materializes P (one 5-D DMA copy per tile: dims b, oh, ow, kh, (kw, c), staged through SPM by
  :func:`compiler.kernels.staged_copy.staged_copy`) and :func:`compiler.kernels.gemm.tiled_gemm` multiplies it;
- :func:`patch_gemm` is tiled_gemm with its A loads rewritten to read those views of X directly (a few 4-D copies
  per A tile where it starts or ends mid output row or mid kernel row), so P never goes through DRAM.

:func:`compiler.ops.conv.lower_patchify` takes the one whose DMA work is smaller (:func:`dma_estimate`; the fused
one unless B is re-read for many column tiles), folds the bias into the GEMM (a ones column of P, the bias as the last
row of B) and stores B in the order its loads read it (:func:`pack_b_loads`).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from compiler.errors import CompileError
from compiler.kernels.common.target import Target
from compiler.kernels.conv2d import ConvShape
from compiler.kernels.gemm import GemmTiling, tiled_gemm
from compiler.kernels.staged_copy import Box, Operand, staged_copy
from isa import DmaCopy, DmaFill, DType, Program, Queue, Region, Space, View
from isa.cost import instr_cost
from isa.view import MAX_EXTENT

F32 = DType.F32


def is_patchify(node, graph) -> bool:
    """Whether ``node`` is a 2-D Conv this module lowers: a kernel larger than 1x1 with strides equal to it, no
    padding, no dilation, one group, constant weights."""
    if node.op != "Conv" or len(node.present_inputs) < 2 or not graph.is_const(node.inputs[1]):
        return False
    if len(graph.tensor(node.inputs[0]).shape) != 4:
        return False
    a = node.attrs
    k = tuple(a.get("kernel_shape") or graph.tensor(node.inputs[1]).shape[2:])
    return (len(k) == 2 and k[0] * k[1] > 1 and tuple(a.get("strides", (1, 1))) == k
            and not any(a.get("pads", (0,) * 4)) and all(d == 1 for d in a.get("dilations", (1, 1)))
            and a.get("group", 1) == 1)


def _check(cs: ConvShape) -> None:
    if not (cs.stride == (cs.R, cs.S) and not any(cs.pad) and cs.dilation == (1, 1) and cs.groups == 1):
        raise CompileError(f"patch lowering needs stride == kernel size, no padding/dilation and one group, not {cs}")


def patch_matrix(cs: ConvShape, dtype: DType, target: Target, ones: bool = False,
                 tile_bytes: int | None = None) -> Program:
    """The program writing region P (row-major ``[N*OH*OW][R*S*C]``, patch order (kh, kw, c)) from region X (NHWC).

    ``ones`` appends a column of 1.0 (P is then ``[N*OH*OW][R*S*C + 1]``), so a GEMM with the bias as the last row
    of B adds it."""
    _check(cs)
    N, C, H, W, R, S = cs.N, cs.C, cs.H, cs.W, cs.R, cs.S
    OH, OW, kp = cs.OH, cs.OW, R * S * C
    row = kp + ones
    src = Operand("X", 0, (H * W * C, R * W * C, S * C, W * C, 1))
    boxes = [Box((N, OH, OW, R, S * C), Operand("P", 0, (OH * OW * row, OW * row, row, S * C, 1)), src)]
    if ones:
        boxes.append(Box((N * OH * OW, 1), Operand("P", kp, (row, 1)), fill=1.0))
    es = dtype.size
    regions = (Region("X", 0, N * H * W * C * es), Region("P", 1, N * OH * OW * row * es))
    kw = {} if tile_bytes is None else {"tile_bytes": tile_bytes}
    return staged_copy(boxes, dtype, regions, target, **kw)


def _runs(first: int, count: int, period: int) -> list[tuple[int, int, int, int, int]]:
    """Split indices ``[first, first + count)`` of a ``[*][period]`` grid into (offset from first, outer index,
    inner index, rows, columns) pieces: a partial row, a block of whole rows, a partial row."""
    out, i, end = [], first, first + count
    while i < end:
        o, q = divmod(i, period)
        if q or end - i < period:
            n = min(period - q, end - i)
            out.append((i - first, o, q, 1, n))
        else:
            n = (end - i) // period
            out.append((i - first, o, 0, n, period))
        i += out[-1][3] * out[-1][4]
    return out


def _patch_load(load: DmaCopy, cs: ConvShape, K: int, ones: bool) -> list:
    """The loads replacing one tiled_gemm A load ``[tm][tk]`` of the patch matrix (K columns, the last one the
    ones column if ``ones``): strided views of X, plus a fill of the ones column."""
    es = load.dst.dtype.size
    tm, tk = load.shape
    if load.src.region != "A" or load.src.strides != (K * es, es) or load.dst.strides != (tk * es, es) \
            or load.pad or load.src.base % es:
        raise CompileError(f"unexpected A load {load}")
    m0, k0 = divmod(load.src.base // es, K)
    C, W, R, S, OH, OW = cs.C, cs.W, cs.R, cs.S, cs.OH, cs.OW
    kp, dtype, a = R * S * C, load.dst.dtype, load.dst.base
    out: list = []
    rows = []  # (tile row, image, oh, ow, n_oh, n_ow): per image, partial output rows and blocks of whole ones
    for r, img, q, n_img, n in _runs(m0, tm, OH * OW):
        if n_img > 1 or n == OH * OW:
            rows += [(r + j * OH * OW, img + j, 0, 0, OH, OW) for j in range(n_img)]
        else:
            rows += [(r + r2, img, oh, ow, n_oh, n_ow) for r2, oh, ow, n_oh, n_ow in _runs(q, n, OW)]
    cols = _runs(k0, min(tk, kp - k0), S * C) if k0 < kp else []
    for r, b, oh, ow, n_oh, n_ow in rows:
        for c, kh, q, n_kh, n_q in cols:
            src = (((b * cs.H + oh * R + kh) * W + ow * S) * C + q) * es
            dst = View(Space.SPM, a + (r * tk + c) * es, dtype, (OW * tk * es, tk * es, S * C * es, es))
            out.append(DmaCopy(queue=Queue.DMA_LD, shape=(n_oh, n_ow, n_kh, n_q), dst=dst,
                               src=View(Space.DRAM, src, dtype, (R * W * C * es, S * C * es, W * C * es, es), "X")))
    if ones and k0 <= kp < k0 + tk:
        out.append(DmaFill(queue=Queue.DMA_LD, shape=(tm,), value=1.0,
                           dst=View(Space.SPM, a + (kp - k0) * es, dtype, (tk * es,))))
    if any(e > MAX_EXTENT for i in out for e in i.shape):
        raise CompileError("a patch load exceeds the DMA's extent limit")
    out[0] = replace(out[0], waits=load.waits)
    out[-1] = replace(out[-1], signals=out[-1].signals + load.signals)
    return out


def patch_gemm(cs: ConvShape, dtype: DType, target: Target, ones: bool = False,
               tiling: GemmTiling | None = None) -> Program:
    """im2col fused into the GEMM: :func:`compiler.kernels.gemm.tiled_gemm` for ``P @ B`` whose A loads read the patches
    straight from X (NHWC) instead of a materialized P. Regions X, B (``[R*S*C (+1)][K]``), C (NHWC output, f32).
    ``ones``: P gets a ones column (B's last row is the bias)."""
    _check(cs)
    M, K = cs.N * cs.OH * cs.OW, cs.R * cs.S * cs.C + ones
    prog = tiled_gemm(M, cs.K, K, dtype, target, tiling)
    instrs = []
    for i in prog.instrs:
        if isinstance(i, DmaCopy) and i.src.space is Space.DRAM and i.src.region == "A":
            instrs += _patch_load(i, cs, K, ones)
        else:
            instrs.append(i)
    regions = tuple(Region("X", r.index, cs.N * cs.H * cs.W * cs.C * dtype.size) if r.name == "A" else r
                    for r in prog.regions)
    return replace(prog, regions=regions, instrs=tuple(instrs))


def patch_weights(w: np.ndarray) -> np.ndarray:
    """OIHW weights ``(K, C, R, S)`` as the GEMM's B ``[R*S*C][K]`` in (kh, kw, c) row order."""
    K, C, R, S = w.shape
    return np.ascontiguousarray(w.transpose(2, 3, 1, 0).reshape(R * S * C, K))


def patch_reference(x: np.ndarray, cs: ConvShape) -> np.ndarray:
    """numpy's P from NHWC ``x``."""
    N, OH, OW, R, S, C = cs.N, cs.OH, cs.OW, cs.R, cs.S, cs.C
    v = x[:, :OH * R, :OW * S].reshape(N, OH, R, OW, S, C).transpose(0, 1, 3, 2, 4, 5)
    return np.ascontiguousarray(v.reshape(N * OH * OW, R * S * C))


def pack_b_loads(prog: Program, b: np.ndarray) -> tuple[Program, np.ndarray]:
    """``prog`` (a tiled_gemm-style program reading row-major ``b`` from region B) with every distinct B load reading
    a dense run, and the B image that makes it so: each load's elements gathered, in its iteration order, one after
    the other (as :func:`compiler.kernels.conv2d.pack_weights` blocks conv weights). The loads then stream whole DRAM
    pages instead of hopping between weight rows."""
    flat, es = np.ascontiguousarray(b).ravel(), b.dtype.itemsize
    parts, where, instrs, size = [], {}, [], 0
    for i in prog.instrs:
        if isinstance(i, DmaCopy) and i.src.space is Space.DRAM and i.src.region == "B":
            if i.pad or i.src.base % es or any(st % es for st in i.src.strides):
                raise CompileError(f"unexpected B load {i}")
            key = (i.shape, i.src.base, i.src.strides)
            if key not in where:
                idx = np.full((1,) * len(i.shape), i.src.base // es, np.int64)
                for d, (e, st) in enumerate(zip(i.shape, i.src.strides)):
                    idx = idx + (np.arange(e) * (st // es)).reshape((1,) * d + (e,) + (1,) * (len(i.shape) - d - 1))
                parts.append(flat[idx.ravel()])
                where[key] = size
                size += parts[-1].size
            dense = tuple(int(np.prod(i.shape[d + 1:])) * es for d in range(len(i.shape)))
            i = replace(i, src=View(Space.DRAM, where[key] * es, i.src.dtype, dense, "B"))
        instrs.append(i)
    packed = np.concatenate(parts) if parts else flat
    regions = tuple(Region("B", r.index, packed.size * es) if r.name == "B" else r for r in prog.regions)
    return replace(prog, regions=regions, instrs=tuple(instrs)), packed


def dma_estimate(programs: list[Program], arch) -> int:
    """Cycles the DMA instructions of ``programs`` take in isolation, summed: the im2col and the GEMM are bound by
    the DRAM bus, which serves one window at a time, so this ranks the two lowerings."""
    return sum(instr_cost(i, arch).cycles for p in programs for i in p.instrs if isinstance(i, DmaCopy | DmaFill))
