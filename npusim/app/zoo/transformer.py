"""Transformer models of the zoo: one BERT-base encoder layer and a ViT-B/16 patch embedding plus encoder block."""

from __future__ import annotations

import math

import numpy as np

from compiler.errors import CompileError
from compiler.frontend.builder import GraphBuilder, to_onnx
from npusim.app.zoo.blocks import Init, gelu_erf


class _Encoder:
    """Writes encoder layers (multi-head self-attention and a GELU MLP) with MatMul + Add projections."""

    def __init__(self, b: GraphBuilder, init: Init, seq: int, hidden: int = 768, heads: int = 12, ffn: int = 3072,
                 eps: float = 1e-12):
        self.b, self.init, self.seq, self.hidden, self.heads, self.ffn = b, init, seq, hidden, heads, ffn
        self.eps = eps  # LayerNormalization epsilon

    def linear(self, x: str, cin: int, cout: int, name: str) -> str:
        """``x @ W + b`` with W ``[cin, cout]`` ~ N(0, 1/cin)."""
        b = self.b
        w = b.const(f"{name}.weight", self.init.normal((cin, cout), 1 / math.sqrt(cin)))
        bias = b.const(f"{name}.bias", self.init.normal((cout,), 0.02))
        return b.add(b.matmul(x, w, name=f"{name}.matmul"), bias, name=name)

    def layernorm(self, x: str, name: str) -> str:
        b, h = self.b, self.hidden
        gamma = b.const(f"{name}.weight", 1 + self.init.normal((h,), 0.05))
        beta = b.const(f"{name}.bias", self.init.normal((h,), 0.05))
        return b.layernorm(x, gamma, beta, axis=-1, epsilon=self.eps, name=name)

    def attention(self, x: str, p: str) -> str:
        """Self-attention over ``x [1, seq, hidden]``: heads split by Reshape/Transpose, scaled scores, Softmax."""
        b, s, h, nh = self.b, self.seq, self.hidden, self.heads
        d = h // nh

        def heads(t: str, perm: tuple[int, ...], name: str) -> str:
            return b.transpose(b.reshape(t, (1, s, nh, d), name=f"{name}.split"), perm, name=f"{name}.heads")

        q = heads(self.linear(x, h, h, f"{p}.query"), (0, 2, 1, 3), f"{p}.query")   # [1, nh, s, d]
        k = heads(self.linear(x, h, h, f"{p}.key"), (0, 2, 3, 1), f"{p}.key")       # [1, nh, d, s]
        v = heads(self.linear(x, h, h, f"{p}.value"), (0, 2, 1, 3), f"{p}.value")   # [1, nh, s, d]
        scores = b.div(b.matmul(q, k, name=f"{p}.scores"), np.float32(math.sqrt(d)), name=f"{p}.scale")
        probs = b.softmax(scores, -1, name=f"{p}.softmax")
        ctx = b.matmul(probs, v, name=f"{p}.context")                              # [1, nh, s, d]
        ctx = b.reshape(b.transpose(ctx, (0, 2, 1, 3), name=f"{p}.merge"), (1, s, h), name=f"{p}.merged")
        return self.linear(ctx, h, h, f"{p}.output")

    def mlp(self, x: str, p: str) -> str:
        t = gelu_erf(self.b, self.linear(x, self.hidden, self.ffn, f"{p}.fc1"), f"{p}.gelu")
        return self.linear(t, self.ffn, self.hidden, f"{p}.fc2")

    def post_norm(self, x: str, p: str) -> str:
        """BERT: ``h = LN(x + attn(x)); LN(h + mlp(h))``."""
        b = self.b
        h = self.layernorm(b.add(x, self.attention(x, f"{p}.attention"), name=f"{p}.attention.residual"),
                           f"{p}.attention.norm")
        return self.layernorm(b.add(h, self.mlp(h, f"{p}.mlp"), name=f"{p}.mlp.residual"), f"{p}.mlp.norm")

    def pre_norm(self, x: str, p: str) -> str:
        """ViT: ``h = x + attn(LN(x)); h + mlp(LN(h))``."""
        b = self.b
        h = b.add(x, self.attention(self.layernorm(x, f"{p}.norm1"), f"{p}.attention"), name=f"{p}.attention.residual")
        return b.add(h, self.mlp(self.layernorm(h, f"{p}.norm2"), f"{p}.mlp"), name=f"{p}.mlp.residual")


def bert_layer(seed: int = 0, seq: int = 128, hidden: int = 768, heads: int = 12, ffn: int = 3072):
    """One BERT-base encoder layer: 1x128x768 -> 1x128x768, 12 heads, post-LayerNorm, GELU from Erf, 7.1M
    weights.

    seq, hidden, heads, ffn: a smaller variant (tokens, model width, attention heads, MLP width).
    """
    if hidden % heads:
        raise CompileError(f"hidden={hidden} must be a multiple of heads={heads}")
    b = GraphBuilder("bert_layer")
    enc = _Encoder(b, Init(seed), seq, hidden, heads, ffn)
    b.output(enc.post_norm(b.input("x", (1, seq, enc.hidden), np.float32), "layer0"))
    return to_onnx(b.build())


def vit_block(seed: int = 0):
    """ViT-B/16 front: 16x16 stride-16 patch-embedding conv on 1x3x224x224 to 196 tokens of 768, position
    embedding, one pre-LayerNorm encoder block -> 1x196x768, 7.8M weights."""
    b, init = GraphBuilder("vit_block"), Init(seed)
    hidden, patch, tokens = 768, 16, (224 // 16) ** 2
    x = b.input("x", (1, 3, 224, 224), np.float32)
    w = b.const("patch_embed.weight", init.he((hidden, 3, patch, patch), gain=1.0))
    e = b.conv(x, w, b.const("patch_embed.bias", init.normal((hidden,), 0.02)), strides=patch, name="patch_embed")
    e = b.transpose(b.reshape(e, (1, hidden, tokens), name="patch_embed.flatten"), (0, 2, 1), name="tokens")
    e = b.add(e, b.const("pos_embed", init.normal((1, tokens, hidden), 0.02)), name="pos_embed.add")
    b.output(_Encoder(b, init, tokens, hidden, eps=1e-6).pre_norm(e, "block0"))
    return to_onnx(b.build())
