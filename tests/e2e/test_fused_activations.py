"""Gelu(approximate='tanh') and Swish (SiLU) on the NPU: one stream each (8 and 2 vector instructions per tile),
matching onnxruntime on every preset, also where their values are far in the tails."""

import numpy as np
import pytest
from onnx import helper

from compiler.kernels.common.target import Target
from compiler.kernels.vector import streams
from isa import Act, BinOp, DType, VecBinary, VecUnary
from isa.arch import load_arch, presets_by_size
from npusim.app.driver import run_model

from ..compiler.util import model, vi

PRESETS = presets_by_size()


def _one(op: str, opset: int, shape: list, **attrs):
    return model([helper.make_node(op, ["x"], ["y"], name="act", **attrs)], [vi("x", shape)], [vi("y", shape)],
                 opset=opset)


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("op,opset,attrs", [("Gelu", 20, {"approximate": "tanh"}), ("Swish", 24, {}),
                                            ("Swish", 24, {"alpha": 1.702})])
def test_matches_onnxruntime_on_the_npu(preset, op, opset, attrs):
    shape = [2, 8, 30, 7]   # 4-D, channels-last on the NPU
    x = np.linspace(-12, 12, int(np.prod(shape)), dtype=np.float32).reshape(shape)
    _, _, _, report = run_model(_one(op, opset, shape, **attrs), load_arch(preset), {"x": x}, validate=True)
    assert report["host_ops"] == []
    check = report["validation"]["y"]
    assert check["max_rel_error"] <= 1e-6, check


def test_one_stream_with_eight_and_two_instructions_per_tile():
    target = Target.of(load_arch("mid32"))
    for act, alpha, want in (("gelu_tanh", 1.0, [BinOp.MUL, BinOp.MUL, BinOp.ADD, BinOp.MUL, Act.TANH, BinOp.ADD,
                                                  BinOp.MUL, BinOp.MUL]),
                             ("silu", 1.0, [Act.SIGMOID, BinOp.MUL]),
                             ("silu", 2.0, [BinOp.MUL, Act.SIGMOID, BinOp.MUL])):
        prog = streams.activation(act, (64, 1000), DType.F32, target, alpha=alpha)
        ops = [i.op if isinstance(i, VecBinary) else i.fn for i in prog.instrs if isinstance(i, (VecBinary, VecUnary))]
        tiles = len(ops) // len(want)
        assert tiles >= 8 and ops == want * tiles   # one pass through DRAM, every tile the whole sequence


def test_tanh_gelu_in_the_graph_builder_form_validates_below_opset_20():
    # the builder's Gelu(approximate='tanh') written out for an older opset (as PyTorch exports it) runs in
    # onnxruntime and, re-imported, fuses back into one Gelu on the NPU
    from compiler.frontend.builder import GraphBuilder, to_onnx

    b = GraphBuilder("g")
    b.output(b.gelu(b.input("x", (4, 96)), approximate="tanh", name="y"))
    proto = to_onnx(b.build(), opset=17)
    assert [n.op_type for n in proto.graph.node].count("Tanh") == 1
    compiled, _, _, report = run_model(proto, load_arch("edge16"), validate=True)
    assert report["validation"]["y"]["ok"] and report["validation"]["y"]["max_rel_error"] <= 1e-6
    assert [(n.op, n.attrs) for n in compiled.graph.nodes] == [("Gelu", {"approximate": "tanh"})]
