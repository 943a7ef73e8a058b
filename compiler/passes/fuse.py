"""Fuse an activation into the op that feeds it: a Conv or an element-wise Add/Sub/Mul/Div whose only consumer is a
Relu, or a Clip with constant bounds, takes the activation as ``attrs["activation"]`` (``("relu",)`` or
``("clamp", lo, hi)``) and the activation's output; the lowering applies it to each tile before the store (for a
Conv, after the bias, on the accumulator tile)."""

from __future__ import annotations

from dataclasses import replace

from ..ir import Graph

PRODUCERS = ("Conv", "Add", "Sub", "Mul", "Div")


def fuse_activation(graph: Graph) -> Graph:
    nodes, drop = {n.name: n for n in graph.nodes}, set()
    for act in graph.nodes:
        if act.op not in ("Relu", "Clip"):
            continue
        conv = graph.producer(act.inputs[0])
        if conv is None or conv.op not in PRODUCERS or len(graph.consumers(act.inputs[0])) != 1 \
                or act.inputs[0] in graph.outputs or "activation" in conv.attrs:
            continue
        if act.op == "Relu":
            fused = ("relu",)
        else:
            bounds = list(act.inputs[1:]) + ["", ""]
            if any(b and not graph.is_const(b) for b in bounds[:2]):
                continue
            lo = float(graph.tensor(bounds[0]).data) if bounds[0] else float(act.attrs.get("min", -3.4e38))
            hi = float(graph.tensor(bounds[1]).data) if bounds[1] else float(act.attrs.get("max", 3.4e38))
            fused = ("clamp", lo, hi)
        nodes[conv.name] = replace(conv, attrs={**conv.attrs, "activation": fused}, outputs=act.outputs)
        drop.add(act.name)
    if not drop:
        return graph
    tensors = dict(graph.tensors)
    for name in drop:
        tensors.pop(graph.node(name).inputs[0], None)
    return replace(graph, nodes=tuple(nodes[n.name] for n in graph.nodes if n.name not in drop), tensors=tensors)
