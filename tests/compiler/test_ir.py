"""The graph IR: tensors, nodes, graph queries, topo_check, dump."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.errors import CompileError, GraphError
from compiler.ir import Graph, Node, Tensor
from isa.errors import NpuSimError


def small_graph() -> Graph:
    t = {"x": Tensor("x", (1, 4), np.float32), "w": Tensor.const("w", np.ones((4, 2), np.float32)),
         "y": Tensor("y", (1, 2), np.float32), "z": Tensor("z", (1, 2), np.float32)}
    nodes = (Node("mm", "MatMul", ("x", "w"), ("y",)), Node("act", "Relu", ("y",), ("z",)))
    return Graph("g", ("x",), ("z",), nodes, t)


def test_tensor_normalises_and_freezes():
    t = Tensor("a", [2, np.int64(3)], "float32")
    assert t.shape == (2, 3) and t.dtype == np.float32 and not t.is_const and t.size == 6 and t.nbytes == 24
    src = np.arange(6, dtype=np.int32).reshape(2, 3)
    c = Tensor.const("c", src)
    src[0, 0] = 99  # the tensor holds its own read-only copy
    assert c.data[0, 0] == 0 and not c.data.flags.writeable and c.type_str() == "i32[2,3]"
    with pytest.raises(GraphError, match="data shape"):
        Tensor("d", (3,), np.float32, np.zeros(2, np.float32))
    with pytest.raises(AttributeError):
        t.name = "b"


def test_graph_queries():
    g = small_graph()
    g.topo_check()
    assert g.producer("y").name == "mm" and g.producer("x") is None and g.producer("w") is None
    assert [n.name for n in g.consumers("y")] == ["act"] and g.consumers("z") == ()
    assert g.node("act").op == "Relu" and g.is_const("w") and not g.is_const("x")
    assert g.param_count == 8 and list(g.constants) == ["w"] and g.op_counts() == {"MatMul": 1, "Relu": 1}
    with pytest.raises(GraphError, match="no tensor 'q'"):
        g.tensor("q")


def test_topo_check_errors():
    g = small_graph()
    with pytest.raises(GraphError, match="'y' is used before it is produced"):
        Graph("g", g.inputs, g.outputs, g.nodes[::-1], g.tensors).topo_check()
    with pytest.raises(GraphError, match="already defined"):
        Graph("g", g.inputs, g.outputs, g.nodes + (Node("again", "Relu", ("x",), ("z",)),), g.tensors).topo_check()
    with pytest.raises(GraphError, match="not a tensor of the graph"):
        Graph("g", g.inputs, g.outputs, (Node("mm", "MatMul", ("x", "v"), ("y",)),), g.tensors).topo_check()
    with pytest.raises(GraphError, match="output 'z' is never produced"):
        Graph("g", g.inputs, g.outputs, g.nodes[:1], g.tensors).topo_check()
    with pytest.raises(GraphError, match="node name 'mm' is used twice"):
        Graph("g", g.inputs, g.outputs, (g.nodes[0], Node("mm", "Relu", ("y",), ("z",))), g.tensors).topo_check()
    assert issubclass(GraphError, CompileError) and issubclass(CompileError, NpuSimError)


def test_dump_lists_every_node_with_shapes_and_attrs():
    g = small_graph()
    g = Graph(g.name, g.inputs, g.outputs, (g.nodes[0], Node("act", "Softmax", ("y",), ("z",), {"axis": 1},
                                                             unsupported="just because")), g.tensors)
    text = g.dump()
    lines = text.splitlines()
    assert lines[0] == "graph g (2 nodes, 8 constant elements)"
    assert "  input  x:f32[1,4]" in lines and "  output z:f32[1,2]" in lines
    assert lines[-2].split() == ["mm", "MatMul", "x:f32[1,4],", "w:f32[4,2]=const", "->", "y:f32[1,2]"]
    assert lines[-1].split()[:5] == ["act", "Softmax", "y:f32[1,2]", "->", "z:f32[1,2]"]
    assert lines[-1].endswith("axis=1  [host: just because]")
