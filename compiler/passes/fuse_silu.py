"""Fuse SiLU as exporters write it, ``Mul(x, Sigmoid(x))`` (either order; PyTorch's ``nn.SiLU`` below opset 24),
into one ONNX ``Swish`` node (opset 24; ``alpha`` 1), and ``Mul(x, Sigmoid(Mul(x, alpha)))`` with a constant
``alpha`` into ``Swish(alpha)``. The Sigmoid's (and the inner Mul's) result must be read by the pattern alone."""

from __future__ import annotations

from compiler.ir import Graph, Node
from compiler.passes.patterns import Rewrite, other, same_shape, scalar, sole_user


def fuse_silu(graph: Graph) -> Graph:
    rw = Rewrite(graph)
    for sig in graph.nodes:
        if sig.op != "Sigmoid" or sig.domain not in ("", "ai.onnx"):
            continue
        y = sole_user(graph, sig.outputs[0], "Mul")
        if y is None:
            continue
        x, alpha, pattern = other(y, sig.outputs[0]), 1.0, [sig, y]
        if x != sig.inputs[0]:   # Sigmoid(x * alpha)?
            inner = graph.producer(sig.inputs[0])
            if inner is None or inner.op != "Mul" or other(inner, x) is None or \
                    scalar(graph, other(inner, x)) is None or graph.tensor(other(inner, x)).dtype.kind != "f":
                continue
            alpha, pattern = scalar(graph, other(inner, x)), [inner, sig, y]
        if same_shape(graph, x, *(n.outputs[0] for n in pattern)):
            rw.add(pattern, Node(y.name, "Swish", (x,), y.outputs, {"alpha": alpha}))
    return rw.graph()
