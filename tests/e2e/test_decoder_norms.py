"""RMS normalisation of decoders on the NPU, equal to onnxruntime: ONNX RMSNormalization (opset 23), onnxruntime's
SimplifiedLayerNormalization (default domain) and com.microsoft.SkipSimplifiedLayerNormalization with its optional
outputs, and the exporters' written-out RMSNorm fused into one pass."""

import numpy as np
import pytest
from onnx import helper

from compiler.frontend.onnx_import import import_onnx
from compiler.passes import run_passes
from isa.arch import load_arch
from npusim.app.driver import run_model
from tests.e2e.decoder_ops import F32, PRESETS, check, model

rng = np.random.default_rng(7)
X = rng.standard_normal((2, 5, 16)).astype(np.float32)
SCALE = rng.standard_normal(16).astype(np.float32)


@pytest.mark.parametrize("arch", PRESETS)
def test_rms_normalization_runs_on_the_npu_on_every_preset(arch):
    m = model([helper.make_node("RMSNormalization", ["x", "s"], ["y"], epsilon=1e-6)], [("x", F32, [2, 5, 16])],
              [("y", F32, [2, 5, 16])], {"s": SCALE})
    compiled, _ = check(m, {"x": X}, arch)
    assert [lr.op for lr in compiled.layers] == ["RMSNormalization"]


def test_rms_normalization_over_several_axes_with_a_broadcast_scale():
    m = model([helper.make_node("RMSNormalization", ["x", "s"], ["y"], axis=1)], [("x", F32, [2, 5, 16])],
              [("y", F32, [2, 5, 16])], {"s": rng.standard_normal((5, 1)).astype(np.float32)})
    check(m, {"x": X})


def test_onnxruntimes_simplified_layer_normalization_in_the_default_domain():
    m = model([helper.make_node("SimplifiedLayerNormalization", ["x", "s"], ["y"], epsilon=1e-5, axis=-1)],
              [("x", F32, [2, 5, 16])], [("y", F32, [2, 5, 16])], {"s": SCALE}, opset=17)
    compiled, _ = check(m, {"x": X}, "edge16")
    assert [lr.op for lr in compiled.layers] == ["SimplifiedLayerNormalization"]


@pytest.mark.parametrize("outputs, bias", [(["y"], False), (["y", "", "", "sum"], True),
                                           (["y", "mean", "inv_std_var", "sum"], True)])
def test_skip_simplified_layer_normalization_and_its_optional_outputs(outputs, bias):
    skip = rng.standard_normal((2, 5, 16)).astype(np.float32)
    node = helper.make_node("SkipSimplifiedLayerNormalization", ["x", "skip", "s"] + (["b"] if bias else []),
                            outputs, domain="com.microsoft", epsilon=1e-5)
    m = model([node], [("x", F32, [2, 5, 16]), ("skip", F32, [2, 5, 16])], [(o, F32, None) for o in outputs if o],
              {"s": SCALE, "b": rng.standard_normal(16).astype(np.float32)}, opset=17, contrib=True)
    assert "SimplifiedLayerNormalization" in [n.op for n in import_onnx(m).nodes]
    check(m, {"x": X, "skip": skip}, "dc128" if bias else "mid32")


def _written_out(form: str, opset: int, weight: bool = True):
    """LlamaRMSNorm as exporters write it: Pow (or Mul) / ReduceMean / Add / Sqrt and Reciprocal + Mul, Div, or
    Div(1, .) + Mul; times the weight."""
    inits = {"two": np.float32(2), "eps": np.float32(1e-6), "one": np.float32(1), "w": SCALE}
    nodes = [helper.make_node("Mul", ["x", "x"], ["sq"]) if form == "mul" else
             helper.make_node("Pow", ["x", "two"], ["sq"])]
    if opset >= 18:
        inits["axes"] = np.array([-1], np.int64)
        nodes.append(helper.make_node("ReduceMean", ["sq", "axes"], ["ms"], keepdims=1))
    else:
        nodes.append(helper.make_node("ReduceMean", ["sq"], ["ms"], axes=[-1], keepdims=1))
    nodes += [helper.make_node("Add", ["ms", "eps"], ["me"]), helper.make_node("Sqrt", ["me"], ["r"])]
    nodes += {"div": [helper.make_node("Div", ["x", "r"], ["n"])],
              "div1": [helper.make_node("Div", ["one", "r"], ["i"]), helper.make_node("Mul", ["x", "i"], ["n"])]
              }.get(form, [helper.make_node("Reciprocal", ["r"], ["i"]), helper.make_node("Mul", ["i", "x"], ["n"])])
    if weight:
        nodes.append(helper.make_node("Mul", ["w", "n"], ["y"]))
    return model(nodes, [("x", F32, [2, 5, 16])], [("y" if weight else "n", F32, [2, 5, 16])], inits, opset)


@pytest.mark.parametrize("form, opset", [("reciprocal", 18), ("div", 17), ("div1", 18), ("mul", 17)])
def test_the_exporters_rms_norm_is_fused_into_one_pass(form, opset):
    m = _written_out(form, opset)
    assert [n.op for n in run_passes(import_onnx(m)).nodes] == ["RMSNormalization"]
    check(m, {"x": X})


def test_an_rms_norm_without_weight_is_fused_with_unit_scale():
    m = _written_out("reciprocal", 18, weight=False)
    assert [n.op for n in run_passes(import_onnx(m)).nodes] == ["RMSNormalization"]
    check(m, {"x": X})


def test_an_rms_norm_whose_mean_square_is_read_elsewhere_stays_as_it_is():
    m = _written_out("reciprocal", 18)
    m.graph.output.append(helper.make_tensor_value_info("ms", F32, None))
    assert "RMSNormalization" not in [n.op for n in run_passes(import_onnx(m)).nodes]
    check(m, {"x": X})


def test_the_fused_rms_norm_makes_one_dram_pass_instead_of_seven():
    # llama-3.2-1b's hidden size, a decode step: one vector pass reads x once and writes y once
    m = _written_out("reciprocal", 18)
    m.graph.input[0].type.tensor_type.shape.dim[2].dim_value = 2048
    m.graph.output[0].type.tensor_type.shape.dim[2].dim_value = 2048
    w = next(i for i in m.graph.initializer if i.name == "w")
    w.CopyFrom(helper.make_tensor("w", F32, [2048], np.ones(2048, np.float32)))
    arch = load_arch("mid32")
    fused = run_model(m, arch, timing_only=True, cache=False)
    unfused = run_model(m, arch, timing_only=True, cache=False, fuse=False)
    assert len(fused[0].layers) == 1 and len(unfused[0].layers) == 7
    moved = [r[1].dram_bytes_read + r[1].dram_bytes_written for r in (fused, unfused)]
    assert moved[0] < moved[1] / 2
    assert fused[1].cycles < unfused[1].cycles / 2
