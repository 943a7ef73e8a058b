"""Fuse multi-scale deformable attention (seed-ops.md 5) as mmcv's ``multi_scale_deformable_attn_pytorch`` exports
it into one ``MSDeformAttn`` node, lowered as one pass per (head, query tile) whose sampled tensor never leaves the
SPM (:mod:`compiler.msda`).

The pattern, from the ReduceSum back: ``ReduceSum(axes=[3]) <- Mul(s, a) <- [Reshape] <- Concat(axis=3) <-
[Reshape (Unsqueeze)] <- GridSample`` per level (``torch.stack(dim=-2).flatten(-2)``, or a Concat of the 4-D
samples), where

- every GridSample is linear, zeros, align_corners=0 (what the module calls) on ``X_l (N, D, H_l, W_l)`` at
  ``grid_l (N, Q, P, 2)``, the same N, D, Q, P for every level;
- the stacked samples are ``(N, D, Q, L*P)`` level-major (``k = l*P + p``) and ``a`` is ``(N, 1, Q, L*P)``;
- the ReduceSum's output is ``(N, D, Q)`` (keepdims 0) or ``(N, D, Q, 1)``.

The node: ``MSDeformAttn(X_0..X_{L-1}, grid_0..grid_{L-1}, a)`` with ``levels = L``, ``points = P``. The Softmax of
the weights, the offset and weight GEMMs and the output projection stay as they are.
"""

from __future__ import annotations

from ..ir import Graph, Node
from .patterns import Rewrite, sole_user
from .reduce import reduce_axes


def _samples(graph: Graph, t: str, pattern: list[Node]) -> list[Node] | None:
    """The GridSample nodes whose outputs stack into ``t`` level by level (collecting the stacking nodes into
    ``pattern``), or None when ``t`` is not such a stack."""
    node = graph.producer(t)
    if node is not None and node.op == "Reshape":
        pattern.append(node)
        node = graph.producer(node.inputs[0])
    if node is None or node.op != "Concat" or node.attrs.get("axis") != 3:
        return None
    pattern.append(node)
    out = []
    for x in node.inputs:
        sample = graph.producer(x)
        if sample is not None and sample.op == "Reshape" and len(graph.tensor(x).shape) == 5:
            if graph.tensor(x).shape[3] != 1 or sole_user(graph, sample.inputs[0], "Reshape") is None:
                return None
            pattern.append(sample)
            sample = graph.producer(sample.inputs[0])
        if sample is None or sample.op != "GridSample" or sole_user(graph, sample.outputs[0], ("Reshape", "Concat")) \
                is None:
            return None
        out.append(sample)
    return out


def _grid_sample_ok(n: Node) -> bool:
    a = n.attrs
    return a.get("mode") == "linear" and a.get("padding_mode") == "zeros" and not a.get("align_corners")


def fuse_msda(graph: Graph) -> Graph:
    rw = Rewrite(graph)
    for total in graph.nodes:
        if total.op != "ReduceSum" or total.domain not in ("", "ai.onnx"):
            continue
        mul = graph.producer(total.inputs[0])
        if mul is None or mul.op != "Mul" or len(graph.tensor(total.inputs[0]).shape) != 4 \
                or reduce_axes(total, graph) != (3,) or sole_user(graph, mul.outputs[0], "ReduceSum") is None:
            continue
        for k in (0, 1):
            pattern: list[Node] = []
            samples = _samples(graph, mul.inputs[k], pattern)
            if not samples or not all(_grid_sample_ok(s) for s in samples):
                continue
            n, d, q, p = graph.tensor(samples[0].outputs[0]).shape
            lp = len(samples) * p
            a = mul.inputs[1 - k]
            if graph.tensor(mul.inputs[k]).shape != (n, d, q, lp) or graph.tensor(a).shape != (n, 1, q, lp) \
                    or graph.tensor(mul.outputs[0]).shape != (n, d, q, lp) \
                    or any(graph.tensor(s.outputs[0]).shape != (n, d, q, p) for s in samples) \
                    or any(graph.tensor(s.inputs[0]).shape[:2] != (n, d) for s in samples):
                continue
            inputs = (*(s.inputs[0] for s in samples), *(s.inputs[1] for s in samples), a)
            fused = Node(total.name, "MSDeformAttn", inputs, total.outputs, {"levels": len(samples), "points": p})
            rw.add([*samples, *pattern, mul, total], fused)
            break
    return rw.graph()
