"""Grouped-query attention as the exporters write it, ``repeat_kv`` (Hugging Face's: each key/value head repeated for
the ``G`` query heads that share it) before the attention's MatMuls, rewritten so that the repeat is never
materialised:

    r = Reshape(Expand(Reshape(x, [B, Hkv, 1, T, D]), [B, Hkv, G, T, D]), [B, Hkv * G, T, D])   (Unsqueeze: a Reshape)
    y = MatMul(a, f(r))            a: [B, Hkv * G, S, K];  f: Transposes that keep the batch and head axes, Mul/Div
                                   by a scalar constant (the key's transpose, a scale), in any order

becomes

    y = Reshape(MatMul(Reshape(a, [B, Hkv, G * S, K]), f(x)), [B, Hkv * G, S, N])

(both Reshapes free): query head ``h`` reads key/value head ``h // G``, so the ``G`` query heads of a key/value head
are the rows of one matrix and ``f`` runs on the ``Hkv`` heads only. It runs after ``fuse_matmul``: what that put into
the MatMul's epilogue (a divisor, a bias, an activation; not a residual) stays there. Every tensor the pattern
computes must be read by it alone and not be a graph output.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from compiler.ir import Graph, Node, Tensor
from compiler.ops import npu_unsupported
from compiler.passes.patterns import fresh, other, scalar

HEADWISE = ("Transpose", "Mul", "Div")


def _sole(graph: Graph, t: str, user: Node) -> bool:
    """Whether ``user`` is the only reader of ``t`` and ``t`` is not a graph output."""
    return t not in graph.outputs and graph.consumers(t) == (user,)


def _headwise(graph: Graph, node: Node, t: str) -> bool:
    """Whether ``node`` (reading ``t``) acts on every head alike: a Transpose keeping axes 0 and 1, or ``t`` times or
    divided by a scalar float constant."""
    if node.domain not in ("", "ai.onnx") or node.op not in HEADWISE:
        return False
    if node.op == "Transpose":
        return tuple(node.attrs.get("perm", ()))[:2] == (0, 1)
    c = other(node, t)
    return c is not None and c != t and (node.op == "Mul" or node.inputs[0] == t) and \
        scalar(graph, c) is not None and graph.tensor(c).dtype.kind == "f"


def _repeat(graph: Graph, t: str) -> tuple[str, int, list[Node]] | None:
    """(x, G, [the three nodes]) when ``t`` is ``x`` [B, Hkv, T, D] with each head repeated ``G`` times."""
    r3 = graph.producer(t)
    ex = graph.producer(r3.inputs[0]) if r3 is not None and r3.op == "Reshape" else None
    r1 = graph.producer(ex.inputs[0]) if ex is not None and ex.op == "Expand" else None
    if r1 is None or r1.op != "Reshape" or not _sole(graph, r1.outputs[0], ex) or \
            not _sole(graph, ex.outputs[0], r3):
        return None
    x = r1.inputs[0]
    xs, s1, s2, s3 = (graph.tensor(n).shape for n in (x, r1.outputs[0], ex.outputs[0], t))
    if len(xs) != 4 or s1 != (*xs[:2], 1, *xs[2:]) or len(s2) != 5 or s2[:2] != xs[:2] or s2[3:] != xs[2:]:
        return None
    g = s2[2]
    return (x, g, [r1, ex, r3]) if g > 1 and s3 == (xs[0], xs[1] * g, *xs[2:]) else None


def _match(graph: Graph, mm: Node):
    """(x, G, the repeated tensor, the head-wise nodes from it to the MatMul, every node of the pattern) for MatMul
    ``mm`` whose B is a repeated key/value, or None."""
    if mm.op != "MatMul" or mm.domain not in ("", "ai.onnx") or mm.attrs.get("residual") or len(mm.inputs) < 2:
        return None
    chain, t = [], mm.inputs[1]
    user = mm
    while True:
        p = graph.producer(t)
        if p is None or not _sole(graph, t, user):
            return None
        if p.op == "Reshape":
            break
        if not _headwise(graph, p, p.inputs[0]):
            return None
        chain.insert(0, p)
        t, user = p.inputs[0], p
    found = _repeat(graph, t)
    if found is None:
        return None
    x, g, nodes = found
    a = graph.tensor(mm.inputs[0])
    if a.rank != 4 or a.is_const or a.shape[:2] != graph.tensor(t).shape[:2]:
        return None
    return x, g, t, chain, nodes + chain + [mm]


def _grouped(graph: Graph, mm: Node, x: str, g: int, start: str, chain: list[Node], taken: set[str]):
    """The nodes computing ``mm`` on the unrepeated ``x`` (``start``: the repeated tensor ``chain`` begins at) and
    their new tensors."""
    B, H, S, K = graph.tensor(mm.inputs[0]).shape
    out = graph.tensor(mm.outputs[0])
    tensors: dict[str, Tensor] = {}

    def new(name: str, shape, dtype=np.float32, data=None) -> str:
        name = fresh(graph, name, taken)
        taken.add(name)
        tensors[name] = Tensor(name, tuple(shape), np.dtype(dtype)) if data is None else Tensor.const(name, data)
        return name

    nodes = []
    a = new(f"{mm.name}.grouped_a", (B, H // g, g * S, K))
    nodes.append(Node(a, "Reshape", (mm.inputs[0], new(f"{a}.shape", (4,), np.int64,
                                                       np.asarray((B, H // g, g * S, K), np.int64))), (a,),
                      {"allowzero": 0}))
    t, shape, prev = x, graph.tensor(x).shape, start
    for c in chain:   # the head-wise ops on the Hkv heads
        if c.op == "Transpose":
            shape = tuple(shape[p] for p in c.attrs["perm"])
        y = new(f"{c.name}.kv", shape, graph.tensor(c.outputs[0]).dtype)
        nodes.append(replace(c, name=y, inputs=tuple(t if i == prev else i for i in c.inputs), outputs=(y,),
                             source=None))
        t, prev = y, c.outputs[0]
    y = new(f"{mm.name}.grouped", (B, H // g, g * S, out.shape[-1]), out.dtype)
    nodes.append(replace(mm, name=y, inputs=(a, t, *mm.inputs[2:]), outputs=(y,), source=None))
    nodes.append(Node(mm.name, "Reshape", (y, new(f"{mm.name}.shape", (4,), np.int64,
                                                  np.asarray(out.shape, np.int64))), mm.outputs, {"allowzero": 0}))
    return nodes, tensors


def fuse_repeat_kv(graph: Graph) -> Graph:
    """``graph`` with every MatMul by a repeated key or value (see the module's doc) computed on the unrepeated one."""
    taken: set[str] = set()
    at: dict[str, list[Node]] = {}
    drop: set[str] = set()
    tensors = dict(graph.tensors)
    for mm in graph.nodes:
        found = _match(graph, mm)
        if found is None or {n.name for n in found[4]} & drop:
            continue
        x, g, start, chain, pattern = found
        nodes, new = _grouped(graph, mm, x, g, start, chain, taken)
        probe = replace(graph, tensors={**tensors, **new})
        if any(npu_unsupported(n, probe) for n in nodes):
            continue
        at[mm.name] = nodes
        drop |= {n.name for n in pattern}
        tensors.update(new)
    if not at:
        return graph
    nodes = tuple(m for n in graph.nodes for m in (at.get(n.name) or ([] if n.name in drop else [n])))
    used = {t for n in nodes for t in (*n.inputs, *n.outputs)} | set(graph.inputs) | set(graph.outputs)
    gone = {t for n in graph.nodes if n.name in drop for t in (*n.inputs, *n.outputs)} - used
    return replace(graph, nodes=nodes, tensors={k: v for k, v in tensors.items() if k not in gone})
