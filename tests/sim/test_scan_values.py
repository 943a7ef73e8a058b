"""CumSum on the vector unit (compiler/kernels/vector/scan.py) against a sequential numpy scan, bit for bit, for
every axis position, exclusive and reverse, tiles that split the scanned axis (the running sum carried between
them), integers; its vector unit's busy cycles by hand."""

import numpy as np
import pytest

from compiler.kernels.common.target import Target
from compiler.kernels.vector.scan import cumsum, cumsum_shape, scan_tile
from isa import DType, Queue
from isa.arch import load_arch
from npusim import simulate
from npusim.sim.simulator import region_array

ARCH = load_arch("edge16")
TARGET = Target.of(ARCH)
RNG = np.random.default_rng(5)


def reference(x: np.ndarray, axis: int, exclusive: bool, reverse: bool) -> np.ndarray:
    """onnxruntime's CumSum: a sequential sum in the element type (np.cumsum accumulates one by one)."""
    x = np.flip(x, axis) if reverse else x
    y = np.cumsum(x, axis=axis, dtype=x.dtype)
    if exclusive:
        y = np.concatenate([np.zeros_like(np.take(y, [0], axis)), np.take(y, range(x.shape[axis] - 1), axis)], axis)
    return np.flip(y, axis) if reverse else y


def run(prog, x: np.ndarray, dtype: DType) -> np.ndarray:
    res = simulate(prog, ARCH, {"X": x})
    assert np.array_equal(res.outputs["Y"], simulate(prog, ARCH, {"X": x}, serial=True).outputs["Y"])
    return region_array(res, "Y", dtype, x.shape)


CASES = [((7,), 0), ((3, 40), 1), ((3, 40), 0), ((2, 5, 6, 7), 2), ((1, 300, 5), 1), ((4, 3000), 1),
         ((2000, 3), 0), ((2, 9000), 1)]


@pytest.mark.parametrize("shape, axis", CASES, ids=str)
@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_float_cumsum_matches_a_sequential_scan(shape, axis, exclusive, reverse):
    x = (RNG.standard_normal(shape) * 100).astype(np.float32)
    prog = cumsum(cumsum_shape(shape, axis), DType.F32, TARGET, exclusive, reverse)
    np.testing.assert_array_equal(run(prog, x, DType.F32), reference(x, axis, exclusive, reverse))


@pytest.mark.parametrize("tile", [(1, 3, 1), (2, 7, 3), (3, 1, 5), (1, 40, 8)], ids=str)
@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_the_running_sum_is_carried_across_tiles(tile, exclusive, reverse):
    x = (RNG.standard_normal((3, 40, 8)) * 10).astype(np.float32)
    x[1, 5, 2], x[2, 30, 0] = np.inf, np.nan   # NaN and inf reach exactly the positions after them
    prog = cumsum((3, 40, 8), DType.F32, TARGET, exclusive, reverse, tile)
    np.testing.assert_array_equal(run(prog, x, DType.F32), reference(x, 1, exclusive, reverse))


@pytest.mark.parametrize("dtype", [DType.I32, DType.F16, DType.I8])
def test_other_types(dtype):
    x = RNG.integers(-5, 6, (6, 70)).astype(dtype.storage)
    for exclusive in (False, True):
        prog = cumsum((6, 70, 1), dtype, TARGET, exclusive, reverse=False, tile=(2, 30, 1))
        np.testing.assert_array_equal(run(prog, x.reshape(6, 70), dtype).reshape(6, 70),
                                      reference(x, 1, exclusive, False))


def test_tiles_take_a_wide_cross_section_then_the_scanned_axis():
    lanes = TARGET.lanes
    assert scan_tile(1, 128, 1, DType.F32, TARGET) == (1, 128, 1)   # a row of position ids: one tile, one row
    # (1, 64, 128 x 128) over axis 1: 8 beats of lanes wide, all 64 positions, then as wide as the tile allows
    tp, tl, tq = scan_tile(1, 64, 16384, DType.F32, TARGET)
    assert (tp, tl) == (1, 64) and tq >= 8 * lanes and tl * tq <= TARGET.spm // 20
    # a long scan of few rows: every row in the cross-section, the axis split into tiles
    tp, tl, tq = scan_tile(3, 100_000, 1, DType.F32, TARGET)
    assert (tp, tq) == (3, 1) and tl < 100_000


def test_vector_busy_cycles_by_hand():
    # one 1 x 10 row, one tile: a mov and 9 adds, each alu_latency + ceil(1 / lanes) = alu_latency + 1
    prog = cumsum((1, 10, 1), DType.F32, TARGET)
    v = ARCH.vector
    assert sum(i.queue is Queue.VPU for i in prog.instrs) == 10
    res = simulate(prog, ARCH, timing_only=True)
    assert res.unit["vector"].busy == 10 * (v.alu_latency + v.alu_interval)
    # 3 rows of 300 scanned along 300 in tiles of 3 x 100: per tile 100 instructions of 3 elements (the first tile
    # starts with a mov, the others with an add from the carry; each tile but the last adds a carry mov)
    prog = cumsum((3, 300, 1), DType.F32, TARGET, tile=(3, 100, 1))
    res = simulate(prog, ARCH, timing_only=True)
    assert res.unit["vector"].busy == (300 + 2) * (v.alu_latency + v.alu_interval)
