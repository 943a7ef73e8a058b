"""The KV cache bound in place (compiler/passes/kv_cache.py, compiler/ops/kv_cache.py): a decode step's
``present = Concat(past, new)`` writes only the new tokens, its values equal onnxruntime's, and the report says so."""

import numpy as np
import pytest

from compiler.frontend.builder import GraphBuilder, to_onnx
from isa.arch import load_arch
from npusim.app.driver import run_model


def _step(past: int, batch: int = 1, heads: int = 2, dim: int = 8, new: int = 1, past_read_too: bool = False):
    """Attention scores of ``new`` query tokens over the past plus new keys, returning the present keys too."""
    b = GraphBuilder("kv_step")
    pk = b.input("past_key", (batch, heads, past, dim))
    k = b.input("k", (batch, heads, new, dim))
    q = b.input("q", (batch, heads, new, dim))
    present = b.concat([pk, k], axis=2, name="present_key")
    scores = b.matmul(q, b.transpose(present, (0, 1, 3, 2)), name="scores")
    if past_read_too:   # the past read by another node too: no in-place binding
        scores = b.add(scores, b.reduce_sum(b.reduce_sum(pk, [2, 3]), [1], keepdims=True), name="plus")
    b.output(scores, present)
    return to_onnx(b.build())


def _append_layer(report: dict) -> dict:
    return next(layer for layer in report["layers"] if layer["name"] == "present_key")


@pytest.mark.parametrize("arch", ["edge16", "mid32", "dc128"])
def test_decode_step_appends_in_place_and_matches_onnxruntime(arch):
    _, _, _, report = run_model(_step(37, batch=2, heads=4, dim=16), load_arch(arch), validate=True, cache=False)
    assert all(v["ok"] for v in report["validation"].values()), report["validation"]
    new = 2 * 4 * 1 * 16 * 4
    assert report["kv_cache"] == [{"past": "past_key", "present": "present_key", "bytes": 2 * 4 * 38 * 16 * 4,
                                   "appended_bytes": new}]
    layer = _append_layer(report)
    assert layer["op"] == "KVAppend" and layer["dram_bytes"] == 2 * new   # the new keys read once, written once


def test_a_step_writes_the_new_tokens_not_the_cache():
    """From one context to the next the append moves the same bytes; a Concat copy would move the whole cache."""
    moved = [_append_layer(run_model(_step(t), load_arch("mid32"), timing_only=True, cache=False)[3])["dram_bytes"]
             for t in (16, 17, 256)]
    assert moved == [2 * 2 * 8 * 4] * 3
    _, _, _, report = run_model(_step(256, past_read_too=True), load_arch("mid32"), validate=True, cache=False)
    assert report["kv_cache"] == [] and all(v["ok"] for v in report["validation"].values())
    copy = _append_layer(report)
    assert copy["op"] == "Concat" and copy["dram_bytes"] == 2 * (2 * 257 * 8 * 4)   # the whole present read and written


def test_prefill_into_an_empty_cache_matches_onnxruntime():
    """A prefill writes its tokens into an empty past (length 0): no past values, the whole present appended."""
    _, _, outputs, report = run_model(_step(0, new=5), load_arch("mid32"), validate=True, cache=False)
    assert all(v["ok"] for v in report["validation"].values())
    assert outputs["present_key"].shape == (1, 2, 5, 8) and np.isfinite(outputs["present_key"]).all()
