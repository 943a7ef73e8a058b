"""Architecture sweeps (npusim.sweep), the per-layer check against onnxruntime and the fuse/buffers compile options."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from compiler.builder import GraphBuilder, to_onnx
from compiler.errors import CompileError
from compiler.zoo import bert_layer, resnet18
from isa.arch import load_arch
from npusim.driver import check_layers, run_model
from npusim.sweep import grid_points, pareto, sweep, table

ARCH = load_arch("mid32")


def _pt(area, cycles, tag=""):
    return {"area": area, "cycles": cycles, "tag": tag, "error": None}


def test_pareto_keeps_exactly_the_undominated_points():
    pts = [_pt(4, 10, "a"), _pt(1, 50, "b"), _pt(2, 50, "dominated by b"), _pt(2, 20, "c"), _pt(8, 10, "worse a"),
           _pt(3, 30, "dominated by c"), {"area": None, "cycles": None, "tag": "error", "error": "no fit"}]
    assert [p["tag"] for p in pareto(pts, "area", "cycles")] == ["b", "c", "a"]
    # brute force: p is on the front iff no other point is <= on both and < on one
    ok = [p for p in pts if p["area"] is not None]
    front = [p for p in ok if not any(q["area"] <= p["area"] and q["cycles"] <= p["cycles"] and
                                      (q["area"], q["cycles"]) != (p["area"], p["cycles"]) for q in ok)]
    assert sorted(p["tag"] for p in front) == sorted(p["tag"] for p in pareto(pts, "area", "cycles"))


def test_grid_points_are_the_cartesian_product_with_joint_keys():
    pts = grid_points({"matrix.rows,matrix.cols": [8, 16], "dram.bandwidth": [4.0, 8.0, 16.0]})
    assert len(pts) == 6
    assert pts[0] == ["matrix.rows=8", "matrix.cols=8", "dram.bandwidth=4.0"]
    assert pts[-1] == ["matrix.rows=16", "matrix.cols=16", "dram.bandwidth=16.0"]


def _mlp():
    b = GraphBuilder("mlp")
    rng = np.random.default_rng(1)
    x = b.input("x", (8, 64), np.float32)
    h = b.relu(b.matmul(x, b.const("w1", rng.standard_normal((64, 96), np.float32) / 8), name="fc1"), name="act")
    b.output(b.matmul(h, b.const("w2", rng.standard_normal((96, 32), np.float32) / 10), name="fc2"))
    return to_onnx(b.build())


def test_sweep_runs_every_point_and_reports_an_arch_that_cannot_hold_the_model_as_an_error():
    grid = {"matrix.rows,matrix.cols": [8, 16], "spm.size": [256, 65536]}
    pts = sweep(_mlp(), ARCH, grid, scheduler="threads", progress=False)
    assert [p["overrides"] for p in pts] == grid_points(grid)
    bad, good = [p for p in pts if p["error"]], [p for p in pts if not p["error"]]
    assert [p["overrides"][-1] for p in bad] == ["spm.size=256"] * 2 and "SPM" in bad[0]["error"]
    assert all(p["cycles"] is None for p in bad)
    for p in good:
        n = int(p["overrides"][0].split("=")[1])
        assert p["macs"] == n * n and p["sram_bytes"] == 65536 + ARCH.acc.size
        res = run_model(_mlp(), ARCH.with_overrides(p["overrides"]), timing_only=True)[1]
        assert p["cycles"] == res.cycles   # the same as running the point alone
        assert p["matrix_utilization"] == pytest.approx((8 * 64 * 96 + 8 * 96 * 32) / (res.cycles * n * n))
    assert "error: TilingError" in table(pts)


def test_check_layers_compares_the_intermediates_both_sides_have():
    rows = check_layers(_mlp(), ARCH)
    # fusion is for Conv/Add producers only, so fc1's output, act and fc2 all exist on both sides
    assert [r["tensor"] for r in rows] == ["fc1", "act", "fc2"]
    assert all(r["ok"] and r["max_rel_error"] < 1e-5 for r in rows)
    assert rows[0]["shape"] == (8, 96)


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
