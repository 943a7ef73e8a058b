"""The per-layer check against onnxruntime, the fuse/buffers compile options and the zoo size arguments (the sweep
itself: tests/sweep/)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from compiler.errors import CompileError
from compiler.frontend.builder import GraphBuilder, to_onnx
from isa.arch import load_arch
from npusim.app.driver import check_layers, run_model
from npusim.app.zoo import bert_layer, resnet18

ARCH = load_arch("mid32")


def _mlp():
    b = GraphBuilder("mlp")
    rng = np.random.default_rng(1)
    x = b.input("x", (8, 64), np.float32)
    h = b.relu(b.matmul(x, b.const("w1", rng.standard_normal((64, 96), np.float32) / 8), name="fc1"), name="act")
    b.output(b.matmul(h, b.const("w2", rng.standard_normal((96, 32), np.float32) / 10), name="fc2"))
    return to_onnx(b.build())


def test_check_layers_compares_the_intermediates_both_sides_have():
    rows = check_layers(_mlp(), ARCH)
    # fuse_matmul takes the activation into fc1's GEMM epilogue, so fc1's pre-activation output exists only in
    # onnxruntime: act and fc2 are on both sides
    assert [r["tensor"] for r in rows] == ["act", "fc2"]
    assert all(r["ok"] and r["max_rel_error"] < 1e-5 for r in rows)
    assert rows[0]["shape"] == (8, 96)   # act: fc1 and its activation


def test_check_layers_skips_fused_tensors():
    m = resnet18(image=32, width=8, classes=10)
    fused = {r["tensor"] for r in check_layers(m, ARCH)}
    unfused = check_layers(m, ARCH, fuse=False)
    assert "conv1.bn" in {r["tensor"] for r in unfused} and "conv1.bn" not in fused   # Relu fused into the conv
    assert all(r["ok"] for r in unfused)
    # the reference side is onnxruntime on the original model: the check agrees with it on an output tensor
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    want = sess.run(None, {"x": x})[0]
    got = run_model(m, ARCH, {"x": x})[2]["fc"]
    assert np.abs(got - want).max() / np.abs(want).max() < 1e-3


def test_single_buffering_and_no_fusion_cost_cycles_but_not_correctness():
    m = resnet18(image=64, width=8, classes=10)   # at 32x32 every conv is one tile: nothing to overlap
    base = run_model(m, ARCH, validate=True)
    single = run_model(m, ARCH, validate=True, buffers=1)
    unfused = run_model(m, ARCH, validate=True, fuse=False)
    assert all(v["ok"] for r in (base, single, unfused) for v in r[3]["validation"].values())
    assert single[1].cycles > base[1].cycles
    assert unfused[1].cycles > base[1].cycles
    assert len(unfused[0].layers) > len(base[0].layers)   # every Relu after a conv is a layer of its own
    assert single[0].program.instrs == base[0].program.instrs   # same tiles, only the ring depth differs
    assert {s.name: s.init for s in single[0].program.sems if "empty" in s.name} == \
        {s.name: 1 for s in base[0].program.sems if "empty" in s.name}
    with pytest.raises(CompileError, match="buffers must be 1"):
        run_model(m, ARCH, buffers=3)


def test_zoo_size_arguments_keep_the_default_models():
    assert bert_layer().SerializeToString() == bert_layer(seq=128, hidden=768, heads=12, ffn=3072).SerializeToString()
    small = bert_layer(seq=8, hidden=32, heads=2, ffn=64)
    assert [d.dim_value for d in small.graph.input[0].type.tensor_type.shape.dim] == [1, 8, 32]
    with pytest.raises(CompileError, match="multiple of heads"):
        bert_layer(hidden=30, heads=4)
