"""ONNX ConvTranspose on the NPU (compiler/ops/conv_transpose.py) against onnxruntime on all three presets, for
the split lowering and both swelling baselines: every attribute form (strides, pads, output_padding, output_shape,
auto_pad, dilations, groups, bias, 1-D, a fused Relu/Clip) at opsets 11, 17 and 22, a hypothesis sweep, and the
forms that stay on the host with a reason. Floats are checked with a GEMM-style bound: |npu - ort| <= 2 (n + 1) eps32
sum |x w| over the n products of each output (both sides accumulate in fp32)."""

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from compiler.errors import CompileError
from compiler.kernels.conv_transpose2d import ConvTransposeShape, conv_transpose_reference
from compiler.ops.conv_transpose import transpose_shape
from isa.arch import load_arch, presets_by_size
from npusim.app.driver import load_model, run_model
from tests.compiler.util import model, ort_run, vi

PRESETS = presets_by_size()
MODES = ("split", "swell_spm", "swell_dram")


def _node(y: str, w: str, bias: str | None = None, x: str = "x", **attrs):
    return helper.make_node("ConvTranspose", [x, w] + ([bias] if bias else []), [y], name=y, **attrs)


def _inits(rng, shapes: dict) -> list:
    return [numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n) for n, s in shapes.items()]


def _bound(m, inputs: dict, name: str) -> np.ndarray:
    """2 (n + 1) eps32 sum|x w| of output ``name``'s ConvTranspose node (a fused activation only shrinks errors)."""
    graph = load_model(m)
    node = next(n for n in graph.nodes if name in n.outputs or n.outputs[0] in
                [c.inputs[0] for c in graph.nodes if name in c.outputs])
    x = np.abs(inputs[node.inputs[0]]).astype(np.float64)
    w = np.abs(graph.tensor(node.inputs[1]).data).astype(np.float64)
    ct = transpose_shape(node, x.shape, w.shape)
    x4, w4 = x.reshape(ct.N, ct.C, ct.H, ct.W), w.reshape(ct.C, ct.Kg, ct.R, ct.S)
    n = ct.Cg * -(-ct.R // ct.stride[0]) * -(-ct.S // ct.stride[1]) * max(ct.dilation)
    return (2 * (n + 1) * np.finfo(np.float32).eps * conv_transpose_reference(x4, w4, ct)
            + 2 * np.finfo(np.float32).eps).reshape(-1)


def _check(m, preset: str, mode: str, seed: int = 0) -> dict:
    """Run ``m`` on ``preset`` lowered as ``mode``: every ConvTranspose on the NPU, every output within the bound."""
    graph = load_model(m)
    rng = np.random.default_rng(seed)
    inputs = {n: rng.standard_normal(graph.tensor(n).shape).astype(np.float32) for n in graph.inputs}
    _, _, outputs, report = run_model(m, load_arch(preset), inputs, conv_transpose=mode)
    assert report["host_ops"] == [], report["host_ops"]
    assert {lr["op"] for lr in report["layers"]} == {"ConvTranspose"}
    names = [o.name for o in m.graph.output]
    for name, want in zip(names, ort_run(m, inputs, names)):
        got = outputs[name]
        assert got.shape == want.shape, (name, got.shape, want.shape)
        err = np.abs(got.astype(np.float64) - want).reshape(-1)
        bound = _bound(m, inputs, name)
        assert (err <= bound).all(), (name, preset, mode, float(err.max()), float(bound[np.argmax(err - bound)]))
    return report


def transpose_forms(opset: int):
    """Eight 2-D forms on one 1x8x5x6 input: the three BEV/FPN 2x upsamplings (k=2 s=2 with a fused Relu; k=4 s=2
    p=1; k=3 s=2 p=1 op=1 with bias); asymmetric strides, pads, dilations and output_padding, grouped; SAME_UPPER
    and SAME_LOWER at stride 2 (grouped, with bias); output_shape at stride 3; dilation 2 at stride 2 (bias-only
    phases) with a fused Clip; VALID at stride 1."""
    rng = np.random.default_rng(opset)
    nodes = [_node("c1", "w1", strides=[2, 2]), helper.make_node("Relu", ["c1"], ["y1"]),
             _node("y2", "w2", strides=[2, 2], pads=[1, 1, 1, 1]),
             _node("y3", "w3", "b3", strides=[2, 2], pads=[1, 1, 1, 1], output_padding=[1, 1]),
             _node("y4", "w4", strides=[2, 3], pads=[1, 0, 2, 1], dilations=[1, 2], output_padding=[1, 0], group=2),
             _node("y5", "w5", "b5", strides=[2, 2], auto_pad="SAME_UPPER", group=4),
             _node("y6", "w6", strides=[3, 2], output_shape=[14, 11], kernel_shape=[4, 3]),
             _node("c7", "w7", "b7", strides=[2, 2], dilations=[2, 2]),
             helper.make_node("Clip", ["c7", "lo", "hi"], ["y7"]),
             _node("y8", "w8", auto_pad="VALID")]
    if opset >= 17:   # SAME_LOWER: onnx's shape inference before 1.16 placed the odd pad like SAME_UPPER
        nodes.append(_node("y9", "w9", "b9", strides=[2, 2], auto_pad="SAME_LOWER"))
    inits = _inits(rng, {"w1": (8, 12, 2, 2), "w2": (8, 6, 4, 4), "w3": (8, 6, 3, 3), "b3": (6,),
                         "w4": (8, 3, 3, 2), "w5": (8, 2, 3, 3), "b5": (8,), "w6": (8, 4, 4, 3), "w7": (8, 4, 3, 3),
                         "b7": (4,), "w8": (8, 5, 2, 3), "w9": (8, 4, 3, 3), "b9": (4,)})
    inits += [numpy_helper.from_array(np.float32(-0.5), "lo"), numpy_helper.from_array(np.float32(1.0), "hi")]
    outs = [f"y{i}" for i in range(1, 9 + (opset >= 17))]
    return model(nodes, [vi("x", [1, 8, 5, 6])], [vi(y, None) for y in outs], opset, inits)


@pytest.mark.parametrize("preset, mode", [(p, "split") for p in PRESETS] + [("mid32", "swell_spm"),
                                                                             ("edge16", "swell_dram")])
def test_conv_transpose_forms_match_onnxruntime(preset, mode):
    _check(transpose_forms(17), preset, mode)


@pytest.mark.parametrize("opset", [11, 22])
def test_conv_transpose_opsets(opset):
    _check(transpose_forms(opset), "mid32", "split")


@pytest.mark.parametrize("preset", PRESETS)
def test_conv_transpose_1d(preset):
    rng = np.random.default_rng(5)
    nodes = [_node("y1", "w1", "b1", strides=[2], pads=[1, 1]),
             _node("y2", "w2", strides=[3], output_padding=[2], dilations=[2], group=3),
             _node("y3", "w3", strides=[2], auto_pad="SAME_UPPER")]
    inits = _inits(rng, {"w1": (6, 5, 4), "b1": (5,), "w2": (6, 2, 3), "w3": (6, 4, 3)})
    m = model(nodes, [vi("x", [2, 6, 9])], [vi(f"y{i}", None) for i in (1, 2, 3)], 17, inits)
    _check(m, preset, "split")


@st.composite
def layers(draw):
    """One random ConvTranspose layer: (input shape, weight shape, attributes)."""
    i = st.integers
    g = draw(st.sampled_from([1, 1, 2, 3]))
    c, k = g * draw(i(1, 12)), g * draw(i(1, 12))
    r, s, sh, sw = draw(i(1, 5)), draw(i(1, 5)), draw(i(1, 3)), draw(i(1, 3))
    dh, dw = draw(st.sampled_from([1, 1, 2])), draw(st.sampled_from([1, 1, 2]))
    h, w = draw(i(1, 7)), draw(i(1, 7))
    attrs = {"strides": [sh, sw], "dilations": [dh, dw], "group": g}
    op = [draw(i(0, sh - 1)), draw(i(0, sw - 1))]   # onnxruntime refuses output_padding >= stride
    form = draw(st.sampled_from(["pads", "pads", "SAME_UPPER", "SAME_LOWER", "VALID", "output_shape"]))
    if form == "pads":
        attrs |= {"pads": [draw(i(0, (r - 1) * dh)), draw(i(0, (s - 1) * dw)), draw(i(0, (r - 1) * dh)),
                           draw(i(0, (s - 1) * dw))], "output_padding": op}
    elif form == "output_shape":
        full = [sh * (h - 1) + op[0] + (r - 1) * dh + 1, sw * (w - 1) + op[1] + (s - 1) * dw + 1]
        attrs |= {"output_shape": [draw(i(max(1, f - (r - 1) * dh), f)) for f in full[:1]]
                  + [draw(i(max(1, full[1] - (s - 1) * dw), full[1]))], "output_padding": op}
    else:   # SAME_* asking for more than the uncropped output (negative pads) stays on the host
        assume(form == "VALID" or min((r - 1) * dh + 1 - sh, (s - 1) * dw + 1 - sw) >= 0)
        attrs["auto_pad"] = form
    return (draw(i(1, 2)), c, h, w), (c, k // g, r, s), attrs, draw(st.booleans())


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(layers(), st.sampled_from(PRESETS), st.sampled_from(MODES))
def test_conv_transpose_sweep_matches_onnxruntime(layer, preset, mode):
    xs, ws, attrs, bias = layer
    try:
        ConvTransposeShape(xs[0], xs[1], xs[2], xs[3], ws[1] * attrs["group"], ws[2], ws[3], attrs["strides"],
                           attrs.get("pads", 0), attrs["dilations"], attrs.get("output_padding", 0), attrs["group"])
    except CompileError:   # the pads crop the whole output: not a valid layer
        return
    rng = np.random.default_rng(len(str(layer)))
    inits = _inits(rng, {"w": ws, **({"b": (ws[1] * attrs["group"],)} if bias else {})})
    m = model([_node("y", "w", "b" if bias else None, **attrs)], [vi("x", list(xs))], [vi("y", None)], 17, inits)
    _check(m, preset, mode)


def test_forms_the_npu_does_not_take_run_on_the_host():
    rng = np.random.default_rng(2)
    nodes = [_node("y1", "w1", strides=[2, 2, 2]),                       # 3-D
             _node("y2", "w", x="x2", strides=[2, 2])]                   # weights computed at run time
    inits = _inits(rng, {"w1": (2, 2, 2, 2, 2)})
    m = model(nodes, [vi("x", [1, 2, 3, 3, 3]), vi("x2", [1, 2, 3, 3]), vi("w", [2, 3, 2, 2])],
              [vi("y1", None), vi("y2", None)], 17, inits)
    _, _, _, report = run_model(m, load_arch("mid32"), validate=True)
    reasons = {h["name"]: h["reason"] for h in report["host_ops"]}
    assert "rank 5" in reasons["y1"] and "constants" in reasons["y2"], reasons
    assert all(v["ok"] for v in report["validation"].values())


def test_unknown_lowering_mode_is_refused():
    m = transpose_forms(17)
    with pytest.raises(CompileError, match="conv_transpose must be one of split, swell_spm, swell_dram"):
        run_model(m, load_arch("edge16"), conv_transpose="gather")


def qdq_model(x_shape, w_shape, per_channel: bool, bias: bool, x_type=TensorProto.INT8, seed: int = 0, **attrs):
    """``DequantizeLinear(x_q) -> ConvTranspose(., DequantizeLinear(w_q)[, DequantizeLinear(b_q)]) ->
    QuantizeLinear``, as onnxruntime's quantization tools write it (symmetric int8 weights, int32 bias at scale
    x_scale * w_scale); (model, int input)."""
    rng = np.random.default_rng(seed)
    kg = w_shape[1]
    k = kg * attrs.get("group", 1)
    ws = (rng.random(kg if per_channel else 1) * 0.02 + 0.005).astype(np.float32)
    xs, ys = np.float32(0.05), np.float32(0.3)
    xt = np.int8 if x_type == TensorProto.INT8 else np.uint8
    inits = [numpy_helper.from_array(rng.integers(-127, 128, w_shape).astype(np.int8), "wq"),
             numpy_helper.from_array(ws if per_channel else ws[0], "ws"),
             numpy_helper.from_array(np.zeros(ws.shape, np.int8) if per_channel else np.int8(0), "wzp"),
             numpy_helper.from_array(xs, "xs"), numpy_helper.from_array(xt(3), "xzp"),
             numpy_helper.from_array(ys, "ys"), numpy_helper.from_array(np.int8(-2), "yzp")]
    nodes = [helper.make_node("DequantizeLinear", ["xq", "xs", "xzp"], ["xf"]),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wzp"], ["wf"], axis=1)]
    if bias:
        inits += [numpy_helper.from_array(rng.integers(-3000, 3000, k).astype(np.int32), "bq"),
                  numpy_helper.from_array(np.resize(xs * ws, k).astype(np.float32), "bs")]
        nodes.append(helper.make_node("DequantizeLinear", ["bq", "bs"], ["bf"], axis=0))
    nodes += [helper.make_node("ConvTranspose", ["xf", "wf"] + ["bf"] * bias, ["yf"], **attrs),
              helper.make_node("QuantizeLinear", ["yf", "ys", "yzp"], ["y"])]
    m = model(nodes, [vi("xq", list(x_shape), x_type)], [vi("y", None, TensorProto.INT8)], 17, inits)
    info = np.iinfo(xt)
    return m, rng.integers(info.min, info.max + 1, x_shape).astype(xt)


QDQ_FORMS = [((1, 8, 5, 6), (8, 6, 3, 3), True, True, {"strides": [2, 2], "pads": [1, 1, 1, 1],
                                                      "output_padding": [1, 1]}),
             ((1, 16, 4, 4), (16, 16, 2, 2), False, False, {"strides": [2, 2]}),
             ((1, 6, 5, 4), (6, 3, 4, 3), False, True, {"strides": [2, 3], "pads": [1, 0, 2, 1], "group": 2}),
             ((2, 6, 7), (6, 5, 4), True, False, {"strides": [2], "pads": [1, 1]})]


@pytest.mark.parametrize("preset", PRESETS)
def test_qdq_conv_transpose_runs_int8_on_the_npu(preset):
    """Fused into one int8 ConvTranspose (no DequantizeLinear/QuantizeLinear layer left); onnxruntime computes the
    QDQ graph in float32 and rounds once, the NPU accumulates exactly in int32 and requantizes as QLinearConv: the
    two may differ by one step where a value lies within float rounding of a half-step (none did here)."""
    for x_shape, w_shape, per_channel, bias, attrs in QDQ_FORMS:
        m, x = qdq_model(x_shape, w_shape, per_channel, bias, **attrs)
        _, _, outputs, report = run_model(m, load_arch(preset), {"xq": x})
        assert report["host_ops"] == [] and [lr["op"] for lr in report["layers"]] == ["ConvTranspose"], report
        want = ort_run(m, {"xq": x})[0]
        assert outputs["y"].dtype == np.int8 and outputs["y"].shape == want.shape
        diff = np.abs(outputs["y"].astype(np.int64) - want)
        assert diff.max() <= 1 and (diff > 0).mean() <= 0.01, (x_shape, w_shape, int(diff.max()))


def test_qdq_forms_not_fused_stay_correct_on_the_host():
    # uint8 activations (the NPU's int8 matrix unit takes int8 x int8): the float ConvTranspose runs on the host
    m, x = qdq_model((1, 4, 3, 3), (4, 4, 3, 3), True, True, TensorProto.UINT8, strides=[2, 2])
    _, _, _, report = run_model(m, load_arch("mid32"), {"xq": x}, validate=True)
    assert "ConvTranspose" in {h["op"] for h in report["host_ops"]}
    assert all(v["ok"] for v in report["validation"].values()), report["validation"]
