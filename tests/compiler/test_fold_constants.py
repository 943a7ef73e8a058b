"""Constant folding: shape arithmetic becomes constants; QDQ weights stay int8."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from compiler.frontend.builder import GraphBuilder, to_onnx
from compiler.frontend.onnx_import import import_onnx
from compiler.passes import fold_constants, remove_dead
from tests.compiler.util import model, ort_run, vi


def shape_chain_nodes() -> list:
    """``Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [-1]))``: flatten all but the batch dim."""
    return [helper.make_node("Shape", ["x"], ["s"]),
            helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
            helper.make_node("Unsqueeze", ["n", "axes0"], ["n1"]),
            helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
            helper.make_node("Reshape", ["x", "target"], ["y"], name="flat")]


def test_shape_chain_folds_to_a_constant_reshape_target_on_import():
    inits = [numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array([0], np.int64), "axes0"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus1")]
    m = model(shape_chain_nodes(), [vi("x", [2, 3, 4, 5])], [vi("y", None)], 13, inits)
    g = import_onnx(m)
    (reshape,) = g.nodes
    assert reshape.op == "Reshape" and reshape.name == "flat"
    target = g.tensor(reshape.inputs[1])
    assert target.is_const and target.data.tolist() == [2, -1] and g.tensor("y").shape == (2, 60)
    assert set(g.tensors) == {"x", "target", "y"}
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
    np.testing.assert_array_equal(ort_run(to_onnx(g), {"x": x})[0], ort_run(m, {"x": x})[0])


def test_fold_constants_on_an_ir_graph():
    b = GraphBuilder("chain")
    x = b.input("x", (2, 3, 4, 5), np.float32)
    s = b.node("Shape", [x], (3,), np.int64, start=1)
    n = b.node("Gather", [s, np.array([2, 0], np.int64)], (2,), np.int64, axis=0)
    t = b.node("Concat", [n, np.array([-1], np.int64)], (3,), np.int64, axis=0)
    c = b.node("Cast", [b.node("Mul", [t, np.array(2, np.int64)], (3,), np.int64)], (3,), np.float32, to="float32")
    y = b.node("Reshape", [x, t], (5, 3, 8), np.float32)
    b.output(y, c)
    g = fold_constants(b.build())
    assert [n.op for n in g.nodes] == ["Reshape"]
    assert g.tensor(t).data.tolist() == [5, 3, -1] and g.tensor(c).data.tolist() == [10.0, 6.0, -2.0]
    assert g.tensor(c).dtype == np.float32 and g.outputs == (y, c)
    g.topo_check()


def test_quantize_of_a_constant_folds_but_dequantize_stays():
    b = GraphBuilder("qdq")
    x = b.input("x", (1, 2), np.float32)
    wq = b.quantize(b.const("w", np.array([[0.5, -1.0], [0.26, 3.0]], np.float32)), np.float32(0.5), np.int8(0))
    y = b.matmul(x, b.dequantize(wq, np.float32(0.5), np.int8(0)))
    b.output(y)
    g = fold_constants(b.build())
    assert [n.op for n in g.nodes] == ["DequantizeLinear", "MatMul"]
    w = g.tensor(g.nodes[0].inputs[0])
    assert w.dtype == np.int8 and w.data.tolist() == [[1, -2], [1, 6]]


def test_remove_dead_drops_unused_nodes_and_tensors():
    b = GraphBuilder("dead")
    x = b.input("x", (3,), np.float32)
    b.relu(b.add(x, 1.0))
    y = b.sigmoid(x)
    b.output(y)
    g = remove_dead(b.build())
    assert [n.op for n in g.nodes] == ["Sigmoid"] and set(g.tensors) == {"x", y}


def test_folding_an_opset13_cast_and_constant_of_shape():
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("ConstantOfShape", ["s"], ["ones"],
                              value=helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0])),
             helper.make_node("Cast", ["s"], ["sf"], to=TensorProto.FLOAT),
             helper.make_node("ReduceSum", ["sf"], ["n"], keepdims=0),
             helper.make_node("Mul", ["x", "ones"], ["xo"]), helper.make_node("Div", ["xo", "n"], ["y"])]
    m = model(nodes, [vi("x", [2, 3])], [vi("y", None)], 13)
    g = import_onnx(m)
    assert [n.op for n in g.nodes] == ["Mul", "Div"] and g.tensor(g.nodes[1].inputs[1]).data == 5.0
