"""Models as users bring them: other opsets (converted or taken as they are), opset-20 forms the host runs at the
model's own opset, symbolic dims fixed on the command line, onnxruntime's log noise kept away from the terminal."""

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from isa.arch import load_arch
from npusim.app.cli import main
from npusim.app.driver import run_model

ONNX_DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")


def _model(nodes, inputs, outputs, opset, inits=()):
    g = helper.make_graph(nodes, "m", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)],
                             ir_version=helper.find_min_ir_version_for([helper.make_opsetid("", opset)]))


def _vi(name, shape, elem=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def _grid_sample_model():
    """AffineGrid (opset 20) + GridSample mode='linear' (the opset-20 spelling) + Gelu approximate='tanh'."""
    theta = np.array([[[0.8, -0.3, 0.1], [0.3, 0.8, -0.2]]], np.float32)
    nodes = [helper.make_node("AffineGrid", ["theta", "size"], ["grid"], align_corners=0),
             helper.make_node("GridSample", ["x", "grid"], ["s"], mode="linear", padding_mode="border"),
             helper.make_node("Gelu", ["s"], ["y"], approximate="tanh")]
    inits = [numpy_helper.from_array(theta, "theta"), numpy_helper.from_array(np.array([1, 3, 6, 5]), "size")]
    return _model(nodes, [_vi("x", [1, 3, 8, 7])], [_vi("y", [1, 3, 6, 5])], 20, inits)


def test_opset20_forms_run_on_the_host_at_the_models_opset():
    _, _, _, report = run_model(_grid_sample_model(), load_arch("mid32"), validate=True)
    assert report["validation"]["y"]["ok"] and report["validation"]["y"]["max_rel_error"] <= 1e-6
    # the constant-theta AffineGrid folds to a constant grid; GridSample mode='linear' and Gelu approximate='tanh'
    # (opset-20 forms) run on the NPU now
    assert report["host_ops"] == []


def test_a_conv_with_mixed_dilations_and_asymmetric_pads_runs():
    # used to die in the host fallback's re-export (an attribute type it could not infer)
    w = np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype(np.float32)
    node = helper.make_node("Conv", ["x", "w"], ["y"], dilations=[2, 1], pads=[0, 0, 1, 1], strides=[1, 2])
    m = _model([node], [_vi("x", [1, 3, 9, 9])], [_vi("y", [1, 4, 6, 4])], 11, [numpy_helper.from_array(w, "w")])
    _, _, _, report = run_model(m, load_arch("edge16"), validate=True)
    assert report["validation"]["y"]["ok"] and report["validation"]["y"]["max_rel_error"] <= 1e-5


@pytest.mark.parametrize("name", ["test_Conv2d_depthwise_padded", "test_MaxPool2d", "test_Linear",
                                  "test_BatchNorm2d_eval"])
def test_pytorch_exported_models_at_opset_6_convert_and_match_their_reference(name):
    # models exported by PyTorch years ago, shipped with the onnx package with their inputs and expected outputs
    d = os.path.join(ONNX_DATA, "pytorch-converted", name)
    m = onnx.load(os.path.join(d, "model.onnx"))
    assert m.opset_import[0].version < 13
    x = numpy_helper.to_array(onnx.load_tensor(os.path.join(d, "test_data_set_0", "input_0.pb")))
    want = numpy_helper.to_array(onnx.load_tensor(os.path.join(d, "test_data_set_0", "output_0.pb")))
    inputs = {m.graph.input[0].name: x}
    _, _, outputs, report = run_model(m, load_arch("mid32"), inputs, validate=True)
    (got,) = outputs.values()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert all(v["ok"] for v in report["validation"].values())


def _dynamic_model():
    w = numpy_helper.from_array(np.ones((8, 4), np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Relu", ["h"], ["y"])]
    return _model(nodes, [_vi("x", ["batch", "seq", 8])], [_vi("y", ["batch", "seq", 4])], 17, [w])


def test_cli_fixes_symbolic_dims(tmp_path, capsys):
    path = tmp_path / "dyn.onnx"
    onnx.save(_dynamic_model(), path)
    assert main(["run", str(path), "--arch", "edge16", "--timing-only", "--quiet"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("npusim: error: tensor 'x' (a graph input) has symbolic dim 0 ('batch')")
    assert err.endswith("fix it with --dim batch=SIZE (Python: dims={'batch': SIZE})") and "\n" not in err
    assert main(["run", str(path), "--arch", "edge16", "--validate", "--quiet", "--dim", "batch=2",
                 "--dim", "seq=5"]) == 0
    out = capsys.readouterr().out
    assert "validation y against onnxruntime" in out and "ok" in out
    assert main(["run", str(path), "--arch", "edge16", "--dim", "batch"]) == 1
    assert "--dim must look like NAME=SIZE" in capsys.readouterr().err


def test_host_fallback_keeps_onnxruntime_log_noise_off_the_terminal(tmp_path, capfd):
    path = tmp_path / "grid.onnx"
    onnx.save(_grid_sample_model(), path)
    assert main(["run", str(path), "--arch", "mid32", "--validate", "--quiet"]) == 0
    captured = capfd.readouterr()
    assert "onnxruntime" not in captured.err and "graph.cc" not in captured.err, captured.err


def test_a_model_onnxruntime_refuses_is_one_line(tmp_path, capsys):
    # a valid ONNX graph with a host node onnxruntime has no kernel for (a float64 Hardmax at opset 20)
    node = helper.make_node("Hardmax", ["x"], ["y"])
    m = _model([node], [_vi("x", [4], TensorProto.DOUBLE)], [_vi("y", [4], TensorProto.DOUBLE)], 20)
    path = tmp_path / "f64.onnx"
    onnx.save(m, path)
    assert main(["run", str(path), "--arch", "edge16", "--quiet"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("npusim: error: ") and "\n" not in err


def test_the_models_bytes_given_to_the_importer_give_the_same_graph_and_errors():
    """run_model hashes a model's bytes for the compile cache and hands them to the importer, whose checker reads
    them instead of serializing the model again: the same graph, and an invalid model the same refusal."""
    from compiler.errors import CompileError
    from npusim.app.driver import load_model
    from npusim.app.zoo import MODELS

    good = MODELS["resnet18"](image=32, width=8, classes=10)
    a, b = load_model(good), load_model(good, serialized=good.SerializeToString(deterministic=True))
    assert a.dump() == b.dump() and all(np.array_equal(a.tensor(n).data, b.tensor(n).data)
                                        for n in a.tensors if a.is_const(n))
    bad = onnx.ModelProto()
    bad.CopyFrom(good)
    bad.graph.node[1].input[0] = "nowhere"
    errors = []
    for serialized in (None, bad.SerializeToString()):
        with pytest.raises(CompileError) as e:
            load_model(bad, serialized=serialized)
        errors.append(str(e.value))
    assert errors[0] == errors[1] and "not valid ONNX" in errors[0]
