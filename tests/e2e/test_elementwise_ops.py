"""Element-wise ops exporters emit, on the NPU against onnxruntime on every preset: the activations built from a few
vector instructions per tile, the single-function ones, Pow with a constant exponent, PRelu and the variadic
Min/Max/Sum/Mean with broadcasting, on 2-D to 4-D row-major inputs and channels-last ones (a Conv's output)."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.frontend.onnx_import import import_onnx
from isa import Queue
from isa.arch import load_arch, presets_by_size
from npusim.app.driver import run_model
from tests.compiler.util import model, vi

PRESETS = presets_by_size()
RTOL = 1e-5   # max |err| / max |onnxruntime| per output
SHAPE = (2, 8, 6, 10)
RNG = np.random.default_rng(3)


def _ident(c: int):
    """An identity 1x1 convolution: its output is its input, stored channels-last."""
    return numpy_helper.from_array(np.eye(c, dtype=np.float32).reshape(c, c, 1, 1), "ident")


def _branches(op: str, attrs: dict, extra: tuple[str, ...] = (), inits: tuple = (), opset: int = 18):
    """``op`` on four inputs: channels-last 4-D (``x`` through an identity conv), row-major 4-D, 3-D and 2-D (``r``
    and reshapes of it)."""
    n, c, h, w = SHAPE
    nodes = [helper.make_node("Conv", ["x", "ident"], ["xc"]),
             helper.make_node(op, ["xc", *extra], ["y_nhwc"], name="nhwc", **attrs),
             helper.make_node(op, ["r", *extra], ["y4"], name="rm4", **attrs),
             helper.make_node("Reshape", ["r", "s3"], ["r3"]),
             helper.make_node(op, ["r3", *extra], ["y3"], name="rm3", **attrs),
             helper.make_node("Reshape", ["r", "s2"], ["r2"]),
             helper.make_node(op, ["r2", *extra], ["y2"], name="rm2", **attrs)]
    inits = [_ident(c), numpy_helper.from_array(np.array([n * c, h, w], np.int64), "s3"),
             numpy_helper.from_array(np.array([-1, w], np.int64), "s2"), *inits]
    return model(nodes, [vi("x", list(SHAPE)), vi("r", list(SHAPE))],
                 [vi(o, None) for o in ("y_nhwc", "y4", "y3", "y2")], opset=opset, inits=inits)


def check(m, preset: str, inputs: dict, ops_on_npu: set[str]) -> dict:
    """Run ``m`` validated on ``preset``: nothing on the host, every listed op among the NPU's layers, every output
    within RTOL of onnxruntime. The validation report."""
    compiled, _, _, report = run_model(m, load_arch(preset), inputs, validate=True)
    assert report["host_ops"] == [], report["host_ops"]
    assert ops_on_npu <= {lr.op for lr in compiled.layers}
    for name, v in report["validation"].items():
        assert v["max_rel_error"] <= RTOL, (name, v)
    return report["validation"]


def _values(kind: str, shape=SHAPE, seed=0) -> np.ndarray:
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32) * 3
    if kind == "positive":
        return np.abs(x) + np.float32(0.05)
    if kind == "nonzero":
        return np.where(x < 0, x - 0.5, x + 0.5).astype(np.float32)
    return x


UNARY = [("LeakyRelu", {"alpha": 0.1}, "any"), ("LeakyRelu", {"alpha": 1.5}, "any"),
         ("LeakyRelu", {"alpha": -0.3}, "any"), ("LeakyRelu", {}, "any"), ("Elu", {"alpha": 0.7}, "any"),
         ("Selu", {}, "any"), ("Selu", {"alpha": 1.2, "gamma": 0.9}, "any"),
         ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}, "any"), ("HardSwish", {}, "any"), ("Mish", {}, "any"),
         ("Softplus", {}, "any"), ("Exp", {}, "any"), ("Log", {}, "positive"), ("Sqrt", {}, "positive"),
         ("Reciprocal", {}, "nonzero"), ("Abs", {}, "any"), ("Neg", {}, "any"), ("Sigmoid", {}, "any")]


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("op, attrs, kind", UNARY, ids=[f"{o}{''.join(f'-{v}' for v in a.values())}"
                                                        for o, a, _ in UNARY])
def test_activations_on_every_layout_and_preset(op, attrs, kind, preset):
    inputs = {"x": _values(kind, seed=1), "r": _values(kind, seed=2)}
    check(_branches(op, attrs), preset, inputs, {op})


def test_an_activation_is_one_stream_with_a_few_instructions_per_tile():
    """Elu: min, exp, cvt, relu, add on each tile between its one load and one store (no pass through DRAM)."""
    m = model([helper.make_node("Elu", ["x"], ["y"], alpha=0.5)], [vi("x", [64, 4096])], [vi("y", None)])
    compiled, _, _, report = run_model(m, load_arch("edge16"), {"x": _values("any", (64, 4096))}, validate=True)
    assert report["validation"]["y"]["max_rel_error"] <= RTOL
    instrs = compiled.program.instrs[compiled.layers[0].start:compiled.layers[0].end]
    loads, vpu = [sum(i.queue is q for i in instrs) for q in (Queue.DMA_LD, Queue.VPU)]
    stores = sum(i.queue is Queue.DMA_ST for i in instrs)
    assert loads == stores > 1 and vpu == 5 * loads


@pytest.mark.parametrize("alpha", [1.0, 1.702])
def test_swish_matches_onnxruntime_at_opset_24(alpha):
    """Swish (SiLU at alpha 1, what a fused Sigmoid * x becomes) from the graph API, against onnxruntime running the
    opset-24 node (the importer does not read opset 24 yet)."""
    import onnxruntime as ort

    from compiler.frontend.builder import GraphBuilder

    x = _values("any", (4, 8, 6, 10), seed=3)
    b = GraphBuilder("swish")
    b.output(b.node("Swish", [b.input("x", x.shape)], x.shape, alpha=alpha))
    _, _, outs, report = run_model(b.build(), load_arch("mid32"), {"x": x})
    assert report["host_ops"] == []
    m = model([helper.make_node("Swish", ["x"], ["y"], alpha=alpha)], [vi("x", list(x.shape))],
              [vi("y", list(x.shape))], opset=24)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = next(iter(outs.values()))
    assert np.abs(got - want).max() <= RTOL * np.abs(want).max()


def test_softplus_and_mish_do_not_overflow():
    x = np.array([[-120, -30, -5, 0, 5, 30, 89, 100, 3e4]], np.float32)
    for op in ("Softplus", "Mish"):
        m = model([helper.make_node(op, ["x"], ["y"])], [vi("x", list(x.shape))], [vi("y", None)], opset=18)
        _, _, outs, report = run_model(m, load_arch("edge16"), {"x": x}, validate=True)
        assert np.isfinite(outs["y"]).all() and report["validation"]["y"]["max_rel_error"] <= RTOL, (op, outs["y"])


EXPONENTS = [2.0, 3.0, 4.0, 7.0, 0.5, -0.5, -1.0, -2.0, 2.5, 1.7, -0.3, -2.7, 0.0, 1.0, 32.0]


@pytest.mark.parametrize("preset", PRESETS)
def test_pow_with_a_constant_exponent(preset):
    names = [f"e{k}" for k in range(len(EXPONENTS))]
    nodes = [helper.make_node("Pow", ["x", e], [f"y{k}"]) for k, e in enumerate(names)]
    nodes.append(helper.make_node("Pow", ["x", "i3"], ["yi"]))    # an int64 exponent
    inits = [numpy_helper.from_array(np.array(e, np.float32), n) for n, e in zip(names, EXPONENTS)]
    inits.append(numpy_helper.from_array(np.array(3, np.int64), "i3"))
    outs = [vi(f"y{k}", None) for k in range(len(EXPONENTS))] + [vi("yi", None)]
    x = np.random.default_rng(4).uniform(0.05, 2.5, (3, 5, 7)).astype(np.float32)
    check(model(nodes, [vi("x", [3, 5, 7])], outs, inits=inits), preset, {"x": x}, {"Pow"})


def test_pow_of_negative_bases_follows_onnxruntime():
    """Integer exponents keep the sign (products); others give NaN where onnxruntime's powf does."""
    x = np.array([-2.5, -1.0, -0.5, 0.0, 0.5, 3.0], np.float32)
    for e in (2.0, 3.0, -3.0, 0.5, 1.7, -0.3):
        m = model([helper.make_node("Pow", ["x", "e"], ["y"])], [vi("x", [6])], [vi("y", None)],
                  inits=[numpy_helper.from_array(np.array(e, np.float32), "e")])
        _, _, outs, report = run_model(m, load_arch("edge16"), {"x": x})
        assert report["host_ops"] == []
        with np.errstate(divide="ignore", invalid="ignore"):
            want = np.power(x.astype(np.float64), e)
        np.testing.assert_allclose(outs["y"], want, rtol=1e-6, equal_nan=True)


def test_pow_forms_the_npu_does_not_take_run_on_the_host_with_a_reason():
    nodes = [helper.make_node("Pow", ["x", "big"], ["a"], name="big"),
             helper.make_node("Pow", ["x", "vec"], ["b"], name="vec"),
             helper.make_node("Pow", ["x", "x"], ["c"], name="act")]
    inits = [numpy_helper.from_array(np.array(40.0, np.float32), "big"),
             numpy_helper.from_array(np.array([1.0, 2.0, 3.0], np.float32), "vec")]
    m = model(nodes, [vi("x", [2, 3])], [vi(o, None) for o in "abc"], inits=inits)
    x = np.random.default_rng(5).uniform(0.5, 1.5, (2, 3)).astype(np.float32)
    _, _, _, report = run_model(m, load_arch("edge16"), {"x": x}, validate=True)
    reasons = {h["name"]: h["reason"] for h in report["host_ops"]}
    assert reasons == {"big": "exponent 40.0: only exponents whose integer part is at most 32 in magnitude are "
                              "lowered",
                       "vec": "only a scalar exponent is lowered, not shape (3,)",
                       "act": "input 1 (the exponent, 'x') must be a constant (it does not fold to one)"}
    assert all(v["ok"] for v in report["validation"].values())


# ------------------------------------------------------------------------------------------------ PRelu

@pytest.mark.parametrize("preset", PRESETS)
def test_prelu_slopes_broadcast_per_channel_scalar_and_last_axis(preset):
    c, w = SHAPE[1], SHAPE[3]
    slopes = {"unit": RNG.uniform(0, 1, (c, 1, 1)), "steep": RNG.uniform(1, 3, (c, 1, 1)),
              "mixed": RNG.uniform(-1, 2, (c, 1, 1)), "scalar": np.array([0.25]), "lastaxis": RNG.uniform(-1, 1, w)}
    nodes = [helper.make_node("Conv", ["x", "ident"], ["xc"])]
    outs = []
    for name in slopes:
        for src in ("xc", "r"):
            nodes.append(helper.make_node("PRelu", [src, name], [f"{name}_{src}"]))
            outs.append(vi(f"{name}_{src}", None))
    nodes.append(helper.make_node("PRelu", ["r", "s_act"], ["by_input"]))   # a slope computed by the model
    inits = [_ident(c)] + [numpy_helper.from_array(v.astype(np.float32), k) for k, v in slopes.items()]
    m = model(nodes, [vi("x", list(SHAPE)), vi("r", list(SHAPE)), vi("s_act", [c, 1, 1])],
              outs + [vi("by_input", None)], inits=inits)
    inputs = {"x": _values("any", seed=6), "r": _values("any", seed=7),
              "s_act": RNG.uniform(-1, 1, (c, 1, 1)).astype(np.float32)}
    check(m, preset, inputs, {"PRelu"})


# ------------------------------------------------------------------------------------------------ variadic

@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("op", ["Sum", "Mean", "Max", "Min"])
def test_variadic_ops_broadcast_any_number_of_inputs(op, preset):
    n, c, h, w = SHAPE
    nodes = [helper.make_node("Conv", ["x", "ident"], ["xc"]),
             # channels-last: a per-channel constant, a (W,) activation, the conv output twice
             helper.make_node(op, ["xc", "cc", "vw", "xc"], ["y_nhwc"]),
             # an activation that does not read the same channels-last: the op runs row-major
             helper.make_node(op, ["xc", "hw1"], ["y_mixed"]),
             helper.make_node(op, ["r", "cc", "hw1"], ["y_rm"]),
             helper.make_node(op, ["vw", "v2"], ["y_2d"]),       # (W,) with (3, W)
             helper.make_node(op, ["r"], ["y_one"]),
             helper.make_node(op, ["v2", "v2", "v2", "v2", "v2", "v2", "v2", "v2", "v2", "v2", "v2", "v2", "v2",
                                  "v2", "v2"], ["y_15"])]
    inits = [_ident(c), numpy_helper.from_array(RNG.standard_normal((c, 1, 1)).astype(np.float32), "cc")]
    m = model(nodes, [vi("x", list(SHAPE)), vi("r", list(SHAPE)), vi("vw", [w]), vi("hw1", [c, h, 1]),
                      vi("v2", [3, w])],
              [vi(o, None) for o in ("y_nhwc", "y_mixed", "y_rm", "y_2d", "y_one", "y_15")], inits=inits)
    inputs = {"x": _values("any", seed=8), "r": _values("any", seed=9), "vw": _values("any", (w,), 10),
              "hw1": _values("any", (c, h, 1), 11), "v2": _values("any", (3, w), 12)}
    check(m, preset, inputs, {op})


@pytest.mark.parametrize("other", [[8, 1, 1], [10], [1, 6, 10], [8, 6, 1]])
def test_binary_op_of_a_channels_last_tensor_and_a_lower_rank_activation(other):
    """(C, 1, 1), (W,) and (1, H, W) read the same channels-last; (C, H, 1) does not, so the op runs row-major."""
    nodes = [helper.make_node("Conv", ["x", "ident"], ["xc"]), helper.make_node("Mul", ["xc", "b"], ["y"]),
             helper.make_node("Sub", ["b", "xc"], ["z"])]
    m = model(nodes, [vi("x", list(SHAPE)), vi("b", other)], [vi("y", None), vi("z", None)], inits=[_ident(SHAPE[1])])
    compiled, _, _, report = run_model(m, load_arch("edge16"), {"x": _values("any", seed=1),
                                                                 "b": _values("any", tuple(other), seed=2)},
                                       validate=True)
    assert all(v["max_abs_error"] == 0 for v in report["validation"].values())
    assert ("Transpose" in {lr.op for lr in compiled.layers}) == (other == [8, 6, 1])


def test_sixteen_inputs_run_on_the_host_with_a_reason():
    nodes = [helper.make_node("Sum", ["x"] * 16, ["y"], name="sum16")]
    m = model(nodes, [vi("x", [4])], [vi("y", None)])
    _, _, _, report = run_model(m, load_arch("edge16"), validate=True)
    assert [(h["name"], h["reason"]) for h in report["host_ops"]] == [("sum16", "16 inputs; at most 15 are lowered")]
    assert report["validation"]["y"]["ok"]


def test_the_folded_ops_still_fold_when_constant():
    """Neg, Sqrt, Pow and Reciprocal of constants fold away as before (now they also run on the NPU otherwise)."""
    nodes = [helper.make_node("Sqrt", ["c"], ["s"]), helper.make_node("Neg", ["s"], ["n"]),
             helper.make_node("Pow", ["n", "two"], ["p"]), helper.make_node("Reciprocal", ["p"], ["q"]),
             helper.make_node("Add", ["x", "q"], ["y"])]
    inits = [numpy_helper.from_array(np.array([4.0, 9.0], np.float32), "c"),
             numpy_helper.from_array(np.array(2.0, np.float32), "two")]
    g = import_onnx(model(nodes, [vi("x", [2])], [vi("y", [2])], inits=inits))
    assert [n.op for n in g.nodes] == ["Add"]
    np.testing.assert_allclose(g.tensor(g.nodes[0].inputs[1]).data, [1 / 4, 1 / 9], rtol=1e-7)


def test_an_integer_tensor_keeps_the_host():
    m = model([helper.make_node("Abs", ["x"], ["y"], name="abs")], [vi("x", [5], TensorProto.INT32)],
              [vi("y", None, TensorProto.INT32)])
    x = np.array([-3, 0, 2, -7, 9], np.int32)
    _, _, outs, report = run_model(m, load_arch("edge16"), {"x": x}, validate=True)
    assert [h["name"] for h in report["host_ops"]] == ["abs"] and report["validation"]["y"]["ok"]
    np.testing.assert_array_equal(outs["y"], np.abs(x))


@pytest.mark.parametrize("op", ["Exp", "Add", "Sum", "ReduceSum"])
def test_an_empty_tensor_runs_on_the_host_with_a_reason(op):
    """A zero-size activation (onnx's *_empty_set node tests) has no bytes to stream: the host takes the node."""
    ins = ["x", "x"] if op in ("Add", "Sum") else ["x"]
    m = model([helper.make_node(op, ins, ["y"], name="n")], [vi("x", [2, 0, 4])], [vi("y", None)], opset=18)
    _, _, outs, report = run_model(m, load_arch("edge16"), {"x": np.zeros((2, 0, 4), np.float32)}, validate=True)
    assert report["host_ops"][0]["reason"] == "tensor 'x' is empty (shape (2, 0, 4))"
    assert report["validation"]["y"]["ok"] and outs["y"].shape == ((1, 1, 1) if op == "ReduceSum" else (2, 0, 4))
