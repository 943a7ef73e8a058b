"""Row-wise ops over the last axis on the vector unit: Softmax, LayerNormalization, and the row-wise program of
ReduceMean and ReduceSum (their entries: :mod:`compiler.lower.reduce`)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from isa import DType, Reduce

from .. import vector
from ..canonical import CanonContext, axis_attr, norm_axis
from ..ir import Graph, Node
from .context import LoweringContext
from .spec import OpSpec

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
    if n.op == "Softmax":
        prog = vector.softmax(rows, length, F32, low.target)
    elif n.op == "LayerNormalization":
        # scale and bias broadcast to the normalized (last) axis: a (1,)-shaped scale is one value for every element
        gamma = np.broadcast_to(low.data(n.inputs[1]).astype(np.float32), (length,))
        beta = np.broadcast_to(low.data(n.inputs[2]).astype(np.float32), (length,)) \
            if len(n.present_inputs) > 2 else np.zeros_like(gamma)
        bind["GB"] = ("W", low.const(np.concatenate([gamma.ravel(), beta.ravel()])))
        prog = vector.layernorm(rows, length, F32, low.target, n.attrs.get("epsilon", 1e-5))
    else:
        prog = vector.reduce_rows(Reduce.SUM, rows, length, F32, low.target, mean=n.op == "ReduceMean")
    low.emit(n, prog, bind)
    low.bind[n.outputs[0]] = y


def _last_axis(node: Node, graph: Graph) -> str | None:
    rank = len(graph.tensor(node.inputs[0]).shape)
    axes = _axes(node)
    if tuple(a % rank for a in axes) != (rank - 1,):
        return f"only the last axis, not {axes}"
    if node.op == "LayerNormalization" and not all(graph.is_const(t) for t in node.present_inputs[1:]):
        return "scale and bias must be constants"
    return None


def _layernorm(node: Node, ctx: CanonContext) -> Node:
    a, rank = node.attrs, len(ctx.shape(node.inputs[0]))
    return dataclasses.replace(node, attrs={"axis": norm_axis(int(a.get("axis", -1)), rank, node.name, node.op),
                                            "epsilon": float(a.get("epsilon", 1e-5)),
                                            "stash_type": int(a.get("stash_type", 1))},
                               outputs=ctx.drop_extra_outputs(node, "the Mean/InvStdDev output"))


OPS = (
    OpSpec("Softmax", lower_rows, axis_attr(-1), _last_axis, npu="vector unit, last axis"),
    OpSpec("LayerNormalization", lower_rows, _layernorm, _last_axis, npu="vector unit, last axis, constant scale "
           "and bias"),
)
