"""Bind a decoder's KV cache in place: ``present = Concat(past, new)`` on the sequence axis, where ``past`` is a graph
input read by nothing else and ``present`` a graph output, becomes ``KVAppend(past, new) -> present``
(:mod:`compiler.ops.kv_cache`).

Exported decode steps (torch.onnx, optimum, onnxruntime-genai) take the cache as ``past_key_values.*`` inputs and
return ``present.*`` outputs that are the past plus the step's tokens. Lowered as a Concat, every step copies the
whole cache through the DMA; bound in place, the caller's past already sits in the present buffer and a step writes
only its new tokens' keys and values."""

from __future__ import annotations

from compiler.ir import Graph, Node
from compiler.ops.kv_cache import OP


def _kv_append(graph: Graph, n: Node) -> Node | None:
    """``n`` as a KVAppend, or None when it is not a Concat of a past input and new tokens into a present output."""
    if n.op != "Concat" or len(n.present_inputs) != 2 or n.outputs[0] not in graph.outputs:
        return None
    past, new = n.present_inputs
    if past not in graph.inputs or graph.consumers(past) != (n,) or graph.is_const(new):
        return None
    t_past, t_new = graph.tensor(past), graph.tensor(new)
    rank = t_past.rank
    if rank == 0 or t_past.dtype != t_new.dtype or past in graph.outputs:
        return None
    axis = n.attrs.get("axis", 0) % rank
    return Node(n.name, OP, (past, new), n.outputs, {"axis": axis}, source=n.source)


def bind_kv_cache(graph: Graph) -> Graph:
    """Every Concat that appends to a past KV input in place (see the module docstring) as a KVAppend node."""
    nodes, changed = [], False
    for n in graph.nodes:
        got = _kv_append(graph, n)
        changed |= got is not None
        nodes.append(got or n)
    if not changed:
        return graph
    return Graph(graph.name, graph.inputs, graph.outputs, nodes, graph.tensors, graph.opsets)
