"""A tiny Llama decoder layer in the dynamo exporter's form (tests/e2e/decoder_layer.py), prefill and decode steps,
runs on the NPU equal to onnxruntime with ``repeat_kv`` never materialised; optimum's merged decoder (an If on
``use_cache_branch``) compiles the branch of the step given as a constant and refuses a run-time condition."""

import numpy as np
import pytest
from onnx import helper, numpy_helper

from compiler.errors import UnsupportedOpError
from compiler.frontend.onnx_import import import_onnx
from compiler.passes import run_passes
from npusim.app.onnx_backend import NpuBackend, bind_constants
from tests.e2e.decoder_layer import HEAD, HEADS, KV_HEADS, decoder_layer, step_inputs
from tests.e2e.decoder_ops import BOOL, F32, PRESETS, check, model


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


# -- optimum's merged decoder ---------------------------------------------------------------------------------------

def _merged():
    """A main graph whose If on ``use_cache_branch`` computes y and the present key from the past (then) or without
    it (else), as optimum merges a decoder with and without past."""
    rng = np.random.default_rng(3)
    w1, w2 = (rng.standard_normal((8, 8)).astype(np.float32) for _ in range(2))
    then = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["t_y"]), helper.make_node("Reshape", ["t_y", "shape"], ["t_k"]),
         helper.make_node("Concat", ["past", "t_k"], ["t_present"], axis=2)], "with_past", [],
        [helper.make_tensor_value_info(n, F32, None) for n in ("t_y", "t_present")], [numpy_helper.from_array(w1,
                                                                                                          "w1")])
    other = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w2"], ["e_y"]), helper.make_node("Reshape", ["e_y", "shape"],
                                                                            ["e_present"])], "without_past", [],
        [helper.make_tensor_value_info(n, F32, None) for n in ("e_y", "e_present")], [numpy_helper.from_array(w2,
                                                                                                            "w2")])
    node = helper.make_node("If", ["use_cache_branch"], ["y", "present"], then_branch=then, else_branch=other,
                            name="optimum_if")
    m = model([node], [("x", F32, [1, 3, 8]), ("past", F32, [1, 2, 2, 4]), ("use_cache_branch", BOOL, [1])],
              [("y", F32, [1, 3, 8]), ("present", F32, [1, 2, "total", 4])],
              {"shape": np.array([1, 2, 3, 4], np.int64)}, opset=17)
    feeds = {"x": rng.standard_normal((1, 3, 8)).astype(np.float32),
             "past": rng.standard_normal((1, 2, 2, 4)).astype(np.float32)}
    return m, feeds


@pytest.mark.parametrize("use_cache", [True, False])
def test_an_if_on_use_cache_branch_given_as_a_constant_is_inlined(use_cache):
    m, feeds = _merged()
    step = bind_constants(m, {"use_cache_branch": np.array([use_cache])})
    graph = import_onnx(step)
    assert [n.op for n in graph.nodes] == (["MatMul", "Reshape", "Concat"] if use_cache else ["MatMul", "Reshape"])
    assert graph.tensor("present").shape == (1, 2, 5 if use_cache else 3, 4)
    check(step, feeds)
    # the ONNX backend binds a bool input as a constant of each run
    rep = NpuBackend.prepare(m, fallback=False)
    rep.run({**feeds, "use_cache_branch": np.array([use_cache])})
    assert rep.report["host_ops"] == []


def test_an_if_on_a_run_time_condition_is_refused_in_one_line():
    m, _ = _merged()
    with pytest.raises(UnsupportedOpError, match=r"^node 'optimum_if' \(If\): its condition 'use_cache_branch' is "
                                                 r"a graph input; a program takes one branch, chosen when compiling: "
                                                 r"bind it as a constant for the step being compiled [^\n]*"
                                                 r"bind_constants\(model, \{'use_cache_branch': value\}\)"):
        import_onnx(m, allow_unknown=True)
