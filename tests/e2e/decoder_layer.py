"""A tiny Llama decoder layer (grouped-query attention, RoPE, RMSNorm, SwiGLU, a KV cache) written the way
``torch.onnx.export(dynamo=True)`` writes Hugging Face's eager Llama at opset 18, built with onnx.helper (no torch
needed): int64 ``input_ids`` into an embedding Gather, ``LlamaRMSNorm`` as Pow/ReduceMean/Add/Sqrt/Reciprocal/Mul,
the cos/sin caches gathered at the run-time ``position_ids`` and ``rotate_half`` as Slice/Neg/Concat/Mul/Add,
``past_key``/``past_value`` concatenated with the new key and value into ``present_*``, ``repeat_kv`` as
Unsqueeze/Expand/Reshape, the causal mask built from Trilu and Where on constants and the padding of a run-time int64
``attention_mask`` applied by Where, scores times the scale, Softmax, ``nn.SiLU`` as ``x * Sigmoid(x)``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper

from tests.e2e.export_style import Exporter

EPS = 1e-6


@dataclass(frozen=True)
class Dims:
    """A decoder's sizes (elements): hidden width, query heads, key/value heads, head size, MLP width, vocabulary
    and the positions of the cos/sin caches. The defaults are the tests' tiny layer."""

    hidden: int = 32
    heads: int = 4
    kv_heads: int = 2
    head: int = 8
    ffn: int = 48
    vocab: int = 40
    max_pos: int = 16


TINY = Dims()
HIDDEN, HEADS, KV_HEADS, HEAD = TINY.hidden, TINY.heads, TINY.kv_heads, TINY.head


def _rms_norm(e: Exporter, x: str, scope: str, d: Dims) -> str:
    var = e.node("ReduceMean", [e.node("Pow", [x, e.const(2.0, scope)], scope), e.const([-1], scope, np.int64)],
                 scope, keepdims=1)
    inv = e.node("Reciprocal", [e.node("Sqrt", [e.node("Add", [var, e.const(EPS, scope)], scope)], scope)], scope)
    return e.node("Mul", [e.param(f"{scope}.weight", (d.hidden,), 0.3), e.node("Mul", [x, inv], scope)], scope)


def _proj(e: Exporter, x: str, cin: int, cout: int, scope: str) -> str:
    return e.node("MatMul", [x, e.param(f"{scope}.weight_t", (cin, cout), 1 / np.sqrt(cin))], scope)


def _heads(e: Exporter, x: str, batch: int, seq: int, heads: int, head: int, scope: str) -> str:
    """(B, S, heads * head) -> (B, heads, S, head)."""
    x = e.node("Reshape", [x, e.const([batch, seq, heads, head], scope, np.int64)], scope)
    return e.node("Transpose", [x], scope, perm=[0, 2, 1, 3])


def _rotate(e: Exporter, x: str, cos: str, sin: str, head: int, scope: str) -> str:
    """``x * cos + rotate_half(x) * sin``, rotate_half = Concat(-x[..., D/2:], x[..., :D/2])."""
    half, axis = e.const([head // 2], scope, np.int64), e.const([-1], scope, np.int64)
    x1 = e.node("Slice", [x, e.const([0], scope, np.int64), half, axis], scope)
    x2 = e.node("Slice", [x, half, e.const([head], scope, np.int64), axis], scope)
    rot = e.node("Concat", [e.node("Neg", [x2], scope), x1], scope, axis=-1)
    return e.node("Add", [e.node("Mul", [x, cos], scope), e.node("Mul", [rot, sin], scope)], scope)


def _repeat_kv(e: Exporter, x: str, batch: int, total: int, d: Dims, scope: str) -> str:
    g = d.heads // d.kv_heads
    x = e.node("Unsqueeze", [x, e.const([2], scope, np.int64)], scope)
    x = e.node("Expand", [x, e.const([batch, d.kv_heads, g, total, d.head], scope, np.int64)], scope)
    return e.node("Reshape", [x, e.const([batch, d.heads, total, d.head], scope, np.int64)], scope)


def _mask(e: Exporter, batch: int, seq: int, past: int) -> str:
    """The additive causal mask (constants: Trilu and Where) with the padding of ``attention_mask`` (run time)."""
    total, low = past + seq, np.finfo(np.float32).min
    ones = e.const(np.ones((seq, total), np.float32), "mask")
    causal = e.node("Trilu", [ones, e.const(past, "mask", np.int64)], "mask", upper=0)
    allowed = e.node("Cast", [causal], "mask", to=TensorProto.BOOL)
    bias = e.node("Where", [allowed, e.const(0.0, "mask"), e.const(low, "mask")], "mask")
    keep = e.node("Cast", [e.node("Unsqueeze", ["attention_mask", e.const([1, 2], "mask", np.int64)], "mask")],
                  "mask", to=TensorProto.BOOL)
    return e.node("Where", [keep, bias, e.const(low, "mask")], "mask")


def _attention(e: Exporter, x: str, batch: int, seq: int, past: int, d: Dims) -> tuple[str, str, str]:
    total = past + seq
    q = _heads(e, _proj(e, x, d.hidden, d.heads * d.head, "attn/q_proj"), batch, seq, d.heads, d.head, "attn/q")
    k, v = (_heads(e, _proj(e, x, d.hidden, d.kv_heads * d.head, f"attn/{n}_proj"), batch, seq, d.kv_heads, d.head,
                   f"attn/{n}") for n in ("k", "v"))
    angles = np.arange(d.max_pos)[:, None] / 10000 ** (np.arange(0, d.head, 2) / d.head)
    emb = np.concatenate([angles, angles], axis=-1)
    e.inits += [onnx.numpy_helper.from_array(np.cos(emb).astype(np.float32), "rotary.cos_cached"),
                onnx.numpy_helper.from_array(np.sin(emb).astype(np.float32), "rotary.sin_cached")]
    cos, sin = (e.node("Unsqueeze", [e.node("Gather", [t, "position_ids"], "rotary"),
                                     e.const([1], "rotary", np.int64)], "rotary")
                for t in ("rotary.cos_cached", "rotary.sin_cached"))
    q, k = _rotate(e, q, cos, sin, d.head, "attn/rope_q"), _rotate(e, k, cos, sin, d.head, "attn/rope_k")
    present_k = e.node("Concat", ["past_key", k], "attn", axis=2)
    present_v = e.node("Concat", ["past_value", v], "attn", axis=2)
    kt = e.node("Transpose", [_repeat_kv(e, present_k, batch, total, d, "attn/repeat_k")], "attn", perm=[0, 1, 3, 2])
    scores = e.node("Mul", [e.node("MatMul", [q, kt], "attn"), e.const(d.head ** -0.5, "attn")], "attn")
    probs = e.node("Softmax", [e.node("Add", [scores, _mask(e, batch, seq, past)], "attn")], "attn", axis=-1)
    ctx = e.node("MatMul", [probs, _repeat_kv(e, present_v, batch, total, d, "attn/repeat_v")], "attn")
    ctx = e.node("Reshape", [e.node("Transpose", [ctx], "attn", perm=[0, 2, 1, 3]),
                             e.const([batch, seq, d.heads * d.head], "attn", np.int64)], "attn")
    return _proj(e, ctx, d.heads * d.head, d.hidden, "attn/o_proj"), present_k, present_v


def decoder_layer(batch: int, seq: int, past: int, seed: int = 3, d: Dims = TINY) -> onnx.ModelProto:
    """The embedding and one Llama decoder layer of sizes ``d`` for ``seq`` new tokens after ``past`` cached ones:
    inputs ``input_ids``, ``position_ids`` (int64, (batch, seq)), ``attention_mask`` (int64, (batch, past + seq)),
    ``past_key`` and ``past_value`` (batch, kv heads, past, head); outputs ``hidden`` and ``present_key``,
    ``present_value`` (the past with the new tokens appended)."""
    e = Exporter(18, seed)
    h = e.node("Gather", [e.param("embed_tokens.weight", (d.vocab, d.hidden), 1.0), "input_ids"], "embed")
    attn, present_k, present_v = _attention(e, _rms_norm(e, h, "input_layernorm", d), batch, seq, past, d)
    h = e.node("Add", [h, attn], "")
    n = _rms_norm(e, h, "post_attention_layernorm", d)
    gate = _proj(e, n, d.hidden, d.ffn, "mlp/gate_proj")
    act = e.node("Mul", [gate, e.node("Sigmoid", [gate], "mlp/act")], "mlp/act")
    mlp = _proj(e, e.node("Mul", [act, _proj(e, n, d.hidden, d.ffn, "mlp/up_proj")], "mlp"), d.ffn, d.hidden,
                "mlp/down_proj")
    out = e.node("Add", [h, mlp], "")
    i64, f32 = TensorProto.INT64, TensorProto.FLOAT
    inputs = [helper.make_tensor_value_info("input_ids", i64, [batch, seq]),
              helper.make_tensor_value_info("position_ids", i64, [batch, seq]),
              helper.make_tensor_value_info("attention_mask", i64, [batch, past + seq]),
              helper.make_tensor_value_info("past_key", f32, [batch, d.kv_heads, past, d.head]),
              helper.make_tensor_value_info("past_value", f32, [batch, d.kv_heads, past, d.head])]
    outputs = [helper.make_tensor_value_info(name, f32, None) for name in (out, present_k, present_v)]
    graph = helper.make_graph(e.nodes, "main_graph", inputs, outputs, initializer=e.inits)
    for o, name in zip(graph.output, ("hidden", "present_key", "present_value")):
        for node in graph.node:
            node.input[:] = [name if i == o.name else i for i in node.input]
            node.output[:] = [name if i == o.name else i for i in node.output]
        o.name = name
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=10,
                             producer_name="pytorch")


def step_inputs(batch: int, seq: int, past: int, seed: int = 0, d: Dims = TINY) -> dict[str, np.ndarray]:
    """Inputs of one step: random ids and cache, positions ``past .. past + seq - 1``, no padding."""
    rng = np.random.default_rng(seed)
    cache = (batch, d.kv_heads, past, d.head)
    return {"input_ids": rng.integers(0, d.vocab, (batch, seq)).astype(np.int64),
            "position_ids": np.broadcast_to(np.arange(past, past + seq), (batch, seq)).astype(np.int64),
            "attention_mask": np.ones((batch, past + seq), np.int64),
            "past_key": rng.standard_normal(cache).astype(np.float32),
            "past_value": rng.standard_normal(cache).astype(np.float32)}
