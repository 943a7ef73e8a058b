"""The vector recipes (compiler.kernels.vector.streams.pointwise), reductions over any axes and group normalisation
(compiler.kernels.reduce) as programs against numpy: bit-exact where the recipe is onnxruntime's own arithmetic, the
on-chip accumulation across tiles and the three-pass normalisation under a small SPM, and how many passes each takes."""

import numpy as np
import pytest

from compiler.errors import CompileError
from compiler.kernels import reduce as red
from compiler.kernels.common.target import Target
from compiler.kernels.vector import recipes, streams
from isa import BinOp, DType, Queue
from isa.arch import load_arch
from npusim import simulate
from npusim.sim.simulator import region_array

ARCH = load_arch("edge16")
TARGET = Target.of(ARCH)
F32 = np.float32
RNG = np.random.default_rng(11)


def run(program, inputs, shape):
    res = simulate(program, ARCH, inputs)
    serial = simulate(program, ARCH, inputs, serial=True)
    assert np.array_equal(res.outputs["Y"], serial.outputs["Y"])
    return region_array(res, "Y", DType.F32, shape)


def count(program, queue):
    return sum(i.queue is queue for i in program.instrs)


@pytest.mark.parametrize("alpha", [0.0, 0.01, 1.0, 2.5, -0.4])
def test_leaky_relu_is_exact_for_every_slope(alpha):
    x = RNG.standard_normal((37, 129)).astype(F32)
    got = run(streams.pointwise(recipes.leaky_relu(alpha), [("X", x.shape)], x.shape, TARGET), {"X": x}, x.shape)
    np.testing.assert_array_equal(got, np.where(x >= 0, x, x * F32(alpha)))


def test_hard_swish_batchnorm_and_mean_round_as_onnxruntime():
    x = RNG.standard_normal((3, 40, 50)).astype(F32) * 4
    got = run(streams.pointwise(recipes.hard_sigmoid(1 / 6, 0.5, True), [("X", x.shape)], x.shape, TARGET), {"X": x},
              x.shape)
    np.testing.assert_array_equal(got, x * np.clip(x * F32(1 / 6) + F32(0.5), 0, 1))
    s, t = RNG.standard_normal((3, 1, 1)).astype(F32), RNG.standard_normal((3, 1, 1)).astype(F32)
    prog = streams.pointwise(recipes.affine(), [("X", x.shape), ("S", s.shape), ("T", t.shape)], x.shape, TARGET)
    np.testing.assert_array_equal(run(prog, {"X": x, "S": s, "T": t}, x.shape), x * s + t)
    b = RNG.standard_normal((50,)).astype(F32)
    prog = streams.pointwise(recipes.variadic(BinOp.ADD, 3, mean=True), [("A", x.shape), ("B", b.shape),
                                                                        ("C", s.shape)], x.shape, TARGET)
    np.testing.assert_array_equal(run(prog, {"A": x, "B": b, "C": s}, x.shape), (x + b + s) * F32(1 / 3))


@pytest.mark.parametrize("e, products", [(2, 1), (3, 2), (8, 3), (13, 5), (-3, 3), (0.5, 1), (2.5, 3), (-1.5, 2),
                                         (1.7, 4)])
def test_pow_instructions_per_tile(e, products):
    """x^n by squaring and multiplying (x*x*x for 3, as onnxruntime), the fraction by sqrt, rsqrt or exp(f log x)."""
    x = RNG.uniform(0.1, 1.9, (200, 300)).astype(F32)
    prog = streams.pointwise(recipes.power(e), [("X", x.shape)], x.shape, TARGET)
    assert count(prog, Queue.VPU) == products * count(prog, Queue.DMA_LD)
    got = run(prog, {"X": x}, x.shape)
    if e in (2, 3):
        np.testing.assert_array_equal(got, x * x if e == 2 else x * x * x)
    np.testing.assert_allclose(got, np.power(x.astype(np.float64), e), rtol=2e-6)


def test_pow_beyond_the_multiplication_limit_is_refused():
    with pytest.raises(CompileError, match="integer part beyond 32"):
        recipes.power(33.5)


def test_space_merges_dimensions_and_refuses_more_than_five_groups():
    sp = red.space((2, 3, 4, 5, 6), (False, True, True, False, False))
    assert sp.shape == (2, 12, 30) and sp.reduced == (False, True, False) and sp.y == (30, 0, 1)
    assert red.space((1, 7, 1), (True, False, True)).shape == (7,)
    with pytest.raises(CompileError, match="leaves 6 alternating groups"):
        red.space((2, 2, 2, 2, 2, 2), (True, False) * 3)


REFERENCE = {"ReduceSum": lambda x, a: x.sum(a), "ReduceMean": lambda x, a: x.mean(a),
             "ReduceMax": lambda x, a: x.max(a), "ReduceMin": lambda x, a: x.min(a),
             "ReduceSumSquare": lambda x, a: (x * x).sum(a), "ReduceL1": lambda x, a: np.abs(x).sum(a),
             "ReduceL2": lambda x, a: np.sqrt((x * x).sum(a)), "ReduceLogSum": lambda x, a: np.log(x.sum(a))}


@pytest.mark.parametrize("op", list(red.KINDS))
@pytest.mark.parametrize("shape, axes, spm", [((5, 6, 7), (1,), None), ((5, 6, 7), (0, 2), None),
                                              ((2000, 30), (0,), 8192), ((4, 3, 500), (0, 2), 8192)])
def test_reductions_accumulate_across_tiles(op, shape, axes, spm):
    x = RNG.uniform(0.5, 1.5, shape).astype(F32)
    target = TARGET if spm is None else TARGET.with_spm(spm)
    prog = red.reduce(op, red.space(shape, tuple(i in axes for i in range(len(shape)))), target)
    out = tuple(e for i, e in enumerate(shape) if i not in axes)
    got = run(prog, {"X": x}, out)
    np.testing.assert_allclose(got, REFERENCE[op](x.astype(np.float64), axes), rtol=2e-6)
    if spm:   # one output box, many input tiles: one store, the steps before it store nothing
        assert count(prog, Queue.DMA_ST) < count(prog, Queue.DMA_LD) // 4


def _group_norm(x, g, gamma, beta, eps):
    n, c = x.shape[:2]
    xg = x.reshape(n, g, -1).astype(np.float64)
    m, v = xg.mean(-1, keepdims=True), xg.var(-1, keepdims=True)
    y = ((xg - m) / np.sqrt(v + eps)).reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    return y * gamma.reshape(shape) + beta.reshape(shape)


@pytest.mark.parametrize("nhwc", [False, True])
@pytest.mark.parametrize("groups, spm, passes", [(2, None, 1), (8, None, 1), (2, 16384, 3), (8, 4096, 3)])
def test_group_norm_in_one_pass_or_three(groups, spm, passes, nhwc):
    n, c, h, w = 2, 8, 16, 20
    x = (RNG.standard_normal((n, c, h, w)) * 2 + 1).astype(F32)
    gamma, beta = RNG.standard_normal(c).astype(F32), RNG.standard_normal(c).astype(F32)
    cg = c // groups
    if nhwc:
        sp = red.space((n, h * w, groups, cg), (False, True, False, True), chan=(0, 0, cg, 1))
        xm = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    else:
        sp = red.space((n, groups, cg, h * w), (False, False, True, True), chan=(0, cg, 1, 0))
        xm = x
    prog = red.normalize(sp, c, 1e-5, TARGET if spm is None else TARGET.with_spm(spm))
    got = run(prog, {"X": xm, "GB": np.concatenate([gamma, beta])}, xm.shape)
    got = got.transpose(0, 3, 1, 2) if nhwc else got
    np.testing.assert_allclose(got, _group_norm(x, groups, gamma, beta, 1e-5), rtol=1e-5, atol=2e-6)
    stores = count(prog, Queue.DMA_ST)
    assert count(prog, Queue.DMA_LD) == passes * stores + 1   # + the one load of gamma and beta
