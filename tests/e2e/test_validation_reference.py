"""``--validate``'s onnxruntime reference runs the graph as written: for a quantized MatMul weight onnxruntime's
optimizer would fuse DequantizeLinear -> MatMul into a MatMulNBits at accuracy level 4 (activations quantized to
int8), a reference less accurate than the NPU it checks."""

import numpy as np
import onnxruntime as ort

from isa.arch import load_arch
from npusim.app.driver import run_model
from tests.e2e.test_weight_quant import dq_matmul_model, onnxruntime_y


def test_an_int4_weight_model_validates_against_the_unfused_reference():
    model, x, w = dq_matmul_model(10, 256, 64, "int4", 32, seed=3)
    _, _, outputs, report = run_model(model, load_arch("mid32"), {"x": x}, validate=True, cache=False)
    check = report["validation"]["y"]
    assert check["ok"] and check["max_rel_error"] < 1e-6, check
    fused = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    ref = x @ w
    scale = np.abs(ref).max()
    assert np.abs(fused - ref).max() / scale > 1e-3   # what the default session gives: its int8 activations
    assert np.abs(onnxruntime_y(model, x) - ref).max() / scale < 1e-6
