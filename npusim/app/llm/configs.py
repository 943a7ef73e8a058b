"""Decoder-only language models by name: the published shapes of real checkpoints (weights are seeded random; no
download) and tiny ones for tests. :data:`MODELS` is the one list; ``npusim llm --help`` and docs/llm.md read it."""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class LlmConfig:
    """A decoder's shapes. ``heads`` query heads and ``kv_heads`` key/value heads (grouped-query attention when
    fewer) of ``head_dim``; ``ffn`` the MLP width; ``norm`` ``rms`` (RMSNorm) or ``layer`` (LayerNorm); ``mlp``
    ``swiglu`` (gate, up, down; SiLU) or ``gelu`` (fc1, GELU tanh, fc2); ``rope``: rotary positions (rotate-half),
    else learned position embeddings; ``qkv_bias``/``bias``: biases on the attention projections / on every
    linear; ``tied``: the LM head shares the embedding table; ``source``: where the shapes come from."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    norm: str = "rms"
    mlp: str = "swiglu"
    rope: bool = True
    qkv_bias: bool = False
    bias: bool = False
    tied: bool = False
    eps: float = 1e-5
    rope_theta: float = 500000.0
    max_positions: int = 131072
    source: str = ""

    def __post_init__(self) -> None:
        if self.heads % self.kv_heads:
            raise ValueError(f"{self.name}: heads={self.heads} must be a multiple of kv_heads={self.kv_heads}")
        if self.norm not in ("rms", "layer") or self.mlp not in ("swiglu", "gelu"):
            raise ValueError(f"{self.name}: norm must be rms or layer, mlp swiglu or gelu")

    @property
    def group(self) -> int:
        """Query heads per key/value head."""
        return self.heads // self.kv_heads

    @property
    def layer_params(self) -> int:
        """Weights of one decoder layer's linear layers (the norms' vectors and biases left out)."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        mlp = 3 if self.mlp == "swiglu" else 2
        return self.hidden * (q + 2 * kv) + q * self.hidden + mlp * self.hidden * self.ffn

    @property
    def params(self) -> int:
        """Weights of the whole model: the layers, the embedding table and the LM head (once when tied)."""
        return self.layers * self.layer_params + self.vocab * self.hidden * (1 if self.tied else 2)

    def kv_bytes_per_token(self, kv_bytes: int) -> int:
        """Bytes of keys and values one token adds to the cache over all layers (``kv_bytes`` an element)."""
        return 2 * self.layers * self.kv_heads * self.head_dim * kv_bytes


_CONFIGS = (
    LlmConfig("llama-3.2-1b", 16, 2048, 32, 8, 64, 8192, 128256, tied=True,
              source="meta-llama/Llama-3.2-1B config.json"),
    LlmConfig("llama-3-8b", 32, 4096, 32, 8, 128, 14336, 128256, source="meta-llama/Meta-Llama-3-8B config.json"),
    LlmConfig("qwen2.5-0.5b", 24, 896, 14, 2, 64, 4864, 151936, qkv_bias=True, tied=True, eps=1e-6,
              rope_theta=1000000.0, max_positions=32768, source="Qwen/Qwen2.5-0.5B config.json"),
    LlmConfig("gpt2", 12, 768, 12, 12, 64, 3072, 50257, norm="layer", mlp="gelu", rope=False, bias=True,
              qkv_bias=True, tied=True, max_positions=1024, source="openai-community/gpt2 config.json"),
    LlmConfig("tiny-llama", 2, 64, 4, 2, 16, 128, 256, source="a test size: Llama's form (GQA, RoPE, RMSNorm, SwiGLU)"),
    LlmConfig("tiny-gpt2", 2, 64, 4, 4, 16, 256, 256, norm="layer", mlp="gelu", rope=False, bias=True,
              qkv_bias=True, tied=True, max_positions=1024, source="a test size: GPT-2's form"),
)

MODELS: MappingProxyType[str, LlmConfig] = MappingProxyType({c.name: c for c in _CONFIGS})
"""Every named decoder, by name."""


def llm_config(name: str) -> LlmConfig:
    """The config named ``name``; KeyError listing the names otherwise."""
    try:
        return MODELS[name]
    except KeyError:
        raise KeyError(f"no LLM config {name!r}; configs: {', '.join(MODELS)}") \
            from None
