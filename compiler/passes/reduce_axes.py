"""The axes of a reduce node in any of the forms the passes meet: canonical (``axes`` attribute, non-negative), as
imported for an op the compiler does not lower (an ``axes`` attribute before opset 18, the second input from 18)."""

from __future__ import annotations

from compiler.ir import Graph, Node


def reduce_axes(node: Node, graph: Graph) -> tuple[int, ...] | None:
    """The sorted non-negative axes ``node`` reduces over (all of them when it names none), or None when they are
    not constant or the node reduces nothing (``noop_with_empty_axes``)."""
    rank = len(graph.tensor(node.inputs[0]).shape)
    axes = node.attrs.get("axes")
    if axes is None and len(node.inputs) > 1 and node.inputs[1]:
        if not graph.is_const(node.inputs[1]):
            return None
        axes = graph.tensor(node.inputs[1]).data.reshape(-1).tolist()
    if not axes:
        return None if node.attrs.get("noop_with_empty_axes", 0) else tuple(range(rank))
    if any(not -rank <= int(a) < rank for a in axes):
        return None
    return tuple(sorted({int(a) % rank for a in axes}))
