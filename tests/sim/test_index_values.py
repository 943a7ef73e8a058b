"""GatherND and ScatterND programs (compiler/kernels/index.py) against numpy: rows of index tuples with negative
components and batches, gathered rows of any length (split when longer than a tile), the inverse map's last update
winning, a bit-for-bit select; an index out of range stops the run with the gather's error."""

import numpy as np
import pytest

from compiler.kernels.common.target import Target
from compiler.kernels.index import (
    Addressing,
    flat_rows,
    gather_rows,
    scatter_constants,
    scatter_inverse,
    scatter_select,
    scatter_tile,
)
from isa import DType, Queue
from isa.arch import load_arch
from npusim import simulate
from npusim.sim.simulator import SimulationError, region_array

ARCH = load_arch("edge16")
TARGET = Target.of(ARCH)
RNG = np.random.default_rng(23)


def _flat(idx: np.ndarray, a: Addressing) -> np.ndarray:
    res = simulate(flat_rows(len(idx), a, TARGET), ARCH, {"I": idx.astype(np.int32), "K": a.constants(len(idx))})
    return region_array(res, "F", DType.I32, (len(idx),))


@pytest.mark.parametrize("dims, n", [((7,), 5), ((3, 4), 50), ((2, 3, 5), 700), ((100,), 3000)], ids=str)
def test_index_tuples_become_rows(dims, n):
    a = Addressing(dims, int(np.prod(dims)))
    idx = np.stack([RNG.integers(-d, d, n) for d in dims], 1)
    want = np.ravel_multi_index(tuple(np.where(idx < 0, idx + dims, idx).T), dims)
    np.testing.assert_array_equal(_flat(idx, a), want)


def test_a_component_out_of_range_gives_a_row_past_the_table():
    a = Addressing((3, 4), 12)
    idx = np.array([[0, 4], [3, 0], [-4, 0], [0, -5], [2, 3], [-1, -1]])
    flat = _flat(idx, a)
    assert (flat[:4] >= 12).all() and flat[4:].tolist() == [11, 11]


def test_batches_offset_each_points_rows():
    a = Addressing((4,), 4 * 2, batch=(3, 4))   # 2 batches of 3 points, 4 rows each
    idx = np.array([[1], [-1], [0], [2], [3], [-4]])
    np.testing.assert_array_equal(_flat(idx, a), [1, 3, 0, 6, 7, 4])


@pytest.mark.parametrize("points, row, rows, dtype", [(40, 7, 12, DType.F32), (3000, 1, 50, DType.I32),
                                                      (5, 40000, 9, DType.F32), (200, 33, 9, DType.U8)], ids=str)
def test_gather_rows(points, row, rows, dtype):
    table = RNG.integers(0, 250, (rows, row)).astype(dtype.storage)
    flat = RNG.integers(0, rows, points).astype(np.int32)
    res = simulate(gather_rows(points, row, rows, dtype, TARGET), ARCH, {"F": flat, "T": table})
    np.testing.assert_array_equal(region_array(res, "Y", dtype, (points, row)), table[flat])


def test_a_row_past_the_table_is_an_error():
    table = np.zeros((4, 3), np.float32)
    with pytest.raises(SimulationError, match=r"dma.ld.gather index 5 at point \[1\] is outside the table's 4 rows"):
        simulate(gather_rows(3, 3, 4, DType.F32, TARGET), ARCH, {"F": np.array([0, 5, 1], np.int32), "T": table})


def _scatter(data: np.ndarray, idx: np.ndarray, upd: np.ndarray, r: int) -> np.ndarray:
    dims = data.shape[:r]
    rows, row = int(np.prod(dims)), int(np.prod(data.shape[r:]))
    a = Addressing(dims, rows)
    n = len(idx)
    consts = scatter_constants(n, a, scatter_tile(n, a, TARGET))
    res = simulate(scatter_inverse(n, a, TARGET), ARCH, {"I": idx.astype(np.int32), "K": consts})
    inv = region_array(res, "V", DType.I32, (rows,))
    dtype = DType.from_numpy(data.dtype)
    res = simulate(scatter_select(rows, row, n, dtype, TARGET), ARCH,
                   {"D": data.reshape(rows, row), "V": inv, "U": upd.reshape(n, row)})
    return region_array(res, "Y", dtype, data.shape)


def _reference(data, idx, upd):
    out = data.copy()
    for i, t in enumerate(idx):   # in order: a later update of one row wins, as in onnxruntime
        out[tuple(t)] = upd[i]
    return out


@pytest.mark.parametrize("shape, r, n", [((8,), 1, 5), ((6, 5), 1, 4), ((4, 5, 3), 2, 9), ((300, 2), 1, 40),
                                         ((2, 3, 4, 1000), 3, 6)], ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8])
def test_scatter_matches_a_sequential_reference(shape, r, n, dtype):
    data = RNG.integers(0, 200, shape).astype(dtype)
    if dtype == np.float32:
        data.reshape(-1)[::5] = np.nan   # kept bit for bit where no update lands
    idx = np.stack([RNG.integers(-d, d, n) for d in shape[:r]], 1)
    idx[-1] = idx[0]   # a duplicate: the last update wins
    upd = RNG.integers(0, 200, (n,) + shape[r:]).astype(dtype)
    got = _scatter(data, idx, upd, r)
    np.testing.assert_array_equal(got.view(np.uint8), _reference(data, idx, upd).view(np.uint8))


def test_a_scatter_index_out_of_range_is_an_error():
    data, upd = np.zeros((4, 2), np.float32), np.ones((2, 2), np.float32)
    with pytest.raises(SimulationError, match=r"vpu.gather index \d+ at point \[1\] is outside the table's 4 rows"):
        _scatter(data, np.array([[1], [4]]), upd, 1)


def test_one_tile_of_gather_takes_its_instructions_in_turn():
    # one tile (8 points of 16 f32): the index load, the gather (after it in the dma.ld queue), the store: nothing
    # overlaps, so the run is the sum of the three instructions' costs; the vector unit does nothing
    from isa.cost import instr_cost

    prog = gather_rows(8, 16, 4, DType.F32, TARGET)
    body = [i for i in prog.instrs if i.queue is not Queue.CTRL]
    assert [type(i).__name__ for i in body] == ["DmaCopy", "Gather", "DmaCopy"]
    res = simulate(prog, ARCH, timing_only=True)
    assert res.cycles == sum(instr_cost(i, ARCH).cycles for i in body)
    assert res.unit["vector"].busy == 0


def test_index_rows_busy_cycles_by_hand():
    # 10 tuples of 2 components, one tile: 11 instructions over the 20 components (negatives, range check, the
    # masked sum of products and the penalty sum); shifts and multiplies are the mul class, the rest alu
    v = ARCH.vector

    def cost(cls: str, n: int) -> int:
        return getattr(v, f"{cls}_latency") + -(-n // v.lanes) * getattr(v, f"{cls}_interval")

    res = simulate(flat_rows(10, Addressing((3, 4), 12), TARGET), ARCH, timing_only=True)
    assert res.unit["vector"].busy == 6 * cost("alu", 20) + 5 * cost("mul", 20)
