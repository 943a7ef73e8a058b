"""Reductions over any axes and the normalisations (InstanceNormalization, GroupNormalization at opsets 18 and 21,
a standalone BatchNormalization) on the NPU against onnxruntime on every preset, row-major and channels-last."""

import numpy as np
import pytest
from onnx import helper, numpy_helper

from compiler.frontend.onnx_import import import_onnx
from isa.arch import load_arch
from npusim.app.driver import run_model
from tests.compiler.util import model, vi
from tests.e2e.test_elementwise_ops import PRESETS, RTOL, check

REDUCE = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceSumSquare", "ReduceL1", "ReduceL2",
          "ReduceLogSum"]
SHAPE = (2, 6, 8, 10)

# (input, axes or None for all, keepdims, noop_with_empty_axes)
CASES = [("xc", (1,), 1, 0), ("xc", (2, 3), 1, 0), ("xc", (1, 3), 0, 0), ("xc", (0, 2), 1, 0), ("xc", (3,), 0, 0),
         ("r", (1,), 1, 0), ("r", (2, 3), 0, 0), ("r", (0, 2), 1, 0), ("r", (-1,), 1, 0), ("r", (-3, -1), 0, 0),
         ("r", None, 0, 0), ("r3", (0,), 0, 0), ("r3", (0, 2), 1, 0), ("r2", (0,), 1, 0), ("r2", (), 1, 1),
         ("r2", None, 1, 0)]


def _reduce_model(op: str, opset: int):
    n, c, h, w = SHAPE
    nodes = [helper.make_node("Conv", ["x", "ident"], ["xc"]),
             helper.make_node("Reshape", ["r", "s3"], ["r3"]), helper.make_node("Reshape", ["r", "s2"], ["r2"])]
    inits = [numpy_helper.from_array(np.eye(c, dtype=np.float32).reshape(c, c, 1, 1), "ident"),
             numpy_helper.from_array(np.array([n * c, h, w], np.int64), "s3"),
             numpy_helper.from_array(np.array([-1, w], np.int64), "s2")]
    outs = []
    for k, (src, axes, keep, noop) in enumerate(CASES):
        if noop and opset < 18 and op != "ReduceSum":   # noop_with_empty_axes came with axes as an input
            continue
        attrs = {"keepdims": keep, "noop_with_empty_axes": noop} if noop else {"keepdims": keep}
        ins = [src]
        if axes is not None:
            if opset >= 18 or op == "ReduceSum":
                inits.append(numpy_helper.from_array(np.array(axes, np.int64), f"axes{k}"))
                ins.append(f"axes{k}")
            else:
                attrs["axes"] = list(axes)
        nodes.append(helper.make_node(op, ins, [f"y{k}"], name=f"case{k}", **attrs))
        outs.append(vi(f"y{k}", None))
    return model(nodes, [vi("x", list(SHAPE)), vi("r", list(SHAPE))], outs, opset=opset, inits=inits)


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("op", REDUCE)
def test_reductions_over_any_axes(op, preset):
    rng = np.random.default_rng(REDUCE.index(op))
    values = lambda: rng.uniform(0.2, 2.0, SHAPE).astype(np.float32) * rng.choice([-1, 1], SHAPE).astype(np.float32)
    inputs = {"x": values(), "r": values()}
    if op == "ReduceLogSum":   # the log of a positive sum
        inputs = {k: np.abs(v) for k, v in inputs.items()}
    check(_reduce_model(op, 18 if preset != "mid32" else 13), preset, inputs, {op} if op != "ReduceSum" else set())


def test_reductions_keep_the_channels_last_order_and_the_row_program():
    """A channels-last input is reduced where it is (no transpose); a row-major last-axis ReduceMean keeps the
    row-wise program; ReduceSumSquare with noop_with_empty_axes squares each element (onnxruntime)."""
    m = _reduce_model("ReduceMean", 18)
    compiled, _, _, report = run_model(m, load_arch("mid32"), validate=True)
    assert "Transpose" not in {lr.op for lr in compiled.layers}
    g = import_onnx(_reduce_model("ReduceSumSquare", 18))
    assert {n.name: n.attrs["axes"] for n in g.nodes if n.op == "ReduceSumSquare"}["case14"] == ()
    assert {n.name: n.op for n in g.nodes}["case14"] == "ReduceSumSquare"


def test_a_reduction_larger_than_the_spm_accumulates_on_chip():
    """A mean over 2**20 elements (4 MiB) on edge16's 256 KiB: tiles accumulate into one on-chip sum."""
    m = model([helper.make_node("ReduceMean", ["x"], ["y"], keepdims=0)], [vi("x", [16, 256, 256])],
              [vi("y", None)], opset=18)
    x = np.random.default_rng(1).uniform(0.5, 1.5, (16, 256, 256)).astype(np.float32)
    compiled, _, outs, report = run_model(m, load_arch("edge16"), {"x": x}, validate=True)
    assert report["validation"]["y"]["max_rel_error"] <= RTOL and report["host_ops"] == []


def test_a_reduction_beyond_five_alternating_groups_runs_on_the_host():
    shape = [2, 3, 2, 3, 2, 3]
    m = model([helper.make_node("ReduceMax", ["x", "a"], ["y"], name="rmax")], [vi("x", shape)], [vi("y", None)],
              opset=18, inits=[numpy_helper.from_array(np.array([0, 2, 4], np.int64), "a")])
    _, _, _, report = run_model(m, load_arch("edge16"), validate=True)
    assert report["host_ops"][0]["reason"].startswith("reducing axes (0, 2, 4) of (2, 3, 2, 3, 2, 3) leaves 6")
    assert report["validation"]["y"]["ok"]


# ------------------------------------------------------------------------------------------------ normalisations

def _norm_model(shape, groups: int, opset: int, per_group: bool = False, nhwc: bool = True):
    """InstanceNormalization and GroupNormalization of a row-major input ``r`` and (4-D) of a conv's output."""
    c = shape[1]
    rng = np.random.default_rng(c + groups)
    p = lambda n: rng.standard_normal(n).astype(np.float32)
    gn = groups if per_group else c
    inits = [numpy_helper.from_array(v, k) for k, v in (("s", p(c)), ("b", p(c)), ("gs", p(gn)), ("gb", p(gn)))]
    nodes, ins, outs = [], ["r"], []
    if nhwc:
        inits.append(numpy_helper.from_array(np.eye(c, dtype=np.float32).reshape(c, c, 1, 1), "ident"))
        nodes.append(helper.make_node("Conv", ["x", "ident"], ["xc"]))
        ins.append("xc")
    for src in ins:
        nodes += [helper.make_node("InstanceNormalization", [src, "s", "b"], [f"in_{src}"], epsilon=1e-4),
                  helper.make_node("GroupNormalization", [src, "gs", "gb"], [f"gn_{src}"], num_groups=groups)]
        outs += [vi(f"in_{src}", None), vi(f"gn_{src}", None)]
    return model(nodes, [vi(n, list(shape)) for n in ("r", "x")[:len(ins)]], outs, opset=opset, inits=inits)


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("shape, groups, opset, per_group, nhwc", [
    ((2, 6, 8, 10), 3, 21, False, True), ((2, 6, 8, 10), 2, 18, True, True), ((3, 8, 20), 4, 21, False, False),
    ((1, 32, 32, 32), 2, 21, False, True),   # 16,384 elements a group: three passes on edge16, one elsewhere
])
def test_instance_and_group_normalization(shape, groups, opset, per_group, nhwc, preset):
    rng = np.random.default_rng(9)
    inputs = {k: (rng.standard_normal(shape) * 2 + 0.5).astype(np.float32) for k in ("r", "x")[:1 + nhwc]}
    check(_norm_model(shape, groups, opset, per_group, nhwc), preset, inputs,
          {"InstanceNormalization", "GroupNormalization"})


def test_group_norm_outputs_get_their_input_shape():
    """ONNX's shape inference leaves GroupNormalization's output without a shape; the importer gives it its input's,
    so what follows gets shapes too (two in a row here)."""
    p = [numpy_helper.from_array(np.ones(4, np.float32), k) for k in "sb"]
    nodes = [helper.make_node("GroupNormalization", ["x", "s", "b"], ["a"], num_groups=2),
             helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("GroupNormalization", ["r", "s", "b"], ["y"], num_groups=4)]
    g = import_onnx(model(nodes, [vi("x", [1, 4, 3, 5])], [vi("y", None)], opset=21, inits=p))
    assert {t: g.tensor(t).shape for t in "ary"} == {"a": (1, 4, 3, 5), "r": (1, 4, 3, 5), "y": (1, 4, 3, 5)}


def _bn_model(shape, after_conv: bool):
    c = shape[1]
    rng = np.random.default_rng(c)
    params = [rng.standard_normal(c), rng.standard_normal(c), rng.standard_normal(c), rng.uniform(0.1, 2, c)]
    inits = [numpy_helper.from_array(v.astype(np.float32), k) for k, v in zip("sbmv", params)]
    src = "r"
    nodes = []
    if after_conv:   # a Relu between: not foldable into the conv
        inits.append(numpy_helper.from_array(rng.standard_normal((c, c, 3, 3)).astype(np.float32), "w"))
        nodes += [helper.make_node("Conv", ["r", "w"], ["c"], pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", ["c"], ["a"])]
        src = "a"
    nodes.append(helper.make_node("BatchNormalization", [src, "s", "b", "m", "v"], ["y"], epsilon=1e-3))
    return model(nodes, [vi("r", list(shape))], [vi("y", None)], opset=15, inits=inits)


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("shape, after_conv", [((4, 16), False), ((2, 8, 30), False), ((2, 8, 6, 10), False),
                                               ((2, 8, 6, 10), True)])
def test_standalone_batchnorm_is_one_pass(shape, after_conv, preset):
    inputs = {"r": np.random.default_rng(2).standard_normal(shape).astype(np.float32)}
    check(_bn_model(shape, after_conv), preset, inputs, {"BatchNormalization"})


def test_batchnorm_after_a_conv_is_still_folded_into_it():
    c = 8
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((c, 3, 3, 3)).astype(np.float32), "w")]
    inits += [numpy_helper.from_array(rng.uniform(0.5, 1.5, c).astype(np.float32), k) for k in "sbmv"]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["y"])]
    m = model(nodes, [vi("x", [1, 3, 8, 8])], [vi("y", None)], opset=15, inits=inits)
    compiled, _, _, report = run_model(m, load_arch("edge16"), validate=True)
    assert [lr.op for lr in compiled.layers] == ["Conv"] and report["validation"]["y"]["ok"]


def test_normalisations_with_computed_parameters_run_on_the_host():
    nodes = [helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], name="inorm")]
    m = model(nodes, [vi("x", [1, 3, 4, 4]), vi("s", [3]), vi("b", [3])], [vi("y", None)])
    _, _, _, report = run_model(m, load_arch("edge16"), validate=True)
    assert [(h["name"], h["reason"]) for h in report["host_ops"]] == [
        ("inorm", "scale, bias (mean and variance) must be constants")]
    assert report["validation"]["y"]["max_rel_error"] <= RTOL


def test_a_normalisation_whose_parameters_do_not_fit_the_spm_runs_on_the_host():
    c = 1024
    inits = [numpy_helper.from_array(np.ones(c, np.float32), k) for k in "sb"]
    m = model([helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], name="inorm")],
              [vi("x", [1, c, 2, 2])], [vi("y", None)], inits=inits)
    _, _, _, report = run_model(m, load_arch("edge16", ["spm.size=8192"]), validate=True)
    assert [(h["name"], h["reason"]) for h in report["host_ops"]] == [
        ("inorm", "1024 channels of scale and bias do not fit the SPM")]
    assert report["validation"]["y"]["ok"]
