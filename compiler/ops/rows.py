"""Row-wise ops on the vector unit: Softmax and LogSoftmax over any axis, LayerNormalization over the last axis,
RMSNormalization (and onnxruntime's SimplifiedLayerNormalization) over the axes from ``axis`` on, and the row-wise
program of ReduceMean and ReduceSum (their entries: :mod:`compiler.ops.reduce`)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from compiler.frontend.canonical import CanonContext, axis_attr, norm_axis
from compiler.ir import Graph, Node
from compiler.kernels.vector import rowwise
from compiler.ops.context import LoweringContext
from compiler.ops.spec import OpSpec
from isa import DType, Reduce

F32 = DType.F32


def _axes(n: Node) -> tuple[int, ...]:
    return tuple(n.attrs.get("axes", (n.attrs.get("axis", -1),)))


def lower_rows(low: LoweringContext, n: Node) -> None:
    """The op over rows of the last axis of a row-major tensor."""
    x = low.want(n.inputs[0], "rm")
    rows, length = math.prod(x.shape[:-1]), x.shape[-1]
    out_shape = low.graph.tensor(n.outputs[0]).shape
    y = low.alloc(out_shape, "rm")
    bind = {"X": ("ACT", x.offset), "Y": ("ACT", y.offset)}
    if n.op == "LayerNormalization":
        # scale and bias broadcast to the normalized (last) axis: a (1,)-shaped scale is one value for every element
        gamma = np.broadcast_to(low.data(n.inputs[1]).astype(np.float32), (length,))
        beta = np.broadcast_to(low.data(n.inputs[2]).astype(np.float32), (length,)) \
            if len(n.present_inputs) > 2 else np.zeros_like(gamma)
        bind["GB"] = ("W", low.const(np.concatenate([gamma.ravel(), beta.ravel()])))
        prog = rowwise.layernorm(rows, length, F32, low.target, n.attrs.get("epsilon", 1e-5))
    else:
        prog = rowwise.reduce_rows(Reduce.SUM, rows, length, F32, low.target, mean=n.op == "ReduceMean")
    low.emit(n, prog, bind)
    low.bind[n.outputs[0]] = y


def lower_rmsnorm(low: LoweringContext, n: Node) -> None:
    """RMSNormalization over the axes from ``axis`` on: the row-major tensor as ``[rows][length]`` rows, the constant
    scale broadcast to one row (:func:`compiler.kernels.vector.rowwise.rmsnorm`, one DRAM pass)."""
    x = low.want(n.inputs[0], "rm")
    axis = n.attrs["axis"]
    rows, length = math.prod(x.shape[:axis]), math.prod(x.shape[axis:])
    scale = np.broadcast_to(low.data(n.inputs[1]).astype(np.float32), x.shape[axis:]).ravel()
    y = low.alloc(x.shape, "rm")
    prog = rowwise.rmsnorm(rows, length, F32, low.target, n.attrs["epsilon"])
    low.emit(n, prog, {"X": ("ACT", x.offset), "G": ("W", low.const(np.ascontiguousarray(scale))),
                       "Y": ("ACT", y.offset)})
    low.bind[n.outputs[0]] = y


def lower_softmax(low: LoweringContext, n: Node) -> None:
    """Softmax / LogSoftmax over any axis, in the layout the input is in (a channels-last tensor's channel axis is
    its rows): over the innermost axis in memory as rows, over another one through strided views
    (:func:`compiler.kernels.vector.rowwise.softmax_axis`), never a transpose."""
    b = low.bind[n.inputs[0]]
    x = b if b.layout == "nhwc" and len(b.shape) == 4 else low.want(n.inputs[0], "rm")
    axis = n.attrs["axis"]
    p = (0, 2, 3, 1).index(axis) if x.layout == "nhwc" else axis
    outer, length, inner = math.prod(x.phys[:p]), x.phys[p], math.prod(x.phys[p + 1:])
    y = low.alloc(x.shape, x.layout)
    log = n.op == "LogSoftmax"
    prog = rowwise.softmax(outer, length, F32, low.target, log) if inner == 1 else \
        rowwise.softmax_axis(outer, length, inner, F32, low.target, log)
    low.emit(n, prog, {"X": ("ACT", x.offset), "Y": ("ACT", y.offset)})
    low.bind[n.outputs[0]] = y


def _last_axis(node: Node, graph: Graph) -> str | None:
    rank = len(graph.tensor(node.inputs[0]).shape)
    axes = _axes(node)
    if tuple(a % rank for a in axes) != (rank - 1,):
        return f"only the last axis, not {axes}"
    if node.op == "LayerNormalization" and not all(graph.is_const(t) for t in node.present_inputs[1:]):
        return "scale and bias must be constants"
    return None


def _norm(node: Node, ctx: CanonContext, extra: str) -> Node:
    """A normalization's canonical attributes (axis, epsilon, stash_type); its ``extra`` outputs dropped."""
    a, rank = node.attrs, len(ctx.shape(node.inputs[0]))
    return dataclasses.replace(node, attrs={"axis": norm_axis(int(a.get("axis", -1)), rank, node.name, node.op),
                                            "epsilon": float(a.get("epsilon", 1e-5)),
                                            "stash_type": int(a.get("stash_type", 1))},
                               outputs=ctx.drop_extra_outputs(node, extra))


def _layernorm(node: Node, ctx: CanonContext) -> Node:
    return _norm(node, ctx, "the Mean/InvStdDev output")


def _rmsnorm(node: Node, ctx: CanonContext) -> Node:
    return _norm(node, ctx, "the InvStdDev output")


def _rms_scale(node: Node, graph: Graph) -> str | None:
    """A constant scale that broadcasts to the normalized shape."""
    shape = graph.tensor(node.inputs[0]).shape[node.attrs["axis"]:]
    if not graph.is_const(node.inputs[1]):
        return "the scale must be a constant"
    s = graph.tensor(node.inputs[1]).shape
    if len(s) > len(shape) or any(d not in (1, e) for d, e in zip(s[::-1], shape[::-1])):
        return f"scale of shape {s} does not broadcast to the normalized shape {shape}"
    return None


RMS_NPU = ("vector unit, the axes from `axis` on as one row (x times rsqrt(mean(x^2) + epsilon) times the scale, one "
           "pass), constant scale")

OPS = (
    OpSpec("Softmax", lower_softmax, axis_attr(-1), npu="vector unit, any axis (strided views, no transpose)"),
    OpSpec("LogSoftmax", lower_softmax, axis_attr(-1), npu="vector unit, any axis (strided views, no transpose)"),
    OpSpec("LayerNormalization", lower_rows, _layernorm, _last_axis, npu="vector unit, last axis, constant scale "
           "and bias"),
    OpSpec("RMSNormalization", lower_rmsnorm, _rmsnorm, _rms_scale, npu=RMS_NPU + "; also what the exporters' "
           "Pow/ReduceMean/Add/Sqrt/Div (or Reciprocal/Mul) pattern is fused into"),
    OpSpec("SimplifiedLayerNormalization", lower_rmsnorm, _rmsnorm, _rms_scale,
           npu="onnxruntime's RMSNormalization (default domain, as onnxruntime registers it): " + RMS_NPU),
)
