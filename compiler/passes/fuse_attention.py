"""Fuse scaled dot-product attention into one ``FusedAttention`` node (not an ONNX op; ONNX's own, opset 23, is
``Attention``), lowered as one flash-style program whose scores never reach DRAM (:mod:`compiler.kernels.attention`).

The chain, from the Softmax:

``MatMul(P, V) <- Softmax(axis=-1) <- [Add(s, mask)] <- [Div(s, c) | Mul(s, c)] <- MatMul(Q, K)``

- ``Q [.., Lq, d]``, ``K [.., d, Lk]`` (keys already transposed; a Transpose that made them stays a node of its own),
  ``V [.., Lk, dv]``, leading dims broadcasting to the scores' ``[.., Lq, Lk]``, all float32;
- the scale: a constant scalar divisor (``Div``) or factor (``Mul``, either operand), optional;
- the mask: an ``Add`` of a float32 constant broadcastable to the scores (either operand; additive, e.g. 0 and
  ``-inf`` of a causal mask), optional; it must not broadcast the scores to a larger shape;
- ``P`` is the first operand of the last MatMul.

The node: ``FusedAttention(Q, K, V, mask | "")`` with ``scale`` (a float, 1.0 without one), ``divide`` (1 for a Div)
and ``parts``, the names of the scores MatMul, the scale, the Add and the Softmax ("" for an absent one), which the
unfused lowering (:mod:`compiler.ops.attention`) names its layers after. As for every pattern pass
(:mod:`compiler.passes.patterns`), each tensor the chain computes but its result must be read by the chain alone and
not be a graph output, else the nodes stay as they are.
"""

from __future__ import annotations

import numpy as np

from compiler.ir import FUSED_ATTRS, Graph, Node
from compiler.passes.patterns import Rewrite, other, scalar

OP = "FusedAttention"


def _default(n: Node | None, op: str) -> bool:
    return n is not None and n.op == op and n.domain in ("", "ai.onnx")


def _scale(graph: Graph, node: Node | None, y: str) -> tuple[float, bool, str] | None:
    """(scale, whether it divides, the scaled tensor) when ``node`` (producing ``y``) multiplies or divides one tensor
    by a float constant scalar without broadcasting it, else None."""
    if node is None or not (_default(node, "Div") or _default(node, "Mul")):
        return None
    x = node.inputs[0] if node.op == "Div" else next((t for t in node.inputs if not graph.is_const(t)), None)
    c = node.inputs[1] if node.op == "Div" else other(node, x) if x else None
    value = scalar(graph, c) if c and c != x else None
    if value is None or graph.tensor(c).dtype != np.float32 or graph.tensor(x).shape != graph.tensor(y).shape:
        return None
    return float(np.float32(value)), node.op == "Div", x


def _mask(graph: Graph, node: Node | None, y: str) -> tuple[str, str] | None:
    """(mask, the masked tensor) when ``node`` (producing ``y``) adds a float32 constant to one tensor without
    broadcasting it, else None."""
    if not _default(node, "Add"):
        return None
    consts = [t for t in node.inputs if graph.is_const(t)]
    if len(consts) != 1 or node.inputs[0] == node.inputs[1]:
        return None
    x = other(node, consts[0])
    if graph.tensor(consts[0]).dtype != np.float32 or graph.tensor(x).shape != graph.tensor(y).shape:
        return None
    return consts[0], x


def _match(graph: Graph, sm: Node) -> tuple[list[Node], Node] | None:
    """The chain ending in Softmax ``sm`` (see the module docstring) and its fused node, or None."""
    x, rank = sm.inputs[0], graph.tensor(sm.inputs[0]).rank
    users = graph.consumers(sm.outputs[0])
    if rank < 2 or sm.attrs.get("axis", -1) % rank != rank - 1 or len(users) != 1 or not _default(users[0], "MatMul") \
            or users[0].inputs[0] != sm.outputs[0] or users[0].inputs[1] == sm.outputs[0]:
        return None
    pv, pattern, parts = users[0], [sm], {"add": "", "scale": ""}
    mask, scale, divide = "", 1.0, False
    node = graph.producer(x)
    found = _mask(graph, node, x)
    if found:
        (mask, x), parts["add"] = found, node.name
        pattern.append(node)
        node = graph.producer(x)
    found = _scale(graph, node, x)
    if found:
        (scale, divide, x), parts["scale"] = found, node.name
        pattern.append(node)
        node = graph.producer(x)
    if not _default(node, "MatMul") or any(a in node.attrs for a in FUSED_ATTRS) or len(node.inputs) != 2:
        return None
    pattern += [node, pv]
    q, k, v = node.inputs[0], node.inputs[1], pv.inputs[1]
    if any(graph.tensor(t).dtype != np.float32 for t in (q, k, v, pv.outputs[0])):
        return None
    attrs = {"scale": scale, "divide": int(divide), "parts": (node.name, parts["scale"], parts["add"], sm.name)}
    return pattern, Node(pv.name, OP, (q, k, v, mask), pv.outputs, attrs)


def fuse_attention(graph: Graph) -> Graph:
    """Every attention chain of ``graph`` (see the module docstring) as one ``FusedAttention`` node."""
    rw = Rewrite(graph)
    for sm in graph.nodes:
        if _default(sm, "Softmax"):
            found = _match(graph, sm)
            if found:
                rw.add(*found)
    return rw.graph()
