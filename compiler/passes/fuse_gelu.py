"""Fuse the GELU that exporters write at opsets below 20 into one ``Gelu`` node.

- erf form, ``approximate="none"``: ``x * 0.5 * (1 + Erf(x / sqrt 2))``, the product in any order and grouping
  (PyTorch: ``Mul(Mul(x, Add(Erf(Div(x, sqrt2)), 1)), 0.5)``; HuggingFace: ``(x * 0.5) * (1 + erf)``), the scaling as
  ``Div(x, sqrt 2)`` or ``Mul(x, 1/sqrt 2)`` (TensorFlow), constants on either side;
- tanh form, ``approximate="tanh"``: ``x * 0.5 * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))``, with the cube as
  ``x * x * x`` in any grouping or ``Pow(x, 3)``.

Every constant must equal its value rounded to the tensor's type (0.5, 1, sqrt 2 or 1/sqrt 2, sqrt(2/pi),
0.044715), every tensor of the pattern must have x's shape and type (no constant broadcasts it), and only the last
product may be read outside the pattern.
"""

from __future__ import annotations

import math

from compiler.ir import Graph, Node
from compiler.passes.patterns import Rewrite, is_value, other, same_shape, scalar

SQRT2 = math.sqrt(2.0)
SQRT_2_PI = math.sqrt(2.0 / math.pi)
KAPPA = 0.044715


def fuse_gelu(graph: Graph) -> Graph:
    rw = Rewrite(graph)
    for y in graph.nodes:
        if y.op != "Mul" or y.domain not in ("", "ai.onnx"):
            continue
        nodes = [y]
        leaves = product(graph, y.inputs[0], nodes) + product(graph, y.inputs[1], nodes)
        consts = [t for t in leaves if graph.is_const(t)]
        acts = [t for t in leaves if not graph.is_const(t)]
        if len(leaves) != 3 or len(consts) != 1 or not is_value(graph, consts[0], 0.5):
            continue
        for x, a in (acts, acts[::-1]):
            found = _erf_branch(graph, a, x) or _tanh_branch(graph, a, x)
            if found is None:
                continue
            approximate, branch = found
            pattern = nodes + branch
            if same_shape(graph, x, *(o for n in pattern for o in n.outputs)) and \
                    rw.add(pattern, Node(y.name, "Gelu", (x,), y.outputs, {"approximate": approximate})):
                break
    return rw.graph()


def product(graph: Graph, t: str, nodes: list[Node], depth: int = 3) -> list[str]:
    """The factors of the product ``t``: descends (at most ``depth`` levels: the patterns have four factors) into
    the Mul nodes (and Pow by a constant 2 or 3) that compute it and whose result nothing else reads, appending them
    to ``nodes``; anything else is one factor."""
    p = graph.producer(t)
    if p is None or p.domain not in ("", "ai.onnx") or t in graph.outputs or len(graph.consumers(t)) != 1 or \
            depth == 0:
        return [t]
    if p.op == "Mul":
        nodes.append(p)
        return product(graph, p.inputs[0], nodes, depth - 1) + product(graph, p.inputs[1], nodes, depth - 1)
    if p.op == "Pow" and scalar(graph, p.inputs[1]) in (2.0, 3.0):
        nodes.append(p)
        return [p.inputs[0]] * int(scalar(graph, p.inputs[1]))
    return [t]


def _one_plus(graph: Graph, a: str, op: str) -> tuple[Node, Node] | None:
    """(the Add, the ``op`` node) when ``a = Add(op(...), 1)`` in either order and op's result is read once."""
    add = graph.producer(a)
    if add is None or add.op != "Add":
        return None
    for k in (0, 1):
        f = graph.producer(add.inputs[k])
        if f is not None and f.op == op and is_value(graph, add.inputs[1 - k], 1.0) \
                and len(graph.consumers(add.inputs[k])) == 1:
            return add, f
    return None


def _erf_branch(graph: Graph, a: str, x: str) -> tuple[str, list[Node]] | None:
    """``("none", nodes)`` when ``a = 1 + Erf(x / sqrt 2)`` (or ``Erf(x * 1/sqrt 2)``)."""
    found = _one_plus(graph, a, "Erf")
    if found is None:
        return None
    add, erf = found
    s = graph.producer(erf.inputs[0])
    if s is None or len(graph.consumers(erf.inputs[0])) != 1:
        return None
    if s.op == "Div" and s.inputs[0] == x and is_value(graph, s.inputs[1], SQRT2):
        return "none", [add, erf, s]
    if s.op == "Mul" and other(s, x) is not None and is_value(graph, other(s, x), 1.0 / SQRT2):
        return "none", [add, erf, s]
    return None


def _tanh_branch(graph: Graph, a: str, x: str) -> tuple[str, list[Node]] | None:
    """``("tanh", nodes)`` when ``a = 1 + Tanh(sqrt(2/pi) * (x + 0.044715 * x^3))``."""
    found = _one_plus(graph, a, "Tanh")
    if found is None:
        return None
    add, tanh = found
    nodes = [add, tanh]
    inner = product(graph, tanh.inputs[0], nodes)
    if len(inner) != 2 or not any(is_value(graph, c, SQRT_2_PI) for c in inner):
        return None
    v = graph.producer(inner[1] if is_value(graph, inner[0], SQRT_2_PI) else inner[0])
    if v is None or v.op != "Add" or other(v, x) is None or len(graph.consumers(v.outputs[0])) != 1:
        return None
    nodes.append(v)
    cube = product(graph, other(v, x), nodes)
    rest = [c for c in cube if c != x]
    if cube.count(x) != 3 or len(rest) != 1 or not is_value(graph, rest[0], KAPPA):
        return None
    return "tanh", nodes
