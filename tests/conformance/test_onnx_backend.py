"""npusim's onnx backend (npusim.app.onnx_backend): prepare/run on mid32 against onnxruntime, constants bound from
inputs, host fallback visible in the report or refused without it, run_node, devices."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.errors import UnsupportedOpError
from npusim.app import onnx_backend
from npusim.app.onnx_backend import NpuBackend


def _conv_model(weights_as_input: bool = False, extra: str | None = None) -> onnx.ModelProto:
    """x[1,3,8,8] -> Conv 3x3 (8 filters, pad 1, bias) -> Relu [-> extra op] -> y."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(8).astype(np.float32), "b")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             helper.make_node("Relu", ["c"], ["r" if extra else "y"], name="relu")]
    if extra:
        nodes.append(helper.make_node(extra, ["r"], ["y"], name="extra"))
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])]
    if weights_as_input:
        inputs += [helper.make_tensor_value_info("w", TensorProto.FLOAT, [8, 3, 3, 3]),
                   helper.make_tensor_value_info("b", TensorProto.FLOAT, [8])]
    g = helper.make_graph(nodes, "conv", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8, 8])],
                          initializer=[] if weights_as_input else [w, b])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _ort(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


X = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)


def test_prepare_and_run_matches_onnxruntime_on_the_npu():
    model = _conv_model()
    rep = NpuBackend.prepare(model)
    (y,) = rep.run([X])
    want = _ort(model, {"x": X})[0]
    assert y.dtype == np.float32 and y.shape == (1, 8, 8, 8)
    assert np.abs(y - want).max() <= 1e-5 * np.abs(want).max()
    assert rep.arch.name == "mid32" and rep.report["host_ops"] == [] and rep.result.cycles > 0
    assert rep.run({"x": X}).y.tolist() == y.tolist()   # a dict by name; outputs by name too


def test_constant_inputs_are_bound_from_the_run_values():
    """Weights fed as graph inputs run on the NPU only once bound as constants; unbound they are activations the
    Conv lowering cannot take, which is an UnsupportedOpError without fallback."""
    model, init = _conv_model(weights_as_input=True), _conv_model()
    w, b = (numpy_helper.to_array(t) for t in init.graph.initializer)
    rep = NpuBackend.prepare(model, constant_inputs=("w", "b"), fallback=False)
    (y,) = rep.run([X, w, b])
    want = _ort(init, {"x": X})[0]
    assert rep.report["host_ops"] == [] and np.abs(y - want).max() <= 1e-5 * np.abs(want).max()
    assert NpuBackend.prepare(model, constant_inputs=(1, 2)).run([X, w, b])[0].tolist() == y.tolist()
    with pytest.raises(UnsupportedOpError, match="conv"):
        NpuBackend.prepare(model, fallback=False).run([X, w, b])
    with pytest.raises(ValueError, match=r"constant_inputs \[3, 'z'\] are not inputs of the model"):
        NpuBackend.prepare(model, constant_inputs=(3, "z"))


def test_host_fallback_shows_in_the_report_or_is_refused():
    model = _conv_model(extra="Floor")
    rep = NpuBackend.prepare(model)
    (y,) = rep.run([X])
    assert [(h["name"], h["op"]) for h in rep.report["host_ops"]] == [("extra", "Floor")]
    want = _ort(model, {"x": X})[0]
    assert np.abs(y - want).max() <= 1e-5 * np.abs(want).max()

    class NpuOnly(NpuBackend):
        fallback = False

    with pytest.raises(UnsupportedOpError, match=r"node 'extra' \(Floor\)"):
        NpuOnly.run_model(model, [X])


def test_run_node_and_module_functions():
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], transB=1)
    rng = np.random.default_rng(2)
    a, b, c = (rng.standard_normal(s).astype(np.float32) for s in ((4, 6), (5, 6), (5,)))
    want = a @ b.T + c
    (y,) = onnx_backend.run_node(node, [a, b, c], constant_inputs=(1, 2))
    assert y.shape == (4, 5) and np.abs(y - want).max() <= 1e-5 * np.abs(want).max()
    (y2,) = NpuBackend.run_node(node, [a, b, c], outputs_info=[(np.float32, (4, 5))], constant_inputs=("b", "c"),
                                opset_version=13)
    assert y2.tolist() == y.tolist()


def test_devices():
    assert onnx_backend.supports_device("CPU") and not NpuBackend.supports_device("CUDA")
    assert not NpuBackend.supports_device("NPU")
    with pytest.raises(ValueError, match="not 'CUDA'"):
        NpuBackend.prepare(_conv_model(), "CUDA")


def test_int64_inputs_are_constants():
    """A shape fed as an input (as onnx's node tests do) becomes a constant: the NPU holds no int64 activations."""
    g = helper.make_graph([helper.make_node("Reshape", ["x", "shape"], ["y"])], "reshape",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4]),
                           helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 6])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    rep = NpuBackend.prepare(model, fallback=False)
    (y,) = rep.run([x, np.array([4, 6], np.int64)])
    assert y.tolist() == x.reshape(4, 6).tolist() and rep.report["host_ops"] == []
