"""import_onnx: opsets, shape inference, constants, attribute defaults, canonical forms and the errors."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.errors import (
    FALLBACK_HINT,
    CompileError,
    DynamicShapeError,
    UnsupportedDTypeError,
    UnsupportedOpError,
    UnsupportedOpsetError,
)
from compiler.frontend.onnx_import import import_onnx
from tests.compiler.util import model, ort_run, vi


def init(name: str, value) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value), name)


def conv_model(opset: int = 17, **attrs) -> onnx.ModelProto:
    w = init("w", np.ones((4, 3, 3, 3), np.float32))
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="conv_3", **attrs)
    return model([node], [vi("x", [1, 3, 8, 8])], [vi("y", None)], opset, [w])


def test_conv_defaults_are_filled_in():
    g = import_onnx(conv_model())
    (n,) = g.nodes
    assert n.attrs == {"kernel_shape": (3, 3), "strides": (1, 1), "pads": (0, 0, 0, 0), "dilations": (1, 1),
                       "group": 1}
    assert g.tensor("y").shape == (1, 4, 6, 6) and g.inputs == ("x",) and g.is_const("w")
    assert import_onnx(conv_model(auto_pad="VALID", strides=[2, 2])).nodes[0].attrs["pads"] == (0, 0, 0, 0)


def test_gemm_softmax_and_pool_defaults():
    nodes = [helper.make_node("Gemm", ["x", "w"], ["g"]), helper.make_node("Softmax", ["g"], ["s"]),
             helper.make_node("Reshape", ["s", "shape"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"], axis=-1), helper.make_node("Transpose", ["f"], ["t"])]
    m = model(nodes, [vi("x", [2, 4])], [vi("t", None)], 13,
              [init("w", np.ones((4, 8), np.float32)), init("shape", np.array([1, 1, 4, 4], np.int64))])
    g = import_onnx(m)
    attrs = {n.op: n.attrs for n in g.nodes}
    assert attrs["Gemm"] == {"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 0}
    assert attrs["Softmax"] == {"axis": 1}
    assert attrs["Reshape"] == {"allowzero": 0}
    assert attrs["MaxPool"] == {"kernel_shape": (2, 2), "strides": (1, 1), "pads": (0, 0, 0, 0),
                                "dilations": (1, 1), "ceil_mode": 0, "storage_order": 0}
    assert attrs["Flatten"] == {"axis": 3} and attrs["Transpose"] == {"perm": (1, 0)}
    assert g.tensor("t").shape == (3, 3)


def test_opset18_axes_inputs_become_canonical():
    nodes = [helper.make_node("ReduceMean", ["x", "axes"], ["m"], keepdims=0, name="rm"),
             helper.make_node("ReduceSum", ["m"], ["s"], noop_with_empty_axes=1),
             helper.make_node("Pad", ["s", "pads", "", "pad_axes"], ["p"]),
             helper.make_node("Gelu", ["p"], ["y"])]
    inits = [init("axes", np.array([-1], np.int64)), init("pads", np.array([1, 2], np.int64)),
             init("pad_axes", np.array([-1], np.int64))]
    m = model(nodes, [vi("x", [2, 3, 4])], [vi("y", None)], 20, inits)
    g = import_onnx(m)
    assert [n.op for n in g.nodes] == ["ReduceMean", "Identity", "Pad", "Gelu"]
    rm, _, pad, gelu = g.nodes
    assert rm.inputs == ("x",) and rm.attrs == {"axes": (2,), "keepdims": 0}
    assert g.tensor(pad.inputs[1]).data.tolist() == [0, 1, 0, 2] and pad.attrs == {"mode": "constant"}
    assert gelu.attrs == {"approximate": "none"} and g.tensor("y").shape == (2, 6)
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    assert ort_run(m, {"x": x})[0].shape == (2, 6)


def test_squeeze_of_activation_becomes_reshape_and_constant_nodes_fold():
    nodes = [helper.make_node("Constant", [], ["ax"], value=helper.make_tensor("v", TensorProto.INT64, [1], [0])),
             helper.make_node("Unsqueeze", ["x", "ax"], ["u"]), helper.make_node("Relu", ["u"], ["r"]),
             helper.make_node("Squeeze", ["r", "ax"], ["y"])]
    g = import_onnx(model(nodes, [vi("x", [3, 4])], [vi("y", None)], 13))
    assert [n.op for n in g.nodes] == ["Reshape", "Relu", "Reshape"]
    assert g.tensor(g.nodes[0].inputs[1]).data.tolist() == [1, 3, 4] and g.tensor("u").shape == (1, 3, 4)


def test_import_from_path(tmp_path):
    path = tmp_path / "conv.onnx"
    onnx.save(conv_model(), path)
    assert import_onnx(path).tensor("y").shape == import_onnx(str(path)).tensor("y").shape == (1, 4, 6, 6)


@pytest.mark.parametrize("auto_pad,strides,pads", [("SAME_UPPER", [1, 1], (1, 1, 1, 1)),
                                                   ("SAME_UPPER", [2, 2], (0, 0, 1, 1)),
                                                   ("SAME_LOWER", [2, 2], (1, 1, 0, 0)),
                                                   ("SAME_LOWER", [3, 1], (1, 1, 0, 1))])
def test_auto_pad_same_is_resolved_to_explicit_pads(auto_pad, strides, pads):
    # ONNX: out = ceil(8 / stride), total = (out - 1) * stride + 3 - 8 split in half, the odd one at the end (UPPER)
    # or the beginning (LOWER); shape inference agrees on the output
    g = import_onnx(conv_model(auto_pad=auto_pad, strides=strides))
    assert g.nodes[0].attrs["pads"] == pads
    assert g.tensor("y").shape == (1, 4, -(-8 // strides[0]), -(-8 // strides[1]))


def test_invalid_auto_pad_is_refused():
    with pytest.raises(UnsupportedOpError) as e:
        import_onnx(conv_model(auto_pad="SAME"))
    assert str(e.value) == "node 'conv_3' (Conv): attribute auto_pad='SAME' is not valid" + FALLBACK_HINT
    assert (e.value.node, e.value.op) == ("conv_3", "Conv")
    g = import_onnx(conv_model(auto_pad="SAME"), allow_unknown=True)
    assert g.nodes[0].unsupported.startswith("attribute auto_pad='SAME'")


@pytest.mark.parametrize("opset", [7, 9, 11, 12, 13, 17, 21, 22, 28])
def test_every_opset_the_installed_onnx_defines_imports(opset):
    # below 13 the model is converted up by onnx.version_converter; the graph remembers the opset it works in
    g = import_onnx(conv_model(opset))
    assert [n.op for n in g.nodes] == ["Conv"] and g.opsets[""] == max(opset, 13)
    assert g.nodes[0].attrs["pads"] == (0, 0, 0, 0)


def test_an_opset_newer_than_onnx_is_refused():
    newest = onnx.defs.onnx_opset_version()
    m = conv_model(newest)
    m.opset_import[0].version = newest + 1
    with pytest.raises(UnsupportedOpsetError, match=f"^model opset {newest + 1} is not supported; supported opsets "
                                                    f"are 1 to {newest}, the ones the installed onnx package "
                                                    f"defines"):
        import_onnx(m)


def test_an_old_model_converts_and_keeps_its_semantics():
    # opset 9 Upsample (removed since 10) and opset-11 Softmax (coerced to 2-D at axis 1) convert to opset 13 forms
    # that compute the same values as onnxruntime on the original
    nodes = [helper.make_node("Upsample", ["x", "scales"], ["u"], mode="nearest"),
             helper.make_node("Softmax", ["u"], ["y"], axis=1)]
    m = model(nodes, [vi("x", [1, 2, 3, 3])], [vi("y", [1, 2, 6, 6])], 9,
              [init("scales", np.array([1, 1, 2, 2], np.float32))])
    g = import_onnx(m, allow_unknown=True)
    assert g.opsets[""] == 13 and "Resize" in [n.op for n in g.nodes]


def test_an_old_model_is_checked_at_its_own_opset_before_conversion():
    # an op the default domain does not define: invalid at opset 7 itself (the converter used to be the first to
    # stumble on it, with no adapter for the node)
    bad = helper.make_node("NotAnOp", ["x"], ["y"], name="mystery")
    m = model([bad], [vi("x", [2])], [vi("y", [2])], 7)
    with pytest.raises(CompileError, match=r"^the model is not valid ONNX: No Op registered for NotAnOp with "
                                           r"domain_version of 7$"):
        import_onnx(m, allow_unknown=True)


def test_invalid_models_are_refused_with_the_checker_reason():
    m = conv_model()
    m.graph.node.append(helper.make_node("Relu", ["nowhere"], ["z"]))
    m.graph.output.append(vi("z", [1]))
    with pytest.raises(CompileError, match=r"^the model is not valid ONNX: "):
        import_onnx(m)


def test_duplicate_node_names_are_refused_as_onnxruntime_does():
    m = model([helper.make_node("Relu", ["x"], ["a"], name="dup"), helper.make_node("Relu", ["a"], ["y"], name="dup")],
              [vi("x", [2])], [vi("y", [2])])
    with pytest.raises(CompileError, match=r"^the model is not valid ONNX: two nodes are named 'dup'$"):
        import_onnx(m)


def test_dims_fix_symbolic_input_dimensions():
    m = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", ["batch", "seq", 8])], [vi("y", None)])
    with pytest.raises(DynamicShapeError, match=r"symbolic dim 0 \('batch'\) in shape \(batch, seq, 8\); fix it "
                                                r"with --dim batch=SIZE \(Python: dims=\{'batch': SIZE\}\)$"):
        import_onnx(m)
    assert import_onnx(m, dims={"batch": 2, "seq": 5}).tensor("y").shape == (2, 5, 8)
    with pytest.raises(CompileError, match=r"^--dim heads=4: no input dimension is named 'heads'; symbolic input "
                                           r"dimensions: batch, seq$"):
        import_onnx(m, dims={"heads": 4})


def test_data_dependent_shapes_say_why_they_cannot_compile():
    m = model([helper.make_node("NonZero", ["x"], ["y"], name="nz")], [vi("x", [4])],
              [vi("y", None, TensorProto.INT64)])
    with pytest.raises(DynamicShapeError, match=r"^node 'nz' \(NonZero\): tensor 'y' has .* its size depends on the "
                                                r"values of the data \(NonZero\), which a program with static "
                                                r"shapes cannot have$"):
        import_onnx(m, allow_unknown=True)


def test_dynamic_shapes_name_the_tensor():
    with pytest.raises(DynamicShapeError, match=r"tensor 'x' \(a graph input\) has symbolic dim 0 \('N'\) in shape "
                                                r"\(N, 3\); fix it with --dim N=SIZE"):
        import_onnx(model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", ["N", 3])], [vi("y", None)]))
    with pytest.raises(DynamicShapeError, match="tensor 'x' .*unknown dim 1"):
        import_onnx(model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [1, None])], [vi("y", None)]))
    with pytest.raises(DynamicShapeError, match="unknown rank"):
        import_onnx(model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", None)], [vi("y", None)]))


def test_unsupported_op_and_allow_unknown():
    nodes = [helper.make_node("Sin", ["x"], ["s"], name="sin_0"), helper.make_node("Relu", ["s"], ["y"])]
    m = model(nodes, [vi("x", [2, 3])], [vi("y", None)])
    with pytest.raises(UnsupportedOpError, match=r"^node 'sin_0' \(Sin\): operator is not supported by the compiler"):
        import_onnx(m)
    g = import_onnx(m, allow_unknown=True)
    sin, relu = g.nodes
    assert sin.on_host and not relu.on_host and sin.unsupported == "operator is not supported by the compiler"
    assert "[host: operator is not supported" in g.dump() and g.tensor("s").shape == (2, 3)


def test_foreign_domain_op_needs_a_shape_to_go_to_the_host():
    node = helper.make_node("FusedThing", ["x"], ["y"], domain="com.example", name="f")
    ext = [helper.make_opsetid("com.example", 1)]
    m = model([node], [vi("x", [2, 3])], [vi("y", None)], extra_opsets=ext)
    with pytest.raises(UnsupportedOpError, match=r"node 'f' \(com.example::FusedThing\): operator is not supported"):
        import_onnx(m)
    with pytest.raises(DynamicShapeError, match=r"node 'f' \(com.example::FusedThing\): tensor 'y' has an unknown"):
        import_onnx(m, allow_unknown=True)
    g = import_onnx(model([node], [vi("x", [2, 3])], [vi("y", [2, 3])], extra_opsets=ext), allow_unknown=True)
    assert g.nodes[0].on_host and g.nodes[0].domain == "com.example"


def test_gather_with_computed_indices_is_taken():
    # constant indices are DMA boxes; computed ones are rows gathered by the DMA (compiler.ops.index)
    from compiler.ops import npu_unsupported

    node = helper.make_node("Gather", ["x", "i"], ["y"], name="g0")
    graph = import_onnx(model([node], [vi("x", [5, 3]), vi("i", [2], TensorProto.INT32)], [vi("y", None)]))
    assert npu_unsupported(graph.nodes[0], graph) is None


def test_unsupported_dtype():
    # every numeric type and bool is taken (compiler/frontend/dtypes.py); complex has no NPU storage
    m = model([helper.make_node("Identity", ["x"], ["y"], name="r")], [vi("x", [2], TensorProto.COMPLEX64)],
              [vi("y", None, TensorProto.COMPLEX64)])
    with pytest.raises(UnsupportedDTypeError, match=r"node 'r' \(Identity\): tensor 'x' has dtype complex64, "
                                                    r"which is not supported; supported: f32, f16, bf16, f64, i8"):
        import_onnx(m, allow_unknown=True)
    m = model([helper.make_node("Relu", ["x"], ["y"], name="r")], [vi("x", [2], TensorProto.DOUBLE)],
              [vi("y", None, TensorProto.DOUBLE)])
    assert import_onnx(m).tensor("y").dtype == np.float64


def test_used_extra_outputs_and_training_are_refused():
    nodes = [helper.make_node("MaxPool", ["x"], ["y", "idx"], kernel_shape=[2, 2], name="mp")]
    m = model(nodes, [vi("x", [1, 1, 4, 4])], [vi("y", None), vi("idx", None, TensorProto.INT64)])
    with pytest.raises(UnsupportedOpError, match=r"node 'mp' \(MaxPool\): only the first output is supported; the "
                                                 r"Indices output \('idx'\) is used"):
        import_onnx(m)
    m = model(nodes, [vi("x", [1, 1, 4, 4])], [vi("y", None)])
    assert import_onnx(m).nodes[0].outputs == ("y",)


def test_ceil_mode_corner_is_refused():
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[2, 2], pads=[1, 1, 1, 1],
                            ceil_mode=1, name="mp")
    with pytest.raises(UnsupportedOpError, match="ONNX shape inference gives 7 outputs, onnxruntime and PyTorch 6"):
        import_onnx(model([node], [vi("x", [1, 1, 11, 11])], [vi("y", None)]))
    ok = model([node], [vi("x", [1, 1, 10, 10])], [vi("y", None)])
    assert import_onnx(ok).tensor("y").shape == ort_run(ok, {"x": np.zeros((1, 1, 10, 10), np.float32)})[0].shape


def test_shape_inference_failure_is_a_compile_error():
    node = helper.make_node("Add", ["x", "z"], ["y"])
    with pytest.raises(CompileError, match="ONNX shape inference failed"):
        import_onnx(model([node], [vi("x", [2, 3]), vi("z", [4, 5])], [vi("y", None)]))


def test_qlinear_ops_are_recognised():
    q = [init(n, v) for n, v in (("xs", np.float32(0.1)), ("xz", np.uint8(128)), ("ws", np.float32(0.05)),
                                 ("wz", np.uint8(128)), ("ys", np.float32(0.2)), ("yz", np.uint8(128)),
                                 ("w", np.full((4, 3, 3, 3), 130, np.uint8)), ("m", np.full((3, 2), 129, np.uint8)))]
    nodes = [helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["c"], pads=[1] * 4),
             helper.make_node("QLinearMatMul", ["x2", "xs", "xz", "m", "ws", "wz", "ys", "yz"], ["mm"])]
    m = model(nodes, [vi("x", [1, 3, 5, 5], TensorProto.UINT8), vi("x2", [4, 3], TensorProto.UINT8)],
              [vi("c", None, TensorProto.UINT8), vi("mm", None, TensorProto.UINT8)], inits=q)
    g = import_onnx(m)
    assert g.nodes[0].attrs["kernel_shape"] == (3, 3) and g.tensor("c").shape == (1, 4, 5, 5)
    assert g.tensor("mm").dtype == np.uint8 and g.tensor("mm").shape == (4, 2)
