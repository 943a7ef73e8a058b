"""Bind a decoder's KV cache in place: ``present = Concat(past, new)`` on the sequence axis, where ``past`` is a graph
input read by nothing else (directly, or through Identity nodes and one-input Concats, which exporters leave around
it) and ``present`` a graph output, becomes ``KVAppend(past, new) -> present`` (:mod:`compiler.ops.kv_cache`).

Exported decode steps (torch.onnx, optimum, onnxruntime-genai) take the cache as ``past_key_values.*`` inputs and
return ``present.*`` outputs that are the past plus the step's tokens. Lowered as a Concat, every step copies the
whole cache through the DMA; bound in place, the caller's past already sits in the present buffer and a step writes
only its new tokens' keys and values."""

from __future__ import annotations

from compiler.ir import Graph, Node
from compiler.ops.kv_cache import OP


def _is_alias(n: Node) -> bool:
    return n.op == "Identity" or (n.op == "Concat" and len(n.present_inputs) == 1)


def _past_input(graph: Graph, t: str) -> tuple[str, list[Node]] | None:
    """The graph input ``t`` is (through aliases each read by one node only), with those alias nodes; or None."""
    chain: list[Node] = []
    while t not in graph.inputs:
        n = graph.producer(t)
        if n is None or not _is_alias(n) or len(graph.consumers(n.present_inputs[0])) != 1:
            return None
        chain.append(n)
        t = n.present_inputs[0]
    return t, chain


def _kv_append(graph: Graph, n: Node) -> tuple[Node, list[Node]] | None:
    """``n`` as a KVAppend with the alias nodes it replaces, or None when it is not a Concat of a past input and new
    tokens into a present output."""
    if n.op != "Concat" or len(n.present_inputs) != 2 or n.outputs[0] not in graph.outputs:
        return None
    first, new = n.present_inputs
    found = _past_input(graph, first)
    if found is None or graph.consumers(first) != (n,) or graph.is_const(new):
        return None
    past, chain = found
    t_past, t_new = graph.tensor(past), graph.tensor(new)
    rank = t_past.rank
    if rank == 0 or t_past.dtype != t_new.dtype or past in graph.outputs or rank != t_new.rank:
        return None
    axis = n.attrs.get("axis", 0) % rank
    return Node(n.name, OP, (past, new), n.outputs, {"axis": axis}, source=n.source), chain


def bind_kv_cache(graph: Graph) -> Graph:
    """Every Concat that appends to a past KV input in place (see the module docstring) as a KVAppend node."""
    replaced: dict[str, Node] = {}
    dropped: set[str] = set()
    for n in graph.nodes:
        got = _kv_append(graph, n)
        if got is not None:
            replaced[n.name] = got[0]
            dropped |= {a.name for a in got[1]}
    if not replaced:
        return graph
    nodes = [replaced.get(n.name, n) for n in graph.nodes if n.name not in dropped]
    return Graph(graph.name, graph.inputs, graph.outputs, nodes, graph.tensors, graph.opsets)
