"""onnxruntime's ``com.microsoft.MatMulNBits`` (int4 weights with block scales, B stored ``[N, k_blocks, blob]``, low
nibble first, default zero point 8): values against onnxruntime (which implements the op) on the NPU, and the
variants the NPU does not take sent to the host with the reason, or refused naming it.

Tolerance as for the DequantizeLinear form (tests/e2e/test_weight_quant.py, :func:`quant_tolerance`): 1e-5 of the
output's largest magnitude; the NPU scales each K block's partial sum instead of each weight (decode) or dequantizes
the weight in one f32 rounding as onnxruntime does (prefill-sized M); either way only the f32 rounding order
differs."""

import re

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.errors import UnsupportedOpError
from compiler.frontend.onnx_import import import_onnx
from isa.arch import load_arch
from npusim.app.driver import run_model
from tests.e2e.test_weight_quant import quant_tolerance


def _packed(values: np.ndarray, bits: int) -> np.ndarray:
    """Codes ``[rows, n]`` packed ``8 / bits`` a byte along the last axis, the earlier one in the low bits."""
    if bits == 8:
        return values.astype(np.uint8)
    return (values[:, 0::2] | (values[:, 1::2] << 4)).astype(np.uint8)


def nbits_model(M: int, K: int, N: int, block: int = 32, zero_points: str = "", bias: bool = False,
                batch: int = 0, bits: int = 4, relu: bool = False, runtime_b: bool = False, seed: int = 0,
                **attrs):
    """``y = x @ W^T (+ bias)`` by one MatMulNBits at opset 21 (``x`` [M, K], or [batch, M, K] when ``batch``),
    followed by a Relu when ``relu`` (its output then not a graph output); ``zero_points``: "" (the default, 2^(bits
    - 1)), "packed" (uint8, two a byte) or "float". Returns (model, x, the weight [K, N] dequantized by numpy)."""
    rng = np.random.default_rng(seed)
    kb, top = -(-K // block), 1 << bits
    codes = rng.integers(0, top, (N, kb * block))
    codes[:, K:] = 0                                   # the last block's padding
    scale = (rng.random((N, kb)) * 0.1 + 0.01).astype(np.float32)
    inits = [numpy_helper.from_array(scale, "scales")]
    blob = _packed(codes, bits).reshape(N, kb, block * bits // 8)
    if not runtime_b:
        inits.append(numpy_helper.from_array(blob, "B"))
    inputs, zp = ["x", "B", "scales"], np.full((N, kb), top // 2, np.float32)
    if zero_points == "packed":
        z = rng.integers(0, top, (N, kb + kb % 2) if bits == 4 else (N, kb))
        zp = z[:, :kb].astype(np.float32)
        inits.append(numpy_helper.from_array(_packed(z, bits), "zp"))
    elif zero_points == "float":
        zp = (rng.random((N, kb)) * (top - 1)).astype(np.float32)
        inits.append(numpy_helper.from_array(zp, "zp"))
    inputs.append("zp" if zero_points else "")
    if attrs.pop("g_idx", False):
        inits.append(numpy_helper.from_array((np.arange(K) // block).astype(np.int32), "g_idx"))
    inputs.append("g_idx" if any(i.name == "g_idx" for i in inits) else "")
    b = rng.standard_normal(N).astype(np.float32) if bias else np.zeros(N, np.float32)
    if bias:
        inits.append(numpy_helper.from_array(b, "bias"))
    inputs.append("bias" if bias else "")
    while inputs[-1] == "":
        inputs.pop()
    xs, ys = ((batch, M, K), (batch, M, N)) if batch else ((M, K), (M, N))
    nodes = [helper.make_node("MatMulNBits", inputs, ["mm" if relu else "y"], domain="com.microsoft", K=K, N=N,
                              bits=bits, block_size=block, **attrs)]
    nodes += [helper.make_node("Relu", ["mm"], ["y"])] if relu else []
    graph_inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, xs)]
    graph_inputs += [helper.make_tensor_value_info("B", TensorProto.UINT8, blob.shape)] if runtime_b else []
    graph = helper.make_graph(nodes, "nbits", graph_inputs,
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ys)], inits)
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=10)
    w = (codes[:, :K] - np.repeat(zp, block, 1)[:, :K]) * np.repeat(scale, block, 1)[:, :K]
    x = rng.standard_normal(xs).astype(np.float32)
    return model, x, w.T.astype(np.float32), (blob if runtime_b else None), b


def onnxruntime_y(model, feeds: dict) -> np.ndarray:
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


CASES = [dict(K=96), dict(K=100, zero_points="packed"), dict(K=100, zero_points="float", bias=True),
         dict(K=72, block=16, batch=2, accuracy_level=1), dict(K=64, block=64, zero_points="packed", relu=True)]


@pytest.mark.parametrize("arch", ["edge16", "mid32"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
@pytest.mark.parametrize("M", [1, 3])
def test_matmul_nbits_runs_on_the_npu_and_matches_onnxruntime(arch, case, M):
    """K not a multiple of the block (K=100: the last block is padded) or of the array, N=40 not a multiple of the
    array; default, packed and float zero points; bias; rank-3 A; an intermediate output (its type is not ONNX's)."""
    model, x, w, _, b = nbits_model(M, N=40, **case)
    want = onnxruntime_y(model, {"x": x})
    _, _, outputs, report = run_model(model, load_arch(arch), {"x": x}, cache=False)
    ops = [r["op"] for r in report["layers"]]
    assert ops[0] == "QuantMatMul" and report["host_ops"] == [], ops
    ref = np.maximum(x @ w + b, 0) if case.get("relu") else x @ w + b   # the layout as this file builds it
    assert np.abs(want - ref).max() < 1e-3
    assert np.abs(outputs["y"] - want).max() <= quant_tolerance(want), np.abs(outputs["y"] - want).max()


def test_matmul_nbits_weight_is_kept_as_uint4_codes_with_zero_point_8():
    """B ``[N, k_blocks, blob]`` becomes codes ``[K, N]`` (transposed, low nibble = earlier k), default zp 8."""
    model, _, w, _, _ = nbits_model(2, 64, 32)
    g = import_onnx(model)
    (node,) = g.nodes
    assert node.op == "QuantMatMul" and node.attrs["format"] == "uint4" and node.attrs["zp"] == 8
    codes, scale = g.tensor(node.inputs[1]).data, g.tensor(node.inputs[2]).data
    assert codes.shape == (64, 32) and codes.dtype == np.uint8
    np.testing.assert_array_equal((codes.astype(np.float32) - 8) * np.repeat(scale, 32, 0), w)


UNSUPPORTED = [(dict(bits=8), "bits=8: only 4-bit"), (dict(accuracy_level=4), "accuracy_level=4 computes in a lower"),
               (dict(g_idx=True), "g_idx"), (dict(runtime_b=True), "input B .'B'. is computed at run time")]


@pytest.mark.parametrize("variant,reason", UNSUPPORTED, ids=["bits8", "accuracy4", "g_idx", "runtime_b"])
def test_unsupported_matmul_nbits_runs_on_the_host_with_the_reason(variant, reason):
    """Values still those of onnxruntime for the whole model (a constant B stays an initializer for the host's
    onnxruntime session, which prepacks it and, at accuracy_level 4, quantizes A as it does for the model)."""
    model, x, _, blob, _ = nbits_model(3, 64, 40, **variant)
    feeds = {"x": x} | ({"B": blob} if blob is not None else {})
    _, _, outputs, report = run_model(model, load_arch("edge16"), feeds, cache=False)
    (host,) = report["host_ops"]
    assert host["op"] == "MatMulNBits"
    assert re.search(reason, host["reason"]), host["reason"]
    np.testing.assert_array_equal(outputs["y"], onnxruntime_y(model, feeds))


@pytest.mark.parametrize("variant,reason", UNSUPPORTED[:2], ids=["bits8", "accuracy4"])
def test_unsupported_matmul_nbits_without_fallback_is_refused_naming_it(variant, reason):
    model, _, _, _, _ = nbits_model(3, 64, 40, **variant)
    with pytest.raises(UnsupportedOpError, match=r"^node 'mat_mul_nbits_0' \(com.microsoft::MatMulNBits\): "
                       + reason) as e:
        import_onnx(model)
    assert "\n" not in str(e.value)


def test_run_summary_gives_the_packed_weight_bytes(tmp_path, capsys, monkeypatch):
    """``npusim run``'s text summary: the DRAM weights image of a 1024 x 1024 int4 weight in blocks of 32 is the codes
    (half a byte each) and the f32 scales (one per block): 0.66 MB (no tile padding at these sizes)."""
    from npusim.app.cli import main

    monkeypatch.setenv("NPUSIM_NO_CACHE", "1")
    K, N = 1024, 1024
    path = tmp_path / "nbits.onnx"
    path.write_bytes(nbits_model(1, K, N)[0].SerializeToString())
    assert main(["run", str(path), "--arch", "edge16", "--timing-only"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("weights "))
    mb = float(re.match(r"weights ([\d.]+) MB in DRAM \(quantized MatMul weights stay packed", line).group(1))
    assert mb == round((K * N / 2 + K // 32 * N * 4) / 1e6, 2), line
