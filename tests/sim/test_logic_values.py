"""Comparisons, logic, IsNaN and the run-time Where (compiler/kernels/vector/logic.py) against numpy, bit for bit,
with NaN, infinities and signed zeros among the values and numpy broadcasting; their vector unit's busy cycles by
hand."""

import numpy as np
import pytest

from compiler.kernels.common.target import Target
from compiler.kernels.vector import logic
from isa import BinOp, DType, Queue
from isa.arch import load_arch
from npusim import simulate
from npusim.sim.simulator import region_array

ARCH = load_arch("edge16")
TARGET = Target.of(ARCH)
RNG = np.random.default_rng(11)
SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0], np.float32)
SHAPES = [((4, 5), (5,)), ((2, 3, 7, 9), (3, 1, 9)), ((1,), (6, 1)), ((300, 64), (300, 64)),
          ((2, 1, 3, 4, 1), (1, 5, 3, 1, 6)), ((5000, 9), (1, 9))]


def _floats(shape) -> np.ndarray:
    """Random small integers as floats (so equal pairs are common) with NaN, infinities and signed zeros mixed in."""
    x = RNG.integers(-3, 4, shape).astype(np.float32)
    pick = RNG.random(shape) < 0.3
    x[pick] = RNG.choice(SPECIAL, int(pick.sum()))
    return x


def run(program, inputs, shape, dtype):
    res = simulate(program, ARCH, inputs)
    serial = simulate(program, ARCH, inputs, serial=True)
    assert np.array_equal(res.outputs["Y"], serial.outputs["Y"])
    return region_array(res, "Y", dtype, shape), res


REFERENCE = {"eq": np.equal, "gt": np.greater, "lt": np.less, "ge": np.greater_equal, "le": np.less_equal}


@pytest.mark.parametrize("shapes", SHAPES, ids=lambda s: f"{s[0]}-{s[1]}")
@pytest.mark.parametrize("op", logic.COMPARISONS)
def test_float_comparisons_match_numpy(op, shapes):
    a, b = _floats(shapes[0]), _floats(shapes[1])
    out = np.broadcast_shapes(*shapes)
    got, _ = run(logic.compare(op, a.shape, b.shape, DType.F32, TARGET), {"A": a, "B": b}, out, DType.U8)
    np.testing.assert_array_equal(got, REFERENCE[op](a, b).astype(np.uint8))


@pytest.mark.parametrize("op", logic.COMPARISONS)
@pytest.mark.parametrize("dtype", [DType.I32, DType.U8])
def test_integer_comparisons_match_numpy(op, dtype):
    lo, hi = (-2**31, 2**31) if dtype is DType.I32 else (0, 2)
    a = RNG.integers(lo, hi, (40, 33)).astype(dtype.storage)
    b = np.concatenate([a[:20], RNG.integers(lo, hi, (20, 33)).astype(dtype.storage)])
    got, _ = run(logic.compare(op, a.shape, b.shape, dtype, TARGET), {"A": a, "B": b}, a.shape, DType.U8)
    np.testing.assert_array_equal(got, REFERENCE[op](a, b).astype(np.uint8))


@pytest.mark.parametrize("shapes", SHAPES[:3], ids=lambda s: f"{s[0]}-{s[1]}")
@pytest.mark.parametrize("op", sorted(logic.LOGIC))
def test_logic_matches_numpy(op, shapes):
    a, b = (RNG.integers(0, 2, s).astype(np.uint8) for s in shapes)
    got, _ = run(logic.logical(op, a.shape, b.shape, TARGET), {"A": a, "B": b}, np.broadcast_shapes(*shapes), DType.U8)
    ref = {"and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor}[op](a, b)
    np.testing.assert_array_equal(got, ref.astype(np.uint8))


def test_not_and_isnan_match_numpy():
    c = RNG.integers(0, 2, (7, 300)).astype(np.uint8)
    got, _ = run(logic.logical_not(c.shape, TARGET), {"X": c}, c.shape, DType.U8)
    np.testing.assert_array_equal(got, 1 - c)
    x = _floats((3, 50, 41))
    x.view(np.uint32)[0, 0, :3] = [0x7FC00001, 0xFFC00000, 0x7F800001]   # NaN payloads and signs, a signalling NaN
    got, _ = run(logic.isnan(x.shape, DType.F32, TARGET), {"X": x}, x.shape, DType.U8)
    np.testing.assert_array_equal(got, np.isnan(x).astype(np.uint8))
    h = x.astype(np.float16)
    got, _ = run(logic.isnan(h.shape, DType.F16, TARGET), {"X": h}, h.shape, DType.U8)
    np.testing.assert_array_equal(got, np.isnan(h).astype(np.uint8))


@pytest.mark.parametrize("shapes", [((4, 5), (4, 5), (4, 5)), ((3, 1, 9), (2, 3, 7, 9), (9,)), ((6, 1), (1,), (1, 7)),
                                    ((5000, 9), (1, 9), (5000, 1))], ids=str)
@pytest.mark.parametrize("dtype", [DType.F32, DType.I32, DType.F16, DType.U8])
def test_where_selects_bit_for_bit(shapes, dtype):
    c = RNG.integers(0, 2, shapes[0]).astype(np.uint8)
    if dtype.is_float:
        x, z = (_floats(s).astype(dtype.storage) for s in shapes[1:])
        x.view(np.uint8)[..., :1] ^= 1   # payload bits, so a select through float arithmetic would show
    else:
        x, z = (RNG.integers(0, 256 if dtype is DType.U8 else 2**31, s).astype(dtype.storage) for s in shapes[1:])
    out = np.broadcast_shapes(*shapes)
    got, _ = run(logic.where(c.shape, x.shape, z.shape, dtype, TARGET), {"C": c, "X": x, "Z": z}, out, dtype)
    ref = np.where(c.astype(bool), x, z)
    np.testing.assert_array_equal(got.view(np.uint8), ref.view(np.uint8))


@pytest.mark.parametrize("op, per_tile", [("gt", ["alu"]), ("ge", ["alu", "alu"]), ("isnan", ["alu", "alu"]),
                                          ("where", ["mul", "alu", "alu", "alu"])])
def test_vector_busy_cycles_by_hand(op, per_tile):
    # each vector instruction of a tile of n elements: latency + ceil(n / lanes) * interval of its class (alu: add,
    # compare, min/max, logic; mul: the mask's multiply), no bank conflicts (every operand dense)
    shape = (48, 1000)   # 48,000 elements: 8 tiles of 6,000 (the stream's minimum of 8 tiles)
    if op == "where":
        prog = logic.where(shape, shape, shape, DType.F32, TARGET)
    elif op == "isnan":
        prog = logic.isnan(shape, DType.F32, TARGET)
    else:
        prog = logic.compare(op, shape, shape, DType.F32, TARGET)
    vpu = [i for i in prog.instrs if i.queue is Queue.VPU]
    v = ARCH.vector
    tiles = [int(np.prod(i.shape)) for i in vpu[::len(per_tile)]]
    assert sum(tiles) == 48_000 and len(vpu) == len(per_tile) * len(tiles)
    expected = sum(getattr(v, f"{cls}_latency") + -(-n // v.lanes) * getattr(v, f"{cls}_interval")
                   for n in tiles for cls in per_tile)
    res = simulate(prog, ARCH, timing_only=True)
    assert (res.unit["vector"].busy, res.unit["vector"].stall["bank_conflict"]) == (expected, 0)
    assert all(i.op is not BinOp.DIV for i in vpu)
