"""The layout ops of ONNX models (built with onnx.helper at their opsets) on the NPU, against onnxruntime on every
preset: DepthToSpace / SpaceToDepth, Split, Softmax / LogSoftmax on any axis, Pad edge / reflect / wrap, Expand,
Tile, Gather with constant indices, Where with a constant condition and Concat of many inputs; row-major inputs and
channels-last ones (the output of a 1x1 MaxPool of another input, ``c``: the compiler keeps it NHWC and its values
exact)."""

import re

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.compile import compile_model
from compiler.errors import UnsupportedOpError
from compiler.frontend.onnx_import import import_onnx
from compiler.ops import npu_unsupported
from isa import Queue
from isa.arch import load_arch, presets_by_size
from npusim.app.driver import run_model

PRESETS = presets_by_size()


def _model(nodes, inputs, outputs, consts=None, opset=17, dtype=TensorProto.FLOAT):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, dtype, s) for n, s in inputs],
                              [helper.make_tensor_value_info(n, dtype, None) for n in outputs],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in (consts or {}).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _nhwc(x, y):
    """``y``: ``x`` through a 1x1 MaxPool, which the compiler keeps channels-last (and ``x`` with it)."""
    return helper.make_node("MaxPool", [x], [y], kernel_shape=[1, 1])


def _run(model, preset, inputs=None, exact=True):
    compiled, _, _, report = run_model(model, load_arch(preset), inputs, validate=True)
    assert report["host_ops"] == []
    for name, check in report["validation"].items():
        assert check["ok"] and (check["max_abs_error"] == 0 if exact else check["max_rel_error"] <= 1e-5), \
            (name, check)
    return compiled


def _ops(compiled):
    return [lr.op for lr in compiled.layers]


def _vector_instrs(compiled, op):
    return sum(i.queue is Queue.VPU for lr in compiled.layers if lr.op == op
               for i in compiled.program.instrs[lr.start:lr.end])


@pytest.mark.parametrize("preset", PRESETS)
def test_depth_to_space_and_space_to_depth_are_dma_copies(preset):
    nodes = [_nhwc("c", "xc"),
             helper.make_node("DepthToSpace", ["x"], ["dcr"], blocksize=2, mode="DCR"),
             helper.make_node("DepthToSpace", ["x"], ["crd"], blocksize=3, mode="CRD"),
             helper.make_node("DepthToSpace", ["xc"], ["dcr_c"], blocksize=3),
             helper.make_node("DepthToSpace", ["xc"], ["crd_c"], blocksize=2, mode="CRD"),
             helper.make_node("SpaceToDepth", ["x"], ["s2d"], blocksize=2),
             helper.make_node("SpaceToDepth", ["xc"], ["s2d_c"], blocksize=3)]
    compiled = _run(_model(nodes, [("x", (2, 36, 6, 12)), ("c", (2, 36, 6, 12))],
                           ["dcr", "crd", "dcr_c", "crd_c", "s2d", "s2d_c"]), preset)
    assert "Transpose" not in _ops(compiled)
    assert _vector_instrs(compiled, "DepthToSpace") == _vector_instrs(compiled, "SpaceToDepth") == 0


@pytest.mark.parametrize("preset", PRESETS)
def test_split_any_axis_sizes_and_forms(preset):
    consts = {"s": np.array([3, 1, 4], np.int64)}
    nodes = [_nhwc("c", "xc"),
             helper.make_node("Split", ["x", "s"], ["a0", "a1", "a2"], axis=1),     # sizes as an input
             helper.make_node("Split", ["x"], ["b0", "b1"], axis=0),                # equal parts: free aliases
             helper.make_node("Split", ["x"], ["c0", "c1", "c2", "c3"], axis=-1),  # equal parts, innermost
             helper.make_node("Split", ["xc", "s"], ["d0", "d1", "d2"], axis=1),    # channels of NHWC
             helper.make_node("Split", ["xc"], ["e0", "e1"], axis=2)]               # rows of NHWC
    outs = ["a0", "a1", "a2", "b0", "b1", "c0", "c1", "c2", "c3", "d0", "d1", "d2", "e0", "e1"]
    compiled = _run(_model(nodes, [("x", (2, 8, 6, 12)), ("c", (2, 8, 6, 12))], outs, consts), preset)
    assert _ops(compiled).count("Split") == 4 and "Transpose" not in _ops(compiled)    # axis 0: no copy at all


@pytest.mark.parametrize("preset", PRESETS)
def test_split_num_outputs_opset_18(preset):
    nodes = [helper.make_node("Split", ["x"], ["a", "b", "c"], axis=1, num_outputs=3),   # 4, 4, 2
             helper.make_node("Split", ["x"], ["d", "e"], axis=0, num_outputs=2)]
    _run(_model(nodes, [("x", (3, 10))], ["a", "b", "c", "d", "e"], opset=18), preset)


@pytest.mark.parametrize("nodes, opset", [
    ([helper.make_node("Split", ["x"], ["a", "b"], axis=1, split=[3, 5])], 11),           # sizes as an attribute
    ([helper.make_node("Softmax", ["x"], ["a"], axis=1),                                     # softmax over dims 1..
      helper.make_node("LogSoftmax", ["x"], ["b"], axis=2)], 11),
    ([helper.make_node("Pad", ["x"], ["a"], mode="reflect", pads=[0, 1, 2, 0, 0, 2, 1, 3]),  # pads as an attribute
      helper.make_node("Pad", ["x"], ["b"], mode="edge", pads=[1, 0, 0, 0, 3, 0, 0, 2])], 10),
    ([helper.make_node("DepthToSpace", ["x"], ["a"], blocksize=2),
      helper.make_node("SpaceToDepth", ["x"], ["b"], blocksize=2)], 9),
])
def test_older_opsets(nodes, opset):
    _run(_model(nodes, [("x", (2, 8, 4, 8))], ["a", "b"], opset=opset), "mid32",
         exact=nodes[0].op_type != "Softmax")


@pytest.mark.parametrize("preset", PRESETS)
def test_softmax_and_log_softmax_on_every_axis_without_a_transpose(preset):
    nodes = [_nhwc("c", "xc")]
    outs = []
    for axis in (0, 1, 2, 3, -1):
        for op in ("Softmax", "LogSoftmax"):
            for src in ("x", "xc"):
                outs.append(f"{op}_{src}_{axis}")
                nodes.append(helper.make_node(op, [src], [outs[-1]], axis=axis))
    compiled = _run(_model(nodes, [("x", (2, 24, 7, 40)), ("c", (2, 24, 7, 40))], outs), preset, exact=False)
    assert "Transpose" not in _ops(compiled)


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("mode", ["edge", "reflect", "wrap"])
def test_pad_edge_reflect_wrap(preset, mode):
    consts = {"p3": np.array([2, 0, 3, 1, 4, 2], np.int64),          # rank 3, row-major
              "crop": np.array([-1, 2, 1, 0, 0, -2], np.int64),      # crops first, then pads
              "p4": np.array([0, 0, 3, 2, 0, 0, 1, 4], np.int64)}    # spatial pads of NHWC
    if mode == "edge":
        consts["wide"] = np.array([0, 20, 1, 0, 17, 2], np.int64)   # wider than the DMA's 15
    nodes = [_nhwc("x4", "xc"), helper.make_node("Pad", ["x3", "p3"], ["a"], mode=mode),
             helper.make_node("Pad", ["x3", "crop"], ["b"], mode=mode),
             helper.make_node("Pad", ["xc", "p4"], ["c"], mode=mode)]
    outs = ["a", "b", "c"]
    if mode == "edge":
        nodes.append(helper.make_node("Pad", ["x3", "wide"], ["d"], mode=mode))
        outs.append("d")
    compiled = _run(_model(nodes, [("x3", (5, 6, 7)), ("x4", (2, 3, 5, 6))], outs, consts, opset=19), preset)
    assert _vector_instrs(compiled, "Pad") == 0 and "Transpose" not in _ops(compiled)


@pytest.mark.parametrize("preset", PRESETS)
def test_expand_and_tile(preset):
    consts = {"s4": np.array([2, 3, 4, 5], np.int64), "same": np.array([3, 1, 5], np.int64),
              "sc": np.array([2, 6, 5, 4], np.int64), "r3": np.array([2, 3, 2], np.int64),
              "rc": np.array([1, 2, 1, 3], np.int64)}
    nodes = [_nhwc("x4", "xc"), helper.make_node("Expand", ["x3", "s4"], ["a"]),
             helper.make_node("Expand", ["x3", "same"], ["b"]),      # its own shape: free
             helper.make_node("Expand", ["xc", "sc"], ["c"]),        # NHWC, batch and channels broadcast
             helper.make_node("Tile", ["x3", "r3"], ["d"]), helper.make_node("Tile", ["xc", "rc"], ["e"])]
    compiled = _run(_model(nodes, [("x3", (3, 1, 5)), ("x4", (1, 1, 5, 4))], ["a", "b", "c", "d", "e"], consts),
                    preset)
    assert _ops(compiled).count("Expand") == 2 and "Transpose" not in _ops(compiled)


@pytest.mark.parametrize("preset", PRESETS)
def test_gather_constant_indices_any_axis(preset):
    consts = {"rows": np.array([3, 4, 5, 0, 0, 9, 7, 5], np.int64),  # a run, a repeat, a reversed run
              "grid": np.array([[1, -1], [2, 2]], np.int64), "one": np.array(-2, np.int64),
              "chan": np.array([5, 4, 3, 2, 6], np.int64)}
    nodes = [_nhwc("c", "xc"), helper.make_node("Gather", ["x", "rows"], ["g0"], axis=3),
             helper.make_node("Gather", ["x", "grid"], ["g1"], axis=1),
             helper.make_node("Gather", ["x", "one"], ["g2"], axis=0),
             helper.make_node("Gather", ["x", "rows"], ["g3"], axis=-2),
             helper.make_node("Gather", ["xc", "chan"], ["g4"], axis=1)]    # channels of NHWC, kept NHWC
    compiled = _run(_model(nodes, [("x", (3, 7, 10, 11)), ("c", (3, 7, 10, 11))], ["g0", "g1", "g2", "g3", "g4"],
                           consts), preset)
    assert "Transpose" not in _ops(compiled)


@pytest.mark.parametrize("preset", PRESETS)
def test_where_constant_condition_is_exact_whatever_the_other_branch_holds(preset):
    rng = np.random.default_rng(3)
    causal = np.tril(np.ones((9, 9), bool))
    consts = {"causal": causal, "ninf": np.array(-np.inf, np.float32), "rand": rng.random((3, 1, 9)) > 0.5,
              "bias": rng.standard_normal((9,)).astype(np.float32), "cc": rng.random((1, 3, 1, 1)) > 0.5}
    nodes = [_nhwc("c", "sc"), helper.make_node("Where", ["causal", "s", "ninf"], ["masked"]),
             helper.make_node("Where", ["rand", "u", "s"], ["mixed"]),
             helper.make_node("Where", ["causal", "bias", "s"], ["const_branch"]),
             helper.make_node("Where", ["cc", "sc", "ninf"], ["nhwc"])]
    s = rng.standard_normal((2, 3, 9, 9)).astype(np.float32)
    u = rng.standard_normal((2, 3, 9, 9)).astype(np.float32)
    c = rng.standard_normal((2, 3, 9, 9)).astype(np.float32)
    s[..., 0, 5] = np.nan           # above the diagonal: never selected by the causal mask
    s[..., 1, 8] = np.inf
    u[..., 0, 0] = np.nan
    compiled = _run(_model(nodes, [("s", s.shape), ("u", u.shape), ("c", c.shape)],
                           ["masked", "mixed", "const_branch", "nhwc"], consts), preset, {"s": s, "u": u, "c": c})
    # the causal mask's 17 runs per head are a bit-exact select on the vector unit (xor, and, xor per tile); the
    # 16 runs of "mixed" (each across the batch) and the 3 of "nhwc" are DMA copies (the other branch never read)
    vpu = [sum(i.queue is Queue.VPU for i in compiled.program.instrs[lr.start:lr.end])
           for lr in compiled.layers if lr.op == "Where"]
    assert [v > 0 for v in vpu] == [True, False, True, False]


@pytest.mark.parametrize("preset", PRESETS)
def test_concat_of_48_inputs(preset):
    n = 48
    nodes = [helper.make_node("Concat", [f"x{i}" for i in range(n)], ["y"], axis=1),
             helper.make_node("Concat", [f"x{i}" for i in range(0, n, 5)], ["z"], axis=0)]
    compiled = _run(_model(nodes, [(f"x{i}", (2, i % 5 + 1)) for i in range(n)], ["y", "z"]), preset)
    assert set(_ops(compiled)) == {"Concat"}


def test_int8_copies_are_exact():
    rng = np.random.default_rng(5)
    consts = {"sc": np.array(0.05, np.float32), "zp": np.array(3, np.int8), "idx": np.array([2, 0, 1, 1], np.int64),
              "rep": np.array([1, 2, 1, 2], np.int64), "cond": rng.random((8, 1, 6)) > 0.5,
              "shape": np.array([2, 8, 4, 6], np.int64)}
    nodes = [helper.make_node("QuantizeLinear", ["x", "sc", "zp"], ["q"]),
             helper.make_node("DepthToSpace", ["q"], ["d2s"], blocksize=2, mode="CRD"),
             helper.make_node("Split", ["q"], ["s0", "s1"], axis=3),
             helper.make_node("Gather", ["q", "idx"], ["g"], axis=2),
             helper.make_node("Tile", ["q", "rep"], ["t"]), helper.make_node("Expand", ["q", "shape"], ["e"]),
             helper.make_node("QuantizeLinear", ["x2", "sc", "zp"], ["q2"]),
             helper.make_node("Where", ["cond", "q", "q2"], ["w"])]
    outs = []
    for t in ("d2s", "s0", "s1", "g", "t", "e", "w"):
        nodes.append(helper.make_node("DequantizeLinear", [t, "sc", "zp"], [f"{t}_f"]))
        outs.append(f"{t}_f")
    _run(_model(nodes, [("x", (1, 8, 4, 6)), ("x2", (1, 8, 4, 6))], outs, consts), "mid32")


@pytest.mark.parametrize("nodes, consts, reason", [
    ([helper.make_node("Pad", ["x", "p"], ["y"], mode="wrap")], {"p": np.array([0, 0, 0, 0, 7, 0], np.int64)},
     r"mode 'wrap' pads axis 1 by up to 6 \(it keeps 6 elements\), not 7"),
])
def test_forms_not_lowered_say_why_and_run_on_the_host(nodes, consts, reason):
    model = _model(nodes, [("x", (4, 6, 5))], ["y"], consts, opset=19)
    graph = import_onnx(model, allow_unknown=True)
    assert re.fullmatch(reason, npu_unsupported(graph.nodes[-1], graph))
    with pytest.raises(UnsupportedOpError, match=reason):
        compile_model(graph, load_arch("edge16"), fallback=False)
    assert [h.node.op for h in compile_model(graph, load_arch("edge16")).host_ops] == [nodes[0].op_type]


@pytest.mark.parametrize("preset", PRESETS)
def test_space_to_depth_crd_mode_of_opset_28(preset):
    # SpaceToDepth takes DepthToSpace's mode from opset 28 on: CRD keeps a channel's block positions together
    x = np.arange(2 * 3 * 4 * 6, dtype=np.float32).reshape(2, 3, 4, 6)
    model = _model([helper.make_node("SpaceToDepth", ["x"], ["y"], blocksize=2, mode="CRD")], [("x", x.shape)],
                   ["y"], opset=28)
    _run(model, preset, {"x": x})   # bit for bit against onnxruntime
    _, _, outputs, _ = run_model(model, load_arch(preset), {"x": x})
    assert np.array_equal(outputs["y"], x.reshape(2, 3, 2, 2, 3, 2).transpose(0, 1, 3, 5, 2, 4).reshape(2, 12, 2, 3))


def test_a_graph_output_that_folds_to_a_constant_is_copied_out_by_the_dma():
    # every input a constant (onnx's backend binds int64/bool inputs so): the Where folds and the model's output is
    # the constant, which the program copies from the weights (a KeyError in compile_model before)
    c = numpy_helper.from_array(np.array([[True, False], [False, True]]), "c")
    x, y = (numpy_helper.from_array(v.astype(np.float32), k) for k, v in (("x", np.arange(4.0).reshape(2, 2)),
                                                                         ("y", -np.ones((2, 2)))))
    g = helper.make_graph([helper.make_node("Where", ["c", "x", "y"], ["z"])], "g", [],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)], [c, x, y])
    compiled, result, outputs, report = run_model(helper.make_model(g), load_arch("mid32"), validate=True)
    assert np.array_equal(outputs["z"], [[0, -1], [-1, 3]]) and report["validation"]["z"]["ok"]
    assert [lr.op for lr in compiled.layers] == ["Constant"] and result.cycles > 0
