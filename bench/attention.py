"""The fused attention against the unfused chain: simulated cycles and DRAM bytes (timing only, fp32) of
llama-3.2-1b's attention (8 KV heads, 4 query heads each, head_dim 64), as the decoder step graphs of
:mod:`npusim.app.llm.decoder` write it (``MatMul(Q, K) -> Mul(1/8) -> Add(causal mask) -> Softmax -> MatMul(P, V)``,
the queries of a KV head's group as the rows of one matrix), cut out of one layer's graph.

    python bench/attention.py [--presets edge16 mid32 dc128] [--cases prefill128 ...]

before: ``compile_model(attention="unfused")``, the chain's layers as without the fuse_attention pass (the same
programs); after: the FusedAttention program. Prefill of P tokens: 4P rows per KV head, keys 0..P-1, causal; decode
with a context of C: 4 rows per KV head (one new token), C + 1 keys, no mask.
"""

from __future__ import annotations

import argparse

import onnx
from onnx import utils

from isa.arch import load_arch, presets_by_size
from npusim.app.driver import run_model
from npusim.app.llm.configs import llm_config
from npusim.app.llm.decoder import layer_model

CASES = {"prefill128": (128, 0), "prefill512": (512, 0), "decode512": (1, 512), "decode2048": (1, 2048)}
"""name -> (new tokens, cached tokens) of the step."""
CHAIN = (["layer.attn.q.grouped", "present_key", "present_value"], ["layer.attn.context"])
"""The attention chain's inputs (grouped queries, the keys transposed, the values) and output in a layer's graph."""


def attention_graph(q: int, past: int) -> onnx.ModelProto:
    """llama-3.2-1b's attention of a step of ``q`` new tokens over ``past`` cached ones, cut out of its layer graph
    (int4 weights: the layer is built only to be cut)."""
    layer = onnx.shape_inference.infer_shapes(layer_model(llm_config("llama-3.2-1b"), "i4", 1, q, past))
    return utils.Extractor(layer).extract_model(*CHAIN)


def measure(model: onnx.ModelProto, preset: str, mode: str) -> tuple[int, int]:
    """(cycles, DRAM bytes) of ``model`` on ``preset`` with the attention lowered ``mode``."""
    _, result, _, _ = run_model(model, load_arch(preset), timing_only=True, attention=mode)
    return result.cycles, result.dram_bytes_read + result.dram_bytes_written


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", nargs="+", default=list(presets_by_size()))
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    args = ap.parse_args()
    print("| preset | case | cycles before | cycles after | speedup | DRAM MB before | DRAM MB after | bytes ratio |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for case in args.cases:
        model = attention_graph(*CASES[case])
        for preset in args.presets:
            (c0, b0), (c1, b1) = measure(model, preset, "unfused"), measure(model, preset, "fused")
            print(f"| {preset} | {case} | {c0:,} | {c1:,} | {c0 / c1:.2f}x | {b0 / 1e6:,.2f} | {b1 / 1e6:,.2f} | "
                  f"{b0 / b1:.1f}x |", flush=True)


if __name__ == "__main__":
    main()
