"""Cast on the vector unit (compiler/kernels/vector/cast.py) against numpy's C casts: integers wrap, floats round to
nearest even, bools are x != 0 (NaN true, -0.0 false); its vector unit's busy cycles by hand."""

import numpy as np
import pytest

from compiler.kernels.common.target import Target
from compiler.kernels.vector.cast import Conversion, cast
from isa import DType
from isa.arch import load_arch
from npusim import simulate
from npusim.sim.simulator import region_array

ARCH = load_arch("edge16")
TARGET = Target.of(ARCH)
RNG = np.random.default_rng(31)


def run(c: Conversion, x: np.ndarray) -> np.ndarray:
    res = simulate(cast(x.shape, c, TARGET), ARCH, {"X": x})
    return region_array(res, "Y", c.dst, x.shape)


@pytest.mark.parametrize("bits, signed, np_dst", [(8, True, np.int8), (8, False, np.uint8), (16, True, np.int16)])
def test_integers_wrap(bits, signed, np_dst):
    x = RNG.integers(-2**31, 2**31, (5, 300)).astype(np.int32)
    c = Conversion(DType.I32, DType.from_numpy(np_dst), bits=bits, signed=signed)
    np.testing.assert_array_equal(run(c, x), x.astype(np_dst))


def test_to_bool_and_to_float():
    x = (RNG.standard_normal((4, 100)) * 3).astype(np.float32)
    x.reshape(-1)[:4] = [np.nan, -0.0, 0.0, np.inf]
    np.testing.assert_array_equal(run(Conversion(DType.F32, DType.U8, to_bool=True), x), (x != 0).astype(np.uint8))
    i = RNG.integers(-2**31, 2**31, (4, 100)).astype(np.int32)
    np.testing.assert_array_equal(run(Conversion(DType.I32, DType.F32), i), i.astype(np.float32))
    np.testing.assert_array_equal(run(Conversion(DType.F32, DType.F16), x), x.astype(np.float16))


def test_vector_busy_cycles_by_hand():
    # 300 int32 to int8, one tile: and, xor, sub, each alu latency + ceil(300 / lanes)
    v = ARCH.vector
    prog = cast((300,), Conversion(DType.I32, DType.I8, bits=8, signed=True), TARGET)
    res = simulate(prog, ARCH, timing_only=True)
    assert res.unit["vector"].busy == 3 * (v.alu_latency + -(-300 // v.lanes) * v.alu_interval)
