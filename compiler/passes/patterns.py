"""What the pattern-fusion passes share: constants by value, the operands of commutative nodes, and
:class:`Rewrite`, which replaces a matched set of nodes by one node only when that is safe.

A match is the nodes of one exporter pattern and the node that computes the same thing. :meth:`Rewrite.add` takes it
only if no node of it was taken by another match, every tensor the pattern computes (but its final output) is read
by the pattern alone and is not a graph output, and the NPU lowers the new node (the registry's check,
:func:`compiler.ops.npu_unsupported`); otherwise the graph keeps the pattern as it is.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

import numpy as np

from compiler.ir import ACTIVATION_OPS, Graph, Node, Tensor
from compiler.ops import npu_unsupported


def scalar(graph: Graph, name: str) -> float | None:
    """The value of constant ``name`` when it holds exactly one number (any shape of size 1), else None."""
    if not name or not graph.is_const(name):
        return None
    t = graph.tensor(name)
    if t.size != 1 or t.dtype.kind not in "fiu":
        return None
    return float(t.data.reshape(-1)[0])


def is_value(graph: Graph, name: str, value: float) -> bool:
    """Whether ``name`` is a constant of one float element equal to ``value`` rounded to the constant's own type
    (``sqrt(2)`` as an f32 constant is 1.4142135)."""
    if scalar(graph, name) is None or graph.tensor(name).dtype.kind != "f":
        return False
    t = graph.tensor(name)
    return bool(t.data.reshape(-1)[0] == np.asarray(value, t.dtype))


def other(node: Node, t: str) -> str | None:
    """The operand of binary ``node`` that is not ``t`` (``t`` itself if it is both), None if ``t`` is not one."""
    a, b = (node.inputs + ("", ""))[:2]
    return b if a == t else a if b == t else None


def sole_user(graph: Graph, t: str, op: str | tuple[str, ...]) -> Node | None:
    """The one node reading ``t`` if it is an ``op`` (one of them) and ``t`` is not a graph output, else None."""
    users = graph.consumers(t)
    ops = (op,) if isinstance(op, str) else op
    if len(users) != 1 or t in graph.outputs or users[0].op not in ops or users[0].domain not in ("", "ai.onnx"):
        return None
    return users[0]


def same_shape(graph: Graph, *names: str) -> bool:
    """Whether the tensors all have the shape and dtype of the first (no broadcasting grew any of them)."""
    first = graph.tensor(names[0])
    return all(graph.tensor(n).shape == first.shape and graph.tensor(n).dtype == first.dtype for n in names[1:])


def per_feature(graph: Graph, p: str, shape: tuple[int, ...], axis: int) -> bool:
    """Whether ``p`` is a float constant that broadcasts to ``shape`` varying only along the axes from ``axis`` (a
    normalisation's per-feature scale or bias)."""
    if not graph.is_const(p):
        return False
    ps = graph.tensor(p).shape
    lead = len(shape) - len(ps)
    return (graph.tensor(p).dtype.kind == "f" and lead >= 0 and
            all(d == 1 for d in ps[: max(0, axis - lead)]) and
            all(d in (1, shape[lead + i]) for i, d in enumerate(ps)))


def activation_of(node: Node, graph: Graph) -> tuple | None:
    """The fused form (``compiler.ir.FUSED_ATTRS`` ``activation``) of a single-input activation node: Relu, Clip with
    constant bounds, Gelu, Swish with alpha 1 (SiLU); None for any other node."""
    if node.domain not in ("", "ai.onnx"):
        return None
    if node.op == "Clip":
        bounds = list(node.inputs[1:]) + ["", ""]
        if any(b and scalar(graph, b) is None for b in bounds[:2]):
            return None
        lo = scalar(graph, bounds[0]) if bounds[0] else float(node.attrs.get("min", -3.4e38))
        hi = scalar(graph, bounds[1]) if bounds[1] else float(node.attrs.get("max", 3.4e38))
        return ("clamp", lo, hi)
    for name, (op, attrs) in ACTIVATION_OPS.items():
        if node.op == op and all(node.attrs.get(k, v) == v for k, v in attrs.items()):
            return (name,)
    return None


class Rewrite:
    """Matches collected on one graph, then applied at once by :meth:`graph`."""

    def __init__(self, graph: Graph):
        self.source = graph
        self.taken: set[str] = set()
        self.new: dict[str, Node] = {}       # name of the pattern's last node -> the node replacing the pattern
        self.drop: set[str] = set()
        self.consts: dict[str, Tensor] = {}

    def add(self, nodes: Iterable[Node], new: Node, consts: Iterable[Tensor] = ()) -> bool:
        """Replace ``nodes`` (a pattern whose last node computes ``new``'s output) by ``new``, where that is safe
        (see the module's doc); ``consts`` are constants ``new`` reads that the graph does not have yet. Whether it
        was taken."""
        g, nodes, consts = self.source, list(dict.fromkeys(nodes)), list(consts)
        names = {n.name for n in nodes}
        if names & self.taken:
            return False
        out = set(new.outputs)
        for n in nodes:
            for t in n.outputs:
                if t and t not in out and (t in g.outputs or any(u.name not in names for u in g.consumers(t))):
                    return False
        order = {n.name: i for i, n in enumerate(g.nodes)}
        last = max(nodes, key=lambda n: order[n.name])
        if set(last.outputs) != out:
            return False
        probe = replace(g, tensors={**g.tensors, **{t.name: t for t in consts}})
        if npu_unsupported(new, probe) is not None:
            return False
        self.taken |= names
        self.new[last.name] = new
        self.drop |= names - {last.name}
        self.consts.update({t.name: t for t in consts})
        return True

    def graph(self) -> Graph:
        """The graph with every taken match applied (the same graph object if there is none)."""
        g = self.source
        if not self.new:
            return g
        nodes = tuple(self.new.get(n.name, n) for n in g.nodes if n.name not in self.drop)
        produced = {t for n in nodes for t in n.outputs if t}
        gone = {t for n in g.nodes if n.name in self.taken for t in n.outputs if t} - produced
        used = {t for n in nodes for t in n.present_inputs}
        gone |= {t for n in g.nodes if n.name in self.taken for t in n.present_inputs if g.is_const(t)} - used
        tensors = {k: t for k, t in g.tensors.items() if k not in gone}
        return replace(g, nodes=nodes, tensors={**tensors, **self.consts})


def fresh(graph: Graph, name: str, taken: Iterable[str] = ()) -> str:
    """``name``, or ``name_1``, ``name_2``... the first that names no tensor of ``graph`` and is not in ``taken``."""
    taken = set(taken)
    out, k = name, 0
    while out in graph.tensors or out in taken:
        k += 1
        out = f"{name}_{k}"
    return out
