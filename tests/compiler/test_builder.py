"""GraphBuilder: shapes by ONNX's rules, to_onnx runs in onnxruntime and matches numpy, errors name the node."""

from __future__ import annotations

import math

import numpy as np
import onnx
import pytest

from compiler.errors import ShapeError
from compiler.frontend.builder import GraphBuilder, to_onnx
from compiler.frontend.onnx_import import import_onnx
from tests.compiler.util import ort_run

RNG = np.random.default_rng(7)


def rand(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def np_conv(x, w, b, stride, pads, dil=(1, 1), group=1):
    """Direct numpy 2-D convolution (NCHW, ONNX pads (top, left, bottom, right))."""
    n, c, h, wd = x.shape
    k, cg, r, s = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh = (h + pads[0] + pads[2] - dil[0] * (r - 1) - 1) // stride[0] + 1
    ow = (wd + pads[1] + pads[3] - dil[1] * (s - 1) - 1) // stride[1] + 1
    out = np.zeros((n, k, oh, ow), np.float64)
    kg = k // group
    for g in range(group):
        for i in range(r):
            for j in range(s):
                patch = xp[:, g * cg:(g + 1) * cg, i * dil[0]:i * dil[0] + stride[0] * (oh - 1) + 1:stride[0],
                           j * dil[1]:j * dil[1] + stride[1] * (ow - 1) + 1:stride[1]]
                out[:, g * kg:(g + 1) * kg] += np.einsum("nchw,kc->nkhw", patch, w[g * kg:(g + 1) * kg, :, i, j])
    return out + (0 if b is None else b[None, :, None, None])


def np_pool(x, k, stride, pads, kind):
    """Max or average (padding not counted) 2-D pooling."""
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])), constant_values=fill)
    ones = np.pad(np.ones_like(x), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    oh, ow = (xp.shape[2] - k) // stride + 1, (xp.shape[3] - k) // stride + 1
    wins = [(xp[:, :, i:i + stride * (oh - 1) + 1:stride, j:j + stride * (ow - 1) + 1:stride],
             ones[:, :, i:i + stride * (oh - 1) + 1:stride, j:j + stride * (ow - 1) + 1:stride])
            for i in range(k) for j in range(k)]
    if kind == "max":
        return np.max([w for w, _ in wins], axis=0)
    return np.sum([w for w, _ in wins], axis=0) / np.sum([o for _, o in wins], axis=0)


def np_softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


W3, B3, W_DW = rand(8, 4, 3, 3), rand(8), rand(4, 1, 3, 3)
G, BETA, MEAN, VAR = rand(4) + 2, rand(4), rand(4), np.abs(rand(4)) + 0.5
ERF = np.vectorize(math.erf)
SC, ZP = np.float32([0.1, 0.02, 0.05])[:, None, None], np.int8([0, 3, -2])[:, None, None]

CASES = {
    "conv": ((1, 4, 9, 9), lambda b, x: b.conv(x, W3, B3, strides=2, pads=(1, 0, 1, 2)),
             lambda x: np_conv(x, W3, B3, (2, 2), (1, 0, 1, 2))),
    "conv_dilated_depthwise": ((1, 4, 9, 9), lambda b, x: b.conv(x, W_DW, pads=2, dilations=2, group=4),
                               lambda x: np_conv(x, W_DW, None, (1, 1), (2, 2, 2, 2), (2, 2), 4)),
    "gemm": ((3, 5), lambda b, x: b.gemm(x, W3.reshape(8, 36)[:4, :5], B3[:4], alpha=0.5, beta=2.0, trans_b=True),
             lambda x: 0.5 * x @ W3.reshape(8, 36)[:4, :5].T + 2.0 * B3[:4]),
    "matmul_batched": ((2, 3, 4, 5), lambda b, x: b.matmul(x, W3.reshape(8, 36)[:5, :6]),
                       lambda x: x @ W3.reshape(8, 36)[:5, :6]),
    "add_broadcast": ((2, 3, 4), lambda b, x: b.add(x, B3[:4]), lambda x: x + B3[:4]),
    "sub_mul_div": ((2, 3), lambda b, x: b.div(b.mul(b.sub(x, 1.5), x), 4.0), lambda x: (x - 1.5) * x / 4.0),
    "relu": ((2, 7), lambda b, x: b.relu(x), lambda x: np.maximum(x, 0)),
    "clip": ((2, 7), lambda b, x: b.clip(b.mul(x, 5.0), 0.0, 6.0), lambda x: np.clip(5 * x, 0, 6)),
    "sigmoid_tanh": ((2, 7), lambda b, x: b.tanh(b.sigmoid(x)), lambda x: np.tanh(1 / (1 + np.exp(-x)))),
    "gelu": ((2, 7), lambda b, x: b.gelu(x), lambda x: 0.5 * x * (1 + ERF(x / math.sqrt(2)))),
    "maxpool": ((1, 2, 7, 7), lambda b, x: b.maxpool(x, 3, 2, 1), lambda x: np_pool(x, 3, 2, (1, 1, 1, 1), "max")),
    "avgpool": ((1, 2, 7, 7), lambda b, x: b.avgpool(x, 3, 2, 1), lambda x: np_pool(x, 3, 2, (1, 1, 1, 1), "avg")),
    "global_avgpool": ((1, 3, 5, 4), lambda b, x: b.global_avgpool(x), lambda x: x.mean((2, 3), keepdims=True)),
    "batchnorm": ((1, 4, 3, 3), lambda b, x: b.batchnorm(x, G, BETA, MEAN, VAR, epsilon=1e-3),
                  lambda x: (x - MEAN[:, None, None]) / np.sqrt(VAR[:, None, None] + 1e-3) * G[:, None, None]
                  + BETA[:, None, None]),
    "softmax": ((2, 3, 5), lambda b, x: b.softmax(x, 1), lambda x: np_softmax(x, 1)),
    "layernorm": ((2, 3, 4), lambda b, x: b.layernorm(x, G, BETA, epsilon=1e-5),
                  lambda x: (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * G + BETA),
    "reduce_mean": ((2, 3, 4), lambda b, x: b.reduce_mean(x, (0, -1)), lambda x: x.mean((0, 2), keepdims=True)),
    "reduce_sum": ((2, 3, 4), lambda b, x: b.reduce_sum(x, 1, keepdims=False), lambda x: x.sum(1)),
    "reshape_transpose": ((2, 3, 4), lambda b, x: b.transpose(b.reshape(x, (0, -1, 2)), (2, 0, 1)),
                          lambda x: x.reshape(2, 6, 2).transpose(2, 0, 1)),
    "flatten": ((2, 3, 4, 5), lambda b, x: b.flatten(x, 2), lambda x: x.reshape(6, 20)),
    "concat_slice": ((2, 3, 4), lambda b, x: b.concat([x, b.slice(x, [3, 0], [0, 5], [2, 0], [-2, 1])], axis=2),
                     lambda x: np.concatenate([x, x[:, :, 3:0:-2]], axis=2)),
    "pad": ((1, 2, 3, 3), lambda b, x: b.pad(x, (0, 0, 1, 2, 0, 0, 2, 0), value=0.5),
            lambda x: np.pad(x, ((0, 0), (0, 0), (1, 2), (2, 0)), constant_values=0.5)),
    "pad_reflect": ((1, 2, 4, 4), lambda b, x: b.pad(x, (0, 0, 1, 1, 0, 0, 1, 1), mode="reflect"),
                    lambda x: np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), mode="reflect")),
    "qdq_per_channel": ((1, 3, 2, 2), lambda b, x: b.dequantize(b.quantize(x, np.float32([0.1, 0.02, 0.05]),
                                                                          np.int8([0, 3, -2])),
                                                               np.float32([0.1, 0.02, 0.05]), np.int8([0, 3, -2])),
                        lambda x: (np.clip(np.rint(x / SC) + ZP, -128, 127) - ZP) * SC),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_builder_matches_numpy_in_onnxruntime(case):
    shape, build, ref = CASES[case]
    b = GraphBuilder(case)
    y = build(b, b.input("x", shape, np.float32))
    b.output(y)
    g = b.build()
    m = to_onnx(g)
    onnx.checker.check_model(m, full_check=True)
    x = rand(*shape)
    (out,) = ort_run(m, {"x": x})
    assert out.shape == g.tensor(y).shape
    np.testing.assert_allclose(out, ref(x.astype(np.float64)), rtol=1e-4, atol=1e-5)


def test_builder_shapes_agree_with_onnx_shape_inference():
    """Every tensor's shape, for ops and attribute corners numpy above does not cover."""
    b = GraphBuilder("shapes")
    x = b.input("x", (1, 3, 11, 10), np.float32)
    outs = [b.maxpool(x, 2, 2, 1, ceil_mode=True), b.avgpool(x, (3, 2), (2, 3), (0, 1, 2, 0), ceil_mode=True),
            b.conv(x, rand(6, 1, 3, 3), strides=(3, 2), pads=(2, 0, 1, 1), dilations=(2, 1), group=3),
            b.flatten(x, 0), b.flatten(x, 4), b.reduce_sum(x, keepdims=False), b.slice(x, [-100], [100], [3], [3]),
            b.matmul(b.reshape(x, (33, 10)), b.const("v", rand(10))), b.transpose(x),
            b.gemm(b.reshape(x, (-1, 30)), b.const("m", rand(11, 5)), b.const("c", rand(5)), trans_a=True)]
    b.output(*outs)
    g = b.build()
    runs = ort_run(to_onnx(g), {"x": rand(1, 3, 11, 10)})
    assert [r.shape for r in runs] == [g.tensor(o).shape for o in outs]
    m = to_onnx(g)
    del m.graph.value_info[:]
    for o in m.graph.output:
        o.type.tensor_type.ClearField("shape")
    inferred = onnx.shape_inference.infer_shapes(m, strict_mode=True)
    got = [tuple(d.dim_value for d in o.type.tensor_type.shape.dim) for o in inferred.graph.output]
    # ONNX's inference agrees, except that it keeps the ceil_mode window that starts in the end padding (11 + 1)
    assert got[0] == (1, 3, 7, 6) and g.tensor(outs[0]).shape == (1, 3, 6, 6)
    assert got[1:] == [g.tensor(o).shape for o in outs[1:]]


def test_builder_round_trips_through_onnx_import():
    b = GraphBuilder("rt")
    x = b.input("x", (1, 4, 8, 8), np.float32)
    y = b.relu(b.batchnorm(b.conv(x, W3, B3, pads=1), *(rand(8) for _ in range(3)), np.ones(8, np.float32)))
    y = b.reduce_mean(b.clip(b.maxpool(y, 2, 2), 0.0, 6.0), (2, 3), keepdims=False)
    y = b.softmax(b.gemm(y, rand(8, 3)), 0)
    b.output(y)
    g = b.build()
    back = import_onnx(to_onnx(g))
    assert [(n.name, n.op, n.attrs, n.outputs) for n in back.nodes] == [(n.name, n.op, n.attrs, n.outputs)
                                                                      for n in g.nodes]
    assert {k: t.shape for k, t in back.tensors.items()} == {k: t.shape for k, t in g.tensors.items()}
    assert back.dump() == g.dump()


def test_builder_errors_name_the_node():
    b = GraphBuilder("bad")
    x = b.input("x", (1, 3, 8, 8), np.float32)
    with pytest.raises(ShapeError, match=r"node 'c1' \(Conv\): x has 3 channels, w \(8, 4, 3, 3\) with group=1"):
        b.conv(x, W3, name="c1")
    with pytest.raises(ShapeError, match=r"node 'matmul_0' \(MatMul\): inner dims differ"):
        b.matmul(x, rand(3, 3))
    with pytest.raises(ShapeError, match=r"\(Add\): shapes \(1, 3, 8, 8\) and \(2, 8\) do not broadcast"):
        b.add(x, rand(2, 8))
    with pytest.raises(ShapeError, match=r"\(Reshape\): cannot reshape \(1, 3, 8, 8\)"):
        b.reshape(x, (5, -1))
    with pytest.raises(ShapeError, match=r"\(Softmax\): axis 4 is out of range for rank 4"):
        b.softmax(x, 4)
    with pytest.raises(ShapeError, match="does not fit"):
        b.maxpool(x, 9)
