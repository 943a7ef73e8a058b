"""Fuse softmax written out, ``Div(Exp(z), ReduceSum(Exp(z), axes=[a], keepdims=1))`` with ``z = x`` or ``z = Sub(x,
ReduceMax(x, axes=[a], keepdims=1))`` (the max subtraction), into one ``Softmax(x, axis=a)``: the same value (the
fused op subtracts the row maximum itself, so it also cannot overflow where the form without it would). Exp's result
must be read by the ReduceSum and the Div alone, and the Sub's by the Exp alone."""

from __future__ import annotations

from compiler.ir import Graph, Node
from compiler.passes.patterns import Rewrite, same_shape
from compiler.passes.reduce_axes import reduce_axes


def fuse_softmax(graph: Graph) -> Graph:
    rw = Rewrite(graph)
    for exp in graph.nodes:
        if exp.op != "Exp" or exp.domain not in ("", "ai.onnx"):
            continue
        e = exp.outputs[0]
        users = graph.consumers(e)
        total = next((u for u in users if u.op == "ReduceSum" and u.inputs[0] == e), None)
        div = next((u for u in users if u.op == "Div" and u.inputs[0] == e), None)
        if total is None or div is None or div.inputs[1] != total.outputs[0] or not total.attrs.get("keepdims", 1):
            continue
        axes = reduce_axes(total, graph)
        if axes is None or len(axes) != 1:
            continue
        x, pattern = exp.inputs[0], [exp, total, div]
        sub = graph.producer(x)
        if sub is not None and sub.op == "Sub" and len(graph.consumers(x)) == 1 and x not in graph.outputs:
            top = graph.producer(sub.inputs[1])
            if top is not None and top.op == "ReduceMax" and top.inputs[0] == sub.inputs[0] \
                    and reduce_axes(top, graph) == axes and top.attrs.get("keepdims", 1):
                x, pattern = sub.inputs[0], [top, sub, *pattern]
        if graph.tensor(x).dtype.kind == "f" and same_shape(graph, x, e, div.outputs[0]):
            rw.add(pattern, Node(div.name, "Softmax", (x,), div.outputs, {"axis": axes[0]}))
    return rw.graph()
