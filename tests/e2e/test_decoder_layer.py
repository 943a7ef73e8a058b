"""A tiny Llama decoder layer in the dynamo exporter's form (tests/e2e/decoder_layer.py), prefill and decode steps,
runs on the NPU equal to onnxruntime with ``repeat_kv`` never materialised."""

import pytest

from compiler.frontend.onnx_import import import_onnx
from compiler.passes import run_passes
from tests.e2e.decoder_layer import HEAD, HEADS, KV_HEADS, decoder_layer, step_inputs
from tests.e2e.decoder_ops import PRESETS, check


@pytest.mark.parametrize("arch", PRESETS)
@pytest.mark.parametrize("batch, seq, past", [(1, 5, 0), (1, 1, 3)], ids=["prefill", "decode"])
def test_the_dynamo_decoder_layer_runs_on_the_npu(arch, batch, seq, past):
    check(decoder_layer(batch, seq, past), step_inputs(batch, seq, past), arch)


@pytest.mark.parametrize("batch, seq, past", [(2, 1, 3), (2, 5, 3)])
def test_a_batch_of_steps(batch, seq, past):
    check(decoder_layer(batch, seq, past), step_inputs(batch, seq, past))


def test_repeat_kv_is_never_materialised():
    graph = run_passes(import_onnx(decoder_layer(1, 5, 3)))
    ops = graph.op_counts()
    assert "Expand" not in ops and ops["RMSNormalization"] == 2
    # both attention GEMMs take a kv head's group of query heads as rows: (B, Hkv, G * S, HEAD or T)
    total, rows = 5 + 3, HEADS // KV_HEADS * 5
    grouped = [n for n in graph.nodes if n.op == "MatMul" and graph.tensor(n.inputs[0]).rank == 4]
    assert [graph.tensor(n.inputs[0]).shape for n in grouped] == [(1, KV_HEADS, rows, HEAD), (1, KV_HEADS, rows,
                                                                                              total)]
    # the key's transpose runs on the Hkv heads of the cache
    kt = [n for n in graph.nodes if n.op == "Transpose" and n.attrs["perm"] == (0, 1, 3, 2)]
    assert [graph.tensor(n.outputs[0]).shape for n in kt] == [(1, KV_HEADS, HEAD, total)]


def test_a_decode_steps_head_transposes_are_free():
    graph = run_passes(import_onnx(decoder_layer(1, 1, 3)))
    assert [graph.tensor(n.inputs[0]).shape for n in graph.nodes if n.op == "Transpose"] == \
        [(1, KV_HEADS, 4, HEAD)]   # only the key cache's
