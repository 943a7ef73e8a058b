"""Writes tests/data/gpt2_tiny_decode_step.onnx: a tiny random HF GPT-2 decode step with a KV cache (2 layers, 2 heads
of 16, vocabulary 64), exported by torch.onnx (TorchScript exporter, opset 17, dynamic batch, sequence and past axes)
with optimum's input and output names. Run it where torch and transformers are installed (the suite needs neither;
written with torch 2.14.1 and transformers 5.24.0):

    python tests/data/export_decoder_step.py gpt2 tests/data/gpt2_tiny_decode_step.onnx

``llama`` exports a tiny Llama the same way, but its traced causal mask keeps the past length it was traced at, which
ONNX shape inference then refuses for any other length (onnxruntime runs it).
"""

import sys

import torch
import transformers as tf

LAYERS, BATCH, PAST = 2, 1, 8


def model(kind: str):
    """(model, kv heads, head dim)."""
    if kind == "gpt2":
        cfg = tf.GPT2Config(vocab_size=64, n_embd=32, n_layer=LAYERS, n_head=2, n_positions=64)
        return tf.GPT2LMHeadModel(cfg), 2, 16
    cfg = tf.LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=LAYERS,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return tf.LlamaForCausalLM(cfg), 2, 16


class Step(torch.nn.Module):
    """``(input_ids, attention_mask, *past) -> (logits, *present)`` with the cache as flat key/value tensors."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, attention_mask, *past):
        cache = tf.DynamicCache()
        for i in range(LAYERS):
            cache.update(past[2 * i], past[2 * i + 1], i)
        out = self.m(input_ids=input_ids, attention_mask=attention_mask, past_key_values=cache, use_cache=True)
        flat = []
        for layer in out.past_key_values.layers:
            flat += [layer.keys, layer.values]
        return (out.logits, *flat)


def export(kind: str, path: str) -> None:
    torch.manual_seed(0)
    m, kvh, hd = model(kind)
    m.eval()
    ids = torch.randint(0, 64, (BATCH, 1))
    mask = torch.ones(BATCH, PAST + 1, dtype=torch.int64)
    past = [torch.randn(BATCH, kvh, PAST, hd) for _ in range(2 * LAYERS)]
    kv = [f"{i}.{x}" for i in range(LAYERS) for x in ("key", "value")]
    names_in = ["input_ids", "attention_mask"] + [f"past_key_values.{n}" for n in kv]
    names_out = ["logits"] + [f"present.{n}" for n in kv]
    dyn = {"input_ids": {0: "batch_size", 1: "sequence_length"}, "logits": {0: "batch_size", 1: "sequence_length"},
           "attention_mask": {0: "batch_size", 1: "total_sequence_length"}}
    dyn |= {n: {0: "batch_size", 2: "past_sequence_length"} for n in names_in[2:]}
    dyn |= {n: {0: "batch_size", 2: "total_sequence_length"} for n in names_out[1:]}
    torch.onnx.export(Step(m), (ids, mask, *past), path, input_names=names_in, output_names=names_out,
                      dynamic_axes=dyn, opset_version=17, dynamo=False)


if __name__ == "__main__":
    export(sys.argv[1], sys.argv[2])
