"""Resize, Upsample and AffineGrid on the NPU (compiler/kernels/resample.py) through the whole path on every preset:
compiled from ONNX at their opsets, simulated, and equal to onnxruntime bit for bit
(npusim.functional.sampling_reference is onnxruntime's float32 order, tested equal to it in
tests/functional/test_sampling_reference.py); none of them on the host, and no transpose segment around them between
convolutions."""

import numpy as np
import pytest
from onnx import helper, numpy_helper

from compiler.frontend.onnx_import import import_onnx
from isa import Gather
from isa.arch import load_arch, presets_by_size
from npusim.app.driver import run_model
from npusim.functional.sampling_reference import affine_grid, grid_sample, resize
from tests.compiler.util import model, ort_run, vi

PRESETS = presets_by_size()
RNG = np.random.default_rng(14)


def same_bits(a, b) -> bool:
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    return a.shape == b.shape and np.array_equal(a.view(np.int32), b.view(np.int32))


def _resize_model(shape, opset=19, scales=None, sizes=None, axes=None, **attrs):
    inits, names = [], ["x", ""]
    if scales is not None:
        inits.append(numpy_helper.from_array(np.array(scales, np.float32), "scales"))
        names.append("scales")
    else:
        names += ["", "sizes"]
        inits.append(numpy_helper.from_array(np.array(sizes, np.int64), "sizes"))
    if opset < 13:   # roi and scales are required inputs there (empty when unused)
        inits += [numpy_helper.from_array(np.zeros(0, np.float32), "roi")]
        names[1] = "roi"
        if scales is None:
            inits.append(numpy_helper.from_array(np.zeros(0, np.float32), "scales"))
            names[2] = "scales"
    if axes is not None:
        attrs["axes"] = axes
    node = helper.make_node("Resize", names, ["y"], **attrs)
    return model([node], [vi("x", list(shape))], [vi("y", None)], opset=opset, inits=inits)


def _on_npu(m, preset, inputs, ops=("Resize",)):
    """Run ``m`` validated on ``preset``: nothing on the host, the ops among the NPU's layers, the outputs
    within onnxruntime's exact values. (compiled, outputs)."""
    compiled, result, outputs, report = run_model(m, load_arch(preset), inputs, validate=True)
    assert report["host_ops"] == [], report["host_ops"]
    assert set(ops) <= {lr.op for lr in compiled.layers}
    for name, v in report["validation"].items():
        assert v["max_abs_error"] == 0, (name, v)
    return compiled, outputs


CLASS1 = [  # (shape, scales or sizes, attrs): power-of-two up, integer down, an unscaled axis, every mode that fits
    ((2, 24, 10, 12), dict(scales=[1, 1, 2, 2]), dict(mode="linear")),
    ((1, 5, 7, 6), dict(scales=[1, 1, 4, 8]), dict(mode="linear", coordinate_transformation_mode="asymmetric")),
    ((1, 40, 9, 8), dict(scales=[1, 1, 1, 2]),
     dict(mode="linear", coordinate_transformation_mode="pytorch_half_pixel")),
    ((1, 6, 12, 16), dict(scales=[1, 1, 0.5, 0.25]), dict(mode="linear")),
    ((1, 3, 5, 7), dict(sizes=[1, 3, 10, 14]), dict(mode="linear")),
    ((2, 16, 6, 5), dict(scales=[1, 1, 2, 4]), dict(mode="nearest")),
    ((1, 7, 6, 6), dict(scales=[1, 1, 3, 3]), dict(mode="nearest", nearest_mode="floor",
                                                   coordinate_transformation_mode="asymmetric")),
    ((1, 9, 8, 8), dict(scales=[1, 1, 0.5, 0.5]), dict(mode="nearest", nearest_mode="ceil",
                                                       coordinate_transformation_mode="align_corners")),
    ((1, 3, 20, 20), dict(sizes=[1, 3, 6, 6]), dict(mode="nearest")),   # 14.4999990 is onnxruntime's tie
]


@pytest.mark.parametrize("preset", PRESETS)
def test_class1_resizes_are_onnxruntime_bit_for_bit(preset):
    for shape, sizing, attrs in CLASS1:
        x = RNG.standard_normal(shape).astype(np.float32)
        compiled, out = _on_npu(_resize_model(shape, **sizing, **attrs), preset, {"x": x})
        want = resize(x, sizing.get("scales"), sizing.get("sizes"), **attrs)
        assert same_bits(out["y"], want), (shape, sizing, attrs)


CLASS2 = [  # every map that is not affine by phase: index tables + vpu.gather (class 2)
    ((1, 5, 7, 6), dict(scales=[1, 1, 1.5, 2.5]), dict(mode="linear")),
    ((2, 20, 9, 8), dict(scales=[1, 1, 2, 2]), dict(mode="linear", coordinate_transformation_mode="align_corners")),
    ((1, 6, 10, 12), dict(sizes=[1, 6, 7, 5]), dict(mode="linear")),
    ((1, 4, 6, 7), dict(scales=[1, 1, 3, 3]),
     dict(mode="linear", coordinate_transformation_mode="half_pixel_symmetric")),
    ((1, 3, 16, 16), dict(scales=[1, 1, 0.75, 1.5]), dict(mode="nearest")),
    ((1, 3, 17, 19), dict(scales=[1, 1, 1.7, 1.3]), dict(mode="nearest", nearest_mode="round_prefer_ceil",
                                                       coordinate_transformation_mode="pytorch_half_pixel")),
    ((1, 70, 6, 5), dict(scales=[1, 1, 1.5, 1.5]), dict(mode="linear", coordinate_transformation_mode="asymmetric")),
]


@pytest.mark.parametrize("preset", PRESETS)
def test_class2_resizes_are_onnxruntime_bit_for_bit(preset):
    for shape, sizing, attrs in CLASS2:
        x = RNG.standard_normal(shape).astype(np.float32)
        x.flat[::7] = -0.0
        compiled, out = _on_npu(_resize_model(shape, **sizing, **attrs), preset, {"x": x})
        assert any(isinstance(i, Gather) for i in compiled.program.instrs)
        want = resize(x, sizing.get("scales"), sizing.get("sizes"), **attrs)
        assert same_bits(out["y"], want), (shape, sizing, attrs)


def test_tf_crop_and_resize_fills_outside_its_roi():
    """The extrapolated frame is filled in DRAM, the rest gathered (class 2) or viewed (class 1)."""
    shape = (1, 4, 6, 8)
    x = RNG.standard_normal(shape).astype(np.float32)
    roi = numpy_helper.from_array(np.array([0, 0, -0.2, 0.1, 1, 1, 1.1, 0.7], np.float32), "roi")
    for scales, mode in (([1, 1, 1.5, 2], "linear"), ([1, 1, 2, 0.5], "nearest")):
        s = numpy_helper.from_array(np.array(scales, np.float32), "s")
        node = helper.make_node("Resize", ["x", "roi", "s"], ["y"], mode=mode, extrapolation_value=-3.5,
                                coordinate_transformation_mode="tf_crop_and_resize")
        m = model([node], [vi("x", list(shape))], [vi("y", None)], opset=19, inits=[roi, s])
        _, out = _on_npu(m, "edge16", {"x": x})
        assert (out["y"] == -3.5).any() and same_bits(out["y"], ort_run(m, {"x": x})[0]), (scales, mode)


@pytest.mark.parametrize("opset", [11, 13, 18, 19])
def test_resize_forms_of_every_opset(opset):
    """Opset 11's required roi/scales, 13's optional inputs, 18's axes and keep_aspect_ratio_policy, 19's
    half_pixel_symmetric; all against onnxruntime on the model as written."""
    shape = (1, 8, 6, 5)
    x = RNG.standard_normal(shape).astype(np.float32)
    cases = [dict(scales=[1, 1, 2, 2], mode="linear"), dict(sizes=[1, 8, 3, 5], mode="nearest")]
    if opset >= 18:
        cases += [dict(scales=[2.0, 2.0], axes=[2, 3], mode="linear"),
                  dict(sizes=[12, 40], axes=[2, 3], keep_aspect_ratio_policy="not_larger", mode="linear")]
    if opset >= 19:
        cases.append(dict(scales=[1, 1, 0.5, 1], mode="linear", coordinate_transformation_mode="half_pixel_symmetric"))
    for case in cases:
        m = _resize_model(shape, opset, **case)
        _, out = _on_npu(m, "mid32", {"x": x})
        assert same_bits(out["y"], ort_run(m, {"x": x})[0]), (opset, case)


def test_upsample_of_opsets_7_and_9_runs_asymmetric_on_the_npu():
    """version_converter makes Resize nodes that would read as half_pixel; the importer restores Upsample's
    asymmetric rule, so linear Upsample now matches onnxruntime (it differed by up to 0.8 on the host before)."""
    x = RNG.standard_normal((1, 4, 5, 6)).astype(np.float32)
    for opset, mode in ((7, "linear"), (9, "linear"), (9, "nearest")):
        if opset == 7:
            node, inits = helper.make_node("Upsample", ["x"], ["y"], mode=mode, scales=[1.0, 1.0, 2.0, 4.0]), []
        else:
            node = helper.make_node("Upsample", ["x", "s"], ["y"], mode=mode)
            inits = [numpy_helper.from_array(np.array([1, 1, 2, 4], np.float32), "s")]
        m = model([node], [vi("x", [1, 4, 5, 6])], [vi("y", None)], opset=opset, inits=inits)
        _, out = _on_npu(m, "edge16", {"x": x})
        assert same_bits(out["y"], ort_run(m, {"x": x})[0]), (opset, mode)


def test_resize_between_convolutions_needs_no_transpose():
    """Conv -> Resize -> Conv keeps the activations channels-last end to end: no Transpose segment."""
    c = 16
    w = numpy_helper.from_array(RNG.standard_normal((c, c, 3, 3)).astype(np.float32) * 0.1, "w")
    s = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "s")
    nodes = [helper.make_node("Conv", ["x", "w"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Resize", ["a", "", "s"], ["b"], mode="linear"),
             helper.make_node("Conv", ["b", "w"], ["y"], pads=[1, 1, 1, 1])]
    m = model(nodes, [vi("x", [1, c, 8, 8])], [vi("y", None)], opset=19, inits=[w, s])
    compiled, _, _, report = run_model(m, load_arch("mid32"), validate=True)
    assert report["host_ops"] == [] and all(v["ok"] for v in report["validation"].values())
    assert [lr.op for lr in compiled.layers] == ["Conv", "Resize", "Conv"]


def test_resize_forms_left_on_the_host_say_why():
    x = RNG.standard_normal((1, 3, 4, 4)).astype(np.float32)
    for attrs, why in ((dict(mode="cubic"), "cubic mode, antialias and exclude_outside run on the host"),
                       (dict(mode="linear", antialias=1), "cubic mode, antialias and exclude_outside"),
                       (dict(mode="nearest", scales=[1, 2, 2, 2]), "scales 1 on N and C")):
        scales = attrs.pop("scales", [1, 1, 2, 2])
        m = _resize_model((1, 3, 4, 4), scales=scales, **attrs)
        _, _, out, report = run_model(m, load_arch("edge16"), {"x": x}, validate=True)
        assert [h["op"] for h in report["host_ops"]] == ["Resize"] and why in report["host_ops"][0]["reason"]
        assert all(v["ok"] for v in report["validation"].values())


@pytest.mark.parametrize("preset", PRESETS)
def test_affine_grid_of_a_runtime_theta_on_the_npu(preset):
    for ac, size in ((0, [2, 3, 7, 9]), (1, [1, 1, 16, 5])):
        theta = RNG.uniform(-1.5, 1.5, (size[0], 2, 3)).astype(np.float32)
        node = helper.make_node("AffineGrid", ["t", "size"], ["g"], align_corners=ac)
        m = model([node], [vi("t", [size[0], 2, 3])], [vi("g", None)], opset=20,
                  inits=[numpy_helper.from_array(np.array(size, np.int64), "size")])
        _, out = _on_npu(m, preset, {"t": theta}, ops=("AffineGrid",))
        assert same_bits(out["g"], affine_grid(theta, size, ac))


def test_affine_grid_of_a_constant_theta_is_folded():
    theta = numpy_helper.from_array(np.array([[[0.8, -0.6, 0.1], [0.6, 0.8, -0.2]]], np.float32), "t")
    size = numpy_helper.from_array(np.array([1, 1, 4, 6], np.int64), "size")
    m = model([helper.make_node("AffineGrid", ["t", "size"], ["g"]),
               helper.make_node("Add", ["g", "z"], ["y"])], [vi("z", [1, 4, 6, 2])], [vi("y", None)], opset=20,
              inits=[theta, size])
    graph = import_onnx(m)
    assert [n.op for n in graph.nodes] == ["Add"]
    folded = next(t for t in graph.tensors.values() if t.is_const and t.shape == (1, 4, 6, 2))
    assert same_bits(folded.data, ort_run(helper.make_model(helper.make_graph(
        [helper.make_node("AffineGrid", ["t", "size"], ["g"])], "g", [], [vi("g", None)], [theta, size]),
        opset_imports=[helper.make_opsetid("", 20)]), {})[0])


# ------------------------------------------------------------------------------------------------ GridSample

def _grid_model(xs, gs, grid=None, opset=20, **attrs):
    """GridSample of input x at grid g: a constant (class 2) when ``grid`` is given, else a graph input (class 3)."""
    inits = [numpy_helper.from_array(grid, "g")] if grid is not None else []
    ins = [vi("x", list(xs))] + ([] if grid is not None else [vi("g", list(gs))])
    return model([helper.make_node("GridSample", ["x", "g"], ["y"], **attrs)], ins, [vi("y", None)], opset=opset,
                 inits=inits)


def _grid(n, ho, wo, h, w):
    """Points over [-1.3, 1.3] (some outside), pixel centres and corners for both align_corners, exact half-pixel
    ties of nearest (x = 0.5, 1.5, 2.5 and W - 0.5) and integer coordinates."""
    g = RNG.uniform(-1.3, 1.3, (n, ho, wo, 2)).astype(np.float32)
    special = [(-1, -1), (1, 1), (0, 0), (2 * 0.5 / w - 1, 2 * 1.5 / h - 1),     # ac=0: pixel centres
               ((2 * 1.0 + 1) / w - 1, (2 * 2.0 + 1) / h - 1),                  # ac=0: x = 0.5... ties
               ((2 * 2.5 + 1) / w - 1, (2 * (h - 0.5) + 1) / h - 1),           # 2.5 -> 2, H - 0.5 -> outside
               (2 * 1.5 / (w - 1) - 1, 2 * 0.5 / (h - 1) - 1),                  # ac=1: x = 1.5, y = 0.5 ties
               (2 * 3 / (w - 1) - 1, 2 * 2 / (h - 1) - 1), (-1.3, 1.3), (1.0 + 1 / w, -1.0 - 1 / h)]
    g.reshape(-1, 2)[:len(special)] = np.array(special, np.float32)
    return g


GRID_FORMS = [(mode, pad, ac) for mode in ("linear", "nearest") for pad in ("zeros", "border", "reflection")
              for ac in (0, 1)]


@pytest.mark.parametrize("preset", PRESETS)
def test_grid_sample_every_form_bit_for_bit(preset):
    """Nearest/linear x zeros/border/reflection x align_corners, a constant grid (class 2) and a run-time one
    (class 3; reflection there stays on the host, with that reason), against onnxruntime and the reference."""
    xs, gs = (2, 24, 6, 7), (2, 5, 9, 2)
    x = RNG.standard_normal(xs).astype(np.float32)
    x.flat[::11] = -0.0
    g = _grid(2, 5, 9, 6, 7)
    for mode, pad, ac in GRID_FORMS:
        want = grid_sample(x, g, mode=mode, padding_mode=pad, align_corners=ac)
        _, out = _on_npu(_grid_model(xs, gs, g, mode=mode, padding_mode=pad, align_corners=ac), preset, {"x": x},
                         ops=("GridSample",))
        assert same_bits(out["y"], want), ("constant", mode, pad, ac)
        m = _grid_model(xs, gs, mode=mode, padding_mode=pad, align_corners=ac)
        if pad == "reflection":
            _, _, out, report = run_model(m, load_arch(preset), {"x": x, "g": g}, validate=True)
            assert "reflection padding of a run-time grid" in report["host_ops"][0]["reason"]
        else:
            compiled, out = _on_npu(m, preset, {"x": x, "g": g}, ops=("GridSample",))
        assert same_bits(out["y"], want), ("run-time", mode, pad, ac)


@pytest.mark.parametrize("opset", [16, 20, 22])
def test_grid_sample_opsets(opset):
    """Opset 16 spells linear 'bilinear'; 20 and 22 'linear'; the defaults (linear, zeros, align_corners=0)."""
    xs, gs = (1, 8, 5, 6), (1, 4, 4, 2)
    x = RNG.standard_normal(xs).astype(np.float32)
    g = _grid(1, 4, 4, 5, 6)
    for attrs in ({}, dict(mode="nearest"), dict(mode="bilinear" if opset == 16 else "linear", align_corners=1)):
        m = _grid_model(xs, gs, opset=opset, **attrs)
        _, out = _on_npu(m, "mid32", {"x": x, "g": g}, ops=("GridSample",))
        assert same_bits(out["y"], ort_run(m, {"x": x, "g": g})[0]), (opset, attrs)


@pytest.mark.parametrize("mode", ["linear", "nearest"])
def test_grid_sample_of_more_points_than_one_transfer_carries(mode):
    """90,000 points of a run-time grid on dc128: a step's indices and weights (4 words a point) are one flat
    transfer of at most 65,535 elements, so steps hold at most 16,383 points (they held 22,500 and the program
    was refused: "shape extents must be in [1, 65535], not 90000")."""
    xs, gs = (1, 4, 6, 7), (1, 300, 300, 2)
    x = RNG.standard_normal(xs).astype(np.float32)
    g = _grid(1, 300, 300, 6, 7)
    compiled, out = _on_npu(_grid_model(xs, gs, mode=mode), "dc128", {"x": x, "g": g}, ops=("GridSample",))
    assert same_bits(out["y"], grid_sample(x, g, mode=mode))


def test_grid_sample_cubic_stays_on_the_host():
    xs, gs = (1, 2, 4, 4), (1, 3, 3, 2)
    m = _grid_model(xs, gs, mode="cubic")
    _, _, _, report = run_model(m, load_arch("edge16"), validate=True)
    assert "cubic" in report["host_ops"][0]["reason"] and all(v["ok"] for v in report["validation"].values())


def test_rotate_example_runs_both_forms_on_the_npu():
    """examples/rotate.py: AffineGrid + GridSample with a constant theta (folded: class 2) and a run-time theta
    (AffineGrid on the vector unit, class 3), both validated against onnxruntime with no host op."""
    import runpy
    from pathlib import Path

    ns = runpy.run_path(str(Path(__file__).resolve().parents[2] / "examples" / "rotate.py"))
    const, runtime = ns["run"](size=12, channels=8, angle=33.0, preset="edge16")
    assert const["host_ops"] == runtime["host_ops"] == [] and const["max_abs_error"] == runtime["max_abs_error"] == 0
    assert len(const["layers"]) == 1 and len(runtime["layers"]) == 3   # AffineGrid, coordinates, sampling
