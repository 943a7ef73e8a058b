"""The numpy references of Resize, GridSample and AffineGrid (npusim.functional.sampling_reference) against onnxruntime,
bit for bit on float32 (docs/perception.md#numerics): every coordinate mode, nearest mode, padding mode, align_corners,
scales and sizes, at the opsets that define them, on random values, exact half-pixel ties, integer coordinates and grids
over [-1.3, 1.3]."""

import itertools

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from isa import SimulationError
from npusim.functional.sampling_reference import (
    COORDINATE_MODES,
    NEAREST_MODES,
    PADDING_MODES,
    affine_grid,
    grid_sample,
    nearest_index,
    resize,
    source_coordinate,
)

F32 = np.float32
ort.set_default_logger_severity(3)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.asarray(a, F32), np.asarray(b, F32)
    return a.shape == b.shape and np.array_equal(a.view(np.int32), b.view(np.int32))


def _session(node, inputs, consts, opset):
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, v.shape)
                                            for n, v in inputs.items()],
                              [helper.make_tensor_value_info(node.output[0], TensorProto.FLOAT, None)], consts)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, inputs)[0]


def ort_resize(x, opset, scales=None, sizes=None, roi=None, axes=None, **attrs):
    with_roi = bool(roi) or opset < 13
    consts = [helper.make_tensor("roi", TensorProto.FLOAT, [len(roi or [])], roi or [])] if with_roi else []
    names = ["X", "roi" if with_roi else ""]
    if scales is not None:
        consts.append(helper.make_tensor("scales", TensorProto.FLOAT, [len(scales)], scales))
        names.append("scales")
    else:
        if opset < 13:
            consts.append(helper.make_tensor("scales", TensorProto.FLOAT, [0], []))
        names += ["scales" if opset < 13 else "", "sizes"]
        consts.append(helper.make_tensor("sizes", TensorProto.INT64, [len(sizes)], sizes))
    if axes is not None:
        attrs["axes"] = axes
    return _session(helper.make_node("Resize", names, ["Y"], **attrs), {"X": x}, consts, opset)


def ort_grid_sample(x, grid, opset, mode, padding_mode, align_corners):
    mode = {"linear": "bilinear", "cubic": "bicubic"}.get(mode, mode) if opset < 20 else mode
    node = helper.make_node("GridSample", ["X", "G"], ["Y"], mode=mode, padding_mode=padding_mode,
                            align_corners=align_corners)
    return _session(node, {"X": x, "G": grid}, [], opset)


def _x(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(F32)


# ---------------------------------------------------------------------------------------------------- Resize

RESIZE_CASES = [  # (input H, W, scales or None, sizes or None)
    ((5, 7), (2.0, 2.0), None), ((6, 4), (1.5, 2.5), None), ((8, 12), (0.5, 0.75), None),
    ((5, 7), None, (13, 9)), ((9, 10), None, (4, 7)), ((4, 6), (8.0, 1.0), None), ((7, 5), (3.0, 3.0), None),
    ((1, 6), (4.0, 2.0), None),
]


@pytest.mark.parametrize("ctm", [m for m in COORDINATE_MODES if m != "tf_half_pixel_for_nn"])
def test_resize_linear_is_onnxruntime_bit_for_bit(ctm):
    for k, ((h, w), scales, sizes) in enumerate(RESIZE_CASES):
        x = _x((2, 3, h, w), k)
        roi = [0, 0, 0.1, 0.25, 1, 1, 0.8, 1.2] if ctm == "tf_crop_and_resize" else None
        full_scales = None if scales is None else [1.0, 1.0, *scales]
        full_sizes = None if sizes is None else [2, 3, *sizes]
        want = ort_resize(x, 19, full_scales, full_sizes, roi, mode="linear", coordinate_transformation_mode=ctm,
                          extrapolation_value=-7.5)
        got = resize(x, full_scales, full_sizes, mode="linear", coordinate_transformation_mode=ctm, roi=roi,
                     extrapolation_value=-7.5)
        assert same_bits(got, want), (ctm, h, w, scales, sizes, np.abs(got - want).max())


@pytest.mark.parametrize("ctm", COORDINATE_MODES[:6])
def test_resize_nearest_is_onnxruntime_bit_for_bit(ctm):
    for nm, (k, ((h, w), scales, sizes)) in itertools.product(NEAREST_MODES, enumerate(RESIZE_CASES)):
        x = _x((1, 2, h, w), k)
        roi = [0, 0, -0.2, 0.3, 1, 1, 0.9, 1.1] if ctm == "tf_crop_and_resize" else None
        full_scales = None if scales is None else [1.0, 1.0, *scales]
        full_sizes = None if sizes is None else [1, 2, *sizes]
        attrs = dict(mode="nearest", coordinate_transformation_mode=ctm, nearest_mode=nm, extrapolation_value=3.25)
        want = ort_resize(x, 19, full_scales, full_sizes, roi, **attrs)
        got = resize(x, full_scales, full_sizes, roi=roi, **attrs)
        assert same_bits(got, want), (ctm, nm, h, w, scales, sizes)


@pytest.mark.parametrize("opset", [11, 13, 18, 19])
def test_resize_at_every_opset(opset):
    """Opset 11's roi/scales inputs, 13's optional ones, 18's axes and keep_aspect_ratio_policy, 19's
    half_pixel_symmetric."""
    x = _x((1, 3, 6, 5), opset)
    modes = ["half_pixel", "align_corners", "asymmetric", "pytorch_half_pixel"]
    modes += ["half_pixel_symmetric"] if opset >= 19 else []
    for ctm, mode in itertools.product(modes, ("linear", "nearest")):
        attrs = dict(mode=mode, coordinate_transformation_mode=ctm)
        for scales, sizes in (([1, 1, 1.75, 2.0], None), (None, [1, 3, 11, 3])):
            want = ort_resize(x, opset, scales, sizes, **attrs)
            assert same_bits(resize(x, scales, sizes, **attrs), want), (opset, ctm, mode, scales, sizes)
    if opset >= 18:
        for policy in ("not_larger", "not_smaller"):
            attrs = dict(mode="linear", keep_aspect_ratio_policy=policy, axes=[2, 3])
            want = ort_resize(x, opset, sizes=[9, 14], **attrs)
            assert same_bits(resize(x, sizes=[9, 14], **attrs), want), policy
        want = ort_resize(x, opset, scales=[2.0, 0.5], axes=[3, 2], mode="linear")
        assert same_bits(resize(x, [2.0, 0.5], axes=[3, 2], mode="linear"), want)


def test_resize_nearest_ties_and_integers():
    """Source coordinates exactly halfway between pixels and exactly on them, under every nearest mode: 4x
    asymmetric puts x at t + {0, .25, .5, .75}; half_pixel at 0.5x lands on integers + 0.5."""
    x = _x((1, 1, 6, 8), 3)
    for nm, (ctm, s) in itertools.product(NEAREST_MODES, (("asymmetric", 4.0), ("half_pixel", 0.5),
                                                           ("align_corners", 3.0), ("half_pixel", 2.0))):
        attrs = dict(mode="nearest", coordinate_transformation_mode=ctm, nearest_mode=nm)
        assert same_bits(resize(x, [1, 1, s, s], **attrs), ort_resize(x, 19, [1, 1, s, s], **attrs)), (nm, ctm, s)


def test_nearest_index_rounding_rules():
    """Ties within 1e-6 of i + 0.5 (onnxruntime 1.32's tolerance), half away from zero otherwise."""
    x = np.array([-1.5, -0.5, 0.49999997, 0.5, 1.5, 2.5, 2.5000002, 2.500002, 2.499998, 9.0], F32)
    assert nearest_index(x, "round_prefer_floor", 20).tolist() == [0, 0, 0, 0, 1, 2, 2, 3, 2, 9]
    assert nearest_index(x, "round_prefer_ceil", 20).tolist() == [0, 0, 1, 1, 2, 3, 3, 3, 2, 9]
    assert nearest_index(x, "floor", 3).tolist() == [0, 0, 0, 0, 1, 2, 2, 2, 2, 2]
    assert nearest_index(x, "ceil", 3).tolist() == [0, 0, 1, 1, 2, 2, 2, 2, 2, 2]


def test_resize_nearest_tie_tolerance_matches_onnxruntime():
    """20 -> 6 half_pixel puts output 4 at 14.4999990 in float32: onnxruntime 1.32 counts it as the tie 14.5
    (round_prefer_ceil takes 15, round_prefer_floor 14)."""
    x = np.arange(20, dtype=F32).reshape(1, 1, 1, 20)
    for nm, want in (("round_prefer_ceil", 15), ("round_prefer_floor", 14)):
        attrs = dict(mode="nearest", nearest_mode=nm)
        got = resize(x, sizes=[1, 1, 1, 6], **attrs)
        assert same_bits(got, ort_resize(x, 19, sizes=[1, 1, 1, 6], **attrs)) and got[0, 0, 0, 4] == want


def test_resize_order_switch_and_bad_arguments():
    x = _x((1, 2, 5, 6), 4)
    prod = resize(x, [1, 1, 1.7, 2.3], mode="linear")
    sep = resize(x, [1, 1, 1.7, 2.3], mode="linear", order="separable")
    assert not same_bits(prod, sep) and np.allclose(prod, sep, rtol=1e-6, atol=1e-6)
    with pytest.raises(SimulationError, match="order must be one of"):
        resize(x, [1, 1, 2, 2], mode="linear", order="pairwise")
    with pytest.raises(SimulationError, match="coordinate_transformation_mode must be"):
        source_coordinate("half_pixels", 4, 2, 2.0)
    with pytest.raises(SimulationError, match="exactly one of scales and sizes"):
        resize(x)
    with pytest.raises(SimulationError, match="nearest and linear, not 'cubic'"):
        resize(x, [1, 1, 2, 2], mode="cubic")


# ------------------------------------------------------------------------------------------------ GridSample

def _grid(n, ho, wo, h, w, seed):
    """Random points over [-1.3, 1.3], then exact half-pixel ties and integer pixel positions of both
    unnormalisations (align_corners 0 and 1)."""
    rng = np.random.default_rng(seed)
    g = rng.uniform(-1.3, 1.3, (n, ho, wo, 2)).astype(F32)
    flat = g.reshape(-1, 2)
    k = flat.shape[0] // 4
    for size, col in ((w, 0), (h, 1)):
        i = rng.integers(-1, size + 1, k).astype(F32)
        flat[:k, col] = (2 * i + 1) / size - 1            # align_corners=0: pixel i (and -1, size: outside)
        flat[k:2 * k, col] = (2 * i + 2) / size - 1       # align_corners=0: exactly halfway, x = i + 0.5
        flat[2 * k:3 * k, col] = 2 * i / (size - 1) - 1   # align_corners=1: pixel i
    return g


@pytest.mark.parametrize("opset", [16, 20, 22])
def test_grid_sample_is_onnxruntime_bit_for_bit(opset):
    x = _x((2, 3, 7, 9), opset)
    grid = _grid(2, 5, 6, 7, 9, opset)
    for mode, pad, ac in itertools.product(("nearest", "linear"), PADDING_MODES, (0, 1)):
        want = ort_grid_sample(x, grid, opset, mode, pad, ac)
        got = grid_sample(x, grid, mode=mode, padding_mode=pad, align_corners=ac)
        assert same_bits(got, want), (opset, mode, pad, ac, np.abs(got - want).max())


def test_grid_sample_orders_differ_where_onnxruntime_switches():
    """onnxruntime's product form holds only on its fast path: the separable form there (and the product form
    elsewhere) is off in the last bits somewhere in the sweep."""
    x, grid = _x((1, 4, 8, 8), 7), _grid(1, 16, 16, 8, 8, 7)
    fast = ort_grid_sample(x, grid, 20, "linear", "zeros", 0)
    assert not same_bits(grid_sample(x, grid, order="separable"), fast)
    slow = ort_grid_sample(x, grid, 20, "linear", "border", 1)
    assert not same_bits(grid_sample(x, grid, padding_mode="border", align_corners=1, order="product"), slow)
    assert np.allclose(grid_sample(x, grid, order="separable"), fast, atol=1e-6)


def test_grid_sample_nearest_rounds_half_to_even():
    """x = 0.5 -> 0, 1.5 -> 2, 2.5 -> 2; 7.5 on W = 8 -> pixel 8, outside: 0 under zeros, 7 under border."""
    x = np.arange(8, dtype=F32).reshape(1, 1, 1, 8)
    xs = np.array([0.5, 1.5, 2.5, 7.5], F32)
    grid = np.stack([(2 * xs + 1) / 8 - 1, np.zeros(4, F32)], -1).reshape(1, 1, 4, 2).astype(F32)
    assert grid_sample(x, grid, mode="nearest").ravel().tolist() == [0, 2, 2, 0]
    assert grid_sample(x, grid, mode="nearest", padding_mode="border").ravel().tolist() == [0, 2, 2, 7]
    assert same_bits(grid_sample(x, grid, mode="nearest"), ort_grid_sample(x, grid, 20, "nearest", "zeros", 0))


# ------------------------------------------------------------------------------------------------ AffineGrid

def test_affine_grid_is_onnxruntime_bit_for_bit():
    rng = np.random.default_rng(5)
    for ac, (h, w) in itertools.product((0, 1), ((6, 9), (1, 4), (16, 16), (7, 33), (200, 200))):
        theta = rng.uniform(-1.5, 1.5, (2, 2, 3)).astype(F32)
        node = helper.make_node("AffineGrid", ["T", "S"], ["Y"], align_corners=ac)
        size = helper.make_tensor("S", TensorProto.INT64, [4], [2, 3, h, w])
        want = _session(node, {"T": theta}, [size], 20)
        got = affine_grid(theta, (2, 3, h, w), ac)
        assert same_bits(got, want), (ac, h, w, np.abs(got - want).max())
    with pytest.raises(SimulationError, match="needs theta of shape"):
        affine_grid(np.zeros((1, 2, 3), F32), (2, 3, 4, 4))
