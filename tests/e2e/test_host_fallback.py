"""Host-CPU fallback: ops the NPU cannot run execute on the host unit, inside the simulation, through DRAM."""

import math
import re
from fractions import Fraction

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.compile import compile_model
from compiler.errors import FALLBACK_HINT, UnsupportedOpError
from isa import HostCall, SimulationError
from isa.arch import load_arch
from isa.asm import parse_program
from npusim.app.cli import main
from npusim.app.driver import load_model, run_model
from npusim.sim.simulator import simulate


def _model(extra_nodes=(), host_conv=False) -> onnx.ModelProto:
    """conv -> Sin (unknown to the compiler) -> 1x1 conv -> Floor (unknown) [-> Add -> a 3x3 stride-2 conv
    whose weights are computed (w3 * input s), which the NPU refuses]."""
    rng = np.random.default_rng(1)
    w1 = rng.standard_normal((8, 3, 3, 3)).astype(np.float32)
    w2 = rng.standard_normal((4, 8, 1, 1)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1], name="conv1"),
             helper.make_node("Sin", ["a"], ["b"], name="sin"),
             helper.make_node("Conv", ["b", "w2"], ["c"], name="conv2"),
             helper.make_node("Floor", ["c"], ["y"], name="floor")]
    out, inputs = [1, 4, 8, 8], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])]
    if host_conv:
        nodes = [helper.make_node("Mul", ["w3", "s"], ["w3s"], name="scale")] + nodes + [
            helper.make_node("Add", ["y", "one"], ["z"], name="add"),
            helper.make_node("Conv", ["z", "w3s"], ["p"], strides=[2, 2], pads=[1, 1, 1, 1], name="pool")]
        out = [1, 4, 4, 4]
        inputs.append(helper.make_tensor_value_info("s", TensorProto.FLOAT, [1]))
    inits = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2"),
             numpy_helper.from_array(np.ones((1, 4, 8, 8), np.float32), "one"),
             numpy_helper.from_array(rng.standard_normal((4, 4, 3, 3)).astype(np.float32), "w3")]
    g = helper.make_graph(nodes, "fallback", inputs,
                          [helper.make_tensor_value_info("p" if host_conv else "y", TensorProto.FLOAT, out)],
                          initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_host_ops_validate_against_onnxruntime_and_show_in_the_report():
    arch = load_arch("edge16")
    compiled, result, _, report = run_model(_model(), arch, validate=True)
    assert report["validation"]["y"]["ok"] and report["validation"]["y"]["max_rel_error"] <= 1e-6
    assert [(h["name"], h["op"]) for h in report["host_ops"]] == [("sin", "Sin"), ("floor", "Floor")]
    bounds = {lr["name"]: lr["bound"] for lr in report["layers"]}
    assert bounds["sin"] == bounds["floor"] == "host" and bounds["conv1"] != "host"
    assert not any(lr["op"] == "Transpose" for lr in report["layers"])   # the host reads channels-last itself
    assert report["units"]["host"]["instructions"] == 2
    # each call: launch + ceil((rd + wr) / bandwidth) + ceil(ops / ops per cycle), the host's physical speeds at
    # edge16's 0.8 GHz (10 us, 6.4 GB/s, 3.2 ops/ns: 8000 cycles, 8 B and 4 ops per cycle); Sin reads and writes
    # 1x8x8x8 f32 (2048 B each way) and does one op per element read or written (512 + 512)
    h, ghz = arch.host, Fraction(repr(arch.clock.ghz))
    nbytes = 8 * 8 * 8 * 4
    want = math.ceil(Fraction(repr(h.launch_ns)) * ghz) + math.ceil(2 * nbytes * ghz / Fraction(repr(h.gb_per_s))) \
        + math.ceil(1024 * ghz / Fraction(repr(h.gops)))
    pcs = [pc for pc, i in enumerate(compiled.program.instrs) if isinstance(i, HostCall)]
    assert int(result.end[pcs[0]] - result.start[pcs[0]]) == want == 8768
    assert report["units"]["host"]["busy_cycles"] == sum(int(result.end[p] - result.start[p]) for p in pcs)


@pytest.mark.parametrize("node", [
    helper.make_node("LRN", ["a"], ["y"], size=3, alpha=1e-3, beta=0.75, bias=2.0, name="lrn"),
    helper.make_node("Shrink", ["a"], ["y"], bias=0.25, lambd=0.5, name="shrink"),
])
def test_a_host_op_whose_onnx_attribute_is_named_like_a_fused_step(node):
    """LRN's (and Shrink's) ``bias`` attribute was taken for a fused bias Add: the host's model was written as the
    op plus an Add of an empty input, which onnxruntime refused (light/bvlc_alexnet, zfnet512, inception_v1)."""
    rng = np.random.default_rng(2)
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["a"], name="relu"), node], "lrn",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 5, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 5, 5])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    x = rng.standard_normal((1, 8, 5, 5)).astype(np.float32)
    _, _, out, report = run_model(m, load_arch("edge16"), {"x": x}, validate=True)
    assert [h["op"] for h in report["host_ops"]] == [node.op_type] and report["validation"]["y"]["ok"]


def test_a_lowering_that_refuses_an_attribute_falls_back_without_leftovers():
    # a Conv whose weights are computed: the registry's check refuses it before lowering (no channels-last
    # conversion is emitted for it) and the host reads the tensor where it is
    compiled, _, _, report = run_model(_model(host_conv=True), load_arch("edge16"), validate=True)
    assert report["validation"]["p"]["ok"]
    assert [h["op"] for h in report["host_ops"]] == ["Sin", "Floor", "Conv"]
    assert report["host_ops"][2]["reason"] == "the weights and bias must be constants"
    assert not any(lr.op == "Transpose" for lr in compiled.layers)


def test_no_fallback_lists_every_unsupported_op():
    with pytest.raises(UnsupportedOpError, match=r"^node 'sin' \(Sin\): operator is not supported by the "
                       r"compiler \(and 1 more nodes: Floor\); without --no-fallback"):
        load_model(_model(), fallback=False)
    graph = load_model(_model(host_conv=True), fallback=True)
    with pytest.raises(UnsupportedOpError, match=r"^node 'sin' \(Sin\): operator is not supported by the "
                       r"compiler \(and 2 more: Conv, Floor\)"):
        compile_model(graph, load_arch("edge16"), fallback=False)


def test_timing_needs_no_host_function_but_values_do():
    compiled = compile_model(load_model(_model()), load_arch("mid32"))
    timing = simulate(compiled.program, load_arch("mid32"), timing_only=True)
    assert timing.unit["host"].instructions == 2
    with pytest.raises(SimulationError, match=r"calls host functions h0_sin, h1_floor but no callables"):
        simulate(compiled.program, load_arch("mid32"), compiled.dram_inputs({"x": np.zeros((1, 3, 8, 8), "f4")}))


def test_host_call_timing_and_ordering_by_semaphores():
    # the host call signals the load that consumes its output: the load starts exactly when the call retires
    prog = parse_program(""".config rows=16 cols=16 spm=262144 acc=65536
.region D r0 4096
.sem done 0
host.call fn=f rd=1000 wr=24 ops=4001 signal(done)
dma.ld shape[16] dst=spm:0<i8>{1} src=dram:D+0<i8>{1} wait(done)
halt
""")
    arch = load_arch("edge16", ["host.launch_ns=125", "host.gb_per_s=6.4", "host.gops=3.2"])   # 100, 8, 4 per cycle
    calls = []
    res = simulate(prog, arch, {}, host_functions={"f": lambda dram: calls.append(sorted(dram))})
    assert calls == [["D"]]
    assert res.end[0] == 100 + 128 + 1001 and res.start[1] == res.end[0]
    assert res.dram_bytes_read == 1000 + 16 and res.dram_bytes_written == 24


def test_cli_no_fallback_is_one_line_and_exit_1(tmp_path, capsys):
    path = tmp_path / "m.onnx"
    onnx.save(_model(), path)
    assert main(["run", str(path), "--arch", "edge16", "--no-fallback"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "Sin" in err and "Floor" in err
    assert main(["run", str(path), "--arch", "edge16", "--validate"]) == 0
    out = capsys.readouterr().out
    assert "host CPU ran sin (Sin): operator is not supported by the compiler" in out


def _too_big(op: str) -> onnx.ModelProto:
    """One layer of ``op`` that no tiling fits on edge16 with 256 B of SPM, not even on a block of the array (a
    GEMM's 1 x 1 tiles would take more steps than a program may have)."""
    from compiler.frontend.builder import GraphBuilder, to_onnx

    rng = np.random.default_rng(3)
    b = GraphBuilder(f"too_big_{op}")
    if op in ("gemm", "matmul"):
        x = b.input("x", (512, 512) if op == "gemm" else (2, 512, 512))
        w = b.const("w", rng.standard_normal((512, 512)).astype(np.float32)) if op == "gemm" \
            else b.input("w", (2, 512, 256))
        b.output(b.gemm(x, w) if op == "gemm" else b.matmul(x, w))
    elif op == "transpose":
        b.output(b.transpose(b.input("x", (1, 16, 2, 32)), (0, 2, 1, 3)))
    else:
        x = b.input("x", (1, 8, 24, 300))
        b.output(b.conv(x, b.const("w", rng.standard_normal((16, 8, 7, 7)).astype(np.float32)), pads=3) if op == "conv"
                 else b.maxpool(x, (20, 200), strides=1))
    return to_onnx(b.build())


@pytest.mark.parametrize("op", ["conv", "maxpool", "gemm", "matmul", "transpose"])
def test_finding5_no_tiling_falls_back_or_is_refused_alike_for_every_op(op):
    """One rule for every lowering: when no tiling of a layer fits (here 256 B of SPM on a 16x16 array), a GEMM, a
    MatMul, a transpose or a pooling runs on the host CPU like a convolution, with the reason saying what did not
    fit and what to raise, and the model still validates; without fallback the refusal is that reason, the node
    named, in the same words for every op."""
    model = _too_big(op)
    arch = load_arch("edge16").with_overrides(["spm.size=256"])
    compiled, _, _, report = run_model(model, arch, validate=True)
    (host,) = compiled.host_ops
    assert host.node.op == {"conv": "Conv", "maxpool": "MaxPool", "gemm": "Gemm", "matmul": "MatMul",
                            "transpose": "Transpose"}[op]
    assert re.fullmatch(r"no tiling fits the NPU: .*256 (B|bytes) of SPM.*; raise spm\.size or acc\.size",
                        host.reason) or (op == "maxpool" and re.fullmatch(
                            r"no tiling fits the NPU: a 20x200 pooling window .* does not fit the SPM; raise spm\.size "
                            r"or acc\.size", host.reason)), host.reason
    assert all(c["ok"] for c in report["validation"].values())
    with pytest.raises(UnsupportedOpError) as refused:
        compile_model(load_model(model), arch, fallback=False)
    assert str(refused.value) == f"node {host.node.name!r} ({host.node.op}): {host.reason}{FALLBACK_HINT}"


@pytest.mark.parametrize("array", [16, 32])
def test_finding5_readme_sweep_points_fall_back_instead_of_failing(array):
    """The README's sweep example (a small BERT layer on mid32 with 512 B of SPM) compiles: the layers no tiling
    fits run on the host, each saying so, where 2 of its 4 points used to end in a CompileError (a transpose)."""
    from npusim.app.zoo import bert_layer

    arch = load_arch("mid32", [f"matrix.rows={array}", f"matrix.cols={array}", "spm.size=512"])
    compiled = compile_model(load_model(bert_layer(seq=16, hidden=64, heads=2, ffn=128)), arch)
    ops = {h.node.op for h in compiled.host_ops}
    assert "Transpose" in ops and all(re.fullmatch(r"no tiling fits the NPU: .*; raise spm\.size or acc\.size",
                                                   h.reason) for h in compiled.host_ops)
