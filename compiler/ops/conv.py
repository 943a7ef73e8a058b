"""Conv on the NPU, three ways: a patch-embedding conv (stride == kernel) as DMA im2col + GEMM
(:mod:`compiler.kernels.patchify`), a depthwise conv on the vector unit (:mod:`compiler.kernels.depthwise`), every other
one on the matrix unit (:func:`compiler.kernels.conv2d.conv2d`) with its bias, activation and residual add fused into
the accumulator epilogue. Every ONNX form: per-axis strides and dilations, four pads (``auto_pad`` resolved by the
importer), groups, and 1-D convolutions (NCL, lowered as one row of a 2-D one on a channels-last NLC tensor). Filter
taps that read only padding at every output (a dilation wider than the map) are dropped first
(:func:`compiler.kernels.conv2d.live_taps`): the smaller convolution is exact."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import numpy as np

from compiler.errors import CompileError, TilingError, UnsupportedOpError
from compiler.frontend.canonical import CanonContext, window_attrs
from compiler.ir import Graph, Node
from compiler.kernels.common.search import on_array_blocks
from compiler.kernels.common.target import Target
from compiler.kernels.conv2d import ConvShape, conv2d, conv_on_array, conv_shape, live_taps, pack_weights
from compiler.kernels.depthwise import depthwise2d, is_depthwise, pack_depthwise
from compiler.kernels.gemm import tiled_gemm
from compiler.kernels.patchify import dma_estimate, is_patchify, pack_b_loads, patch_gemm, patch_matrix, patch_weights
from compiler.ops.context import LoweringContext
from compiler.ops.spec import Canonical, Check, OpSpec
from compiler.ops.steps import activation_step, bias_step, fused_epilogue
from isa import DType, Program
from isa.cost import program_estimate

F32 = DType.F32


def lower_conv(low: LoweringContext, n: Node) -> None:
    """Dispatch: patch embedding, depthwise, or the direct convolution with its epilogue fused."""
    if is_patchify(n, low.graph):   # stride == kernel: the DMA gathers patches, the GEMM does the rest
        return lower_patchify(low, n)
    a = n.attrs
    x = low.want(n.inputs[0], "nhwc")
    w = np.asarray(low.data(n.inputs[1]), np.float32)   # (read only: packing copies it)
    cs = conv_shape(n, x.shape, w.shape)
    w = w.reshape(cs.K, cs.Cg, cs.R, cs.S)   # (a 1-D conv's OIL weights as OIHW)
    cs, rows, cols = live_taps(cs)   # (the taps that read only padding at every output dropped: exact)
    w = w[:, :, rows, cols]
    target = low.target
    y = low.alloc(conv_out_shape(cs, len(x.shape)), "nhwc")
    act = a.get("activation")
    has_bias = len(n.inputs) > 2 and bool(n.inputs[2])
    if is_depthwise(cs.C, cs.K, cs.groups):   # the vector unit, not 1/rows of the array per group
        prog = depthwise2d(cs, F32, target)
        bind = {"X": ("ACT", x.offset), "Wd": ("W", low.const(pack_depthwise(w.copy(), cs))), "Y": ("ACT", y.offset)}
        low.emit(n, prog, bind, cs.macs)
        if has_bias:
            y = bias_step(low, n, y, low.data(n.inputs[2]))
        if act:
            y = activation_step(low, n, y, act)
    else:   # bias and activation fused: applied to each accumulator tile before the store
        residual = bool(a.get("residual"))   # fuse_residual: the Add's other operand starts the accumulators
        ep = fused_epilogue(n, has_bias)
        target, tiling = conv_on_array(cs, F32, target, ep, low.prefetched, blocks=not low.prefetched)
        prog = conv2d(cs, F32, target, tiling, ep)
        packing = (n.inputs[1], cs, target.rows, target.cols, tiling.im2col, tiling.pack, tiling.gpack)
        wt = low.packed.get(packing)
        if wt is None:
            wt = low.packed[packing] = pack_weights(np.ascontiguousarray(w), cs, *packing[2:])
        bind = {"X": ("ACT", x.offset), "Wt": ("W", low.const(wt)), "Y": ("ACT", y.offset)}
        if residual:
            bind["R"] = ("ACT", low.want(n.inputs[3], "nhwc").offset)
        if has_bias:
            bind["Bias"] = ("W", low.const(low.data(n.inputs[2]).astype(np.float32)))
        low.emit(n, prog, bind, cs.macs)
    low.bind[n.outputs[0]] = y


def conv_out_shape(cs: ConvShape, rank: int) -> tuple[int, ...]:
    """The logical output shape of ``cs``: NKL for a 1-D convolution (input ``rank`` 3), else NKHW."""
    return (cs.N, cs.K, cs.OW) if rank == 3 else (cs.N, cs.K, cs.OH, cs.OW)


def lower_patchify(low: LoweringContext, n: Node, *, fuse: bool | None = None, fold_bias: bool = True) -> None:
    """Lower a Conv accepted by :func:`compiler.kernels.patchify.is_patchify`; the output is bound nhwc, f32.

    ``fuse=None`` picks, by :func:`compiler.kernels.patchify.dma_estimate`, between the fused
    :func:`compiler.kernels.patchify.patch_gemm` (one segment ``<name>``) and
    :func:`compiler.kernels.patchify.patch_matrix` (segment ``<name>.im2col``) +
    :func:`compiler.kernels.gemm.tiled_gemm` (``<name>``). ``fold_bias``: the bias rides in the GEMM as a ones column of
    P and a last row of B; otherwise it is a vector add segment ``<name>.bias`` as for other convolutions. When
    neither fits the whole array, both are built for the block of it that
    :func:`compiler.kernels.common.search.on_array_blocks` finds."""
    a = n.attrs
    x = low.want(n.inputs[0], "nhwc")
    w = low.data(n.inputs[1]).astype(np.float32)
    K, C, R, S = w.shape
    N, _, H, W = x.shape
    cs = ConvShape(N, C, H, W, K, R, S, tuple(a["strides"]))
    bias = low.data(n.inputs[2]).astype(np.float32) if len(n.present_inputs) > 2 else None
    ones = bias is not None and fold_bias
    M, kp = N * cs.OH * cs.OW, R * S * C + ones
    b = patch_weights(w)
    b = np.concatenate([b, bias[None, :]]) if ones else b
    _, way = on_array_blocks(low.target, lambda t: _patch_way(cs, t, b, ones, fuse),
                             lambda t, w: sum(program_estimate(p, t.arch) for p in (w.im2col, w.gemm) if p))
    if way.im2col is not None:
        p = low.alloc((M, kp), "rm")
        low.emit(n, way.im2col, {"X": ("ACT", x.offset), "P": ("ACT", p.offset)}, suffix=".im2col")
        a_loc = {"A": ("ACT", p.offset)}
    else:
        a_loc = {"X": ("ACT", x.offset)}
    y = low.alloc((N, K, cs.OH, cs.OW), "nhwc")
    low.emit(n, way.gemm, {**a_loc, "B": ("W", low.const(way.b)), "C": ("ACT", y.offset)}, M * K * kp)
    if bias is not None and not ones:
        y = bias_step(low, n, y, bias)
    if a.get("activation"):   # set by compiler.passes.fuse
        y = activation_step(low, n, y, a["activation"])
    low.bind[n.outputs[0]] = y


class PatchWay(NamedTuple):
    """How a patch embedding runs: the im2col program (None when the GEMM gathers its patches itself), the GEMM and
    the B image its loads read."""

    im2col: Program | None
    gemm: Program
    b: np.ndarray


def _patch_way(cs: ConvShape, target: Target, b: np.ndarray, ones: bool, fuse: bool | None) -> PatchWay:
    """:func:`lower_patchify`'s choice on ``target`` (see there); TilingError when neither way fits it."""
    M, kp = cs.N * cs.OH * cs.OW, b.shape[0]
    fused = split = None
    if fuse is not False:
        try:
            fused = pack_b_loads(patch_gemm(cs, F32, target, ones=ones), b)
        except CompileError:
            if fuse:
                raise
    if fuse is not True:
        try:
            split = (patch_matrix(cs, F32, target, ones=ones), *pack_b_loads(tiled_gemm(M, cs.K, kp, F32, target), b))
        except TilingError:
            if fused is None:
                raise
    if fused is None or split is not None and dma_estimate(list(split[:2]), target.arch) < \
            dma_estimate([fused[0]], target.arch):
        return PatchWay(*split)
    return PatchWay(None, *fused)


def conv_canonical(w_index: int) -> Canonical:
    """The canonical form of a Conv-like op whose weights are input ``w_index``: window attributes and ``group``."""
    def canon(node: Node, ctx: CanonContext) -> Node:
        w = ctx.shape(node.inputs[w_index])
        attrs = window_attrs(node, len(w) - 2, w[2:], node.attrs, ctx.shape(node.inputs[0])[2:])
        return dataclasses.replace(node, attrs={**attrs, "group": int(node.attrs.get("group", 1))})
    return canon


def conv_check(w_index: int) -> Check:
    """Static NPU conditions of a Conv-like op (weights at input ``w_index``): 1-D or 2-D, constant weights and bias
    (any strides, pads, dilations and groups)."""
    def check(node: Node, graph: Graph) -> str | None:
        rank = len(graph.tensor(node.inputs[0]).shape)
        if rank not in (3, 4):
            return f"only 1-D and 2-D convolutions (NCL or NCHW inputs), not rank {rank}"
        consts = [node.inputs[w_index]] + [b for b in node.inputs[2:3] if b and w_index == 1]   # weights, bias
        if not all(graph.is_const(t) for t in consts):
            return "the weights and bias must be constants"
        if node.op == "Conv" and is_patchify(node, graph):
            return None
        try:
            conv_shape(node, graph.tensor(node.inputs[0]).shape, graph.tensor(node.inputs[w_index]).shape)
        except UnsupportedOpError as e:
            return e.reason
        except CompileError as e:
            return str(e)
        return None
    return check


OPS = (
    OpSpec("Conv", lower_conv, conv_canonical(1), conv_check(1), nhwc=True,
           npu="1-D and 2-D, any strides, pads (auto_pad too), dilations and groups (taps that read only padding "
               "dropped); matrix unit (bias, activation and residual add fused; groups of few channels packed into one "
               "array tile), depthwise on the vector unit, stride == kernel as im2col + GEMM"),
)
