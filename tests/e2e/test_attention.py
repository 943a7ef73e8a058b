"""The fused attention end to end: small attention graphs in every form the pass takes match onnxruntime on every
preset (float32, within 1e-5 of the output's largest magnitude: the online softmax sums in another order), the
unfused lowering too, and a prefill's DRAM traffic is its Q, K, V and O, not the [Lq x Lk] scores."""

import numpy as np
import pytest

from isa.arch import load_arch, presets_by_size
from npusim.app.driver import ort_session, run_model
from tests.e2e.attention_graphs import attention_inputs, attention_model, causal_mask

PRESETS = presets_by_size()
TOLERANCE = 1e-5
RNG = np.random.default_rng(7)
CASES = {   # (batch, heads, Lq, Lk, d, mask, scale, K form, K/V heads)
    "decode-row": (1, 2, 1, 7, 8, None, "div", "transposed", None),
    "causal-transpose": (2, 2, 5, 7, 16, "causal", "mul", "transpose", None),
    "causal-33x40": (1, 4, 33, 40, 16, "causal", "div", "transposed", None),
    "mul-first-transpose": (2, 3, 33, 40, 8, None, "mul_first", "transpose", None),
    "one-key": (1, 2, 5, 1, 8, None, "div", "transposed", None),
    "finite-mask-empty-rows": (1, 2, 33, 7, 8, "finite", "mul", "transposed", None),
    "per-head-mask-shared-kv": (1, 2, 5, 40, 16, "random", "div", "transposed", 1),
    "mqa-causal": (2, 4, 33, 40, 16, "causal", "mul", "transpose", 1),
    "no-scale": (1, 1, 5, 7, 8, None, None, "transposed", None),
}


def _mask(kind, heads, lq, lk):
    if kind == "causal":
        return causal_mask(lq, lk)
    if kind == "finite":   # HF's finfo.min; with Lq > Lk the first rows see no key at all (uniform weights)
        return causal_mask(lq, lk, float(np.finfo(np.float32).min))
    if kind == "random":   # an ALiBi-like bias per head: nothing to skip, every block added
        return RNG.standard_normal((1, heads, lq, lk)).astype(np.float32)
    return None


def _model(case):
    batch, heads, lq, lk, d, mask, scale, k_form, kv = CASES[case]
    return attention_model(batch, heads, lq, lk, d, scale=scale, mask=_mask(mask, heads, lq, lk), k_form=k_form,
                           kv_heads=kv)


def _run(model, preset, **options):
    inputs = attention_inputs(model, seed=3)
    compiled, result, outputs, report = run_model(model, load_arch(preset), inputs, **options)
    want = ort_session(model).run(None, inputs)[0]
    return compiled, result, outputs["out"], want, report


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("case", list(CASES))
def test_fused_attention_matches_onnxruntime(case, preset):
    compiled, _, got, want, report = _run(_model(case), preset)
    assert [n.op for n in compiled.graph.nodes if n.op != "Transpose"] == ["FusedAttention"]
    assert report["host_ops"] == []
    assert np.abs(got - want).max() <= TOLERANCE * np.abs(want).max()


def test_rows_masked_everywhere_are_nan_as_in_onnxruntime():
    # -inf everywhere in the first rows: onnxruntime's Softmax gives NaN there, and so does the fused kernel (its
    # blocks are kept, l = 0); the other rows are numbers that match
    model = attention_model(1, 2, 9, 4, 8, scale="mul", mask=causal_mask(9, 4))
    _, _, got, want, _ = _run(model, "mid32")
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.isnan(want).any()
    ok = ~np.isnan(want)
    assert np.abs(got[ok] - want[ok]).max() <= TOLERANCE * np.abs(want[ok]).max()


def test_the_unfused_lowering_is_the_layers_as_they_were():
    model = _model("causal-33x40")
    compiled, _, got, want, _ = _run(model, "edge16", attention="unfused")
    assert np.abs(got - want).max() <= TOLERANCE * np.abs(want).max()
    names = {lr.name.split(".")[0] for lr in compiled.layers}
    assert names == {"scores_mm", "mask", "softmax", "context"}   # the Div rides in the scores' epilogue


def _layer_bytes(report, op):
    return sum(lr["dram_bytes"] for lr in report["layers"] if lr["op"] == op)


def test_prefill_dram_bytes_are_q_k_v_and_o_not_the_scores():
    # Lq = Lk = 256, 2 heads of 32, causal: the fused layer reads Q, K, V (each once when a head's keys stay in the
    # SPM, once per query tile otherwise) and writes O; the unfused layers write and read the 2 x 256 x 256 scores
    # several times
    n, L, d = 2, 256, 32
    model = attention_model(1, n, L, L, d, scale="mul", mask=causal_mask(L, L))
    _, fused, _, _, report = _run(model, "mid32")
    _, unfused, _, _, unfused_report = _run(model, "mid32", attention="unfused")
    qkvo, scores = 4 * n * L * d * 4, n * L * L * 4
    got = _layer_bytes(report, "FusedAttention")
    assert qkvo <= got <= 1.5 * qkvo
    assert sum(lr["dram_bytes"] for lr in unfused_report["layers"]) >= qkvo + 4 * scores
    assert fused.cycles < unfused.cycles


def test_single_buffering_leaves_the_fused_attentions_rings():
    # buffers=1 makes every *_empty ring one deep; the fused program's order needs its rings (its loads and the next
    # block's scores run ahead), which are *_free: it runs as with double buffering and matches
    model = _model("causal-33x40")
    inputs = attention_inputs(model, seed=3)
    base, _, _, _ = run_model(model, load_arch("mid32"), inputs, timing_only=True)
    single, _, got, _ = run_model(model, load_arch("mid32"), inputs, buffers=1)
    want = ort_session(model).run(None, inputs)[0]
    assert np.abs(got["out"] - want).max() <= TOLERANCE * np.abs(want).max()
    assert single.program.sems == base.program.sems and not any(s.name.endswith("_empty") for s in base.program.sems)
