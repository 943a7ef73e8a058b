"""Every ONNX form of Conv, QLinearConv and the pools runs on the NPU (no node on the host) and matches onnxruntime
on all three presets: fp32 within 1e-5 relative, int8 exactly. Models are built with onnx.helper at opset 17 (pools
with dilations at 19), several forms per model, one graph output per form."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from isa.arch import load_arch, presets_by_size
from npusim.app.driver import run_model
from tests.compiler.util import model, vi

PRESETS = presets_by_size()
RNG = np.random.default_rng(13)


def _w(name: str, shape, dtype=np.float32):
    if np.dtype(dtype) == np.float32:
        return numpy_helper.from_array(RNG.standard_normal(shape).astype(np.float32), name)
    return numpy_helper.from_array(RNG.integers(-127, 128, shape).astype(dtype), name)


def _conv(x: str, y: str, w: str, bias: str | None = None, **attrs):
    return helper.make_node("Conv", [x, w] + ([bias] if bias else []), [y], name=y, **attrs)


def _check(m, preset: str, inputs=None, exact: bool = False, ops: set[str] | None = None) -> dict:
    """Run ``m`` with validation on ``preset``; every node on the NPU, every output within the bar."""
    _, _, _, report = run_model(m, load_arch(preset), inputs, validate=True)
    assert report["host_ops"] == [], report["host_ops"]
    for name, v in report["validation"].items():
        if exact:
            assert v["max_abs_error"] == 0, (name, v)
        else:
            assert v["max_rel_error"] <= 1e-5, (name, v)
    if ops is not None:
        assert {lr["op"] for lr in report["layers"]} == ops
    return report


def conv2d_forms():
    """Eight 2-D Conv forms on one 1x8x11x13 input: asymmetric pads with a fused Relu; strides 2x1 with dilation 2x1
    and asymmetric pads (a traceback on the host before); SAME_UPPER, grouped; SAME_LOWER depthwise with channel
    multiplier 2; VALID with a 2x4 kernel; a residual Add (+ Relu) fused into a grouped conv with asymmetric pads;
    pads wider than the DMA's 15 (17, 2, 3, 20); a strided 1x1 (2x3) with a fused Clip."""
    nodes = [_conv("x", "c1", "w1", "b1", pads=[0, 0, 1, 1]), helper.make_node("Relu", ["c1"], ["y1"]),
             _conv("x", "y2", "w2", strides=[2, 1], dilations=[2, 1], pads=[0, 1, 2, 0]),
             _conv("x", "y3", "w3", "b3", strides=[2, 2], auto_pad="SAME_UPPER", group=2),
             _conv("x", "y4", "w4", strides=[2, 1], auto_pad="SAME_LOWER", group=8),
             _conv("x", "y5", "w5", auto_pad="VALID"),
             _conv("x", "c6", "w6", "b6", pads=[1, 0, 1, 2], group=4), helper.make_node("Add", ["c6", "x"], ["a6"]),
             helper.make_node("Relu", ["a6"], ["y6"]),
             _conv("x", "y7", "w7", pads=[17, 2, 3, 20]),
             _conv("x", "c8", "w8", strides=[2, 3]), helper.make_node("Clip", ["c8", "lo", "hi"], ["y8"])]
    inits = [_w("w1", (12, 8, 3, 3)), _w("b1", (12,)), _w("w2", (12, 8, 3, 3)), _w("w3", (12, 4, 3, 2)),
             _w("b3", (12,)), _w("w4", (16, 1, 3, 3)), _w("w5", (8, 8, 2, 4)), _w("w6", (8, 2, 3, 3)),
             _w("b6", (8,)), _w("w7", (8, 8, 3, 3)), _w("w8", (4, 8, 1, 1)),
             numpy_helper.from_array(np.float32(-0.5), "lo"), numpy_helper.from_array(np.float32(1.0), "hi")]
    return model(nodes, [vi("x", [1, 8, 11, 13])], [vi(f"y{i}", None) for i in range(1, 9)], 17, inits)


def dilated_beyond_map_forms():
    """Dilations wider than the map (DeepLabV3's ASPP at a small input): rates 12, 24 and 36 with pads equal to the
    rate on a 64-channel 8x8 map (the centre tap alone touches data; bias and Relu fused), rate 7 with asymmetric
    pads (two taps kept per axis), a depthwise rate-5 conv, a 1-D rate-9 conv with stride 2 and a grouped rate-10
    conv."""
    nodes = [_conv("xa", f"c{r}", f"w{r}", f"b{r}", dilations=[r, r], pads=[r] * 4) for r in (12, 24, 36)]
    nodes += [helper.make_node("Relu", [f"c{r}"], [f"y{k}"]) for k, r in enumerate((12, 24, 36), 1)]
    nodes += [_conv("x", "y4", "w4", dilations=[7, 7], pads=[7, 7, 3, 3]),
              _conv("x", "y5", "w5", dilations=[5, 5], pads=[5, 5, 5, 5], group=8),
              _conv("x1", "y6", "w6", "b6", dilations=[9], pads=[9, 9], strides=[2]),
              _conv("x", "y7", "w7", dilations=[10, 1], pads=[10, 1, 10, 1], group=2)]
    inits = [t for r in (12, 24, 36) for t in (_w(f"w{r}", (32, 64, 3, 3)), _w(f"b{r}", (32,)))]
    inits += [_w("w4", (8, 8, 3, 3)), _w("w5", (8, 1, 3, 3)), _w("w6", (6, 4, 3)), _w("b6", (6,)),
              _w("w7", (6, 4, 3, 3))]
    return model(nodes, [vi("xa", [1, 64, 8, 8]), vi("x", [1, 8, 8, 8]), vi("x1", [2, 4, 8])],
                 [vi(f"y{i}", None) for i in range(1, 8)], 17, inits)


def conv1d_forms():
    """1-D (N, C, L): a strided, dilated conv with asymmetric pads, bias and Relu; a grouped SAME_UPPER conv with a
    residual Add fused; a depthwise one; max and average pooling with ceil_mode; a global average pool."""
    nodes = [_conv("x", "c1", "w1", "b1", strides=[2], pads=[3, 1], dilations=[2]),
             helper.make_node("Relu", ["c1"], ["y1"]),
             _conv("y1", "c2", "w2", auto_pad="SAME_UPPER", group=2), helper.make_node("Add", ["c2", "y1"], ["y2"]),
             _conv("x", "y3", "w3", pads=[2, 1], group=6),
             helper.make_node("MaxPool", ["y2"], ["y4"], kernel_shape=[3], strides=[2], pads=[1, 0], ceil_mode=1),
             helper.make_node("AveragePool", ["x"], ["y5"], kernel_shape=[4], strides=[3], pads=[2, 1],
                              count_include_pad=1, ceil_mode=1),
             helper.make_node("GlobalAveragePool", ["y1"], ["y6"])]
    inits = [_w("w1", (10, 6, 5)), _w("b1", (10,)), _w("w2", (10, 5, 3)), _w("w3", (6, 1, 4))]
    return model(nodes, [vi("x", [2, 6, 30])], [vi(f"y{i}", None) for i in range(1, 7)], 17, inits)


def pool_forms():
    """2-D pooling: rectangular windows, per-axis strides, asymmetric pads, dilations, ceil_mode, count_include_pad
    0 and 1, auto_pad SAME_UPPER, a 17x3 average with pads of 16 (wider than the DMA's), global max and average of
    a rectangular input."""
    mp, ap = "MaxPool", "AveragePool"
    nodes = [helper.make_node(mp, ["x"], ["y1"], kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 0, 1],
                              dilations=[1, 2], ceil_mode=1),
             helper.make_node(mp, ["x"], ["y2"], kernel_shape=[3, 3], strides=[2, 2], auto_pad="SAME_UPPER"),
             helper.make_node(ap, ["x"], ["y3"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                              ceil_mode=1, count_include_pad=1),
             helper.make_node(ap, ["x"], ["y4"], kernel_shape=[3, 2], strides=[2, 3], pads=[0, 1, 2, 0]),
             helper.make_node(ap, ["x"], ["y5"], kernel_shape=[2, 3], strides=[1, 2], pads=[1, 1, 0, 2],
                              dilations=[2, 1], count_include_pad=1),
             helper.make_node(ap, ["x"], ["y6"], kernel_shape=[17, 3], strides=[3, 1], pads=[16, 1, 16, 1]),
             helper.make_node("GlobalMaxPool", ["x"], ["y7"]), helper.make_node("GlobalAveragePool", ["x"], ["y8"])]
    return model(nodes, [vi("x", [1, 8, 11, 13])], [vi(f"y{i}", None) for i in range(1, 9)], 19)


def qlinear_forms():
    """int8 QLinearConv (input zero point 3, so the halo reads 3; per-channel weight scales) with asymmetric pads,
    strides 2x1 and dilation 1x2; rate 12 on a 9x10 map (its centre tap alone touches data); grouped with
    SAME_LOWER (groups packed into array tiles); 1-D with asymmetric
    pads; int8 MaxPool with ceil_mode and dilation."""
    i8 = TensorProto.INT8
    consts = [numpy_helper.from_array(np.float32(0.05), "xs"), numpy_helper.from_array(np.int8(3), "xz"),
              numpy_helper.from_array(np.float32(0.5), "ys"), numpy_helper.from_array(np.int8(-2), "yz"),
              numpy_helper.from_array(np.float32(0.2), "ys2"), numpy_helper.from_array(np.int8(0), "wz")]

    def qconv(x, y, w, shape, **attrs):
        k = shape[0]
        consts.extend([_w(w, shape, np.int8), numpy_helper.from_array(RNG.uniform(0.002, 0.01, k).astype(np.float32),
                                                                     w + "s"),
                       numpy_helper.from_array(np.zeros(k, np.int8), w + "z"),
                       numpy_helper.from_array(RNG.integers(-3000, 3000, k).astype(np.int32), w + "b")])
        return helper.make_node("QLinearConv", [x, "xs", "xz", w, w + "s", w + "z", "ys", "yz", w + "b"], [y],
                                name=y, **attrs)

    nodes = [qconv("x", "y1", "w1", (12, 8, 3, 3), pads=[0, 1, 2, 0], strides=[2, 1], dilations=[1, 2]),
             qconv("x", "y5", "w5", (8, 8, 3, 3), pads=[12, 12, 12, 12], dilations=[12, 12]),   # (its centre tap)
             qconv("x", "y2", "w2", (16, 2, 3, 3), group=4, auto_pad="SAME_LOWER"),
             qconv("x1", "y3", "w3", (8, 6, 5), pads=[3, 1], strides=[2]),
             helper.make_node("MaxPool", ["x"], ["y4"], kernel_shape=[3, 2], strides=[2, 2], pads=[1, 0, 0, 1],
                              dilations=[1, 2], ceil_mode=1)]
    return model(nodes, [vi("x", [1, 8, 9, 10], i8), vi("x1", [1, 6, 21], i8)],
                 [vi(f"y{i}", None, i8) for i in range(1, 6)], 19, consts)


@pytest.mark.parametrize("preset", PRESETS)
def test_conv2d_forms_match_onnxruntime(preset):
    _check(conv2d_forms(), preset, ops={"Conv"})


@pytest.mark.parametrize("preset", PRESETS)
def test_conv1d_forms_match_onnxruntime(preset):
    _check(conv1d_forms(), preset, ops={"Conv", "MaxPool", "AveragePool", "GlobalAveragePool"})


@pytest.mark.parametrize("preset", PRESETS)
def test_dilations_beyond_the_map_match_onnxruntime(preset):
    # every one of them found "no tiling fits the NPU" or ran its padding through the array before its dead taps
    # were dropped (compiler.kernels.conv2d.live_taps)
    _check(dilated_beyond_map_forms(), preset, ops={"Conv"})


@pytest.mark.parametrize("preset", PRESETS)
def test_pool_forms_match_onnxruntime(preset):
    _check(pool_forms(), preset, ops={"MaxPool", "AveragePool", "GlobalMaxPool", "GlobalAveragePool"})


@pytest.mark.parametrize("preset", PRESETS)
def test_qlinear_forms_match_onnxruntime_exactly(preset):
    inputs = {"x": RNG.integers(-128, 128, (1, 8, 9, 10)).astype(np.int8),
              "x1": RNG.integers(-128, 128, (1, 6, 21)).astype(np.int8)}
    _check(qlinear_forms(), preset, inputs, exact=True, ops={"QLinearConv", "MaxPool"})


def test_residual_add_fuses_into_every_direct_conv_form_but_not_depthwise():
    # fuse_residual takes grouped, strided, asymmetric and 1-D convs (the forms conv2d lowers); a depthwise conv
    # runs on the vector unit, whose lowering has no accumulator to start from the residual, so its Add stays
    from compiler.compile import run_passes
    from compiler.frontend.onnx_import import import_onnx

    graph = run_passes(import_onnx(conv2d_forms()))
    c6 = graph.node("c6")   # the fused node keeps the conv's name and takes the Relu's output
    assert c6.attrs["residual"] and c6.attrs["activation"] == ("relu",) and c6.outputs == ("y6",)
    assert "residual" in run_passes(import_onnx(conv1d_forms())).node("c2").attrs
    dw = model([_conv("x", "c", "w", pads=[1, 0, 1, 2], group=8), helper.make_node("Add", ["c", "x"], ["y"])],
               [vi("x", [1, 8, 6, 5])], [vi("y", None)], 17, [_w("w", (8, 1, 3, 3))])
    report = _check(dw, "edge16")
    assert [lr["op"] for lr in report["layers"]] == ["Conv", "Add"]


def test_grouped_conv_costs_about_the_dense_one():
    # ResNeXt's 32 groups of 4 channels on dc128's 128x128 array: one group per array tile streams every pixel 32
    # times through a 4x4 corner (more than 20x the dense conv); packing the 32 groups block-diagonally into one
    # tile costs what the dense conv of the same shape does
    from dataclasses import replace

    from compiler.kernels.common.target import Target
    from compiler.kernels.conv2d import ConvShape, conv2d, search_conv_tiling
    from isa import DType, MatMul
    from npusim import simulate

    arch = load_arch("dc128")
    target = Target.of(arch)
    cs = ConvShape(1, 128, 14, 14, 128, 3, 3, 1, 1, groups=32)

    def run(cs, **kw):
        t = search_conv_tiling(cs, DType.F32, target, **kw)
        prog = conv2d(cs, DType.F32, target, t)
        return t, simulate(prog, arch, timing_only=True).cycles, sum(isinstance(i, MatMul) for i in prog.instrs)

    t, packed, mms = run(cs)
    _, dense, dense_mms = run(replace(cs, groups=1))
    _, single, single_mms = run(cs, group_packing=False)
    assert t.gpack == 32 and mms == dense_mms and single_mms >= 32 * mms
    assert packed <= 1.05 * dense and single > 10 * packed


def test_conv_cli_takes_per_axis_strides_pads_and_dilations(capsys):
    from npusim.app.cli import main

    assert main(["conv", "1", "8", "9", "9", "12", "3", "2", "--stride", "2", "1", "--pad", "0", "1", "2", "0",
                 "--dilation", "1", "2", "--groups", "4", "--arch", "mid32"]) == 0
    out = capsys.readouterr().out
    assert "3x2 stride 2x1 pad 0x1x2x0 dilation 1x2 groups 4 i8 -> 5x8" in out and out.rstrip().endswith("ok")
    assert main(["conv", "1", "8", "9", "9", "12", "3", "3", "--stride", "2", "1", "3"]) == 1
    assert capsys.readouterr().err.strip() == "npusim: error: stride needs 1 or 2 values, not (2, 1, 3)"
