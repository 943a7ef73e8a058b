"""Composite ops of exported decoders that no lowering takes as one node: the importer decomposes them into the ops
the NPU runs (:mod:`compiler.passes.composites`). Their entries here give their canonical form (the node as it is)
and say what becomes of them; a node the decomposition refuses keeps the reason and runs on the host."""

from __future__ import annotations

from compiler.ops.spec import OpSpec

OPS = (
    OpSpec("RotaryEmbedding", None, decomposed=True,
           npu="decomposed at import: the pairs swapped by one Gather of constant indices "
           "(DMA), the cos/sin caches widened and gathered at the position ids (a run-time row gather, or folded), "
           "then x * C + swapped * S on the vector unit; interleaved or halves, partial rotation, 3-D or 4-D input "
           "(onnxruntime's com.microsoft.RotaryEmbedding too)"),
    OpSpec("Attention", None, decomposed=True,
           npu="decomposed at import: per (batch, kv head) one GEMM of its group of query heads "
           "(the repeated K/V never materialised) by K transposed, the scale in its epilogue, softcap, a constant "
           "causal/window/attn_mask added or a run-time mask added or selected, Softmax, one GEMM by V; past/present "
           "key and value by Concat; 3-D or 4-D inputs (onnxruntime's com.microsoft.GroupQueryAttention too)"),
)
