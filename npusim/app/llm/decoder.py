"""ONNX graphs of a decoder's pieces for one step, in the form torch.onnx exports them (opset 21), with seeded random
weights: :func:`layer_model` (one decoder layer with its KV cache, past inputs and present outputs),
:func:`embed_model` (the token embedding lookup) and :func:`head_model` (final norm and LM head on the last token).

A step is ``q`` new tokens per sequence over a cache of ``past`` tokens, ``batch`` sequences: a prefill is ``q = P,
past = 0``, a decode step ``q = 1, past = context``. The layers of a decoder have the same shapes, so one layer's
graph stands for each of them.

Cache layout: values ``[batch, kv_heads, tokens, head_dim]`` as exporters write them; keys transposed,
``[batch, kv_heads, head_dim, tokens]``, so the scores are ``Q @ K`` with no transpose of the cache each step. The
query heads that share a key/value head are the rows of one matrix pass (``[batch, kv_heads, group * q, head_dim]``):
the keys and values are never repeated. Weights by ``fmt``: ``f32``; ``i8`` (int8, one scale per column:
DequantizeLinear axis 1); ``i4`` (int4, one scale per block of :data:`I4_BLOCK` rows along K: DequantizeLinear
``block_size``); ``fp8`` (FLOAT8E4M3FN, one scale per column)."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from npusim.app.llm.configs import LlmConfig

WEIGHT_FORMATS = ("f32", "i8", "i4", "fp8")
"""``--weights`` values: how every linear layer's weight (the LM head's too) is stored in DRAM."""
WEIGHT_BYTES = {"f32": 4.0, "i8": 1.0, "i4": 0.5, "fp8": 1.0}
"""DRAM bytes per weight of each format, scales left out."""
I4_BLOCK = 32
"""Rows along K that share an int4 scale (the block size of int4 LLM exports)."""
OPSET = 21
MAX_INITIALIZER = 1 << 30
"""Bytes: a LM head larger than this is split into column chunks, each its own model (protobuf's 2 GB limit)."""
MAX_EMBED_ROWS = 32768
"""Rows of the embedding table a lookup is simulated on: a row gather's cost does not depend on the rows it skips."""


class _Writer:
    """Accumulates one ONNX graph's nodes and initializers; tensor names are unique by construction."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def const(self, name: str, value: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, op: str, inputs: list[str], name: str, outputs: int = 1, **attrs) -> str | list[str]:
        outs = [name] if outputs == 1 else [f"{name}.{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, **attrs))
        return outs[0] if outputs == 1 else outs

    def shape(self, name: str, dims: tuple[int, ...]) -> str:
        return self.const(f"{name}.shape", np.array(dims, np.int64))

    def reshape(self, x: str, dims: tuple[int, ...], name: str) -> str:
        return self.op("Reshape", [x, self.shape(name, dims)], name)

    def weight(self, name: str, K: int, N: int, fmt: str) -> str:
        """A ``[K, N]`` weight ~ N(0, 1/K) in format ``fmt`` (a quantized one dequantized by a DequantizeLinear)."""
        std = 1 / math.sqrt(K)
        if fmt == "f32":
            return self.const(name, self.rng.standard_normal((K, N), np.float32) * np.float32(std))
        if fmt == "i4":
            t = TensorProto(name=f"{name}.q", data_type=TensorProto.INT4, dims=(K, N))
            t.raw_data = self.rng.integers(0, 256, K * N // 2, np.uint8).tobytes()
            self.inits.append(t)
            scale = self.const(f"{name}.scale", np.full((K // I4_BLOCK, N), std / 4, np.float32))
            return self.op("DequantizeLinear", [t.name, scale], name, axis=0, block_size=I4_BLOCK)
        if fmt == "i8":
            codes = self.rng.integers(-127, 128, (K, N), np.int8)
            scale = np.float32(std / 64)
        else:
            codes = (self.rng.standard_normal((K, N), np.float32) * 4).astype(ml_dtypes.float8_e4m3fn)
            scale = np.float32(std / 4)
        q = self.const(f"{name}.q", codes)
        return self.op("DequantizeLinear", [q, self.const(f"{name}.scale", np.full(N, scale, np.float32))], name,
                       axis=1)

    def linear(self, x: str, K: int, N: int, name: str, fmt: str, bias: bool) -> str:
        y = self.op("MatMul", [x, self.weight(f"{name}.weight", K, N, fmt)], f"{name}.matmul")
        if bias:
            y = self.op("Add", [y, self.const(f"{name}.bias", self.rng.standard_normal(N, np.float32) * 0.02)], name)
        return y

    def norm(self, x: str, cfg: LlmConfig, name: str) -> str:
        """RMSNorm as torch exports it (``x * rsqrt(mean(x^2) + eps) * w``), or LayerNormalization."""
        h = cfg.hidden
        w = self.const(f"{name}.weight", 1 + self.rng.standard_normal(h, np.float32) * 0.05)
        if cfg.norm == "layer":
            b = self.const(f"{name}.bias", self.rng.standard_normal(h, np.float32) * 0.05)
            return self.op("LayerNormalization", [x, w, b], name, axis=-1, epsilon=cfg.eps)
        sq = self.op("Mul", [x, x], f"{name}.square")
        ms = self.op("ReduceMean", [sq, self.const(f"{name}.axes", np.array([-1], np.int64))], f"{name}.mean")
        eps = self.op("Add", [ms, self.const(f"{name}.eps", np.float32(cfg.eps))], f"{name}.eps_add")
        inv = self.op("Reciprocal", [self.op("Sqrt", [eps], f"{name}.sqrt")], f"{name}.rsqrt")
        return self.op("Mul", [self.op("Mul", [x, inv], f"{name}.scaled"), w], name)

    def model(self, name: str, inputs: list, outputs: list) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, name, [helper.make_tensor_value_info(*i) for i in inputs],
                                  [helper.make_tensor_value_info(*o) for o in outputs], self.inits)
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=10,
                                 producer_name="npusim.app.llm")


def _rope(w: _Writer, x: str, cfg: LlmConfig, past: int, q: int, name: str) -> str:
    """Rotate-half rotary embedding of ``x [batch, q, heads, head_dim]`` at positions ``past .. past + q - 1``."""
    d, half = cfg.head_dim, cfg.head_dim // 2
    inv = cfg.rope_theta ** (-np.arange(half, dtype=np.float64) * 2 / d)
    ang = np.outer(np.arange(past, past + q, dtype=np.float64), inv)
    ang = np.concatenate([ang, ang], axis=1).reshape(q, 1, d)
    cos = w.const(f"{name}.cos", np.cos(ang).astype(np.float32))
    sin = w.const(f"{name}.sin", np.sin(ang).astype(np.float32))
    axes = w.const(f"{name}.axes", np.array([3], np.int64))
    lo = w.op("Slice", [x, w.const(f"{name}.s0", np.array([0], np.int64)),
                        w.const(f"{name}.e0", np.array([half], np.int64)), axes], f"{name}.x1")
    hi = w.op("Slice", [x, w.const(f"{name}.s1", np.array([half], np.int64)),
                        w.const(f"{name}.e1", np.array([d], np.int64)), axes], f"{name}.x2")
    rot = w.op("Concat", [w.op("Neg", [hi], f"{name}.neg"), lo], f"{name}.rotated", axis=3)
    return w.op("Add", [w.op("Mul", [x, cos], f"{name}.cos_mul"), w.op("Mul", [rot, sin], f"{name}.sin_mul")], name)


def _grouped(w: _Writer, x: str, cfg: LlmConfig, batch: int, q: int, name: str) -> str:
    """Queries ``[batch, q, heads * head_dim]`` as ``[batch, kv_heads, group * q, head_dim]``."""
    kv, g, d = cfg.kv_heads, cfg.group, cfg.head_dim
    x = w.reshape(x, (batch, q, kv, g, d), f"{name}.split")
    if q > 1:
        x = w.op("Transpose", [x], f"{name}.heads", perm=(0, 2, 3, 1, 4))
    return w.reshape(x, (batch, kv, g * q, d), f"{name}.grouped")


def _causal_mask(cfg: LlmConfig, past: int, q: int) -> np.ndarray:
    """Additive mask ``[group * q, past + q]``: query i (position past + i) sees keys 0 .. past + i."""
    keys = np.arange(past + q)[None, :]
    pos = np.tile(np.arange(past, past + q), cfg.group)[:, None]
    return np.where(keys <= pos, np.float32(0), np.float32(-np.inf)).astype(np.float32)


def _attention(w: _Writer, h: str, cfg: LlmConfig, fmt: str, batch: int, q: int, past: int, p: str) -> str:
    """Self-attention of ``h`` over the cache, appending this step's keys and values (``present_*`` outputs)."""
    kv, g, d = cfg.kv_heads, cfg.group, cfg.head_dim
    qs = w.linear(h, cfg.hidden, cfg.heads * d, f"{p}.q_proj", fmt, cfg.qkv_bias)
    ks = w.linear(h, cfg.hidden, kv * d, f"{p}.k_proj", fmt, cfg.qkv_bias)
    vs = w.linear(h, cfg.hidden, kv * d, f"{p}.v_proj", fmt, cfg.qkv_bias)
    if cfg.rope:
        qs = _rope(w, w.reshape(qs, (batch, q, cfg.heads, d), f"{p}.q_heads"), cfg, past, q, f"{p}.q_rope")
        ks = _rope(w, w.reshape(ks, (batch, q, kv, d), f"{p}.k_heads"), cfg, past, q, f"{p}.k_rope")
    qg = _grouped(w, qs, cfg, batch, q, f"{p}.q")
    k_new = w.op("Transpose", [w.reshape(ks, (batch, q, kv, d), f"{p}.k_split")], f"{p}.k_t", perm=(0, 2, 3, 1))
    v_new = w.op("Transpose", [w.reshape(vs, (batch, q, kv, d), f"{p}.v_split")], f"{p}.v_t", perm=(0, 2, 1, 3))
    keys = w.op("Concat", ["past_key", k_new], "present_key", axis=3)
    values = w.op("Concat", ["past_value", v_new], "present_value", axis=2)
    scores = w.op("MatMul", [qg, keys], f"{p}.scores")
    scores = w.op("Mul", [scores, w.const(f"{p}.scale", np.float32(1 / math.sqrt(d)))], f"{p}.scaled")
    if q > 1:
        scores = w.op("Add", [scores, w.const(f"{p}.mask", _causal_mask(cfg, past, q))], f"{p}.masked")
    probs = w.op("Softmax", [scores], f"{p}.softmax", axis=-1)
    ctx = w.op("MatMul", [probs, values], f"{p}.context")                     # [batch, kv, g * q, d]
    if q > 1:
        ctx = w.op("Transpose", [w.reshape(ctx, (batch, kv, g, q, d), f"{p}.ctx_split")], f"{p}.ctx_t",
                   perm=(0, 3, 1, 2, 4))
    ctx = w.reshape(ctx, (batch, q, cfg.heads * d), f"{p}.merged")
    return w.linear(ctx, cfg.heads * d, cfg.hidden, f"{p}.o_proj", fmt, cfg.bias)


def _mlp(w: _Writer, h: str, cfg: LlmConfig, fmt: str, p: str) -> str:
    if cfg.mlp == "gelu":
        t = w.linear(h, cfg.hidden, cfg.ffn, f"{p}.fc1", fmt, cfg.bias)
        return w.linear(w.op("Gelu", [t], f"{p}.gelu", approximate="tanh"), cfg.ffn, cfg.hidden, f"{p}.fc2", fmt,
                        cfg.bias)
    gate = w.linear(h, cfg.hidden, cfg.ffn, f"{p}.gate_proj", fmt, cfg.bias)
    up = w.linear(h, cfg.hidden, cfg.ffn, f"{p}.up_proj", fmt, cfg.bias)
    act = w.op("Mul", [gate, w.op("Sigmoid", [gate], f"{p}.sigmoid")], f"{p}.silu")
    return w.linear(w.op("Mul", [act, up], f"{p}.gated"), cfg.ffn, cfg.hidden, f"{p}.down_proj", fmt, cfg.bias)


def layer_model(cfg: LlmConfig, fmt: str, batch: int, q: int, past: int, seed: int = 0) -> onnx.ModelProto:
    """One decoder layer for a step of ``q`` tokens over ``past`` cached ones: inputs ``x [batch, q, hidden]``,
    ``past_key``, ``past_value``; outputs ``y`` and ``present_key``, ``present_value`` (see the module docstring)."""
    w = _Writer(seed)
    kv, d, F = cfg.kv_heads, cfg.head_dim, TensorProto.FLOAT
    h = w.norm("x", cfg, "layer.input_norm")
    x1 = w.op("Add", ["x", _attention(w, h, cfg, fmt, batch, q, past, "layer.attn")], "layer.attn_residual")
    y = w.op("Add", [x1, _mlp(w, w.norm(x1, cfg, "layer.post_norm"), cfg, fmt, "layer.mlp")], "y")
    inputs = [("x", F, (batch, q, cfg.hidden)), ("past_key", F, (batch, kv, d, past)),
              ("past_value", F, (batch, kv, past, d))]
    outputs = [(y, F, (batch, q, cfg.hidden)), ("present_key", F, (batch, kv, d, past + q)),
               ("present_value", F, (batch, kv, past + q, d))]
    return w.model(f"{cfg.name}.layer", inputs, outputs)


def embed_model(cfg: LlmConfig, batch: int, q: int, past: int, seed: int = 0) -> onnx.ModelProto:
    """The token embedding lookup (a row gather of f32 ``[vocab, hidden]``, at most :data:`MAX_EMBED_ROWS` rows of
    it; plus the learned position embedding without rotary positions): int64 ``input_ids [batch, q]`` -> ``x``."""
    w = _Writer(seed + 1)
    rows = min(cfg.vocab, MAX_EMBED_ROWS)
    table = w.const("embed.weight", w.rng.standard_normal((rows, cfg.hidden), np.float32))
    x = w.op("Gather", [table, "input_ids"], "embed" if cfg.rope else "embed.tokens", axis=0)
    if not cfg.rope:
        pos = w.rng.standard_normal((q, cfg.hidden), np.float32) * np.float32(0.02)   # the step's rows of the table
        x = w.op("Add", [x, w.const("embed.positions", pos)], "embed")
    return w.model(f"{cfg.name}.embed", [("input_ids", TensorProto.INT64, (batch, q))],
                   [(x, TensorProto.FLOAT, (batch, q, cfg.hidden))])


def head_chunks(cfg: LlmConfig, fmt: str) -> int:
    """How many models :func:`head_model` splits the LM head into (each at most :data:`MAX_INITIALIZER` bytes)."""
    return max(1, math.ceil(cfg.hidden * cfg.vocab * WEIGHT_BYTES[fmt] / MAX_INITIALIZER))


def head_model(cfg: LlmConfig, fmt: str, batch: int, chunk: int = 0, seed: int = 0) -> onnx.ModelProto:
    """Column chunk ``chunk`` of :func:`head_chunks` of the LM head on each sequence's last token, ``h [batch, 1,
    hidden]`` -> ``logits`` (chunk 0 has the final norm): a head over :data:`MAX_INITIALIZER` bytes is split, each
    chunk its own model."""
    step = -(-cfg.vocab // head_chunks(cfg, fmt))
    w, F = _Writer(seed + 2 + chunk), TensorProto.FLOAT
    n = min(step, cfg.vocab - chunk * step)
    h = w.norm("h", cfg, "final_norm") if chunk == 0 else "h"
    logits = w.linear(h, cfg.hidden, n, "lm_head", fmt, False)
    return w.model(f"{cfg.name}.head{chunk}", [("h", F, (batch, 1, cfg.hidden))], [(logits, F, (batch, 1, n))])
