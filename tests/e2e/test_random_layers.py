"""Property tests through the whole compiler: random Conv and MatMul/Gemm graphs compile to race-free programs,
simulate and match onnxruntime (fp32: max|err| / max|ref| <= 1e-5 here, well inside the 1e-3 requirement)."""

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from compiler.frontend.builder import GraphBuilder, to_onnx
from isa.arch import load_arch
from isa.races import find_races
from npusim.app.driver import run_model

ARCHES = {name: load_arch(name) for name in ("edge16", "dc128")}


def _check(graph, arch, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(graph.tensor("x").shape).astype(np.float32)
    compiled, _, _, report = run_model(to_onnx(graph), ARCHES[arch], {"x": x}, validate=True)
    assert find_races(compiled.program) == []
    for name, check in report["validation"].items():
        assert check["ok"] and check["max_rel_error"] < 1e-5, (name, check)


@settings(max_examples=15, deadline=None)
@given(N=st.integers(1, 2), C=st.integers(1, 24), H=st.integers(3, 12), K=st.integers(1, 24), R=st.integers(1, 3),
       stride=st.integers(1, 2), pad=st.integers(0, 2), dilation=st.integers(1, 2), groups=st.sampled_from([1, 2]),
       depthwise=st.booleans(), bias=st.booleans(), relu=st.booleans(),
       arch=st.sampled_from(["edge16", "dc128"]), seed=st.integers(0, 999))
def test_random_conv_graphs(N, C, H, K, R, stride, pad, dilation, groups, depthwise, bias, relu, arch, seed):
    if depthwise:
        groups, K = C, C
    assume(C % groups == 0 and K % groups == 0 and H + 2 * pad >= dilation * (R - 1) + 1)
    rng = np.random.default_rng(seed)
    b = GraphBuilder("conv")
    x = b.input("x", (N, C, H, H + 1))
    w = b.const("w", rng.standard_normal((K, C // groups, R, R)).astype(np.float32))
    y = b.conv(x, w, b.const("b", rng.standard_normal(K).astype(np.float32)) if bias else None, strides=stride,
               pads=pad, dilations=dilation, group=groups)
    b.output(b.relu(y) if relu else y)
    _check(b.build(), arch, seed)


@settings(max_examples=15, deadline=None)
@given(batch=st.sampled_from([(), (2,), (2, 3)]), M=st.integers(1, 40), K=st.integers(1, 70), N=st.integers(1, 50),
       const_b=st.booleans(), arch=st.sampled_from(["edge16", "dc128"]), seed=st.integers(0, 999))
def test_random_matmul_graphs(batch, M, K, N, const_b, arch, seed):
    rng = np.random.default_rng(seed)
    b = GraphBuilder("mm")
    x = b.input("x", batch + (M, K))
    if const_b:
        rhs = b.const("w", rng.standard_normal((K, N)).astype(np.float32))
    else:
        rhs = b.transpose(x, tuple(range(len(batch))) + (len(batch) + 1, len(batch)))   # x @ x^T
    b.output(b.matmul(x, rhs))
    _check(b.build(), arch, seed)
