"""Activations kept in the SPM (compile_model(resident=...)): same values, fewer DRAM bytes, an arena of their own."""

import math

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from compiler.compile import ARENA_FRACTION, compile_model
from compiler.frontend.builder import GraphBuilder
from isa import DmaCopy, MatMul, Space
from isa.arch import load_arch
from npusim import simulate
from npusim.app.driver import run_model

RNG = np.random.default_rng(3)
ARCH = load_arch("dc128")


def three_convs():
    """conv -> relu -> conv -> relu -> conv + the block input (residual): intermediates a, b feed the next conv."""
    b = GraphBuilder("three_convs")
    x = b.input("x", (1, 32, 14, 14))
    w = [b.const(f"w{i}", RNG.standard_normal((32, 32, 3, 3)).astype(np.float32) * 0.1) for i in range(3)]
    a = b.relu(b.conv(x, w[0], pads=1), name="a")
    h = b.relu(b.conv(a, w[1], pads=1), name="h")
    b.output(b.add(b.conv(h, w[2], pads=1), x, name="y"))
    return b.build()


def dram_act_views(program):
    """(instruction, role, view) of every DMA operand in DRAM region ACT."""
    return [(i, r, v) for i in program.instrs if isinstance(i, DmaCopy) for r, v in (("src", i.src), ("dst", i.dst))
            if v.space is Space.DRAM and v.region == "ACT"]


def test_intermediates_move_to_the_spm_arena_and_values_match_onnxruntime():
    graph = three_convs()
    on, off = compile_model(graph, ARCH), compile_model(graph, ARCH, resident=False)
    assert set(off.tensors) - set(on.tensors) == {"a", "h"}   # kept on chip, so not readable from DRAM afterwards
    assert {"x", "y"} <= set(on.tensors)
    arena = ARCH.spm.size - int(ARCH.spm.size * ARENA_FRACTION)
    # every DRAM access to ACT now touches x or y only
    allowed = [(b.offset, b.offset + b.nbytes) for b in (on.tensors["x"], on.tensors["y"])]
    assert all(any(lo <= v.base < hi for lo, hi in allowed) for _, _, v in dram_act_views(on.program))
    # the arena (top of the SPM) is touched only by DMA; the matrix unit reads its slots below it
    spm_views = [(i, v) for i in on.program.instrs for _, v, _ in i.views() if v.space is Space.SPM]
    assert any(v.base >= arena for _, v in spm_views)
    assert all(v.base < arena for i, v in spm_views if isinstance(i, MatMul))
    _, _, _, report = run_model(graph, ARCH, validate=True)
    assert report["validation"]["y"]["ok"] and report["validation"]["y"]["max_rel_error"] < 1e-5


def test_dram_traffic_drops_by_exactly_what_the_intermediates_moved():
    graph = three_convs()
    on, off = compile_model(graph, ARCH), compile_model(graph, ARCH, resident=False)
    x = RNG.standard_normal((1, 32, 14, 14)).astype(np.float32)
    r_on = simulate(on.program, ARCH, on.dram_inputs({"x": x}))
    r_off = simulate(off.program, ARCH, off.dram_inputs({"x": x}))
    np.testing.assert_array_equal(on.read_outputs(r_on.outputs["ACT"])["y"],
                                  off.read_outputs(r_off.outputs["ACT"])["y"])
    inter = [(off.tensors[t].offset, off.tensors[t].offset + off.tensors[t].nbytes) for t in ("a", "h")]
    moved = {"src": 0, "dst": 0}   # bytes the DRAM program's DMAs read from / wrote to a or h
    for i, role, v in dram_act_views(off.program):
        if any(lo <= v.base < hi for lo, hi in inter):
            moved[role] += math.prod(i.src_shape if role == "src" else i.shape) * v.dtype.size
    assert moved["dst"] == 2 * 14 * 14 * 32 * 4   # each intermediate written once
    d_on, d_off = r_on.to_dict()["dram"], r_off.to_dict()["dram"]
    assert d_off["bytes_read"] - d_on["bytes_read"] == moved["src"] > 0
    assert d_off["bytes_written"] - d_on["bytes_written"] == moved["dst"]
    assert r_on.cycles < r_off.cycles


def test_tensors_a_host_call_touches_stay_in_dram():
    """conv -> Sin (host CPU) -> conv: the host reads and writes DRAM, so neither of its tensors moves."""
    w1 = RNG.standard_normal((16, 8, 3, 3)).astype(np.float32)
    w2 = RNG.standard_normal((16, 16, 3, 3)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1], name="conv1"),
             helper.make_node("Sin", ["a"], ["b"], name="sin"),
             helper.make_node("Conv", ["b", "w2"], ["y"], pads=[1, 1, 1, 1], name="conv2")]
    g = helper.make_graph(nodes, "host", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 8, 8])],
                          initializer=[numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    compiled, _, _, report = run_model(model, ARCH, validate=True)
    assert [h["op"] for h in report["host_ops"]] == ["Sin"] and report["validation"]["y"]["ok"]
    assert {"a", "b"} <= set(compiled.tensors)
