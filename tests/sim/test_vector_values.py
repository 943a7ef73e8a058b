"""Vector-unit lowerings (compiler/kernels/vector/) against numpy: broadcasting element-wise ops, activations,
softmax, layer norm, reductions and pooling, on f32 (rtol 1e-5) and f16."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.kernels.common.target import Target
from compiler.kernels.vector.pooling import avgpool_reciprocals, pool2d
from compiler.kernels.vector.rowwise import layernorm, reduce_rows, softmax
from compiler.kernels.vector.streams import binary, unary
from isa import Act, BinOp, DType, Queue, Reduce, VecBinary
from isa.arch import load_arch
from npusim import simulate
from npusim.sim.simulator import region_array

ARCH = load_arch("edge16")
TARGET = Target.of(ARCH)
RNG = np.random.default_rng(7)


def run(program, inputs, shape, dtype=DType.F32):
    res = simulate(program, ARCH, inputs)
    serial = simulate(program, ARCH, inputs, serial=True)
    assert np.array_equal(res.outputs["Y"], serial.outputs["Y"])
    return region_array(res, "Y", dtype, shape).astype(np.float64)


@settings(max_examples=20, deadline=None)
@given(shapes=st.sampled_from([((4, 5), (5,)), ((2, 3, 7, 9), (3, 1, 9)), ((1,), (6, 1)), ((33, 1, 8), (1, 17, 1)),
                               ((300, 64), (300, 64)), ((2, 1, 3, 4, 1), (1, 5, 3, 1, 6))]),
       op=st.sampled_from([BinOp.ADD, BinOp.SUB, BinOp.MUL, BinOp.DIV, BinOp.MAX]))
def test_binary_broadcasting(shapes, op):
    a_shape, b_shape = shapes
    a = RNG.standard_normal(a_shape).astype(np.float32)
    b = (RNG.standard_normal(b_shape) + (3 if op is BinOp.DIV else 0)).astype(np.float32)
    out = np.broadcast_shapes(a_shape, b_shape)
    got = run(binary(op, a_shape, b_shape, DType.F32, TARGET), {"A": a, "B": b}, out)
    ref = {BinOp.ADD: np.add, BinOp.SUB: np.subtract, BinOp.MUL: np.multiply, BinOp.DIV: np.divide,
           BinOp.MAX: np.maximum}[op](a, b)
    np.testing.assert_array_equal(got, ref)   # one f32 operation: bit exact


@pytest.mark.parametrize("act", [(Act.RELU, 0.0, 0.0), (Act.CLAMP, -0.5, 1.25)], ids=["relu", "clamp"])
def test_binary_with_fused_activation_is_one_instruction_per_tile(act):
    a, b = RNG.standard_normal((300, 64)).astype(np.float32), RNG.standard_normal((64,)).astype(np.float32)
    prog = binary(BinOp.ADD, a.shape, b.shape, DType.F32, TARGET, act)
    vpu = [i for i in prog.instrs if i.queue is Queue.VPU]
    assert vpu and all(isinstance(i, VecBinary) and (i.act, i.lo, i.hi) == act for i in vpu)
    got = run(prog, {"A": a, "B": b}, a.shape)
    s = a + b
    np.testing.assert_array_equal(got, np.maximum(s, 0) if act[0] is Act.RELU else np.clip(s, act[1], act[2]))


def test_broadcast_beyond_five_dims_is_refused():
    with pytest.raises(ValueError, match=r"does not collapse to 5 dimensions"):
        binary(BinOp.ADD, (2, 1, 3, 1, 4, 1), (1, 5, 1, 2, 1, 3), DType.F32, TARGET)


@pytest.mark.parametrize("fn,ref", [
    (Act.RELU, lambda x: np.maximum(x, 0)), (Act.SIGMOID, lambda x: 1 / (1 + np.exp(-x))), (Act.TANH, np.tanh),
    (Act.GELU, lambda x: 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2))))])
def test_activations(fn, ref):
    x = RNG.standard_normal((3, 50, 41)).astype(np.float32)
    got = run(unary(fn, x.shape, DType.F32, TARGET), {"X": x}, x.shape)
    np.testing.assert_allclose(got, ref(x.astype(np.float64)), rtol=1e-6, atol=1e-7)


def test_clip_f16():
    x = (RNG.standard_normal((64, 64)) * 4).astype(np.float16)
    got = run(unary(Act.CLAMP, x.shape, DType.F16, TARGET, lo=0, hi=6), {"X": x}, x.shape, DType.F16)
    np.testing.assert_array_equal(got, np.clip(x, 0, 6))


@pytest.mark.parametrize("rows,length", [(1, 10), (700, 3), (77, 130), (128, 768)])
def test_softmax_and_layernorm(rows, length):
    x = RNG.standard_normal((rows, length)).astype(np.float32)
    got = run(softmax(rows, length, DType.F32, TARGET), {"X": x}, x.shape)
    e = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-7)
    g, b = RNG.standard_normal(length).astype(np.float32), RNG.standard_normal(length).astype(np.float32)
    got = run(layernorm(rows, length, DType.F32, TARGET), {"X": x, "GB": np.concatenate([g, b])}, x.shape)
    mu = x.mean(1, keepdims=True)
    ref = (x - mu) / np.sqrt(((x - mu) ** 2).mean(1, keepdims=True) + 1e-5) * g + b
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kind,mean", [(Reduce.SUM, False), (Reduce.SUM, True), (Reduce.MAX, False)])
def test_row_reductions(kind, mean):
    # reference in f64; the NPU sums 70 f32 values sequentially: |error| <= 70 * eps32 * sum|x| ~ 5e-4 worst case
    x = np.random.default_rng(3).standard_normal((90, 70)).astype(np.float32)
    got = run(reduce_rows(kind, 90, 70, DType.F32, TARGET, mean=mean), {"X": x}, (90,))
    x64 = x.astype(np.float64)
    ref = x64.max(1) if kind is Reduce.MAX else x64.mean(1) if mean else x64.sum(1)
    bound = 71 * np.finfo(np.float32).eps * np.abs(x64).sum(1) / (70 if mean else 1)
    assert (np.abs(got - ref) <= bound).all()


def _windows(xp, k, stride, OH, OW):
    return [xp[:, i:i + stride * (OH - 1) + 1:stride, j:j + stride * (OW - 1) + 1:stride]
            for i in range(k) for j in range(k)]


@pytest.mark.parametrize("H,k,stride,pad,C", [(13, 3, 2, 1, 24), (8, 2, 2, 0, 24), (7, 3, 1, 1, 24),
                                               (56, 3, 2, 1, 24), (7, 7, 1, 0, 2048)])
@pytest.mark.parametrize("kind", ["max", "avg"])
def test_pooling_nhwc(H, k, stride, pad, C, kind):
    # the last case (ResNet-50's global pool) does not fit edge16's SPM in one piece: tiles split the channels
    x = RNG.standard_normal((2, H, H + 1, C)).astype(np.float32)
    OH, OW = (H + 2 * pad - k) // stride + 1, (H + 1 + 2 * pad - k) // stride + 1
    p = pool2d(kind, 2, H, H + 1, C, k, stride, pad, DType.F32, TARGET)
    inputs = {"X": x}
    if kind == "max":
        xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)), constant_values=-np.inf)
        ref = np.max(_windows(xp, k, stride, OH, OW), axis=0)
    else:   # the per-position reciprocals (an immediate when no window reaches the padding)
        rc = avgpool_reciprocals(H, H + 1, k, stride, pad)
        assert any(r.name == "RC" for r in p.regions) == (pad > 0)
        inputs |= {"RC": rc} if pad else {}
        xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
        ref = np.sum(_windows(xp, k, stride, OH, OW), axis=0, dtype=np.float32) * rc[None, :, :, None]
    np.testing.assert_allclose(run(p, inputs, (2, OH, OW, C)), ref, rtol=1e-6, atol=1e-6)
