"""ArgMax, ArgMin and TopK on the vector unit (compiler/kernels/vector/ranking.py) against onnxruntime, exactly:
every axis position, first and last index, ties (-0.0 and +0.0 among them), NaN anywhere (first in a row too),
infinities, tiles of several rows; their vector unit's busy cycles by hand."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from compiler.errors import TilingError
from compiler.kernels.common.target import Target
from compiler.kernels.vector.ranking import arg_constants, argext, ranked_shape, topk, topk_constants
from isa import DType, Queue
from isa.arch import load_arch
from npusim import simulate
from npusim.sim.simulator import region_array
from tests.compiler.util import model, ort_run, vi

ARCH = load_arch("edge16")
TARGET = Target.of(ARCH)
RNG = np.random.default_rng(17)


def _values(shape, special: bool = True) -> np.ndarray:
    """Small integers (many ties) with NaN, infinities and signed zeros mixed in."""
    x = RNG.integers(-4, 5, shape).astype(np.float32)
    if special:
        pick = RNG.random(shape) < 0.15
        x[pick] = RNG.choice(np.array([np.nan, np.inf, -np.inf, -0.0, 0.0], np.float32), int(pick.sum()))
    return x


def _ort_arg(x, op, axis, last):
    m = model([helper.make_node(op, ["x"], ["y"], axis=axis, keepdims=0, select_last_index=int(last))],
              [vi("x", list(x.shape))], [vi("y", None, TensorProto.INT64)], 17)
    return ort_run(m, {"x": x})[0]


def _run(prog, feeds, outs):
    res = simulate(prog, ARCH, feeds)
    assert all(np.array_equal(res.outputs[r], simulate(prog, ARCH, feeds, serial=True).outputs[r]) for r, _, _ in outs)
    return [region_array(res, r, d, s) for r, d, s in outs]


SHAPES = [((7,), 0), ((5, 9), 1), ((5, 9), 0), ((2, 3, 40, 2), 2), ((300, 17), 1), ((3, 1000), 1), ((1, 4, 1), 1)]


@pytest.mark.parametrize("shape, axis", SHAPES, ids=str)
@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("last", [False, True])
def test_arg_matches_onnxruntime(shape, axis, op, last):
    x = _values(shape)
    x.reshape(-1)[0] = np.nan   # a row that starts with NaN answers 0
    pre, length, post = ranked_shape(shape, axis)
    prog = argext((pre, length, post), DType.F32, TARGET, largest=op == "ArgMax", last=last)
    (got,) = _run(prog, {"X": x, "K": arg_constants(length, last)}, [("Y", DType.I32, (pre, post))])
    ref = _ort_arg(x, op, axis, last)
    np.testing.assert_array_equal(got.reshape(ref.shape), ref)


@pytest.mark.parametrize("last", [False, True])
def test_arg_of_integers(last):
    x = RNG.integers(-2**31, 2**31 - 1, (30, 50)).astype(np.int32)
    x[:, 7] = x[:, 33] = 2**31 - 1
    prog = argext((30, 50, 1), DType.I32, TARGET, largest=True, last=last)
    (got,) = _run(prog, {"X": x, "K": arg_constants(50, last)}, [("Y", DType.I32, (30, 1))])
    np.testing.assert_array_equal(got.ravel(), np.full(30, 33 if last else 7))


def _ort_topk(x, axis, k, largest):
    m = model([helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=int(largest), sorted=1)],
              [vi("x", list(x.shape))], [vi("v", None), vi("i", None, TensorProto.INT64)], 17,
              [numpy_helper.from_array(np.array([k], np.int64), "k")])
    return ort_run(m, {"x": x})


@pytest.mark.parametrize("shape, axis", SHAPES[:-1], ids=str)
@pytest.mark.parametrize("largest", [True, False])
def test_topk_matches_onnxruntime(shape, axis, largest):
    x = _values(shape)
    pre, length, post = ranked_shape(shape, axis)
    for k in sorted({1, min(3, length), length}):
        prog = topk((pre, length, post), k, TARGET, largest)
        v, i = _run(prog, {"X": x, "K": topk_constants(length)},
                    [("V", DType.F32, (pre, k, post)), ("I", DType.I32, (pre, k, post))])
        rv, ri = _ort_topk(x, axis, k, largest)
        out_shape = shape[:axis] + (k,) + shape[axis + 1:]
        np.testing.assert_array_equal(v.reshape(out_shape), rv)
        np.testing.assert_array_equal(i.reshape(out_shape), ri)


def test_a_row_too_long_for_the_spm_is_a_tiling_error():
    with pytest.raises(TilingError, match="ranking along an axis of 40000 elements needs"):
        argext((1, 40000, 1), DType.F32, TARGET)


def test_vector_busy_cycles_by_hand():
    # ArgMax of one f32 row of 100 (one tile): 9 passes over the 100 elements (NaN to -inf: cmpeq, add, xor, and, xor;
    # the max; cmpeq; the weights' mul; the index's add-min) and 3 over the 1-element first position; each is
    # latency + ceil(n / lanes) of its class (the two multiplies: mul, the rest: alu)
    v = ARCH.vector
    prog = argext((1, 100, 1), DType.F32, TARGET)
    assert sum(i.queue is Queue.VPU for i in prog.instrs) == 12
    alu, mul = v.alu_latency + -(-100 // v.lanes) * v.alu_interval, v.mul_latency + -(-100 // v.lanes) * v.mul_interval
    one_alu, one_mul = v.alu_latency + v.alu_interval, v.mul_latency + v.mul_interval
    res = simulate(prog, ARCH, timing_only=True)
    assert res.unit["vector"].busy == 8 * alu + mul + 2 * one_alu + one_mul


def test_topk_busy_cycles_by_hand():
    # TopK k=1 of one f32 row of 100: keys (x + 0, shr, and, xor), one round (max, cmpeq, the weights' mul, the
    # index's add-min, cmpeq with the positions, mul by -1, xor, min), the key back to float bits on 1 element
    # (shr, and, xor); shifts and multiplies are the mul class, the rest alu
    v = ARCH.vector

    def cost(cls: str, n: int) -> int:
        return getattr(v, f"{cls}_latency") + -(-n // v.lanes) * getattr(v, f"{cls}_interval")

    prog = topk((1, 100, 1), 1, TARGET)
    res = simulate(prog, ARCH, timing_only=True)
    assert res.unit["vector"].busy == 9 * cost("alu", 100) + 3 * cost("mul", 100) + 2 * cost("alu", 1) + \
        cost("mul", 1)
