"""Ops on bools and run-time int64 indices on the NPU against onnxruntime, exactly: comparisons, And/Or/Xor/Not,
IsNaN and a Where on a computed condition (HF ViT's and swin's masks), ArgMax/ArgMin/TopK with every attribute,
GatherND with batch_dims and ScatterND with duplicate indices, int64 CumSum (position ids from a mask), bool Trilu.
Nothing runs on the host; outputs have the model's types (bool, int64); the programs are free of data races."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from isa.arch import load_arch
from isa.races import find_races
from npusim.app.driver import run_model
from tests.compiler.util import model, ort_run, vi

RNG = np.random.default_rng(29)
B, F, I64 = TensorProto.BOOL, TensorProto.FLOAT, TensorProto.INT64


def _check(m, feeds: dict, preset: str = "mid32", ops: set[str] | None = None) -> None:
    """Every node on the NPU, the linked program free of data races, every output exactly onnxruntime's."""
    compiled, _, outputs, report = run_model(m, load_arch(preset), feeds)
    assert report["host_ops"] == [], report["host_ops"]
    assert find_races(compiled.program) == []
    for o, ref in zip(m.graph.output, ort_run(m, feeds)):
        got = outputs[o.name]
        assert got.dtype == ref.dtype and got.shape == ref.shape, o.name
        np.testing.assert_array_equal(got, ref, err_msg=o.name)   # (NaN equal to NaN)
    if ops is not None:
        assert ops <= {lr.op for lr in compiled.layers}


def _floats(shape) -> np.ndarray:
    x = RNG.integers(-3, 4, shape).astype(np.float32)
    pick = RNG.random(shape) < 0.2
    x[pick] = RNG.choice(np.array([np.nan, np.inf, -np.inf, -0.0], np.float32), int(pick.sum()))
    return x


def _const(name: str, value) -> TensorProto:
    return numpy_helper.from_array(np.asarray(value), name)


@pytest.mark.parametrize("preset", ["edge16", "mid32"])
def test_comparisons_logic_and_where_on_a_computed_condition(preset):
    # shapes broadcast both ways; a constant scalar operand; a channels-last operand (a conv's output)
    nodes = [helper.make_node("Conv", ["x", "ident"], ["xc"]),
             helper.make_node("Greater", ["xc", "z"], ["gt"]), helper.make_node("Less", ["x", "zero"], ["lt"]),
             helper.make_node("Equal", ["x", "z"], ["eq"]), helper.make_node("GreaterOrEqual", ["x", "z"], ["ge"]),
             helper.make_node("LessOrEqual", ["z", "x"], ["le"]),
             helper.make_node("And", ["gt", "lt"], ["and"]), helper.make_node("Or", ["eq", "ge"], ["or"]),
             helper.make_node("Xor", ["or", "mask"], ["xor"]), helper.make_node("Not", ["xor"], ["not"]),
             helper.make_node("IsNaN", ["x"], ["isnan"]),
             helper.make_node("Where", ["not", "x", "minf"], ["w1"]),
             helper.make_node("Where", ["isnan", "zero", "x"], ["w2"]),       # HF ViT's NaN guard
             helper.make_node("Where", ["mask", "z", "x"], ["w3"])]
    c = 6
    inits = [_const("ident", np.eye(c, dtype=np.float32).reshape(c, c, 1, 1)), _const("zero", np.float32(0)),
             _const("minf", np.float32(-np.inf))]
    outs = [vi(n, None, B) for n in ("gt", "le", "and", "xor", "not", "isnan")] + [vi(n, None) for n in
                                                                                  ("w1", "w2", "w3")]
    m = model(nodes, [vi("x", [2, c, 5, 7]), vi("z", [5, 1]), vi("mask", [1, 1, 5, 7], B)], outs, 17, inits)
    feeds = {"x": _floats((2, c, 5, 7)), "z": _floats((5, 1)), "mask": RNG.random((1, 1, 5, 7)) < 0.5}
    _check(m, feeds, preset, {"Greater", "And", "Not", "IsNaN", "Where", "Xor"})


def test_where_keeps_every_type():
    # (onnxruntime has no bool Where)
    nodes = [helper.make_node("Where", ["c", "a", "b"], ["y"]), helper.make_node("Where", ["c", "i", "j"], ["k"])]
    u8 = TensorProto.UINT8
    m = model(nodes, [vi("c", [4, 9], B), vi("a", [4, 9], u8), vi("b", [1, 9], u8), vi("i", [4, 1], I64),
                      vi("j", [9], I64)], [vi("y", None, u8), vi("k", None, I64)], 17)
    feeds = {"c": RNG.random((4, 9)) < 0.5, "a": RNG.integers(0, 256, (4, 9), np.uint8),
             "b": RNG.integers(0, 256, (1, 9), np.uint8),
             "i": RNG.integers(-2**31, 2**31, (4, 1)), "j": RNG.integers(-5, 5, 9)}
    _check(m, feeds)


@pytest.mark.parametrize("axis, keepdims, last", [(1, 1, 0), (-1, 0, 1), (0, 1, 1), (2, 0, 0)])
def test_argmax_argmin(axis, keepdims, last):
    nodes = [helper.make_node(op, ["x"], [op], axis=axis, keepdims=keepdims, select_last_index=last)
             for op in ("ArgMax", "ArgMin")]
    m = model(nodes, [vi("x", [3, 8, 5, 6])], [vi(op, None, I64) for op in ("ArgMax", "ArgMin")], 17)
    x = _floats((3, 8, 5, 6))
    x[0, 0, 0, 0] = np.nan   # (first along every axis: that row answers 0)
    _check(m, {"x": x})


@pytest.mark.parametrize("axis, k, largest, sorted_", [(-1, 3, 1, 1), (1, 1, 0, 1), (0, 3, 0, 1), (2, 5, 1, 1)])
def test_topk(axis, k, largest, sorted_):
    m = model([helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest, sorted=sorted_)],
              [vi("x", [3, 8, 5, 6])], [vi("v", None), vi("i", None, I64)], 17, [_const("k", np.array([k]))])
    _check(m, {"x": _floats((3, 8, 5, 6))}, ops={"TopK"})


def test_unsorted_topk_gives_the_same_set_sorted():
    # sorted=0 leaves the order to the implementation: the NPU's is the sorted one, onnxruntime's a heap's
    m = model([helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=1, sorted=0)], [vi("x", [4, 40])],
              [vi("v", None), vi("i", None, I64)], 17, [_const("k", np.array([6]))])
    x = RNG.integers(0, 9, (4, 40)).astype(np.float32)
    _, _, out, report = run_model(m, load_arch("mid32"), {"x": x})
    assert report["host_ops"] == []
    v, i = ort_run(m, {"x": x})
    assert (np.sort(out["v"], 1) == np.sort(v, 1)).all()
    np.testing.assert_array_equal(np.take_along_axis(x, out["i"], 1), out["v"])
    assert (np.diff(out["v"], axis=1) <= 0).all()


def test_gathernd_and_scatternd():
    data = RNG.standard_normal((2, 5, 4, 3)).astype(np.float32)
    nodes = [helper.make_node("GatherND", ["data", "bi"], ["g1"], batch_dims=1),
             helper.make_node("GatherND", ["data", "i2"], ["g2"]),
             helper.make_node("GatherND", ["data", "i4"], ["g3"]),   # every index: single elements
             helper.make_node("ScatterND", ["data", "i2", "upd"], ["s1"]),
             helper.make_node("ScatterND", ["mask", "mi", "mu"], ["s2"])]
    i2 = np.stack([RNG.integers(-2, 2, 7), RNG.integers(-5, 5, 7)], -1)
    i2[5] = i2[1]   # a duplicate: onnxruntime's last update wins
    feeds = {"data": data, "bi": np.stack([RNG.integers(-5, 5, (2, 6)), RNG.integers(-4, 4, (2, 6))], -1),
             "i2": i2, "i4": np.stack([RNG.integers(0, d, 10) for d in (2, 5, 4, 3)], -1),
             "upd": RNG.standard_normal((7, 4, 3)).astype(np.float32), "mask": RNG.random((6, 8)) < 0.5,
             "mi": np.array([[3], [0]]), "mu": RNG.random((2, 8)) < 0.5}
    m = model(nodes, [vi("data", [2, 5, 4, 3]), vi("bi", [2, 6, 2], I64), vi("i2", [7, 2], I64),
                      vi("i4", [10, 4], I64), vi("upd", [7, 4, 3]), vi("mask", [6, 8], B), vi("mi", [2, 1], I64),
                      vi("mu", [2, 8], B)],
              [vi(n, None) for n in ("g1", "g2", "g3", "s1")] + [vi("s2", None, B)], 17)
    _check(m, feeds, ops={"GatherND", "ScatterND"})


def test_an_index_out_of_range_stops_the_run_as_onnxruntime_refuses_it():
    from npusim.sim.simulator import SimulationError

    m = model([helper.make_node("GatherND", ["d", "i"], ["y"])], [vi("d", [4, 3]), vi("i", [2, 1], I64)],
              [vi("y", None)], 17)
    with pytest.raises(SimulationError, match="index 4 at point .* is outside the table's 4 rows"):
        run_model(m, load_arch("mid32"), {"d": np.zeros((4, 3), np.float32), "i": np.array([[1], [4]])})


def test_position_ids_from_a_mask():
    # HF's position ids: cumsum(mask) * mask - 1 ... here the int64 cumsum of a run-time mask, and a bool Trilu
    nodes = [helper.make_node("CumSum", ["mask", "ax"], ["pos"]), helper.make_node("Trilu", ["b"], ["tri"], upper=0)]
    m = model(nodes, [vi("mask", [2, 40], I64), vi("b", [3, 6, 6], B)], [vi("pos", None, I64), vi("tri", None, B)], 17,
              [_const("ax", np.int64(1))])
    _check(m, {"mask": RNG.integers(0, 2, (2, 40)), "b": RNG.random((3, 6, 6)) < 0.7}, ops={"CumSum", "Trilu"})


def test_gather_with_run_time_indices():
    # an embedding lookup (constant table, int64 ids), an inner axis of an activation with negative indices, bools
    nodes = [helper.make_node("Gather", ["table", "ids"], ["emb"]),
             helper.make_node("Gather", ["x", "j"], ["g"], axis=1),
             helper.make_node("Gather", ["m", "j"], ["gm"], axis=-1)]
    m = model(nodes, [vi("ids", [2, 5], I64), vi("x", [3, 7, 4]), vi("j", [2, 2], I64), vi("m", [3, 7], B)],
              [vi("emb", None), vi("g", None), vi("gm", None, B)], 17,
              [_const("table", RNG.standard_normal((50, 8)).astype(np.float32))])
    feeds = {"ids": RNG.integers(0, 50, (2, 5)), "x": RNG.standard_normal((3, 7, 4)).astype(np.float32),
             "j": np.array([[0, -1], [6, -7]]), "m": RNG.random((3, 7)) < 0.5}
    _check(m, feeds, ops={"Gather"})


CASTS = [(I64, F), (B, F), (F, B), (I64, B), (I64, TensorProto.INT8), (I64, TensorProto.UINT8),
         (TensorProto.INT32, TensorProto.INT16), (B, I64), (F, TensorProto.FLOAT16), (TensorProto.UINT8, I64),
         (TensorProto.INT8, TensorProto.UINT8)]


@pytest.mark.parametrize("src, dst", CASTS, ids=lambda t: TensorProto.DataType.Name(t))
def test_cast(src, dst):
    shape = (3, 70)
    np_src = helper.tensor_dtype_to_np_dtype(src)
    if src == F:
        x = _floats(shape) * 1.7
    elif src == B:
        x = RNG.random(shape) < 0.5
    else:
        info = np.iinfo(np.int32 if np_src == np.int64 else np_src)
        x = RNG.integers(info.min, info.max, shape, endpoint=True).astype(np_src)
        x.reshape(-1)[:4] = [0, 1, -1 if info.min < 0 else 2, min(255, info.max)]
    m = model([helper.make_node("Cast", ["x"], ["y"], to=dst)], [vi("x", list(shape), src)], [vi("y", None, dst)],
              17)
    _check(m, {"x": x}, ops={"Cast"})


def test_a_float_to_integer_cast_runs_on_the_host_and_says_why():
    m = model([helper.make_node("Cast", ["x"], ["y"], to=I64)], [vi("x", [4])], [vi("y", None, I64)], 17)
    _, _, out, report = run_model(m, load_arch("mid32"), {"x": np.array([1.5, -1.5, 2.7, -0.2], np.float32)})
    assert [h["reason"] for h in report["host_ops"]] == [
        "a float to integer cast (truncation toward zero) runs on the host"]
    assert out["y"].tolist() == [1, -1, 2, 0]


def test_identity_of_a_bool():
    nodes = [helper.make_node("Not", ["c"], ["n"]), helper.make_node("Identity", ["n"], ["y"])]
    m = model(nodes, [vi("c", [4, 5], B)], [vi("y", None, B)], 17)
    _check(m, {"c": RNG.random((4, 5)) < 0.5}, ops={"Identity"})
