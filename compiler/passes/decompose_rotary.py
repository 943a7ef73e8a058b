"""Rotary position embeddings as the nodes the NPU runs: ONNX ``RotaryEmbedding`` (opset 23) and onnxruntime's
``com.microsoft.RotaryEmbedding``, interleaved or not, with position ids or cos/sin per token, whole or partial
(``rotary_embedding_dim``) rotation.

Over the rotated part ``x`` (the first ``rd`` features of each head) the op is ``x1 * cos - x2 * sin`` and ``x2 * cos
+ x1 * sin`` for the pairs ``(x1, x2)`` (the two halves, or even and odd features when interleaved). Written as

    y = x * C + r(x) * S

with ``r(x)`` the pairs swapped (one Gather of constant indices on the last axis: a DMA copy), ``C`` the cosines of
each feature's pair and ``S`` the sines signed ``-sin`` for the first of a pair and ``sin`` for the second, the
rounding is onnxruntime's (``a * -b = -(a * b)``, ``a + -c = a - c``, both exact). ``C`` and ``S`` are the caches
widened to ``rd`` features (Concat, Neg, which fold when the caches are constants) and gathered at the position ids
(a run-time row gather on the NPU, or folded when the ids are constants). Then two Muls and an Add on the vector unit;
a partial rotation slices the rotated features out and concatenates the rest back."""

from __future__ import annotations

import numpy as np

from compiler.ir import Graph, Node
from compiler.passes.node_emitter import NodeEmitter


def onnx_rotary(graph: Graph, n: Node) -> NodeEmitter | str:
    """ONNX RotaryEmbedding (X, cos_cache, sin_cache[, position_ids]); X (B, H, S, D) or (B, S, H * D)."""
    ins = tuple(n.inputs) + ("",)
    return rotary(graph, n, n.inputs[0], ins[1], ins[2], ins[3], int(n.attrs.get("num_heads", 0)),
                  int(n.attrs.get("rotary_embedding_dim", 0)), bool(n.attrs.get("interleaved", 0)), n.outputs[0])


def contrib_rotary(graph: Graph, n: Node) -> NodeEmitter | str:
    """com.microsoft RotaryEmbedding (input, position_ids, cos_cache, sin_cache): position ids (B, S), or one offset
    (the positions are offset + 0..S-1); a 3-D input without ``num_heads`` has heads of twice the cache's width."""
    if int(n.attrs.get("is_packed_batching", 0)):
        return "is_packed_batching (ragged batches) is not supported"
    if float(n.attrs.get("scale", 1.0)) != 1.0:
        return f"scale={n.attrs['scale']} is not supported"
    x, pos, cos, sin = n.inputs[:4]
    shape = graph.tensor(x).shape
    rd = int(n.attrs.get("rotary_embedding_dim", 0))
    heads = int(n.attrs.get("num_heads", 0))
    if len(shape) == 3 and not heads:
        head = rd or 2 * graph.tensor(cos).shape[-1]
        if not head or shape[2] % head:
            return f"the head size cannot be told from a hidden size of {shape[2]}; give num_heads"
        heads = shape[2] // head
    p, tokens = graph.tensor(pos), _tokens(shape)
    e = NodeEmitter(graph, n)
    if p.size == tokens[0] * tokens[1] and (p.shape == tokens or p.size == 1):
        pos = e.reshape(pos, tokens)
    elif p.size == 1 and graph.is_const(pos):   # an offset: positions offset + 0..S-1
        offset = int(p.data.reshape(-1)[0])
        pos = e.const("positions", np.broadcast_to(offset + np.arange(tokens[1]), tokens).astype(np.int64))
    else:
        return f"position_ids of shape {p.shape} for {tokens[0]} x {tokens[1]} tokens: only (batch, sequence) ids " \
               f"or a constant offset are taken"
    return rotary(graph, n, x, cos, sin, pos, heads, rd, bool(n.attrs.get("interleaved", 0)), n.outputs[0], e)


def _tokens(shape: tuple[int, ...]) -> tuple[int, int]:
    """(batch, sequence) of an input (B, H, S, D) or (B, S, hidden)."""
    return (shape[0], shape[2]) if len(shape) == 4 else (shape[0], shape[1])


def rotary(graph: Graph, n: Node, x: str, cos: str, sin: str, pos: str, heads: int, rd: int, interleaved: bool,
           out: str | None, e: NodeEmitter | None = None) -> NodeEmitter | str:
    """The nodes rotating ``x`` ((B, H, S, D), or (B, S, heads * D)) into ``out`` (None: a new tensor, the
    emitter's last output); the emitter, or why the host runs it."""
    e = e or NodeEmitter(graph, n)
    shape = e.shape(x)
    if graph.tensor(cos).dtype != np.float32 or len(shape) not in (3, 4):
        return "only float32 inputs of rank 3 or 4 run on the NPU"
    if len(shape) == 3 and (not heads or shape[2] % heads):
        return f"a 3-D input needs num_heads dividing its hidden size {shape[2]}, not {heads}"
    head = shape[3] if len(shape) == 4 else shape[2] // heads
    rd = rd or head
    if rd % 2 or rd > head or graph.tensor(cos).shape[-1] != rd // 2:
        return f"a rotary dim of {rd} (cos_cache width {graph.tensor(cos).shape[-1]}) for heads of {head}"
    four = len(shape) == 4
    xv = x if four else e.reshape(x, (*shape[:2], heads, head))
    c, s = _tables(e, cos, sin, pos, rd, interleaved)
    b, seq = _tokens(shape)
    c, s = (e.reshape(t, (b, 1, seq, rd) if four else (b, seq, 1, rd)) for t in (c, s))
    whole = rd == head
    xr = xv if whole else e.slice(xv, 3, 0, rd)
    swap = np.arange(rd).reshape(-1, 2)[:, ::-1].ravel() if interleaved else \
        np.concatenate([np.arange(rd // 2, rd), np.arange(rd // 2)])
    rot = e.gather(xv, e.const("swap", swap.astype(np.int64)), axis=3)   # (indices below rd: the rotated part)
    done = out if whole and four else None
    y = e.binary("Add", e.binary("Mul", xr, c, suffix="cos"), e.binary("Mul", rot, s, suffix="sin"),
                 out=done, suffix="rotated")
    if not whole:
        y = e.concat([y, e.slice(xv, 3, rd, head)], axis=3, out=out if four else None)
    if not four:
        y = e.reshape(y, shape, out=out)
    return e


def _tables(e: NodeEmitter, cos: str, sin: str, pos: str, rd: int, interleaved: bool) -> tuple[str, str]:
    """``C`` and ``S`` (each feature's cosine, and its sine signed -/+ for the first/second of its pair) over ``rd``
    features, at the position ids ``pos`` (or the caches as they are, (B, S, rd / 2), without)."""
    neg = e.unary("Neg", sin)

    def widen(first: str, second: str) -> str:
        shape = e.shape(first)
        if not interleaved:
            return e.concat([first, second], axis=len(shape) - 1)
        pairs = e.concat([e.reshape(first, (*shape, 1)), e.reshape(second, (*shape, 1))], axis=len(shape))
        return e.reshape(pairs, (*shape[:-1], rd))

    c, s = widen(cos, cos), widen(neg, sin)
    if pos:
        c, s = e.gather(c, pos), e.gather(s, pos)
    return c, s
