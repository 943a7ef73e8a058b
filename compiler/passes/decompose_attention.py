"""Attention as the nodes the NPU runs: ONNX ``Attention`` (opset 23; 3-D and 4-D inputs, grouped-query heads,
``is_causal``, bool or float ``attn_mask``, past/present key and value, ``scale``, ``softcap``, the sliding window of
opset 25) and onnxruntime's ``com.microsoft.GroupQueryAttention`` (the forms onnxruntime-genai writes: separate or
packed QKV, past/present KV with ``seqlens_k`` and ``total_sequence_length`` known at compile time, ``do_rotary``,
``softcap``, ``local_window_size``, an ``attention_bias``).

The core (:func:`attend`), for query heads ``Hq`` sharing ``Hkv`` key/value heads in groups of ``G = Hq / Hkv``
(head ``h`` reads key/value head ``h // G``):

    Qg = Reshape(Q, [B, Hkv, G*S, D])              (free: a head's group of query heads are the rows of one matrix)
    scores = MatMul(Qg, Transpose(K, [0, 1, 3, 2])) / (1 / scale)       (one GEMM per (batch, kv head); the division
                                                                          rides in the GEMM's epilogue)
    [softcap * Tanh(scores / softcap)]
    scores5 = Reshape(scores, [B, Hkv, G, S, T]) + mask          (a constant additive mask: causal, window, constant
                                                                  attn_mask; a run-time float mask added, a run-time
                                                                  bool mask applied by Where)
    Y = MatMul(Reshape(Softmax(scores5), [B, Hkv, G*S, T]), V)

so the repeated K and V are never materialised. A query row no key may attend gives zeros, as onnxruntime answers
(a constant mask: its rows are known; a run-time mask: the rows whose result is NaN, ``Where(IsNaN(Y), 0, Y)``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from compiler.ir import Graph, Node
from compiler.passes.decompose_rotary import rotary
from compiler.passes.node_emitter import NodeEmitter

NEG_INF = np.float32(-np.inf)
MASKED = np.finfo(np.float32).min
"""What a position no query may attend adds to its score, as onnxruntime does (the lowest float32, not -inf)."""


@dataclass(frozen=True)
class Scores:
    """How one attention forms and normalises its scores: ``scale`` (multiplies Q K^T), ``softcap`` (0: none),
    ``mask`` a constant additive mask broadcast to (B, Hq, S, T) (0 or :data:`MASKED` where a position may not be
    attended, any float a constant float attn_mask adds; None: none), ``no_key`` the query rows that may attend no key
    (bool, broadcast to (B, Hq, S, 1); their result is zeros), ``runtime`` a run-time mask tensor broadcast to (B,
    Hq, S, T) (a bool one selects, a float one is added; "" none), ``taps``: intermediate results to write to
    outputs, by qk_matmul_output_mode (0 scaled, 1 softcapped, 2 masked, 3 softmax)."""

    scale: float
    softcap: float = 0.0
    mask: np.ndarray | None = None
    no_key: np.ndarray | None = None
    runtime: str = ""
    taps: tuple[tuple[int, str], ...] = ()


def _heads5(e: NodeEmitter, m: str, B: int, Hkv: int, G: int, S: int, T: int) -> str:
    """Mask ``m`` (broadcasting to (B, Hq, S, T)) as 5-D (b, hkv, g, S, T)-broadcastable."""
    s = (1,) * (4 - len(e.shape(m))) + e.shape(m)
    heads = (1, 1) if s[1] == 1 else (Hkv, G)
    return e.reshape(m, (s[0], *heads, s[2], s[3]))


def _const5(mask: np.ndarray, Hkv: int, G: int) -> np.ndarray:
    m = mask.reshape((1,) * (4 - mask.ndim) + mask.shape)
    return m.reshape(m.shape[0], 1, 1, *m.shape[2:]) if m.shape[1] == 1 else \
        m.reshape(m.shape[0], Hkv, G, *m.shape[2:])


def attend(e: NodeEmitter, q: str, k: str, v: str, sc: Scores) -> str:
    """Attention of ``q`` (B, Hq, S, D) over ``k`` (B, Hkv, T, D) and ``v`` (B, Hkv, T, Dv): the result (B, Hkv,
    G*S, Dv) (rows: each kv head's group of query heads, each of S tokens)."""
    B, Hq, S, D = e.shape(q)
    _, Hkv, T, Dv = e.shape(v)
    G = Hq // Hkv
    scores = e.matmul(e.reshape(q, (B, Hkv, G * S, D)), e.transpose(k, (0, 1, 3, 2)), suffix="scores")
    scores = e.binary("Div", scores, e.const("inv_scale", np.float32(1 / np.float32(sc.scale))), suffix="scaled")
    taps = dict(sc.taps)

    def tap(mode: int, t: str) -> None:
        if mode in taps:
            e.reshape(t, (B, Hq, S, T), out=taps[mode])

    tap(0, scores)
    if sc.softcap:
        cap = e.const("softcap", np.float32(sc.softcap))
        scores = e.binary("Mul", e.unary("Tanh", e.binary("Div", scores, cap, suffix="capped")), cap,
                          suffix="softcap")
    tap(1, scores)
    s5 = e.reshape(scores, (B, Hkv, G, S, T))
    if sc.mask is not None and np.any(sc.mask != 0):
        s5 = e.binary("Add", s5, e.const("mask", _const5(sc.mask, Hkv, G)), suffix="masked")
    tapped = s5
    if sc.runtime:
        m5 = _heads5(e, sc.runtime, B, Hkv, G, S, T)
        if e.dtype(sc.runtime) == np.bool_:   # -inf where it is false: a row with no key is NaN, zeroed below
            shape = np.broadcast_shapes(e.shape(s5), e.shape(m5))
            s5 = e.op("Where", (m5, s5, e.const("neg_inf", NEG_INF)), shape, suffix="masked")
            tapped = e.op("Where", (m5, tapped, e.const("lowest", MASKED)), shape, suffix="masked_out") \
                if 2 in taps else s5
        else:
            s5 = tapped = e.binary("Add", s5, m5, suffix="masked")
    tap(2, tapped)
    probs = e.op("Softmax", (s5,), e.shape(s5), suffix="softmax", axis=4)
    y = e.matmul(e.reshape(probs, (B, Hkv, G * S, T)), v, suffix="context")
    if sc.runtime:   # onnxruntime answers zeros for a row that may attend no key (NaN here)
        y = _zero_where(e, e.op("IsNaN", (y,), e.shape(y), np.bool_, suffix="no_key"), y, "guarded")
        if 3 in taps:
            probs = _zero_where(e, e.op("IsNaN", (probs,), e.shape(probs), np.bool_, suffix="no_key"), probs,
                                "probs")
    if sc.no_key is not None and sc.no_key.any():
        rows = np.broadcast_to(_const5(sc.no_key, Hkv, G), (B, Hkv, G, S, 1))
        y = _zero_where(e, e.const("no_key", rows.reshape(B, Hkv, G * S, 1)), y, "guarded")
        if 3 in taps:
            probs = _zero_where(e, e.const("no_key", rows), probs, "probs")
    tap(3, probs)
    return y


def _zero_where(e: NodeEmitter, cond: str, x: str, suffix: str) -> str:
    """``Where(cond, 0, x)``."""
    shape = np.broadcast_shapes(e.shape(cond), e.shape(x))
    return e.op("Where", (cond, e.const("zero", np.float32(0)), x), shape, suffix=suffix)


def allowed(S: int, T: int, offset: int, left: int = -1, right: int = -1, causal: bool = True) -> np.ndarray:
    """(S, T) bool: query ``i`` (at absolute position ``offset + i``) may attend key ``j`` iff ``j <= p`` when
    ``causal``, ``j >= p - left`` when ``left >= 0`` and ``j <= p + right`` when ``right >= 0``."""
    p = offset + np.arange(S)[:, None]
    j = np.arange(T)[None]
    ok = np.ones((S, T), bool)
    if causal:
        ok &= j <= p
    if left >= 0:
        ok &= j >= p - left
    if right >= 0:
        ok &= j <= p + right
    return ok


def _masked(ok: np.ndarray) -> np.ndarray:
    """The additive mask of the positions ``ok`` allows."""
    return np.where(ok, np.float32(0), MASKED).astype(np.float32)


def _add(mask: np.ndarray | None, more: np.ndarray) -> np.ndarray:
    """Two additive masks as one (float32, as onnxruntime adds them)."""
    if mask is None:
        return more.astype(np.float32)
    with np.errstate(over="ignore"):
        return (mask.astype(np.float32) + more.astype(np.float32)).astype(np.float32)


def _heads_first(e: NodeEmitter, x: str, heads: int, four: bool) -> str:
    """(B, H, L, d) of a 4-D input as it is, of a 3-D (B, L, H * d) one by Reshape and Transpose."""
    if four:
        return x
    B, L, hidden = e.shape(x)
    return e.transpose(e.reshape(x, (B, L, heads, hidden // heads)), (0, 2, 1, 3))


def _output(e: NodeEmitter, y: str, B: int, Hq: int, S: int, three: bool, out: str) -> str:
    """The (B, Hkv, G*S, Dv) result as (B, Hq, S, Dv), or (B, S, Hq * Dv) when ``three``, into ``out``."""
    Dv = e.shape(y)[-1]
    if not three:
        return e.reshape(y, (B, Hq, S, Dv), out=out)
    return e.reshape(e.transpose(e.reshape(y, (B, Hq, S, Dv)), (0, 2, 1, 3)), (B, S, Hq * Dv), out=out)


Q, K, V, MASK, PAST_K, PAST_V, NONPAD = range(7)


def _refusal(graph: Graph, n: Node) -> str | None:
    """Why ONNX Attention node ``n`` stays whole (the host runs it), or None."""
    ins = tuple(n.inputs) + ("",) * 7
    if ins[NONPAD]:
        return "nonpad_kv_seqlen (an external KV cache) is not supported"
    if any(graph.tensor(t).dtype != np.float32 for t in (ins[Q], ins[K], ins[V])):
        return "only float32 Q, K and V run on the NPU"
    if int(n.attrs.get("softmax_precision", 1) or 1) != 1:
        return f"softmax_precision={n.attrs['softmax_precision']}: only float32 (1) runs on the NPU"
    if bool(ins[PAST_K]) != bool(ins[PAST_V]):
        return "past_key and past_value must be given together"
    ranks = {graph.tensor(ins[t]).rank for t in (Q, K, V)}
    if ranks not in ({3}, {4}):
        return f"Q, K and V of ranks {sorted(ranks)}: all 3-D or all 4-D are taken"
    return None


def onnx_attention(graph: Graph, n: Node) -> NodeEmitter | str:
    """ONNX Attention (opsets 23-25)."""
    reason = _refusal(graph, n)
    if reason:
        return reason
    e, a = NodeEmitter(graph, n), n.attrs
    ins, outs = tuple(n.inputs) + ("",) * 7, tuple(n.outputs) + ("",) * 4
    three = graph.tensor(ins[Q]).rank == 3
    hq, hkv = int(a.get("q_num_heads", 0)), int(a.get("kv_num_heads", 0))
    if three and (not hq or not hkv):
        return "3-D inputs need q_num_heads and kv_num_heads"
    q = _heads_first(e, ins[Q], hq, not three)
    B, Hq, S, D = e.shape(q)
    Hkv = graph.tensor(ins[K]).shape[1] if not three else hkv
    if Hq % Hkv:
        return f"{Hq} query heads do not share {Hkv} key/value heads evenly"
    k, v = _heads_first(e, ins[K], Hkv, not three), _heads_first(e, ins[V], Hkv, not three)
    P = graph.tensor(ins[PAST_K]).shape[2] if ins[PAST_K] else 0
    if P:
        k = e.concat([ins[PAST_K], k], axis=2, out=outs[1] or None)
        v = e.concat([ins[PAST_V], v], axis=2, out=outs[2] or None)
    elif ins[PAST_K] or outs[1] or outs[2]:
        k = e.unary("Identity", k, out=outs[1]) if outs[1] else k
        v = e.unary("Identity", v, out=outs[2]) if outs[2] else v
    T = e.shape(k)[2]
    scores = _attention_scores(graph, n, ins[MASK], S, T, P, D)
    if isinstance(scores, str):
        return scores
    if outs[3]:
        scores = replace(scores, taps=((int(a.get("qk_matmul_output_mode", 0)), outs[3]),))
    _output(e, attend(e, q, k, v, scores), B, Hq, S, three, outs[0])
    return e


def _attention_scores(graph: Graph, n: Node, mask: str, S: int, T: int, P: int, D: int) -> Scores | str:
    """The Scores of ONNX Attention node ``n``: the causal and window mask (offset: the past length), a constant
    attn_mask folded into it, a run-time one kept."""
    a = n.attrs
    left, right = int(a.get("left_window_size", -1)), int(a.get("right_window_size", -1))
    causal = bool(a.get("is_causal", 0))
    ok = allowed(S, T, P, left, right, causal)
    const = _masked(ok) if causal or left >= 0 or right >= 0 else None
    runtime = ""
    if mask:
        t = graph.tensor(mask)
        if t.rank > 4 or t.shape[-1] != T:
            return f"an attn_mask of shape {t.shape} for {T} keys is not taken"
        if t.is_const and t.dtype == np.bool_:
            ok = ok & t.data
            const = _add(const, _masked(t.data))
        elif t.is_const:
            const = _add(const, t.data)
        elif t.dtype in (np.bool_, np.float32):
            runtime = mask
        else:
            return f"an attn_mask of type {t.dtype} is not taken"
    mode = int(a.get("qk_matmul_output_mode", 0))
    if mode not in (0, 1, 2, 3):
        return f"qk_matmul_output_mode={mode} is not taken"
    scale = float(a["scale"]) if a.get("scale") else 1 / math.sqrt(D)
    return Scores(scale, float(a.get("softcap", 0.0) or 0.0), const, ~ok.any(axis=-1, keepdims=True), runtime)


# -- com.microsoft.GroupQueryAttention -----------------------------------------------------------------------------

(GQ_QUERY, GQ_KEY, GQ_VALUE, GQ_PAST_K, GQ_PAST_V, SEQLENS_K, TOTAL, COS, SIN, POSITION_IDS, BIAS,
 HEAD_SINK) = range(12)
GQ_REFUSED = {12: "k_scale (a quantized KV cache)", 13: "v_scale (a quantized KV cache)", 14: "q_norm_weight",
              15: "k_norm_weight", 16: "query_seqlens (right-padded chunks)", HEAD_SINK: "head_sink"}


def _gqa_refusal(graph: Graph, n: Node, ins: tuple[str, ...]) -> str | None:
    a = n.attrs
    for i, what in GQ_REFUSED.items():
        if ins[i]:
            return f"{what} is not supported"
    for attr, ok in (("smooth_softmax", 0), ("sliding_window_cache", 0), ("qk_output", 0)):
        if int(a.get(attr, ok) or 0) != ok:
            return f"{attr}={a[attr]} is not supported"
    if str(a.get("k_quant_type", "NONE")) != "NONE" or str(a.get("v_quant_type", "NONE")) != "NONE":
        return "a quantized KV cache is not supported"
    if len(n.outputs) > 3 and n.outputs[3]:
        return "output_qk is not supported"
    if graph.tensor(ins[GQ_QUERY]).dtype != np.float32:
        return "only a float32 query runs on the NPU"
    for i, what in ((SEQLENS_K, "seqlens_k"), (TOTAL, "total_sequence_length")):
        if not graph.is_const(ins[i]):
            return (f"{what} ({ins[i]!r}) is computed at run time: the NPU program is compiled for one step; bind "
                    f"it (or the attention mask it comes from) as a constant of the step (docs/compiler.md)")
    return None


def group_query_attention(graph: Graph, n: Node) -> NodeEmitter | str:
    """com.microsoft GroupQueryAttention: query (B, S, H*D) (or packed QKV), key, value (B, S, Hkv*D), past
    key/value (B, Hkv, P, D); every sequence of the batch dense (``seqlens_k`` all ``total - 1``)."""
    ins, a = tuple(n.inputs) + ("",) * 17, n.attrs
    reason = _gqa_refusal(graph, n, ins)
    if reason:
        return reason
    H, Hkv = int(a["num_heads"]), int(a["kv_num_heads"])
    B, S, hidden = graph.tensor(ins[GQ_QUERY]).shape
    packed = not ins[GQ_KEY]
    D = hidden // (H + 2 * Hkv) if packed else hidden // H
    total = int(graph.tensor(ins[TOTAL]).data.reshape(-1)[0])
    seqlens = graph.tensor(ins[SEQLENS_K]).data.reshape(-1)
    P = graph.tensor(ins[GQ_PAST_K]).shape[2] if ins[GQ_PAST_K] else 0
    first = S == total
    past = 0 if first else total - S
    if seqlens.size != B or np.any(seqlens.astype(np.int64) + 1 != total) or past > P or past < 0 or \
            (not first and S > 1 and B > 1):
        return (f"seqlens_k {seqlens.tolist()} with total_sequence_length {total}, {S} new tokens and a past of {P}: "
                f"only dense batches (every seqlens_k = total - 1) are lowered")
    e = NodeEmitter(graph, n)
    q, k, v = ((e.slice(ins[GQ_QUERY], 2, 0, H * D), e.slice(ins[GQ_QUERY], 2, H * D, (H + Hkv) * D),
                e.slice(ins[GQ_QUERY], 2, (H + Hkv) * D, (H + 2 * Hkv) * D)) if packed else
               (ins[GQ_QUERY], ins[GQ_KEY], ins[GQ_VALUE]))
    if int(a.get("do_rotary", 0)):
        rotated = _gqa_rotary(e, graph, n, ins, q, k, H, Hkv, past)
        if isinstance(rotated, str):
            return rotated
        q, k = rotated
    q4, k4, v4 = (_heads_first(e, t, h, False) for t, h in ((q, H), (k, Hkv), (v, Hkv)))
    outs = tuple(n.outputs) + ("",) * 3
    C = max(total, P)
    k_all, v_all = (e.concat([e.slice(p, 2, 0, past), t], axis=2) if past else t
                    for p, t in ((ins[GQ_PAST_K], k4), (ins[GQ_PAST_V], v4)))
    for t, o in ((k_all, outs[1]), (v_all, outs[2])):
        if o and C > total:   # onnxruntime zeroes the rows of the buffer past the total
            e.concat([t, e.const("empty", np.zeros((B, Hkv, C - total, D), np.float32))], axis=2, out=o)
        elif o:
            e.unary("Identity", t, out=o)
    window = int(a.get("local_window_size", -1))
    causal = bool(int(a.get("causal", 1)))
    # onnxruntime's window holds local_window_size keys, the query's own included
    mask = _masked(allowed(S, total, past, window - 1 if window > 0 else -1, -1, causal)) \
        if causal or window > 0 else None
    bias = ins[BIAS]
    if bias and graph.is_const(bias):
        mask, bias = _add(mask, graph.tensor(bias).data), ""
    scale = float(a["scale"]) if a.get("scale") else 1 / math.sqrt(D)
    y = attend(e, q4, k_all, v_all, Scores(scale, float(a.get("softcap", 0.0) or 0.0), mask, runtime=bias))
    _output(e, y, B, H, S, True, outs[0])
    return e


def _gqa_rotary(e: NodeEmitter, graph: Graph, n: Node, ins: tuple[str, ...], q: str, k: str, H: int, Hkv: int,
                past: int) -> tuple[str, str] | str:
    """Q and K rotated as onnxruntime's GroupQueryAttention does with ``do_rotary``: at the position ids given, else
    at the positions ``past + 0..S-1``; (q, k), or why the host runs the node."""
    B, S = e.shape(q)[:2]
    pos = ins[POSITION_IDS] or e.const("positions", np.broadcast_to(past + np.arange(S), (B, S)).astype(np.int64))
    inter = bool(int(n.attrs.get("rotary_interleaved", 0)))
    rd = 2 * graph.tensor(ins[COS]).shape[-1]
    out = []
    for t, heads in ((q, H), (k, Hkv)):
        before = len(e.nodes)
        got = rotary(graph, n, t, ins[COS], ins[SIN], pos, heads, rd, inter, None, e)
        if isinstance(got, str):
            return got
        out.append(e.nodes[-1].outputs[0] if len(e.nodes) > before else t)
    return out[0], out[1]
