"""The int8 path agrees exactly with onnxruntime (run with graph optimizations off) and with numpy's statement of the
ONNX formulas: QuantizeLinear, DequantizeLinear, QLinearConv, QLinearMatMul, including round-half-even ties,
saturation and nonzero zero points, and a small QLinear residual network."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from compiler.errors import UnsupportedOpError
from compiler.frontend.builder import GraphBuilder, to_onnx
from compiler.kernels.conv2d import ConvShape, conv_reference
from isa.arch import load_arch, presets_by_size
from npusim.app.driver import run_model

EDGE = load_arch("edge16")
ONNX_TYPE = {np.dtype(np.int8): TensorProto.INT8, np.dtype(np.uint8): TensorProto.UINT8,
             np.dtype(np.float32): TensorProto.FLOAT}


def one_node(op: str, x: np.ndarray, out_dtype, consts: dict, inputs: list[str], **attrs):
    """A one-node ONNX model: graph input ``x`` then the constants named in ``inputs``."""
    node = helper.make_node(op, ["x", *inputs], ["y"], **attrs)
    graph = helper.make_graph([node], op, [helper.make_tensor_value_info("x", ONNX_TYPE[x.dtype], x.shape)],
                              [helper.make_tensor_value_info("y", ONNX_TYPE[np.dtype(out_dtype)], None)],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def run_exact(model, x: np.ndarray) -> np.ndarray:
    """Simulate on edge16, assert the driver's exact validation against onnxruntime passed; the NPU's output."""
    _, _, outputs, report = run_model(model, EDGE, {"x": x}, validate=True)
    check = report["validation"]["y"]
    assert check["rule"] == "exact" and check["ok"], check
    return outputs["y"]


def saturate(v: np.ndarray, dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.clip(v, info.min, info.max).astype(dtype)


@pytest.mark.parametrize("dtype,zp", [(np.int8, 3), (np.uint8, 128)])
def test_quantize_ties_round_to_even_and_saturate(dtype, zp):
    scale = np.float32(0.25)     # x / scale is exact, so k + 0.5 are true ties
    halves = (np.arange(-40, 40) + 0.5).astype(np.float32) * scale
    x = np.concatenate([halves, np.float32([1e6, -1e6, 40.0, -40.0, 0.0, -0.0])]).reshape(1, 2, 43)
    got = run_exact(one_node("QuantizeLinear", x, dtype, {"s": scale, "z": np.array(zp, dtype)}, ["s", "z"]), x)
    want = saturate(np.rint(x.astype(np.float64) / 0.25) + zp, dtype)   # np.rint: half to even
    np.testing.assert_array_equal(got, want)
    assert {int(v) for v in got.ravel()} >= {np.iinfo(dtype).min, np.iinfo(dtype).max}


def test_quantize_divides_by_the_scale():
    """x / scale and x * (1 / scale) round differently for some x; the NPU must divide as onnxruntime does."""
    scale = np.float32(0.1)
    ties = ((np.arange(-100, 100) + 0.5) * scale).astype(np.float32)   # values next to the rounding boundaries
    x = np.concatenate([ties, np.nextafter(ties, np.float32(np.inf)), np.nextafter(ties, np.float32(-np.inf))])
    x = x.reshape(1, -1)
    divided, multiplied = np.rint(x / scale), np.rint(x * (np.float32(1) / scale))
    assert (divided != multiplied).any(), "the inputs must contain a case where the two differ"
    got = run_exact(one_node("QuantizeLinear", x, np.int8, {"s": scale, "z": np.int8(0)}, ["s", "z"]), x)
    np.testing.assert_array_equal(got, saturate(divided, np.int8))


@pytest.mark.parametrize("dtype,zp", [(np.int8, -7), (np.uint8, 200)])
def test_dequantize(dtype, zp):
    info = np.iinfo(dtype)
    x = np.arange(info.min, info.max + 1).astype(dtype).reshape(1, 4, 8, 8)
    scale = np.float32(0.0371)
    got = run_exact(one_node("DequantizeLinear", x, np.float32, {"s": scale, "z": np.array(zp, dtype)}, ["s", "z"]), x)
    np.testing.assert_array_equal(got, (x.astype(np.float32) - np.float32(zp)) * scale)


def qlinear_conv_model(x, w, x_scale, x_zp, w_scale, y_scale, y_zp, bias, stride=1, pad=0, group=1):
    consts = {"xs": np.float32(x_scale), "xz": np.array(x_zp, x.dtype), "w": w, "ws": np.asarray(w_scale, np.float32),
              "wz": np.zeros(np.size(w_scale), w.dtype), "ys": np.float32(y_scale), "yz": np.array(y_zp, x.dtype),
              "b": bias.astype(np.int32)}
    return one_node("QLinearConv", x, x.dtype, consts, list(consts), strides=[stride] * 2, pads=[pad] * 4,
                    group=group)


def qlinear_conv_reference(x, w, x_scale, x_zp, w_scale, y_scale, y_zp, bias, stride=1, pad=0, group=1):
    """The ONNX formula in numpy: exact i64 accumulation of (x - x_zp) * w (padding is the real value 0), + bias,
    times the f32 scale (x_scale * w_scale) / y_scale, round half to even, + y_zp, saturate."""
    N, C, H, W = x.shape
    cs = ConvShape(N, C, H, W, w.shape[0], w.shape[2], w.shape[3], stride, pad, 1, group)
    acc = conv_reference(x.astype(np.int64) - x_zp, w.astype(np.int64), cs) + bias[None, :, None, None]
    scale = (np.float32(x_scale) * np.asarray(w_scale, np.float32)) / np.float32(y_scale)
    v = acc.astype(np.float32) * np.broadcast_to(scale, (cs.K,))[None, :, None, None]
    return saturate(np.rint(v) + y_zp, x.dtype)


def test_qlinear_conv_ties_round_to_even():
    """Combined scale exactly 0.5: every odd accumulator is a tie."""
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (1, 3, 6, 6)).astype(np.int8)
    w = rng.integers(-3, 4, (4, 3, 3, 3)).astype(np.int8)
    args = (x, w, 1.0, 0, np.full(4, 0.5, np.float32), 1.0, 0, np.array([1, 0, -1, 2]))
    got = run_exact(qlinear_conv_model(*args, pad=1), x)
    np.testing.assert_array_equal(got, qlinear_conv_reference(*args, pad=1))
    N, C, H, W = x.shape
    acc = conv_reference(x.astype(np.int64), w.astype(np.int64), ConvShape(1, 3, 6, 6, 4, 3, 3, 1, 1))
    assert (acc % 2 == 1).sum() > 20, "the data must hit many ties"


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_qlinear_conv_zero_points_saturation_stride_groups(dtype):
    rng = np.random.default_rng(1)
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max + 1, (1, 6, 9, 9)).astype(dtype)
    w = rng.integers(0 if dtype == np.uint8 else -127, 128, (8, 3, 3, 3)).astype(dtype)
    x_zp, y_zp = (-20, -128) if dtype == np.int8 else (100, 10)
    args = (x, w, 0.05, x_zp, rng.uniform(0.002, 0.02, 8), 0.1, y_zp, rng.integers(-3000, 3000, 8))
    got = run_exact(qlinear_conv_model(*args, stride=2, pad=1, group=2), x)
    np.testing.assert_array_equal(got, qlinear_conv_reference(*args, stride=2, pad=1, group=2))
    assert info.min in got and info.max in got, "the scales must drive some outputs into saturation"


@settings(max_examples=6, deadline=None)
@given(c=st.integers(1, 20), k=st.integers(1, 20), hw=st.integers(3, 9), r=st.sampled_from([1, 3]),
       stride=st.integers(1, 2), x_zp=st.integers(-128, 127), y_zp=st.integers(-128, 127), seed=st.integers(0, 99))
def test_qlinear_conv_random_shapes(c, k, hw, r, stride, x_zp, y_zp, seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(-128, 128, (1, c, hw, hw)).astype(np.int8)
    w = rng.integers(-127, 128, (k, c, r, r)).astype(np.int8)
    y_scale = 0.02 * np.sqrt(c * r * r)
    args = (x, w, 0.03, x_zp, rng.uniform(0.002, 0.02, k), y_scale, y_zp, rng.integers(-500, 500, k))
    got = run_exact(qlinear_conv_model(*args, stride=stride, pad=r // 2), x)
    np.testing.assert_array_equal(got, qlinear_conv_reference(*args, stride=stride, pad=r // 2))


def qlinear_matmul(x, b, a_scale, a_zp, b_scale, y_scale, y_zp):
    consts = {"as": np.float32(a_scale), "az": np.array(a_zp, x.dtype), "b": b, "bs": np.asarray(b_scale, np.float32),
              "bz": np.zeros(np.shape(b_scale), b.dtype), "ys": np.float32(y_scale), "yz": np.array(y_zp, x.dtype)}
    model = one_node("QLinearMatMul", x, x.dtype, consts, list(consts))
    acc = (x.astype(np.int64) - a_zp) @ b.astype(np.int64)
    scale = (np.float32(a_scale) * np.asarray(b_scale, np.float32)) / np.float32(y_scale)
    return model, saturate(np.rint(acc.astype(np.float32) * scale) + y_zp, x.dtype)


@pytest.mark.parametrize("b_scale", [np.float32(0.5), np.full(24, 0.5, np.float32)], ids=["per_tensor", "per_column"])
def test_qlinear_matmul_ties(b_scale):
    rng = np.random.default_rng(2)
    x = rng.integers(-128, 128, (5, 40)).astype(np.int8)
    b = rng.integers(-4, 5, (40, 24)).astype(np.int8)
    model, want = qlinear_matmul(x, b, 1.0, 0, b_scale, 1.0, 0)
    np.testing.assert_array_equal(run_exact(model, x), want)
    assert (x.astype(np.int64) @ b % 2 == 1).any()


def test_qlinear_matmul_zero_points_and_saturation():
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (3, 300)).astype(np.int8)
    b = rng.integers(-127, 128, (300, 70)).astype(np.int8)
    model, want = qlinear_matmul(x, b, 0.02, -128, rng.uniform(0.001, 0.01, 70), 0.1, 17)
    got = run_exact(model, x)
    np.testing.assert_array_equal(got, want)
    assert -128 in got and 127 in got


def tiny_qlinear_resnet() -> GraphBuilder:
    """Quantize -> QLinearConv(relu via zp -128) -> MaxPool -> QLinearConv, residual DQ+DQ -> Add -> Relu -> Q,
    DQ -> GlobalAveragePool -> Q, Flatten, QLinearMatMul -> DQ -> Add(bias): every op of the zoo's int8 ResNet."""
    rng = np.random.default_rng(4)
    b = GraphBuilder("tiny_qlinear_resnet")
    s_in, s_a, s_b, s_r, s_p = (np.float32(v) for v in (1 / 32, 1 / 16, 1 / 8, 1 / 16, 1 / 32))
    relu, zero = np.int8(-128), np.int8(0)
    x = b.quantize(b.input("x", (1, 3, 16, 16), np.float32), s_in, zero)

    def conv(t, s_x, z_x, cin, cout, s_y, z_y, stride):
        w = rng.integers(-127, 128, (cout, cin, 3, 3)).astype(np.int8)
        return b.qlinear_conv(t, s_x, z_x, w, rng.uniform(0.001, 0.004, cout).astype(np.float32),
                              np.zeros(cout, np.int8), s_y, z_y, rng.integers(-2000, 2000, cout).astype(np.int32),
                              strides=stride, pads=1)

    h = b.maxpool(conv(x, s_in, zero, 3, 8, s_a, relu, 1), 3, 2, 1)
    t = conv(h, s_a, relu, 8, 8, s_b, zero, 1)
    h = b.quantize(b.relu(b.add(b.dequantize(t, s_b, zero), b.dequantize(h, s_a, relu))), s_r, relu)
    pooled = b.quantize(b.global_avgpool(b.dequantize(h, s_r, relu)), s_p, relu)
    y = b.qlinear_matmul(b.flatten(pooled, 1), s_p, relu, rng.integers(-127, 128, (8, 10)).astype(np.int8),
                         np.float32(0.01), np.int8(0), np.float32(0.02), zero)
    b.output(b.add(b.dequantize(y, np.float32(0.02), zero), rng.standard_normal(10).astype(np.float32)))
    return b


@pytest.mark.parametrize("preset", presets_by_size())
def test_tiny_qlinear_resnet_is_exact(preset):
    _, _, outputs, report = run_model(to_onnx(tiny_qlinear_resnet().build()), load_arch(preset), validate=True)
    (check,) = report["validation"].values()
    assert check == {"max_abs_error": 0.0, "max_rel_error": 0.0, "ok": True, "rule": "exact"}
    (out,) = outputs.values()
    assert out.dtype == np.float32 and len(np.unique(out)) > 5   # a float output, compared bit for bit


def test_nonzero_weight_zero_point_is_refused():
    x = np.zeros((1, 2, 4, 4), np.int8)
    consts = {"xs": np.float32(1), "xz": np.int8(0), "w": np.ones((2, 2, 1, 1), np.int8), "ws": np.float32(1),
              "wz": np.int8(1), "ys": np.float32(1), "yz": np.int8(0)}
    with pytest.raises(UnsupportedOpError, match=r"QLinearConv\): only symmetric weights \(weight zero point 0\)"):
        run_model(one_node("QLinearConv", x, np.int8, consts, list(consts)), EDGE, {"x": x}, fallback=False)


def test_per_axis_activation_quantization_is_refused():
    x = np.zeros((1, 2, 4, 4), np.float32)
    model = one_node("QuantizeLinear", x, np.int8, {"s": np.float32([1, 2]), "z": np.int8([0, 0])}, ["s", "z"])
    with pytest.raises(UnsupportedOpError, match=r"QuantizeLinear\): the scale must be one value \(per tensor\)"):
        run_model(model, EDGE, {"x": x}, fallback=False)
