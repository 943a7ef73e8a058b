"""Issue 17's ONNX classes, each with its minimal reproducer: a model onnxruntime refuses is refused by the importer
with the project's own error (before any lowering reads an operand), and the forms the ONNX fuzzer found computed
wrongly or crashing now run and match onnxruntime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.errors import CompileError
from compiler.frontend.onnx_import import import_onnx
from isa import NpuSimError
from isa.arch import load_arch, presets_by_size
from npusim.app.driver import run_model
from tests.compiler.util import model, vi

rng = np.random.default_rng(0)


def init(name: str, shape, dtype=np.float32) -> onnx.TensorProto:
    a = rng.standard_normal(shape) if np.dtype(dtype).kind == "f" else rng.integers(-3, 4, shape)
    return numpy_helper.from_array(np.asarray(a).astype(dtype), name)


def scalar(name: str, value, dtype=np.float32) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(value, dtype), name)


def conv(w=(8, 4, 3, 3), b=(8,), group=1) -> onnx.ModelProto:
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv", pads=[1, 1, 1, 1], group=group)
    return model([node], [vi("x", [1, 4, 8, 8])], [vi("y", None)], 17, [init("w", w), init("b", b)])


def ort_refuses(m: onnx.ModelProto) -> bool:
    """onnxruntime refuses the model when it loads it or runs it on zeros."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    inits = {t.name for t in m.graph.initializer}
    feeds = {i.name: np.zeros([d.dim_value for d in i.type.tensor_type.shape.dim],
                              helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type))
             for i in m.graph.input if i.name not in inits}
    try:
        ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"]).run(None, feeds)
    except Exception:  # noqa: BLE001 - onnxruntime's own error types
        return True
    return False


CONTRACT_CASES = [
    # (model, message): initializers whose shape contradicts the op (were IndexError/ValueError in the generators)
    (conv(w=(8, 3, 3, 3)), r"node 'conv' \(Conv\): weights 'w' of shape \(8, 3, 3, 3\) need 3 x group 1 = 3 input "
                           r"channels .* but input 'x' has 4 channels"),
    (conv(b=(7,)), r"node 'conv' \(Conv\): bias 'b' must have shape \(8,\) \(one per filter\), not \(7,\)"),
    (conv(b=(8, 1)), r"bias 'b' must have shape \(8,\)"),
    (conv(w=(6, 1, 3, 3), b=(6,), group=2), r"need 1 x group 2 = 2 input channels and a filter count divisible "
                                            r"by the group, but input 'x' has 4"),
    (model([helper.make_node("Gemm", ["x", "w", "c"], ["y"], name="gemm")], [vi("x", [2, 4])], [vi("y", None)], 17,
           [init("w", (4, 3)), init("c", (5,))]),
     r"node 'gemm' \(Gemm\): C 'c' of shape \(5,\) does not broadcast to the output's \(2, 3\)"),
    (model([helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], name="ln")], [vi("x", [4, 16])],
           [vi("y", None)], 17, [init("s", (32,)), init("b", (16,))]),
     r"node 'ln' \(LayerNormalization\): scale 's' of shape \(32,\) does not broadcast to the normalized shape"),
    (model([helper.make_node("PRelu", ["x", "s"], ["y"], name="prelu")], [vi("x", [1, 4, 8, 8])], [vi("y", None)],
           17, [init("s", (3, 1, 1))]), r"slope 's' of shape \(3, 1, 1\) does not broadcast to the input's"),
    (model([helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], name="inorm")], [vi("x", [1, 4, 8, 8])],
           [vi("y", None)], 17, [init("s", (4,)), init("b", (3,))]), r"B 'b' must have shape \(4,\)"),
    (model([helper.make_node("Clip", ["x", "lo", "hi"], ["y"], name="clip")], [vi("x", [4])], [vi("y", None)], 17,
           [init("lo", (2,)), scalar("hi", 1.0)]), r"min 'lo' must be a scalar, not of shape \(2,\)"),
    (model([helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], name="q")], [vi("x", [1, 4, 8, 8])],
           [helper.make_tensor_value_info("y", TensorProto.INT8, None)], 17,
           [init("s", (3,)), init("z", (3,), np.int8)]),
     r"scale 's' of shape \(3,\) must be a scalar or 1-D of the size of axis 1"),
    (model([helper.make_node("Gather", ["x", "i"], ["y"], name="gather", axis=1)], [vi("x", [2, 5])],
           [vi("y", None)], 17, [numpy_helper.from_array(np.array([0, 5], np.int64), "i")]),
     r"index 5 of 'i' is out of range for axis 1 of size 5"),
    (model([helper.make_node("Reshape", ["x", "s"], ["y"], name="reshape")], [vi("x", [3, 16])], [vi("y", None)], 17,
           [numpy_helper.from_array(np.array([4, 2, 4], np.int64), "s")]),   # (the fuzzer: an input dim changed)
     r"shape \(4, 2, 4\) \('s'\) does not hold the 48 elements of input shape \(3, 16\)"),
    (model([helper.make_node("Reshape", ["x", "s"], ["y"], name="reshape")], [vi("x", [3, 16])], [vi("y", None)], 17,
           [numpy_helper.from_array(np.array([[16, 3]], np.int64), "s")]),   # (the fuzzer: (2,) made (1, 2))
     r"the target shape 's' must be 1-D, not of shape \(1, 2\)"),
]


@pytest.mark.parametrize("m,message", CONTRACT_CASES)
def test_operand_contracts_are_checked_before_lowering(m, message):
    assert ort_refuses(m)   # onnxruntime refuses each of them too
    with pytest.raises(CompileError, match=message + r".*; the model is not valid ONNX"):
        import_onnx(m, allow_unknown=True)


def test_a_graph_with_no_outputs_is_refused():
    m = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [4])], [], 17)
    with pytest.raises(CompileError, match=r"^the model's graph has no outputs: there is nothing to compute"):
        import_onnx(m)


def test_a_name_that_is_not_utf8_is_refused_in_one_line():
    # protobuf keeps a string field's bytes as they are; the checker's message quoting it (or reading the name)
    # raised UnicodeDecodeError (found by the fuzzer)
    data = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [4])], [vi("y", [4])], 17).SerializeToString()
    m = onnx.ModelProto()
    m.ParseFromString(data.replace(b"Relu", b"\xff\xfelu", 1))
    with pytest.raises(CompileError, match=r"^the model is not valid ONNX: a name or string in it is not UTF-8 text: "
                                           r"'No Op registered for \ufffd\ufffdlu with domain_version of 17'$"):
        import_onnx(m)


def test_missing_external_data_is_refused(tmp_path):
    m = conv()
    onnx.save(m, tmp_path / "m.onnx", save_as_external_data=True, location="m.data", size_threshold=0)
    (tmp_path / "m.data").unlink()
    with pytest.raises(CompileError, match=r"tensor name: w\) should be stored in .*m\.data, but it is not regular "
                                           r"file"):
        import_onnx(tmp_path / "m.onnx")
    with pytest.raises(CompileError, match=r"^the model is not valid ONNX: .*m\.data"):
        import_onnx(onnx.load(tmp_path / "m.onnx", load_external_data=False))


def test_attribute_types_the_schema_does_not_allow_are_refused():
    m = conv()
    m.graph.node[0].attribute.append(helper.make_attribute("dilations", 1.5))   # (was a TypeError in canon)
    with pytest.raises(CompileError, match=r"^the model is not valid ONNX: Mismatched attribute type"):
        import_onnx(m)


@pytest.mark.parametrize("mutate,message", [
    (lambda m: m.graph.node[0].attribute.append(helper.make_attribute("bogus", 1)), r"Unrecognized attribute: bogus"),
    (lambda m: m.graph.node.reverse(), r"topologically sorted"),   # (onnxruntime sorts them; ONNX requires it)
    (lambda m: (m.graph.node.append(helper.make_node("Add", ["r", "k"], ["z"], name="add")),
                m.graph.initializer.append(numpy_helper.from_array(np.ones(4, np.int64), "k")),
                m.graph.output.append(vi("z", None))),
     r"B has inconsistent type tensor\(int64\)"),
    (lambda m: setattr(m.graph.output[0].type.tensor_type, "elem_type", 0),   # (the fuzzer; the checker allows it)
     r"'y' is declared with element type 0 \(UNDEFINED\); declare its type"),
])
def test_models_onnxruntime_refuses_are_refused(mutate, message):
    m = model([helper.make_node("Relu", ["x"], ["r"], name="relu"), helper.make_node("Neg", ["r"], ["y"], name="neg")],
              [vi("x", [4])], [vi("y", None)], 17)
    mutate(m)
    assert ort_refuses(m) or message == r"topologically sorted"
    with pytest.raises(NpuSimError, match=message):
        run_model(m, load_arch("edge16"))


def test_a_node_invalid_at_its_own_opset_is_refused_before_conversion():
    """Clip with min and max inputs is opset 11's form: at opset 10 the model is invalid (the converter to opset
    13 used to accept it)."""
    m = model([helper.make_node("Clip", ["x", "lo", "hi"], ["y"], name="clip")], [vi("x", [4])], [vi("y", None)], 10,
              [scalar("lo", -1.0), scalar("hi", 1.0)])
    assert ort_refuses(m)
    with pytest.raises(CompileError, match=r"^the model is not valid ONNX: "):
        import_onnx(m)


def test_an_output_that_is_a_constant_is_copied_out():
    """Every path to the output folds to a constant (was a KeyError when the program bound its outputs): the model
    is valid ONNX, so the program copies the folded value to the output, and it matches onnxruntime."""
    m = model([helper.make_node("Mul", ["k", "k"], ["c"]), helper.make_node("Relu", ["c"], ["y"])], [vi("x", [4])],
              [vi("y", None)], 17, [init("k", (4,))])
    _, _, outputs, report = run_model(m, load_arch("edge16"), validate=True)
    assert report["validation"]["y"]["ok"] and report["validation"]["y"]["max_abs_error"] == 0


@pytest.mark.parametrize("arch", presets_by_size())
@pytest.mark.parametrize("case", ["layernorm_scale_1", "clip_bounds_1", "softmax_of_constant"])
def test_forms_the_fuzzer_found_run_and_match_onnxruntime(arch, case):
    """LayerNormalization with a (1,)-shaped scale and bias (was silently wrong: the scale was not broadcast),
    Clip with 1-element 1-D bounds (was a TypeError), a Softmax of a constant added to an input (was a KeyError:
    the NPU lowering wanted an activation; it runs on the host)."""
    if case == "layernorm_scale_1":
        m = model([helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"], name="ln")], [vi("x", [4, 16])],
                  [vi("y", None)], 17, [scalar("s", [0.3]), scalar("b", [0.1])])
    elif case == "clip_bounds_1":
        m = model([helper.make_node("Clip", ["x", "lo", "hi"], ["y"], name="clip")], [vi("x", [4, 16])],
                  [vi("y", None)], 13, [scalar("lo", [-0.5]), scalar("hi", [0.7])])
    else:
        m = model([helper.make_node("Softmax", ["k"], ["s"], name="softmax"),
                   helper.make_node("Add", ["x", "s"], ["y"], name="add")], [vi("x", [4, 16])], [vi("y", None)], 13,
                  [init("k", (4, 16))])
    _, _, _, report = run_model(m, load_arch(arch), validate=True)
    assert all(v["ok"] for v in report["validation"].values()), report["validation"]
    if case != "softmax_of_constant":
        assert report["host_ops"] == []
