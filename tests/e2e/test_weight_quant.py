"""Weight-only quantized MatMuls (opset 21 DequantizeLinear of a constant int4/uint4 weight with block scales, or of
an fp8 E4M3 weight, feeding a MatMul): values against onnxruntime, the weight's DRAM bytes, and the dequantization
as real, priced vector work.

Tolerance: the dequantized weight ``(q - zp) * scale`` is one f32 rounding on the NPU, as in onnxruntime, so the
weights are bit-identical; only the order of the f32 accumulation of K products differs, bounded by
:func:`compiler.kernels.gemm.gemm_tolerance` (``(K + 1) * eps32 * sum |a w|``)."""

import ml_dtypes
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.errors import UnsupportedOpError
from compiler.frontend.onnx_import import import_onnx
from compiler.kernels.gemm import gemm_tolerance
from isa import DType
from isa.arch import load_arch
from npusim.app.driver import run_model

RNG = np.random.default_rng(7)
ONNX_QTYPE = {"int4": TensorProto.INT4, "uint4": TensorProto.UINT4, "int8": TensorProto.INT8,
              "fp8": TensorProto.FLOAT8E4M3FN}


def dq_matmul_model(M: int, K: int, N: int, kind: str, block: int, zero_points: bool = False, seed: int = 0):
    """``y = x @ DequantizeLinear(w_q, scale[, zp])`` at opset 21; with ``block`` (> 0) the scales are per block of
    ``block`` rows along K (axis 0), else per column (axis 1). Returns (model, x, dequantized weight by numpy)."""
    rng = np.random.default_rng(seed)
    if kind == "fp8":
        w = (rng.standard_normal((K, N)) * 4).astype(ml_dtypes.float8_e4m3fn)
        qt = numpy_helper.from_array(w, "wq")
        deq_codes = w.astype(np.float32)
    else:
        lo, hi = {"int4": (-8, 7), "uint4": (0, 15), "int8": (-128, 127)}[kind]
        codes = rng.integers(lo, hi + 1, (K, N))
        qt = helper.make_tensor("wq", ONNX_QTYPE[kind], (K, N), codes.ravel().tolist())
        deq_codes = codes.astype(np.float32)
    rows = -(-K // block) if block else 1
    scale = (rng.random((rows, N)) * 0.1 + 0.01).astype(np.float32)
    inits = [qt, numpy_helper.from_array(scale if block else scale.reshape(N), "s")]
    inputs = ["wq", "s"]
    zp = np.zeros((rows, N), np.float32)
    if zero_points:
        lo, hi = (-8, 7) if kind == "int4" else (0, 15)
        zp = rng.integers(lo, hi + 1, (rows, N)).astype(np.float32)
        inits.append(helper.make_tensor("z", ONNX_QTYPE[kind], zp.shape if block else (N,),
                                        zp.astype(np.int64).ravel().tolist()))
        inputs.append("z")
    attrs = {"axis": 0, "block_size": block} if block else {"axis": 1}
    nodes = [helper.make_node("DequantizeLinear", inputs, ["w"], **attrs),
             helper.make_node("MatMul", ["x", "w"], ["y"])]
    graph = helper.make_graph(nodes, "wq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (M, K))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, (M, N))], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    rep = block or K
    wdeq = (deq_codes - np.repeat(zp, rep, 0)[:K]) * np.repeat(scale, rep, 0)[:K]
    return model, rng.standard_normal((M, K)).astype(np.float32), wdeq.astype(np.float32)


def onnxruntime_y(model, x: np.ndarray) -> np.ndarray:
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL   # the DQ -> MatMul as written
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


@pytest.mark.parametrize("arch", ["edge16", "mid32"])
@pytest.mark.parametrize("kind,block,zps", [("int4", 32, False), ("int4", 16, True), ("uint4", 32, True),
                                            ("uint4", 64, False), ("fp8", 0, False)])
def test_quantized_weight_matmul_matches_onnxruntime(arch, kind, block, zps):
    M, K, N = 3, 96, 40   # K not a multiple of 64, N not a multiple of the array: ragged blocks and tiles
    model, x, w = dq_matmul_model(M, K, N, kind, block, zps)
    want = onnxruntime_y(model, x)
    _, _, outputs, report = run_model(model, load_arch(arch), {"x": x})
    assert [r["op"] for r in report["layers"]] == ["QuantMatMul"] and report["host_ops"] == []   # all on the NPU
    tol = gemm_tolerance(K, DType.F32, np.abs(x) @ np.abs(w))
    assert np.all(np.abs(outputs["y"] - want) <= tol), np.abs(outputs["y"] - want).max()


def test_dequantize_linear_of_a_weight_is_not_folded_to_float():
    model, _, _ = dq_matmul_model(2, 64, 32, "int4", 32)
    g = import_onnx(model)
    assert [n.op for n in g.nodes] == ["QuantMatMul"]
    assert g.tensor(g.nodes[0].inputs[1]).dtype == np.int8   # the codes, not a float32 weight


def test_int4_to_a_non_matmul_consumer_is_refused_with_the_reason():
    model, _, _ = dq_matmul_model(64, 64, 64, "int4", 32)
    model.graph.node[1].op_type = "Add"   # an int4 weight dequantized for an Add: no fusion
    with pytest.raises(UnsupportedOpError, match="DequantizeLinear.*blocked quantization.*not supported"):
        import_onnx(model)


def test_int4_weight_dram_bytes_are_half_the_int8_models_within_the_scales():
    """int8 per column vs int4 blocks of 32 of the same 512 x 256 weight: the int4 image is half the int8 codes plus
    its block scales (f32, K/32 rows) and tile padding (the array-aligned tiles of either)."""
    K, N = 512, 256
    arch = load_arch("mid32")
    _, _, _, r8 = run_model(dq_matmul_model(1, K, N, "int8", 0)[0], arch, {"x": np.ones((1, K), np.float32)},
                            timing_only=True)
    _, _, _, r4 = run_model(dq_matmul_model(1, K, N, "int4", 32)[0], arch, {"x": np.ones((1, K), np.float32)},
                            timing_only=True)
    scales = (K // 32) * N * 4
    assert abs(r4["weight_bytes"] - (K * N // 2 + scales)) <= 0.05 * K * N // 2
    assert r4["weight_bytes"] < 0.6 * r8["weight_bytes"] + scales
