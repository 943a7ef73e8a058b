"""Whole graphs compiled to one program, simulated, and compared with onnxruntime on the same inputs."""

import numpy as np
import pytest

from compiler.compile import compile_model
from compiler.errors import UnsupportedOpError
from compiler.frontend.builder import GraphBuilder, to_onnx
from isa.arch import load_arch
from npusim.app.driver import run_model

RNG = np.random.default_rng(0)


def _w(shape, fan_in):
    return (RNG.standard_normal(shape) * np.sqrt(2 / fan_in)).astype(np.float32)


def tiny_resnet():
    b = GraphBuilder("tiny_resnet")
    x = b.input("x", (1, 3, 16, 16))

    def conv_bn(x, cin, cout, stride=1, relu=True):
        y = b.conv(x, b.const(f"w{cin}_{cout}_{RNG.integers(1 << 30)}", _w((cout, cin, 3, 3), 9 * cin)),
                   strides=stride, pads=1)
        stats = [RNG.uniform(0.5, 1.5, cout), RNG.standard_normal(cout) * 0.1, RNG.standard_normal(cout) * 0.1,
                 RNG.uniform(0.5, 1.5, cout)]
        y = b.batchnorm(y, *(b.const(f"bn{i}_{RNG.integers(1 << 30)}", s.astype(np.float32))
                             for i, s in enumerate(stats)))
        return b.relu(y) if relu else y

    y = b.maxpool(conv_bn(x, 3, 16), 3, 2, pads=1)
    y = b.relu(b.add(y, conv_bn(conv_bn(y, 16, 16), 16, 16, relu=False)))
    y = b.avgpool(y, 3, 2, pads=1)
    y = b.flatten(b.global_avgpool(y))
    y = b.gemm(y, b.const("fc", _w((10, 16), 16)), b.const("fcb", np.ones(10, np.float32)), trans_b=True)
    b.output(b.softmax(y))
    return b.build()


def tiny_encoder(seq=16, hidden=32, heads=2):
    b = GraphBuilder("tiny_encoder")
    x = b.input("x", (1, seq, hidden))
    dh = hidden // heads

    def proj(t, name):
        return b.add(b.matmul(t, b.const(name, _w((hidden, hidden), hidden))),
                     b.const(name + "_b", RNG.standard_normal(hidden).astype(np.float32) * 0.1))

    def heads_of(t):
        return b.transpose(b.reshape(t, (1, seq, heads, dh)), (0, 2, 1, 3))

    q, k, v = (heads_of(proj(x, n)) for n in ("q", "k", "v"))
    scores = b.div(b.matmul(q, b.transpose(k, (0, 1, 3, 2))), b.const("scale", np.float32(np.sqrt(dh))))
    ctx = b.matmul(b.softmax(scores), v)
    ctx = b.reshape(b.transpose(ctx, (0, 2, 1, 3)), (1, seq, hidden))
    gamma, beta = np.ones(hidden, np.float32), np.zeros(hidden, np.float32)
    y = b.layernorm(b.add(x, proj(ctx, "o")), b.const("g", gamma), b.const("bt", beta))
    b.output(b.gelu(y))
    return b.build()


@pytest.mark.parametrize("build", [tiny_resnet, tiny_encoder])
def test_small_models_match_onnxruntime(build):
    graph = build()
    x = RNG.standard_normal(graph.tensor("x").shape).astype(np.float32)
    compiled, result, outputs, report = run_model(to_onnx(graph), load_arch("dc128"), {"x": x}, validate=True)
    for check in report["validation"].values():
        assert check["ok"] and check["max_rel_error"] < 1e-5, check
    layers = report["layers"]
    assert [lr["start"] for lr in layers] == sorted(lr["start"] for lr in layers)
    # the report counts the model's MACs; the instructions also multiply the zero blocks of packed convolutions
    assert sum(lr["macs"] for lr in layers) == report["macs"] <= result.macs
    assert report["mac_utilization"] * result.cycles * 128 * 128 == pytest.approx(report["macs"])
    assert all(lr["cycles"] > 0 and lr["bound"] in ("compute", "memory") for lr in layers)


def test_batchnorm_folded_and_activations_fused():
    compiled = compile_model(tiny_resnet(), load_arch("dc128"))
    ops = [lr.op for lr in compiled.layers]
    assert "BatchNormalization" not in ops and "Relu" not in ops   # BN into the conv; Relu into conv and Add
    assert ops.count("Conv") == 3 and "Add" not in ops              # the shortcut Add into the conv before it
    fused = [n for n in compiled.graph.nodes if n.attrs.get("residual")]
    assert len(fused) == 1 and fused[0].attrs["activation"] == ("relu",)


def test_unsupported_op_is_named():
    b = GraphBuilder("bad")
    x = b.input("x", (1, 4, 8, 8))
    b.output(b.node("Sin", [x], (1, 4, 8, 8)))
    with pytest.raises(UnsupportedOpError, match=r"^node 'sin_0' \(Sin\): not lowered to the NPU yet; without "
                       r"--no-fallback"):
        compile_model(b.build(), load_arch("dc128"), fallback=False)
