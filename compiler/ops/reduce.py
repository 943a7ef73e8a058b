"""Reductions on the vector unit over any set of axes (:mod:`compiler.kernels.reduce`): ReduceSum, ReduceMean,
ReduceMax, ReduceMin, ReduceSumSquare, ReduceL1, ReduceL2, ReduceLogSum, keepdims 0/1, noop_with_empty_axes. A
channels-last tensor is reduced in its own order (no transpose); a row-major ReduceSum/ReduceMean over the last axis
keeps its row-wise program (:func:`compiler.kernels.vector.rowwise.reduce_rows`)."""

from __future__ import annotations

import dataclasses

from compiler.errors import CompileError
from compiler.frontend.canonical import CanonContext, norm_axis
from compiler.ir import Graph, Node
from compiler.kernels import reduce as red
from compiler.kernels.vector.strides import row_major
from compiler.ops.context import LoweringContext
from compiler.ops.rows import lower_rows
from compiler.ops.spec import OpSpec
from isa import DType

IDENTITY_WHEN_EMPTY = frozenset({"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"})
"""Reductions that are the identity over no axes (the others square, take |x| or log: onnxruntime reduces each
element alone under noop_with_empty_axes)."""


def _reduce(node: Node, ctx: CanonContext) -> Node:
    """``axes`` (attribute or constant input) sorted and non-negative, ``keepdims``; empty axes: every axis, or none
    with noop_with_empty_axes (an Identity for the ops where that is one)."""
    a, rank = node.attrs, len(ctx.shape(node.inputs[0]))
    axes = a.get("axes")
    if axes is None:
        value = ctx.const(node, 1, "axes")
        axes = () if value is None else tuple(value.tolist())
    if not axes:
        if a.get("noop_with_empty_axes", 0):
            if node.op in IDENTITY_WHEN_EMPTY:
                return dataclasses.replace(node, op="Identity", inputs=node.inputs[:1], attrs={})
            return dataclasses.replace(node, inputs=node.inputs[:1], attrs={"axes": (), "keepdims": 1})
        axes = tuple(range(rank))
    axes = tuple(sorted({norm_axis(int(x), rank, node.name, node.op) for x in axes}))
    return dataclasses.replace(node, inputs=node.inputs[:1],
                               attrs={"axes": axes, "keepdims": int(a.get("keepdims", 1))})


def _space(shape: tuple[int, ...], layout: str, axes: tuple[int, ...], keepdims: bool, out_layout: str) -> red.Space5:
    """The reduction of a tensor of logical ``shape`` stored in ``layout``, its output stored in ``out_layout``."""
    order = (0, 2, 3, 1) if layout == "nhwc" else tuple(range(len(shape)))
    out = tuple(1 if i in axes else e for i, e in enumerate(shape) if keepdims or i not in axes)
    pos = {a: (a if keepdims else sum(1 for i in range(a) if i not in axes)) for a in range(len(shape))}
    if out_layout == "nhwc":
        ostr = dict(zip((0, 2, 3, 1), row_major((out[0], out[2], out[3], out[1]))))
    else:
        ostr = dict(enumerate(row_major(out)))
    return red.space(tuple(shape[a] for a in order), tuple(a in axes for a in order),
                     tuple(0 if a in axes else ostr[pos[a]] for a in order))


def lower_reduce(low: LoweringContext, n: Node) -> None:
    """The reduction in the input's own layout; a 4-D keepdims output of a channels-last input stays channels-last."""
    x = low.bind[n.inputs[0]]
    axes, keep = tuple(n.attrs["axes"]), bool(n.attrs["keepdims"])
    rank = len(x.shape)
    if n.op in ("ReduceSum", "ReduceMean") and axes == (rank - 1,) and (x.layout == "rm" or rank != 4) \
            and x.shape[-1] * x.dtype.size + 8 <= low.target.spm // 2:
        return lower_rows(low, n)   # the row-wise program it always had
    out_shape = low.graph.tensor(n.outputs[0]).shape
    out_layout = "nhwc" if x.layout == "nhwc" and keep and len(out_shape) == 4 else "rm"
    prog = red.reduce(n.op, _space(x.shape, x.layout, axes, keep, out_layout), low.target)
    y = low.alloc(out_shape, out_layout, DType.F32)
    low.emit(n, prog, {"X": ("ACT", x.offset), "Y": ("ACT", y.offset)})
    low.bind[n.outputs[0]] = y


def _check(node: Node, graph: Graph) -> str | None:
    shape = graph.tensor(node.inputs[0]).shape
    try:   # row-major; channels-last reorders 4 dims, which never adds alternations beyond 4
        red.space(shape, tuple(i in node.attrs["axes"] for i in range(len(shape))))
    except CompileError as e:
        return str(e)
    return None


NPU = {"ReduceSum": "sum", "ReduceMean": "sum / count", "ReduceMax": "max", "ReduceMin": "min",
       "ReduceSumSquare": "sum of x*x", "ReduceL1": "sum of |x|", "ReduceL2": "sqrt of the sum of x*x",
       "ReduceLogSum": "log of the sum"}

OPS = tuple(OpSpec(op, lower_reduce, _reduce, _check,
                   npu=f"vector unit ({text}), any axes in the tensor's layout (at most 5 alternating groups of "
                       f"reduced and kept dimensions), keepdims, noop_with_empty_axes; f32 accumulation")
            for op, text in NPU.items())
