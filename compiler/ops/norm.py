"""Normalisations on the vector unit: InstanceNormalization and GroupNormalization (statistics per group, in the
tensor's own layout: :func:`compiler.kernels.reduce.normalize`) and a standalone BatchNormalization (a per-channel scale
and shift; one after a Conv is folded into its weights first, :mod:`compiler.passes.fold_batchnorm`)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from compiler.errors import CompileError, UnsupportedOpError
from compiler.frontend.canonical import CanonContext
from compiler.ir import Graph, Node
from compiler.kernels import reduce as red
from compiler.kernels.vector import recipes, streams
from compiler.ops.context import LoweringContext
from compiler.ops.spec import OpSpec


def _groups(n: Node, channels: int) -> int:
    return channels if n.op == "InstanceNormalization" else int(n.attrs["num_groups"])


def lower_group_norm(low: LoweringContext, n: Node) -> None:
    """Statistics over each (sample, group): (N, G, C/G, spatial) row-major, (N, spatial, G, C/G) channels-last."""
    x = low.bind[n.inputs[0]]
    channels = x.shape[1]
    g = _groups(n, channels)
    cg, spatial = channels // g, math.prod(x.shape[2:])
    if x.layout == "nhwc":
        sp = red.space((x.shape[0], spatial, g, cg), (False, True, False, True), chan=(0, 0, cg, 1))
    else:
        sp = red.space((x.shape[0], g, cg, spatial), (False, False, True, True), chan=(0, cg, 1, 0))
    gamma, beta = (low.data(t).astype(np.float32).ravel() for t in n.inputs[1:3])
    if gamma.size != channels:   # GroupNormalization-18: one scale and bias per group
        gamma, beta = np.repeat(gamma, cg), np.repeat(beta, cg)
    try:
        prog = red.normalize(sp, channels, n.attrs["epsilon"], low.target)
    except CompileError as e:   # scale and bias alone do not fit the SPM
        raise UnsupportedOpError(n.name, n.op, str(e)) from None
    y = low.alloc(x.shape, x.layout)
    low.emit(n, prog, {"X": ("ACT", x.offset), "GB": ("W", low.const(np.concatenate([gamma, beta]))),
                       "Y": ("ACT", y.offset)})
    low.bind[n.outputs[0]] = y


def lower_batchnorm(low: LoweringContext, n: Node) -> None:
    """``x * s + t`` per channel, ``s = scale / sqrt(var + eps)`` and ``t = B - mean * s`` computed in f32 as
    onnxruntime does, so the two products round the same."""
    x = low.bind[n.inputs[0]]
    scale, bias, mean, var = (low.data(t).astype(np.float32) for t in n.inputs[1:5])
    s = np.float32(1) / np.sqrt(var + np.float32(n.attrs["epsilon"])) * scale
    t = bias - s * mean
    channels = x.shape[1]
    shape = (channels,) if x.layout == "nhwc" else (channels,) + (1,) * (len(x.shape) - 2)
    y = low.alloc(x.shape, x.layout)
    prog = streams.pointwise(recipes.affine(), [("X", x.phys), ("S", shape), ("T", shape)], x.phys, low.target)
    low.emit(n, prog, {"X": ("ACT", x.offset), "S": ("W", low.const(s)), "T": ("W", low.const(t)),
                       "Y": ("ACT", y.offset)})
    low.bind[n.outputs[0]] = y


def _norm(node: Node, ctx: CanonContext) -> Node:
    attrs = {"epsilon": float(node.attrs.get("epsilon", 1e-5))}
    if node.op == "GroupNormalization":
        attrs |= {"num_groups": int(node.attrs["num_groups"]), "stash_type": int(node.attrs.get("stash_type", 1))}
    return dataclasses.replace(node, attrs=attrs)


def _batchnorm(node: Node, ctx: CanonContext) -> Node:
    if node.attrs.get("training_mode", 0):
        raise UnsupportedOpError(node.name, node.op, "training_mode=1 is not supported; export for inference")
    return dataclasses.replace(node, attrs={"epsilon": float(node.attrs.get("epsilon", 1e-5)),
                                            "momentum": float(node.attrs.get("momentum", 0.9))},
                               outputs=ctx.drop_extra_outputs(node, "a training output"))


def _params(node: Node, graph: Graph) -> str | None:
    """Constant per-channel parameters of the right size, and an input with channels."""
    shape = graph.tensor(node.inputs[0]).shape
    if len(shape) < 2 or (node.op == "InstanceNormalization" and len(shape) < 3):
        return f"an input of rank {len(shape)} has no channels to normalise"
    if not all(graph.is_const(t) for t in node.present_inputs[1:]):
        return "scale, bias (mean and variance) must be constants"
    channels = shape[1]
    sizes = {channels}
    if node.op == "GroupNormalization":
        g = node.attrs["num_groups"]
        if g < 1 or channels % g:
            return f"num_groups={g} does not divide {channels} channels"
        sizes.add(g)
    for t in node.present_inputs[1:]:
        if graph.tensor(t).data.size not in sizes:
            return f"{t!r} has {graph.tensor(t).data.size} values for {channels} channels"
    return None


OPS = (
    OpSpec("InstanceNormalization", lower_group_norm, _norm, _params,
           npu="vector unit: mean, centred variance and scale per (sample, channel) in the tensor's layout, "
               "constant scale and bias; one pass when a channel fits the SPM's tile, else three"),
    OpSpec("GroupNormalization", lower_group_norm, _norm, _params,
           npu="vector unit: as InstanceNormalization per group, constant scale and bias per channel (opset 21) or "
               "per group (opset 18)"),
    OpSpec("BatchNormalization", lower_batchnorm, _batchnorm, _params,
           npu="folded into the Conv before it (weights and bias rescaled offline); standalone: vector unit, x * s + "
               "t per channel, one pass (constant parameters, inference)"),
)
