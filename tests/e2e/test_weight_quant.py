"""Weight-only quantized MatMuls (opset 21 DequantizeLinear of a constant int4/uint4 weight with block scales, of an
int8/uint8 weight per tensor, column or block, or of an fp8 E4M3 weight, feeding a MatMul): values against
onnxruntime, the weight's DRAM bytes, and the QDQ forms left as they are.

Tolerance (:func:`quant_tolerance`): onnxruntime dequantizes the weight, ``(q - zp) * scale`` in one f32 rounding,
then sums K products in f32. The NPU either does the same (the ``vector`` scheme: the weights bit-identical, only the
order of the sums differs, :func:`compiler.kernels.gemm.gemm_tolerance`) or multiplies the codes on the array and
scales each K block's partial sum (the ``array`` scheme, which decode takes: ``sum_blk scale * (A . q_blk) - zp *
scale * rowsum(A_blk)``, a reordering whose rounding error is of order ``sqrt(K) * 2**-24`` of ``|A| (|q| + zp)
scale``). Both stay within 1e-5 of the output's largest magnitude here (errors of about 1e-6 seen), while a wrong
scale, zero point, block or column is off by 1e-2 or more."""

import ml_dtypes
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.errors import UnsupportedOpError
from compiler.frontend.onnx_import import import_onnx
from isa.arch import load_arch
from npusim.app.driver import run_model

RNG = np.random.default_rng(7)
ONNX_QTYPE = {"int4": TensorProto.INT4, "uint4": TensorProto.UINT4, "int8": TensorProto.INT8,
              "uint8": TensorProto.UINT8, "fp8": TensorProto.FLOAT8E4M3FN}
RANGES = {"int4": (-8, 7), "uint4": (0, 15), "int8": (-128, 127), "uint8": (0, 255)}


def quant_tolerance(want: np.ndarray) -> float:
    """1e-5 of the output's largest magnitude (module docstring)."""
    return 1e-5 * float(np.abs(want).max())


def dq_matmul_model(M: int, K: int, N: int, kind: str, block: int, zero_points: bool = False, seed: int = 0):
    """``y = x @ DequantizeLinear(w_q, scale[, zp])`` at opset 21; with ``block`` (> 0) the scales are per block of
    ``block`` rows along K (axis 0), else per column (axis 1); ``zero_points`` True: random ones, an int: that one
    in every place. Returns (model, x, dequantized weight by numpy)."""
    rng = np.random.default_rng(seed)
    if kind == "fp8":
        w = (rng.standard_normal((K, N)) * 4).astype(ml_dtypes.float8_e4m3fn)
        qt = numpy_helper.from_array(w, "wq")
        deq_codes = w.astype(np.float32)
    else:
        lo, hi = RANGES[kind]
        codes = rng.integers(lo, hi + 1, (K, N))
        qt = helper.make_tensor("wq", ONNX_QTYPE[kind], (K, N), codes.ravel().tolist())
        deq_codes = codes.astype(np.float32)
    rows = -(-K // block) if block else 1
    scale = (rng.random((rows, N)) * 0.1 + 0.01).astype(np.float32)
    inits = [qt, numpy_helper.from_array(scale if block else scale.reshape(N), "s")]
    inputs = ["wq", "s"]
    zp = np.zeros((rows, N), np.float32)
    if zero_points:
        lo, hi = RANGES[kind]
        zp = rng.integers(lo, hi + 1, (rows, N)).astype(np.float32) if zero_points is True else \
            np.full((rows, N), zero_points, np.float32)
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
                                            ("uint4", 64, False), ("fp8", 0, False), ("int8", 0, False),
                                            ("uint8", 0, 128), ("uint8", 0, True), ("int8", 32, True)])
@pytest.mark.parametrize("M", [1, 3])
def test_quantized_weight_matmul_matches_onnxruntime(arch, kind, block, zps, M):
    """K not a multiple of 64, N not a multiple of the array: ragged blocks and tiles. int8 per column and uint8 with
    zero point 128 become int8 codes with no zero point; uint8 with zero points per column and int8 per block keep
    theirs."""
    K, N = 96, 40
    model, x, w = dq_matmul_model(M, K, N, kind, block, zps)
    want = onnxruntime_y(model, x)
    _, _, outputs, report = run_model(model, load_arch(arch), {"x": x})
    assert [r["op"] for r in report["layers"]] == ["QuantMatMul"] and report["host_ops"] == []   # all on the NPU
    assert np.abs(want - x @ w).max() <= quant_tolerance(want)   # (the model as this file builds it)
    assert np.abs(outputs["y"] - want).max() <= quant_tolerance(want), np.abs(outputs["y"] - want).max()


@pytest.mark.parametrize("zps,kind", [(0, "int8"), (128, "uint8"), (True, "uint8")])
def test_8bit_weights_are_fused_and_stored_one_byte_each(zps, kind):
    """The QuantMatMul's codes: int8 with no zero point when every code less its zero point fits int8 (exact), else
    the codes as they are with their zero points; the DRAM image one byte per weight plus f32 scales per column."""
    K, N = 256, 64
    model, x, w = dq_matmul_model(1, K, N, kind, 0, zps)
    g = import_onnx(model)
    (node,) = g.nodes
    fits = zps is not True
    assert node.op == "QuantMatMul" and node.attrs["format"] == ("int8" if fits else "uint8")
    assert g.tensor(node.inputs[1]).dtype == (np.int8 if fits else np.uint8)
    assert (len(node.inputs) == 4) == (not fits)   # per-column zero points: an image
    _, _, _, report = run_model(model, load_arch("mid32"), {"x": x}, timing_only=True)
    assert K * N + N * 4 <= report["weight_bytes"] <= K * N + N * 4 * (2 - fits) * K // 32   # (scales per k tile)


def test_dequantize_linear_of_a_weight_is_not_folded_to_float():
    model, _, _ = dq_matmul_model(2, 64, 32, "int4", 32)
    g = import_onnx(model)
    assert [n.op for n in g.nodes] == ["QuantMatMul"]
    assert g.tensor(g.nodes[0].inputs[1]).dtype == np.int8   # the codes, not a float32 weight


def test_qdq_matmul_with_quantized_activations_is_left_as_it_is():
    """``MatMul(DequantizeLinear(x_q), DequantizeLinear(w_q))`` (a QDQ model's quantized activations) keeps its two
    DequantizeLinear nodes: no QuantMatMul (its QLinear path is the int8 one, tests/e2e/test_int8.py)."""
    K, N = 32, 16
    w = np.random.default_rng(0).integers(-128, 128, (K, N)).astype(np.int8)
    nodes = [helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["x"]),
             helper.make_node("DequantizeLinear", ["wq", "ws"], ["w"], axis=1),
             helper.make_node("MatMul", ["x", "w"], ["y"])]
    inits = [numpy_helper.from_array(np.float32(0.1), "xs"), numpy_helper.from_array(np.int8(0), "xz"),
             numpy_helper.from_array(w, "wq"), numpy_helper.from_array(np.full(N, 0.02, np.float32), "ws")]
    graph = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("xq", TensorProto.INT8, (1, K))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, N))], inits)
    g = import_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10))
    assert [n.op for n in g.nodes] == ["DequantizeLinear", "DequantizeLinear", "MatMul"]


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
