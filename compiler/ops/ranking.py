"""ArgMax, ArgMin and TopK on the vector unit (:mod:`compiler.kernels.vector.ranking`): any axis, onnxruntime's
answers (ties, signed zeros and NaN included), int64 indices held as int32. A channels-last input ranked over its
channels needs no transpose (the channels are its innermost axis)."""

from __future__ import annotations

import dataclasses

import numpy as np

from compiler.errors import UnsupportedOpError
from compiler.frontend.canonical import CanonContext, norm_axis
from compiler.ir import Graph, Node
from compiler.kernels.vector.ranking import arg_constants, argext, ranked_shape, topk, topk_constants
from compiler.ops.context import Binding, LoweringContext
from compiler.ops.spec import OpSpec
from isa import DType

RANKED = frozenset({np.dtype(np.float32), np.dtype(np.int32)})
"""What ArgMax/ArgMin rank (int64 is int32 on the NPU) and the index type they write."""


def _arg(node: Node, ctx: CanonContext) -> Node:
    rank = len(ctx.shape(node.inputs[0]))
    return dataclasses.replace(node, attrs={"axis": norm_axis(int(node.attrs.get("axis", 0)), rank, node.name,
                                                              node.op),
                                            "keepdims": int(node.attrs.get("keepdims", 1)),
                                            "select_last_index": int(node.attrs.get("select_last_index", 0))})


def _topk(node: Node, ctx: CanonContext) -> Node:
    k = ctx.const(node, 1, "k")
    if k is None or np.asarray(k).size != 1:
        raise UnsupportedOpError(node.name, node.op, "k must be a 1-element constant")
    rank = len(ctx.shape(node.inputs[0]))
    return dataclasses.replace(node, attrs={"axis": norm_axis(int(node.attrs.get("axis", -1)), rank, node.name,
                                                              node.op),
                                            "k": int(np.asarray(k).ravel()[0]),
                                            "largest": int(node.attrs.get("largest", 1)),
                                            "sorted": int(node.attrs.get("sorted", 1))})


def _ranked_input(low: LoweringContext, name: str, axis: int) -> tuple[Binding, tuple[int, int, int], bool]:
    """The input as the kernel reads it, its ``(pre, L, post)`` and whether it stays channels-last (ranked over
    the channels of a channels-last tensor, the innermost axis: no transpose)."""
    b = low.bind[name]
    if b.layout == "nhwc" and axis == 1:
        return b, ranked_shape(b.phys, len(b.shape) - 1), True
    b = low.want(name, "rm")
    return b, ranked_shape(b.shape, axis), False


def lower_arg(low: LoweringContext, n: Node) -> None:
    """ArgMax/ArgMin: one program; the indices (int32) are the ``(pre, post)`` cross-section in row-major order,
    which is the output with or without its kept dimension (from a channels-last input too: its channels are the
    ranked axis)."""
    a = n.attrs
    x, shape3, _ = _ranked_input(low, n.inputs[0], a["axis"])
    last = bool(a["select_last_index"])
    prog = argext(shape3, x.dtype, low.target, largest=n.op == "ArgMax", last=last)
    y = low.alloc(low.graph.tensor(n.outputs[0]).shape, "rm", DType.I32)
    low.emit(n, prog, {"X": ("ACT", x.offset), "K": ("W", low.const(arg_constants(shape3[1], last))),
                       "Y": ("ACT", y.offset)})
    low.bind[n.outputs[0]] = y


def lower_topk(low: LoweringContext, n: Node) -> None:
    """TopK: values and indices in one program, sorted (best first, ties by lower index); a channels-last input
    ranked over its channels gives channels-last outputs."""
    a = n.attrs
    x, shape3, nhwc = _ranked_input(low, n.inputs[0], a["axis"])
    prog = topk(shape3, a["k"], low.target, largest=bool(a["largest"]))
    layout = "nhwc" if nhwc else "rm"
    v = low.alloc(low.graph.tensor(n.outputs[0]).shape, layout, DType.F32)
    i = low.alloc(low.graph.tensor(n.outputs[1]).shape, layout, DType.I32)
    low.emit(n, prog, {"X": ("ACT", x.offset), "K": ("W", low.const(topk_constants(shape3[1]))),
                       "V": ("ACT", v.offset), "I": ("ACT", i.offset)})
    low.bind[n.outputs[0]], low.bind[n.outputs[1]] = v, i


def _topk_check(node: Node, graph: Graph) -> str | None:
    if graph.tensor(node.inputs[0]).dtype != np.float32:
        return f"only float32 values are ranked, not {graph.tensor(node.inputs[0]).dtype}"
    length = graph.tensor(node.inputs[0]).shape[node.attrs["axis"]]
    if not 1 <= node.attrs["k"] <= length:
        return f"k={node.attrs['k']} must be in [1, {length}] (the axis)"
    return None


OPS = (
    *(OpSpec(op, lower_arg, _arg, dtypes=RANKED,
             npu="vector unit, any axis, keepdims, select_last_index; onnxruntime's answer with ties and NaN (a NaN "
                 "is taken only as the first element); the whole axis in one tile (else the host)")
      for op in ("ArgMax", "ArgMin")),
    OpSpec("TopK", lower_topk, _topk, _topk_check, dtypes=RANKED, const_operands=True,
           npu="vector unit, float32, any axis, largest or smallest, constant k: k rounds over each tile; always "
               "sorted (best first, ties by lower index, NaN above +inf, as onnxruntime's sorted output); the whole "
               "axis in one tile (else the host)"),
)
