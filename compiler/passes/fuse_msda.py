"""Fuse multi-scale deformable attention (docs/perception.md#deformable-attention) as mmcv's
``multi_scale_deformable_attn_pytorch`` exports it into one ``MSDeformAttn`` node, lowered as one pass per (head, query
tile) whose sampled tensor never leaves the SPM (:mod:`compiler.kernels.msda`).

The pattern, from the ReduceSum back: ``ReduceSum(axes=[3]) <- Mul(s, a) <- [Reshape] <- Concat(axis=3) <-
[Reshape (Unsqueeze)] <- GridSample`` per level (``torch.stack(dim=-2).flatten(-2)``, or a Concat of the 4-D
samples), where

- every GridSample is linear, zeros, align_corners=0 (what the module calls) on ``X_l (N, D, H_l, W_l)`` at
  ``grid_l (N, Q, P, 2)``, the same N, D, Q, P for every level;
- the stacked samples are ``(N, D, Q, L*P)`` level-major (``k = l*P + p``) and ``a`` is ``(N, 1, Q, L*P)``;
- the ReduceSum's output is ``(N, D, Q)`` (keepdims 0) or ``(N, D, Q, 1)`` (the planar node takes only the first).

The node: ``MSDeformAttn(X_0..X_{L-1}, grid_0..grid_{L-1}, a)`` with ``levels = L``, ``points = P``. The Softmax of
the weights, the offset and weight GEMMs and the output projection stay as they are.

When the layout chains around it are mmcv's too, the node takes them in as well and reads the module's own tensors
(:func:`_mmcv_form`), so no transpose is left: the values ``X_l = Reshape(Transpose(0, 2, 1)(Reshape(Split(value,
axis=1)[l])))`` of ``value (bs, sum H*W, heads, D)``, the grids ``grid_l = Reshape(Transpose(0, 2, 1, 3, 4)(Gather(g,
l, axis=3)))`` of ``g (bs, Q, heads, L, P, 2)``, the weights ``a = Reshape(Transpose(0, 2, 1, 3, 4)(w))`` of ``w (bs,
Q, heads, L, P)`` and the output ``Transpose(0, 2, 1)(Reshape(sum, (bs, heads*D, Q)))``. That node is
``MSDeformAttn(value, g, w)`` with ``heads`` and the levels' ``shapes`` as attributes, output ``(bs, Q, heads*D)``.
"""

from __future__ import annotations

from compiler.ir import Graph, Node
from compiler.passes.patterns import Rewrite, sole_user
from compiler.passes.reduce_axes import reduce_axes


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


def _chain(graph: Graph, t: str, ops: tuple[tuple[str, tuple | None], ...], pattern: list[Node]) -> str | None:
    """Walk back from ``t`` through producers ``ops`` (op, Transpose perm or None), each read by the chain alone;
    the tensor the chain starts from (its nodes added to ``pattern``), or None."""
    found = []
    for op, perm in ops:
        node = graph.producer(t)
        if node is None or node.op != op or (perm is not None and tuple(node.attrs.get("perm", ())) != perm) \
                or len(graph.consumers(t)) != 1 or t in graph.outputs:
            return None
        found.append(node)
        t = node.inputs[0]
    pattern += found
    return t


def _mmcv_form(graph: Graph, samples: list[Node], a: str, total: Node, pattern: list[Node]) -> Node | None:
    """The node reading mmcv's own tensors (see the module's doc) when every chain is there, else None."""
    n, d, q, p = graph.tensor(samples[0].outputs[0]).shape
    more: list[Node] = []
    split, value, grids = None, None, None
    for i, sample in enumerate(samples):
        part = _chain(graph, sample.inputs[0], (("Reshape", None), ("Transpose", (0, 2, 1)), ("Reshape", None)), more)
        node = graph.producer(part) if part else None
        if node is None or node.op != "Split" or node.attrs.get("axis") != 1 or part != node.outputs[i] \
                or len(node.outputs) != len(samples) or (split is not None and node is not split):
            return None
        split, value = node, node.inputs[0]
        g = _chain(graph, sample.inputs[1], (("Reshape", None), ("Transpose", (0, 2, 1, 3, 4))), more)
        gather = graph.producer(g) if g else None
        if gather is None or gather.op != "Gather" or gather.attrs.get("axis") != 3 \
                or not graph.is_const(gather.inputs[1]) or graph.tensor(gather.inputs[1]).size != 1 \
                or int(graph.tensor(gather.inputs[1]).data.reshape(-1)[0]) != i \
                or (grids is not None and gather.inputs[0] != grids):
            return None
        grids = gather.inputs[0]
        more.append(gather)
    weights = _chain(graph, a, (("Reshape", None), ("Transpose", (0, 2, 1, 3, 4))), more)
    users = graph.consumers(total.outputs[0])
    view = users[0] if len(users) == 1 and users[0].op == "Reshape" else None
    last = sole_user(graph, view.outputs[0], "Transpose") if view is not None else None
    if weights is None or last is None or tuple(last.attrs.get("perm", ())) != (0, 2, 1) \
            or total.outputs[0] in graph.outputs:
        return None
    vs, gs, ws = (graph.tensor(t).shape for t in (value, grids, weights))
    if len(vs) != 4 or vs[0] * vs[2] != n or vs[3] != d:
        return None
    bs, heads, nl = vs[0], vs[2], len(samples)
    shapes = tuple(tuple(graph.tensor(s.inputs[0]).shape[2:]) for s in samples)
    if gs != (bs, q, heads, nl, p, 2) or ws != (bs, q, heads, nl, p) \
            or tuple(graph.tensor(o).shape[1] for o in split.outputs) != tuple(h * w for h, w in shapes) \
            or graph.tensor(view.outputs[0]).shape != (bs, heads * d, q) \
            or graph.tensor(last.outputs[0]).shape != (bs, q, heads * d):
        return None
    pattern += [split, *more, view, last]
    return Node(last.name, "MSDeformAttn", (value, grids, weights), last.outputs,
                {"levels": nl, "points": p, "heads": heads, "shapes": shapes})


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
            whole = list(pattern)
            fused = _mmcv_form(graph, samples, a, total, whole)
            if fused is None or not rw.add([*samples, *whole, mul, total], fused):
                inputs = (*(s.inputs[0] for s in samples), *(s.inputs[1] for s in samples), a)
                fused = Node(total.name, "MSDeformAttn", inputs, total.outputs, {"levels": len(samples), "points": p})
                rw.add([*samples, *pattern, mul, total], fused)
            break
    return rw.graph()
