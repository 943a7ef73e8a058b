"""The exporter-pattern fusions at the graph level: each form exporters write becomes one node, and every near miss
(a constant one ulp off, an intermediate read elsewhere or returned, a broadcast, a node the NPU would not lower)
leaves the graph exactly as it was."""

import math

import numpy as np
import pytest

from compiler.frontend.builder import GraphBuilder
from compiler.passes import PASSES, run_passes
from compiler.passes.fuse_gelu import fuse_gelu
from compiler.passes.fuse_layernorm import fuse_layernorm
from compiler.passes.fuse_matmul import fuse_matmul
from compiler.passes.fuse_silu import fuse_silu
from compiler.passes.fuse_softmax import fuse_softmax

F = np.float32
SQRT2, BETA, KAPPA, HALF, ONE, EPS = (F(v) for v in (math.sqrt(2), math.sqrt(2 / math.pi), 0.044715, 0.5, 1, 1e-5))
SHAPE = (2, 8, 16)


def _graph(build, dtype=np.float32, shape=SHAPE, extra_outputs=()):
    """A graph whose output is ``build(b, x)`` (and the tensors named in ``extra_outputs``)."""
    b = GraphBuilder("g")
    x = b.input("x", shape, dtype)
    b.output(build(b, x), *extra_outputs)
    return b.build()


def _ops(g):
    return [n.op for n in g.nodes]


def _unchanged(fuse, g):
    out = fuse(g)
    assert _ops(out) == _ops(g) and set(out.tensors) == set(g.tensors)


# -- GELU -----------------------------------------------------------------------------------------------------------

def erf_pytorch(b, x, sqrt2=SQRT2, half=HALF, one=ONE, z=None):
    t = b.erf(b.div(z or x, sqrt2, name="div"), name="erf")
    return b.mul(b.mul(x, b.add(t, one, name="add"), name="mul"), half, name="y")


def erf_huggingface(b, x):   # x * 0.5 * (1.0 + erf(x / sqrt 2))
    return b.mul(b.mul(x, F(0.5)), b.add(F(1.0), b.erf(b.div(x, SQRT2))), name="y")


def erf_tensorflow(b, x):    # 0.5 * x * (1 + erf(x * 1/sqrt 2))
    return b.mul(b.mul(F(0.5), x), b.add(b.erf(b.mul(x, F(1 / math.sqrt(2)))), F(1.0)), name="y")


def erf_nested(b, x):        # x * ((1 + erf) * 0.5)
    return b.mul(x, b.mul(b.add(b.erf(b.div(x, SQRT2)), F(1.0)), F(0.5)), name="y")


def tanh_pytorch(b, x, kappa=KAPPA, beta=BETA):   # torch.onnx's gelu(approximate='tanh')
    cube = b.mul(x, b.mul(x, x))
    inner = b.mul(beta, b.add(x, b.mul(kappa, cube)))
    return b.mul(F(0.5), b.mul(x, b.add(F(1.0), b.tanh(inner, name="tanh"))), name="y")


def tanh_newgelu(b, x):      # HuggingFace NewGELU: 0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * pow(x, 3))))
    cube = b.node("Pow", [x, F(3.0)], SHAPE)
    inner = b.add(x, b.mul(F(0.044715), cube))
    return b.mul(b.mul(F(0.5), x), b.add(F(1.0), b.tanh(b.mul(BETA, inner))), name="y")


@pytest.mark.parametrize("form,approximate", [(erf_pytorch, "none"), (erf_huggingface, "none"),
                                              (erf_tensorflow, "none"), (erf_nested, "none"),
                                              (tanh_pytorch, "tanh"), (tanh_newgelu, "tanh")])
def test_gelu_forms_become_one_gelu(form, approximate):
    g = fuse_gelu(_graph(form))
    assert [(n.op, n.attrs, n.inputs, n.outputs) for n in g.nodes] == [("Gelu", {"approximate": approximate},
                                                                        ("x",), ("y",))]
    g.topo_check()
    assert not any(t.is_const for t in g.tensors.values())   # the pattern's constants went with it


@pytest.mark.parametrize("near_miss", [
    lambda b, x: erf_pytorch(b, x, sqrt2=np.nextafter(SQRT2, F(2))),        # sqrt 2 one ulp off
    lambda b, x: erf_pytorch(b, x, half=F(0.4999999)),
    lambda b, x: erf_pytorch(b, x, one=np.nextafter(F(1), F(2))),
    lambda b, x: erf_pytorch(b, x, z=b.relu(x)),                             # erf of another tensor
    lambda b, x: erf_pytorch(b, x, half=np.full((1, 1, 1, 1), 0.5, F)),      # the 0.5 broadcasts x to 4-D
    lambda b, x: tanh_pytorch(b, x, kappa=F(0.0447)),
    lambda b, x: tanh_pytorch(b, x, beta=F(0.79788)),
])
def test_gelu_near_misses_stay(near_miss):
    _unchanged(fuse_gelu, _graph(near_miss))


def test_gelu_with_an_intermediate_read_elsewhere_or_returned_stays():
    _unchanged(fuse_gelu, _graph(erf_pytorch, extra_outputs=("erf",)))
    _unchanged(fuse_gelu, _graph(lambda b, x: b.add(erf_pytorch(b, x), b.relu("add"))))
    _unchanged(fuse_gelu, _graph(tanh_pytorch, extra_outputs=("tanh",)))


def test_gelu_the_npu_would_not_lower_stays():
    _unchanged(fuse_gelu, _graph(lambda b, x: erf_pytorch(b, x, np.float16(SQRT2), np.float16(0.5),
                                                          np.float16(1)), dtype=np.float16))


# -- SiLU -----------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("form,alpha", [(lambda b, x: b.mul(x, b.sigmoid(x), name="y"), 1.0),
                                        (lambda b, x: b.mul(b.sigmoid(x), x, name="y"), 1.0),
                                        (lambda b, x: b.mul(x, b.sigmoid(b.mul(x, F(1.702))), name="y"), 1.702)])
def test_silu_becomes_one_swish(form, alpha):
    g = fuse_silu(_graph(form))
    assert [(n.op, n.inputs, n.outputs) for n in g.nodes] == [("Swish", ("x",), ("y",))]
    assert g.nodes[0].attrs["alpha"] == pytest.approx(alpha)


def test_silu_near_misses_stay():
    _unchanged(fuse_silu, _graph(lambda b, x: b.mul(b.relu(x), b.sigmoid(x))))
    _unchanged(fuse_silu, _graph(lambda b, x: b.mul(x, b.sigmoid(x, name="s")), extra_outputs=("s",)))
    _unchanged(fuse_silu, _graph(lambda b, x: b.mul(x, b.sigmoid(b.mul(x, b.relu(x))))))   # not a constant alpha


# -- LayerNorm ------------------------------------------------------------------------------------------------------

def layernorm(b, x, eps=EPS, gamma=True, beta=True, square="pow", axes=(-1,), keep=True, shape=SHAPE):
    red = tuple(1 if i - len(shape) in axes or i in axes else d for i, d in enumerate(shape))
    mean = b.node("ReduceMean", [x], red, axes=axes, keepdims=1)
    d = b.sub(x, mean, name="d")
    sq = b.node("Pow", [d, F(2.0)], shape) if square == "pow" else b.mul(d, d)
    var = b.node("ReduceMean", [sq], red if keep else red[:-1], axes=axes, keepdims=int(keep))
    std = b.node("Sqrt", [b.add(var, eps)], red)
    y = b.div(d, std, name="n")
    norm = shape[-1]
    if gamma:
        y = b.mul(b.const("gamma", np.linspace(0.5, 1.5, norm, dtype=F)), y, name="scaled")
    if beta:
        y = b.add(y, b.const("beta", np.linspace(-1, 1, norm, dtype=F).reshape(1, 1, norm)), name="shifted")
    return y


@pytest.mark.parametrize("gamma,beta,square", [(True, True, "pow"), (True, True, "mul"), (True, False, "pow"),
                                               (False, True, "pow"), (False, False, "mul")])
def test_layernorm_becomes_one_layernormalization(gamma, beta, square):
    g = fuse_layernorm(_graph(lambda b, x: layernorm(b, x, gamma=gamma, beta=beta, square=square)))
    (n,) = g.nodes
    assert n.op == "LayerNormalization" and n.attrs == {"axis": 2, "epsilon": 1e-5, "stash_type": 1}
    scale = g.tensor(n.inputs[1]).data
    assert scale.shape == (16,) and np.array_equal(scale, np.linspace(0.5, 1.5, 16, dtype=F) if gamma else
                                                   np.ones(16, F))
    if beta:   # stored in the normalised shape
        assert g.tensor(n.inputs[2]).data.shape == (16,)
    else:
        assert len(n.inputs) == 2
    g.topo_check()


def test_layernorm_near_misses_stay():
    _unchanged(fuse_layernorm, _graph(lambda b, x: layernorm(b, x, keep=False)))          # var without keepdims
    _unchanged(fuse_layernorm, _graph(lambda b, x: layernorm(b, x, axes=(1,))))           # not the trailing axes
    _unchanged(fuse_layernorm, _graph(lambda b, x: layernorm(b, x, axes=(1, 2))))         # NPU: last axis only
    _unchanged(fuse_layernorm, _graph(lambda b, x: layernorm(b, x), extra_outputs=("d",)))


def test_layernorm_stops_where_its_result_is_read_elsewhere():
    # the normalised value also feeds a Relu: the node computes it (unit scale) and the gamma Mul stays outside
    g = fuse_layernorm(_graph(lambda b, x: b.add(layernorm(b, x, beta=False), b.relu("n"))))
    assert _ops(g) == ["LayerNormalization", "Mul", "Relu", "Add"] and g.nodes[0].outputs == ("n",)


def test_layernorm_with_a_per_row_scale_keeps_the_mul_outside():
    # a gamma that varies along the rows is not LayerNormalization's: the node stops before that Mul
    def build(b, x):
        y = layernorm(b, x, gamma=False, beta=False)
        return b.mul(y, b.const("rows", np.linspace(1, 2, 8, dtype=F).reshape(1, 8, 1)))
    g = fuse_layernorm(_graph(build))
    assert _ops(g) == ["LayerNormalization", "Mul"]


# -- Softmax --------------------------------------------------------------------------------------------------------

def softmax(b, x, stable=True, axis=-1, sum_axis=None, keep=1):
    red = tuple(1 if i == axis % 3 else d for i, d in enumerate(SHAPE))
    if stable:
        x = b.sub(x, b.node("ReduceMax", [x], red, axes=(axis,), keepdims=1))
    e = b.node("Exp", [x], SHAPE)
    s = b.node("ReduceSum", [e, np.array([axis if sum_axis is None else sum_axis], np.int64)], red, keepdims=keep)
    return b.div(e, s, name="y")


@pytest.mark.parametrize("stable", [True, False])
def test_softmax_becomes_one_softmax(stable):
    g = fuse_softmax(_graph(lambda b, x: softmax(b, x, stable)))
    assert [(n.op, n.attrs, n.inputs, n.outputs) for n in g.nodes] == [("Softmax", {"axis": 2}, ("x",), ("y",))]


def test_softmax_near_misses_stay():
    assert _ops(fuse_softmax(_graph(lambda b, x: softmax(b, x, axis=1)))) == ["Softmax"]   # any axis on the NPU
    g = fuse_softmax(_graph(lambda b, x: softmax(b, x, stable=False, sum_axis=1)))   # Exp / its sum over axis 1
    assert _ops(g) == ["Softmax"] and g.nodes[0].attrs["axis"] == 1
    _unchanged(fuse_softmax, _graph(lambda b, x: softmax(b, x, keep=0)))            # the sum without keepdims

    def exp_read_elsewhere(b, x):
        e = b.node("Exp", [x], SHAPE, name="e")
        return b.add(b.div(e, b.node("ReduceSum", [e, np.array([-1], np.int64)], (2, 8, 1), keepdims=1)), e)
    _unchanged(fuse_softmax, _graph(exp_read_elsewhere))


def test_softmax_with_the_max_over_another_axis_keeps_the_subtraction_outside():
    # Exp(z) / ReduceSum(Exp(z)) is softmax(z) whatever z is; a max over another axis is not part of it
    def build(b, x):
        z = b.sub(x, b.node("ReduceMax", [x], (2, 1, 16), axes=(1,), keepdims=1), name="z")
        e = b.node("Exp", [z], SHAPE)
        return b.div(e, b.node("ReduceSum", [e, np.array([-1], np.int64)], (2, 8, 1), keepdims=1), name="y")
    g = fuse_softmax(_graph(build))
    assert _ops(g) == ["ReduceMax", "Sub", "Softmax"] and g.nodes[-1].inputs == ("z",)


# -- MatMul epilogue ------------------------------------------------------------------------------------------------

W = np.random.default_rng(0).standard_normal((16, 24)).astype(F)
BIAS = np.linspace(-1, 1, 24, dtype=F)


def linear(b, x, bias=BIAS, name="fc"):
    return b.add(b.matmul(x, b.const(f"{name}.w", W[: b.shape(x)[-1]]), name=f"{name}.mm"), bias, name=name)


def test_matmul_takes_bias_and_gelu():
    g = run_passes(_graph(lambda b, x: erf_pytorch(b, linear(b, x))))
    (n,) = g.nodes
    assert n.op == "MatMul" and n.name == "fc.mm" and n.outputs == ("y",)
    assert n.attrs == {"bias": True, "activation": ("gelu",)} and n.inputs[2] == "fc_b"


def test_matmul_takes_relu_clip_and_silu():
    for act, want in ((lambda b, t: b.relu(t), ("relu",)), (lambda b, t: b.clip(t, 0.0, 6.0), ("clamp", 0.0, 6.0)),
                      (lambda b, t: b.mul(t, b.sigmoid(t)), ("silu",))):
        g = run_passes(_graph(lambda b, x, act=act: act(b, linear(b, x))))
        assert _ops(g) == ["MatMul"] and g.nodes[0].attrs["activation"] == want


def test_matmul_takes_a_residual_and_the_attention_scale():
    g = fuse_matmul(_graph(lambda b, x: b.add(x, b.add(b.matmul(x, W[:, :16]), BIAS[:16]), name="res")))
    (n,) = g.nodes
    assert n.attrs == {"bias": True, "residual": True} and n.inputs[3] == "x" and n.outputs == ("res",)
    q = _graph(lambda b, x: b.div(b.matmul(x, b.transpose(x, (0, 2, 1))), F(4.0), name="scores"))
    assert [(n.op, n.attrs, n.outputs) for n in fuse_matmul(q).nodes] == [
        ("Transpose", {"perm": (0, 2, 1)}, ("transpose_0",)), ("MatMul", {"divisor": 4.0}, ("scores",))]


def test_matmul_chain_stops_where_a_tensor_is_read_elsewhere():
    # the bias Add's output also feeds a Relu: the MatMul takes the bias only and produces that tensor
    g = fuse_matmul(_graph(lambda b, x: b.add(erf_pytorch(b, linear(b, x)), b.relu("fc"))))
    assert g.nodes[0].attrs == {"bias": True} and g.nodes[0].outputs == ("fc",)
    # the MatMul's own output is returned: nothing fuses
    _unchanged(fuse_matmul, _graph(lambda b, x: linear(b, x), extra_outputs=("fc.mm",)))


def test_matmul_near_misses_stay():
    _unchanged(fuse_matmul, _graph(lambda b, x: linear(b, x, bias=np.ones((8, 24), F))))   # a per-row "bias"
    _unchanged(fuse_matmul, _graph(lambda b, x: b.div(b.matmul(x, W), np.full(24, 2, F))))  # not a scalar
    # after a division a residual stays outside (the division would apply to it too)
    g = fuse_matmul(_graph(lambda b, x: b.add(b.div(b.matmul(x, W[:, :16]), F(2.0)), x)))
    assert _ops(g) == ["MatMul", "Add"] and g.nodes[0].attrs == {"divisor": 2.0}
    # f16: the NPU would not lower the fused MatMul
    _unchanged(fuse_matmul, _graph(lambda b, x: b.add(b.matmul(x, W.astype(np.float16)), BIAS.astype(np.float16)),
                                   dtype=np.float16))


def test_every_fusion_is_a_pass_of_its_own():
    assert list(PASSES) == ["fold_constants", "fold_batchnorm", "fuse_qdq", "fuse_gelu", "fuse_silu", "fuse_layernorm",
                            "fuse_rmsnorm", "fuse_softmax", "fuse_attention", "fuse_activation", "fuse_residual",
                            "fuse_matmul", "fuse_repeat_kv", "fuse_msda", "bind_kv_cache"]
    dumped = []
    run_passes(_graph(lambda b, x: erf_pytorch(b, linear(b, x))), dump_after="fuse_gelu", dump=dumped.append)
    ops = [line.split()[1] for line in dumped[0].splitlines()[3:]]
    assert ops == ["MatMul", "Add", "Gelu"]


def test_a_long_chain_of_products_is_no_problem():
    # 3000 chained Muls: the product search looks a few levels deep, so no recursion limit and no quadratic time
    def chain(b, x):
        for _ in range(3000):
            x = b.mul(x, F(1.0001))
        return x
    g = _graph(chain)
    assert run_passes(g).nodes == g.nodes
