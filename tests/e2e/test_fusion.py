"""Exporter patterns fused end to end: models written as torch.onnx.export writes them (opsets 11 to 18) run with
every pattern fused on the NPU and match onnxruntime on every preset; fused nodes forced to the host still validate;
the BERT layer's table has no Gelu, bias or residual layers left."""

from dataclasses import replace

import numpy as np
import pytest
from onnx import helper

from compiler.compile import compile_model, run_passes
from compiler.errors import UnsupportedOpError
from isa.arch import load_arch, presets_by_size
from npusim.app.driver import host_functions, load_model, ort_session, run_model
from npusim.app.zoo import MODELS
from npusim.sim.simulator import simulate

from .export_style import encoder_block

PRESETS = presets_by_size()
FUSED = {"MatMul": 6, "Reshape": 4, "Transpose": 4, "LayerNormalization": 2, "FusedAttention": 1}


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("opset,act,stable", [(11, "gelu", True), (13, "gelu_tanh", False), (17, "silu", True),
                                              (18, "gelu", True)])
def test_exported_block_runs_fused_on_the_npu(preset, opset, act, stable):
    m = encoder_block(opset, act, stable)
    compiled, result, _, report = run_model(m, load_arch(preset), validate=True)
    assert report["host_ops"] == []
    assert compiled.graph.op_counts() == FUSED
    mlp = [n for n in compiled.graph.nodes if n.name == "/mlp/fc1/MatMul"][0]
    assert mlp.attrs == {"bias": True, "activation": ({"gelu_tanh": ("gelu_tanh",), "silu": ("silu",)}
                                                      .get(act, ("gelu",)))}
    check = report["validation"]["/Add_1_output_0"]
    assert check["max_rel_error"] <= 1e-5, check
    _, unfused, _, _ = run_model(m, load_arch(preset), timing_only=True, fuse=False)
    assert result.cycles < unfused.cycles


@pytest.mark.parametrize("opset,act", [(13, "gelu_tanh"), (17, "silu"), (18, "gelu")])
def test_fused_nodes_forced_to_the_host_validate(opset, act):
    # every node a fusion made (LayerNormalization, FusedAttention (with the Softmax fuse_softmax made in it),
    # MatMul with a bias, residual or activation) runs on the host: compiler.frontend.builder.to_onnx writes it back
    # as the nodes it stands for, at the model's opset
    m = encoder_block(opset, act)
    graph = run_passes(load_model(m))
    made = [n for n in graph.nodes if n.source is None]
    assert {n.op for n in made} == {"LayerNormalization", "FusedAttention", "MatMul"}
    forced = replace(graph, nodes=tuple(replace(n, unsupported="forced") if n.source is None else n
                                        for n in graph.nodes))
    arch = load_arch("mid32")
    compiled = compile_model(forced, arch)
    assert len(compiled.host_ops) == len(made)
    x = np.random.default_rng(1).standard_normal((1, 16, 32)).astype(np.float32)
    res = simulate(compiled.program, arch, compiled.dram_inputs({"input": x}), host_functions=host_functions(compiled))
    got = compiled.read_outputs(res.outputs["ACT"])["/Add_1_output_0"]
    want = ort_session(m).run(None, {"input": x})[0]
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()


def test_bert_layer_table_has_no_gelu_bias_or_residual_layers():
    compiled = compile_model(load_model(MODELS["bert_layer"]()), load_arch("mid32"))
    layers = [(lr.name, lr.op) for lr in compiled.layers]
    assert {op for _, op in layers} == {"MatMul", "Transpose", "FusedAttention", "LayerNormalization"}
    p = "layer0."
    assert [name for name, op in layers if op == "MatMul"] == [
        p + "attention.query.matmul", p + "attention.key.matmul", p + "attention.value.matmul",
        p + "attention.output.matmul", p + "mlp.fc1.matmul", p + "mlp.fc2.matmul"]
    fused = {n.name: n.attrs for n in compiled.graph.nodes if n.op in ("MatMul", "FusedAttention")}
    assert fused[p + "mlp.fc1.matmul"] == {"bias": True, "activation": ("gelu",)}
    assert fused[p + "mlp.fc2.matmul"] == fused[p + "attention.output.matmul"] == {"bias": True, "residual": True}
    assert fused[p + "attention.context"] == {"scale": 8.0, "divide": 1, "parts": (
        p + "attention.scores", p + "attention.scale", "", p + "attention.softmax")}


def test_fusion_saves_cycles_on_a_small_bert_layer():
    m, arch = MODELS["bert_layer"](seq=32, hidden=128, heads=2, ffn=512), load_arch("mid32")
    _, fused, _, report = run_model(m, arch, validate=True)
    _, unfused, _, _ = run_model(m, arch, timing_only=True, fuse=False)
    assert report["validation"]["layer0.mlp.norm"]["max_rel_error"] <= 1e-5
    assert fused.cycles < 0.8 * unfused.cycles


def test_no_fallback_accepts_what_fusion_removes():
    # the fusion passes turn an exported LayerNorm's Pow and Sqrt and a softmax's Exp into fused ops: --no-fallback
    # compiles the model; an op the NPU does not have is still refused
    arch = load_arch("edge16")
    compiled, _, _, report = run_model(encoder_block(17, "gelu"), arch, timing_only=True, fallback=False)
    assert report["host_ops"] == [] and "Pow" not in compiled.graph.op_counts()
    m = encoder_block(17, "gelu")
    m.graph.node.append(helper.make_node("Sin", ["/Add_1_output_0"], ["z"], name="sin"))   # an op the NPU lacks
    m.graph.output[0].name = "z"
    with pytest.raises(UnsupportedOpError, match=r"^node 'sin' \(Sin\)"):
        load_model(m, fallback=False)


def _fc(K: int, N: int, extra=None):
    """x[8 or 1, K] @ W + bias (then ``extra(b, t)``), built in Python."""
    from compiler.frontend.builder import GraphBuilder

    rng = np.random.default_rng(K)
    b = GraphBuilder("fc")
    x = b.input("x", (1 if extra is None else 8, K))
    t = b.matmul(x, (rng.standard_normal((K, N)) / np.sqrt(K)).astype(np.float32), name="mm")
    if extra is None:
        t = b.add(t, rng.standard_normal(N).astype(np.float32), name="y")
    else:
        t = extra(b, x, t, rng.standard_normal(N).astype(np.float32))
    b.output(t)
    return b.build()


def test_the_epilogue_is_taken_where_it_is_predicted_faster():
    # ResNet-50's classifier shape on edge16: the bias takes SPM the best tiles need, and the fused GEMM with smaller
    # tiles is predicted slower than the plain one and a vector add, so the bias stays a step (the unfused cycles);
    # on mid32 it rides in the epilogue and saves cycles
    g = _fc(2048, 1000)
    for preset, layers in (("edge16", ["mm", "mm.bias"]), ("mid32", ["mm"])):
        compiled, res, _, report = run_model(g, load_arch(preset), validate=True)
        _, unfused, _, _ = run_model(g, load_arch(preset), timing_only=True, fuse=False)
        assert [lr.name for lr in compiled.layers] == layers and report["validation"]["y"]["ok"]
        assert res.cycles == unfused.cycles if preset == "edge16" else res.cycles < unfused.cycles


@pytest.mark.parametrize("kind", ["divisor_bias_tanh_gelu", "bias_residual_silu"])
def test_an_epilogue_that_does_not_fit_becomes_vector_steps(kind):
    # a 32 KiB bias on a 32 KiB SPM: no GEMM tiling has room for it, so each fused step is a vector pass of its own,
    # in the fused order, and the values still match onnxruntime
    def divisor_bias_tanh_gelu(b, x, t, bias):
        return b.gelu(b.add(b.div(t, np.float32(2.0)), bias), "tanh", name="y")

    def bias_residual_silu(b, x, t, bias):
        r = b.relu(b.matmul(x, np.full((b.shape(x)[1], 8192), 0.01, np.float32)))
        t = b.add(b.add(t, bias), r)
        return b.mul(t, b.sigmoid(t), name="y")

    build = {"divisor_bias_tanh_gelu": divisor_bias_tanh_gelu, "bias_residual_silu": bias_residual_silu}[kind]
    compiled, _, _, report = run_model(_fc(64, 8192, build), load_arch("edge16", ["spm.size=32768"]), validate=True)
    steps = [lr.name for lr in compiled.layers if lr.name.startswith("mm")]
    assert steps == {"divisor_bias_tanh_gelu": ["mm", "mm.div", "mm.bias", "mm.gelu_tanh"],
                     "bias_residual_silu": ["mm", "mm.bias", "mm.residual", "mm.silu"]}[kind]
    assert report["validation"]["y"]["max_rel_error"] <= 1e-5
