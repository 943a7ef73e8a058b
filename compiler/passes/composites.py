"""Composite ops of exported decoders decomposed at import, before constant folding, into the ops the NPU runs (so
that what is constant in them folds, a cos/sin table gathered at constant positions for one): onnxruntime's contrib
``SkipSimplifiedLayerNormalization`` (:mod:`compiler.passes.decompose_norm`), ONNX's and onnxruntime's
``RotaryEmbedding`` (:mod:`compiler.passes.decompose_rotary`), ONNX's ``Attention`` and onnxruntime's
``GroupQueryAttention`` (:mod:`compiler.passes.decompose_attention`). Each decomposer gives the nodes
(:class:`compiler.passes.node_emitter.NodeEmitter`) or the one-line reason the node stays whole, marked for the host
CPU, which runs it as it was imported.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from compiler.frontend.contrib_types import CONTRIB
from compiler.ir import Graph, Node
from compiler.passes.decompose_attention import group_query_attention, onnx_attention
from compiler.passes.decompose_norm import skip_simplified_layernorm
from compiler.passes.decompose_rotary import contrib_rotary, onnx_rotary
from compiler.passes.node_emitter import NodeEmitter

Decomposer = Callable[[Graph, Node], NodeEmitter | str]
"""The nodes that compute a composite node of the graph, or why it stays whole (the host runs it)."""

DECOMPOSERS: dict[tuple[str, str], Decomposer] = {
    (CONTRIB, "SkipSimplifiedLayerNormalization"): skip_simplified_layernorm,
    ("", "RotaryEmbedding"): onnx_rotary,
    (CONTRIB, "RotaryEmbedding"): contrib_rotary,
    ("", "Attention"): onnx_attention,
    (CONTRIB, "GroupQueryAttention"): group_query_attention,
}
"""(domain, op) -> its decomposer."""


def decompose_composites(graph: Graph) -> Graph:
    """``graph`` with each composite node (:data:`DECOMPOSERS`) replaced by the nodes that compute it, or marked
    ``unsupported`` with the reason it cannot be; the same graph object when it has none."""
    nodes, tensors, changed = [], dict(graph.tensors), False
    for n in graph.nodes:
        fn = DECOMPOSERS.get(("" if n.domain == "ai.onnx" else n.domain, n.op))
        if fn is None or n.unsupported:
            nodes.append(n)
            continue
        got = fn(graph, n)
        changed = True
        if isinstance(got, str):
            nodes.append(replace(n, unsupported=got))
            continue
        nodes.extend(got.nodes)
        tensors.update(got.tensors)
    return replace(graph, nodes=tuple(nodes), tensors=tensors) if changed else graph
