"""The one registry of lowerings: the importer, the host-fallback decision and docs/ops.md read the same entries."""

import numpy as np
import pytest
from onnx import TensorProto, helper

from compiler.compile import compile_model
from compiler.frontend.builder import GraphBuilder
from compiler.frontend.onnx_import import import_onnx
from compiler.ops import REGISTRY, npu_unsupported, unsupported_nodes
from isa.arch import load_arch


def test_every_entry_is_filed_under_its_op_and_says_where_it_runs():
    for op, spec in REGISTRY.items():
        assert spec.op == op
        assert spec.npu, f"{op}: no text for docs/ops.md"


def _graph(build):
    b = GraphBuilder("g")
    x = b.input("x", (1, 4, 6, 6))
    b.output(build(b, x))
    return b.build()


@pytest.mark.parametrize("build, reason", [
    (lambda b, x: b.layernorm(x, np.ones((6, 6), np.float32), axis=2), "only the last axis, not (2,)"),
    (lambda b, x: b.pad(x, (0, 0, 6, 0, 0, 0, 0, 1), mode="reflect"), "mode 'reflect' pads axis 2 by up to 5 (it "
                                                                         "keeps 6 elements), not 6"),
    (lambda b, x: b.pad(x, (0, 0, 1, 0, 0, 0, 0, 1), mode="reflect"), None),
    (lambda b, x: b.softmax(x, axis=1), None),
    (lambda b, x: b.maxpool(x, (3, 2), (2, 1), (0, 1, 1, 0), (1, 2), ceil_mode=True), None),
    (lambda b, x: b.maxpool(b.reshape(x, (1, 4, 6, 6, 1)), (2, 2, 1)), "only 1-D and 2-D pooling (NCL or NCHW "
                                                                        "inputs), not rank 5"),
    (lambda b, x: b.gemm(b.flatten(x), np.ones((144, 3), np.float32), trans_a=False, trans_b=False,
                         c=np.ones(3, np.float32)), None),
])
def test_checks_give_the_reason_a_node_cannot_run_on_the_npu(build, reason):
    g = _graph(build)
    node = g.nodes[-1]
    assert npu_unsupported(node, g) == reason
    assert (node in dict(unsupported_nodes(g))) == (reason is not None)


def test_a_node_whose_weights_are_computed_runs_on_the_host_instead_of_crashing():
    b = GraphBuilder("g")
    x, w = b.input("x", (1, 4, 6, 6)), b.input("w", (3, 4, 3, 3))
    b.output(b.conv(x, w))
    g = b.build()
    assert npu_unsupported(g.nodes[0], g) == "the weights and bias must be constants"
    compiled = compile_model(g, load_arch("edge16"))
    assert [h.node.op for h in compiled.host_ops] == ["Conv"]


def test_a_residual_conv_without_bias_stays_on_the_npu():
    b = GraphBuilder("g")
    x = b.input("x", (1, 8, 6, 6))
    y = b.add(b.conv(x, np.ones((8, 8, 3, 3), np.float32), pads=1), x)
    b.output(y)
    compiled = compile_model(b.build(), load_arch("edge16"))
    assert not compiled.host_ops and [lr.op for lr in compiled.layers] == ["Conv"]


def test_the_importer_canonicalises_through_the_registry():
    node = helper.make_node("Flatten", ["x"], ["y"], axis=-1)
    m = helper.make_model(helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                           [2, 3, 4])],
                                            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6, 4])]),
                          opset_imports=[helper.make_opsetid("", 17)])
    assert import_onnx(m).nodes[0].attrs == {"axis": 2}


def test_a_dtype_refusal_names_the_types_the_op_takes():
    """An op whose dtype set is not float32 (ArgMax ranks f32 and i32) says so, not 'only float32 tensors'."""
    from onnx import TensorProto, helper

    from compiler.frontend.onnx_import import import_onnx
    from compiler.ops import REGISTRY

    m = helper.make_model(helper.make_graph(
        [helper.make_node("ArgMax", ["x"], ["y"], axis=1)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, 5])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [2, 1])]), opset_imports=[helper.make_opsetid("", 17)])
    graph = import_onnx(m)
    reason = REGISTRY["ArgMax"].unsupported(graph.nodes[0], graph)
    assert reason == "only f32, i32 tensors are lowered, not float16 ('x')"
