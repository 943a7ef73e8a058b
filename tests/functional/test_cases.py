"""Hand-computed cases, run on both the numba model and the reference model."""

from __future__ import annotations

import math

import numpy as np
import pytest

from isa import (
    Act,
    Barrier,
    BinOp,
    DmaCopy,
    DmaFill,
    DType,
    Halt,
    MatMul,
    Pad,
    Queue,
    Reduce,
    SemOp,
    SimulationError,
    Space,
    Sync,
    VecBinary,
    VecConvert,
    VecRequant,
    VecUnary,
    View,
)
from npusim.functional.execute import execute
from npusim.functional.memory import DeviceMemory
from npusim.functional.reference import execute_reference

MODELS = pytest.mark.parametrize("run", [execute, execute_reference], ids=["numba", "reference"])
NP = {DType.I8: np.int8, DType.U8: np.uint8, DType.I16: np.int16, DType.I32: np.int32, DType.F16: np.float16,
      DType.BF16: np.uint16, DType.F32: np.float32}


def new_memory() -> DeviceMemory:
    return DeviceMemory(1024, 1024, {"D": 1024})


def v(space: Space, base: int, dtype: DType, *strides: int) -> View:
    return View(space, base, dtype, strides, "D" if space is Space.DRAM else None)


def put(mem: DeviceMemory, space: Space, base: int, data) -> None:
    raw = np.ascontiguousarray(data).view(np.uint8).ravel()
    mem.buffer(v(space, 0, DType.I8, 1))[base:base + raw.size] = raw


def get(mem: DeviceMemory, space: Space, base: int, dtype: DType, shape) -> np.ndarray:
    n = int(np.prod(shape)) * dtype.size
    return mem.buffer(v(space, 0, DType.I8, 1))[base:base + n].view(NP[dtype]).reshape(shape).copy()


def unary(fn: Act, src: np.ndarray, sd: DType, dd: DType, run, **kw) -> np.ndarray:
    mem = new_memory()
    put(mem, Space.SPM, 0, src)
    run(VecUnary(fn=fn, shape=(src.size,), dst=v(Space.SPM, 512, dd, dd.size), src=v(Space.SPM, 0, sd, sd.size), **kw),
        mem)
    return get(mem, Space.SPM, 512, dd, (src.size,))


# ---------------------------------------------------------------- DMA


@MODELS
def test_padded_dma(run):
    mem = new_memory()
    src = np.arange(6, dtype=np.int16).reshape(2, 3)
    put(mem, Space.DRAM, 40, src)
    run(DmaCopy(queue=Queue.DMA_LD, shape=(5, 5), dst=v(Space.SPM, 0, DType.I16, 10, 2),
                src=v(Space.DRAM, 40, DType.I16, 6, 2), pad=(Pad(0, 1, 2), Pad(1, 1, 1)), fill=-7), mem)
    expect = np.pad(src, ((1, 2), (1, 1)), constant_values=-7)
    assert np.array_equal(get(mem, Space.SPM, 0, DType.I16, (5, 5)), expect)


@MODELS
def test_dma_overlap_reads_source_first(run):
    mem = new_memory()
    put(mem, Space.SPM, 0, np.arange(16, dtype=np.uint8))
    run(DmaCopy(queue=Queue.DMA_LD, shape=(12,), dst=v(Space.SPM, 2, DType.U8, 1), src=v(Space.SPM, 0, DType.U8, 1)),
        mem)
    assert list(mem.spm[:16]) == [0, 1] + list(range(12)) + [14, 15]
    run(DmaCopy(queue=Queue.DMA_LD, shape=(12,), dst=v(Space.SPM, 0, DType.U8, 1), src=v(Space.SPM, 3, DType.U8, 1)),
        mem)
    assert list(mem.spm[:12]) == list(range(1, 12)) + [14]


@MODELS
def test_dma_copies_bytes_and_fill_converts(run):
    mem = new_memory()
    put(mem, Space.SPM, 0, np.array([1.0, -2.0], np.float16))
    run(DmaCopy(queue=Queue.DMA_ST, shape=(3,), dst=v(Space.DRAM, 0, DType.BF16, 2), src=v(Space.SPM, 0, DType.F16, 2),
                pad=(Pad(0, 0, 1),), fill=1.01171875), mem)
    assert list(get(mem, Space.DRAM, 0, DType.BF16, (3,))) == [0x3C00, 0xC000, 0x3F82]  # f16 bits; bf16 tie -> even


@MODELS
@pytest.mark.parametrize("value, bits", [(1.00390625, 0x3F80), (1.01171875, 0x3F82), (float("nan"), 0x7FC0),
                                         (-0.0, 0x8000), (3.4028234663852886e38, 0x7F80)])
def test_fill_bf16_rounds_to_nearest_even(run, value, bits):
    mem = new_memory()
    run(DmaFill(queue=Queue.DMA_LD, shape=(2, 2), dst=v(Space.ACC, 8, DType.BF16, 4, 2), value=value), mem)
    assert list(get(mem, Space.ACC, 8, DType.BF16, (4,))) == [bits] * 4


# ---------------------------------------------------------------- MXU


def _mm(mem, run, shape, m, k, n, acc, acc_row, a, a_row, b, zero=True):
    run(MatMul(shape=shape, m=m, k=k, n=n, acc=acc, acc_row=acc_row, a=a, a_row=a_row, b=b, zero=zero), mem)


@MODELS
def test_matmul_int8_2x3x4(run):
    rng = np.random.default_rng(1)
    a, b = rng.integers(-128, 128, (2, 3)).astype(np.int8), rng.integers(-128, 128, (3, 4)).astype(np.int8)
    mem = new_memory()
    put(mem, Space.SPM, 0, a)
    put(mem, Space.SPM, 100, b)
    put(mem, Space.ACC, 0, np.full(8, 99, np.int32))
    _mm(mem, run, (1,), 2, 3, 4, v(Space.ACC, 0, DType.I32, 0), 16, v(Space.SPM, 0, DType.I8, 0), 3,
        v(Space.SPM, 100, DType.I8, 0))
    assert np.array_equal(get(mem, Space.ACC, 0, DType.I32, (2, 4)), a.astype(np.int32) @ b.astype(np.int32))


@MODELS
def test_matmul_accumulates_over_loop_dims_with_acc_stride_0(run):
    rng = np.random.default_rng(2)
    a, b = rng.integers(0, 256, (3, 6)).astype(np.uint8), rng.integers(-128, 128, (6, 2)).astype(np.int8)
    mem = new_memory()
    put(mem, Space.SPM, 0, a)
    put(mem, Space.SPM, 200, b)  # k-chunk c of B (rows 2c, 2c+1) is contiguous at 200 + 4c
    args = ((3,), 3, 2, 2, v(Space.ACC, 64, DType.I32, 0), 8, v(Space.SPM, 0, DType.U8, 2), 6,
            v(Space.SPM, 200, DType.I8, 4))
    _mm(mem, run, *args)
    expect = a.astype(np.int32) @ b.astype(np.int32)
    assert np.array_equal(get(mem, Space.ACC, 64, DType.I32, (3, 2)), expect)
    _mm(mem, run, *args, zero=False)
    assert np.array_equal(get(mem, Space.ACC, 64, DType.I32, (3, 2)), 2 * expect)


@MODELS
def test_matmul_int_wraps(run):
    mem = new_memory()
    put(mem, Space.SPM, 0, np.array([255, 255], np.uint8))
    put(mem, Space.ACC, 0, np.array([2**31 - 1], np.int32))
    _mm(mem, run, (1,), 1, 1, 1, v(Space.ACC, 0, DType.I32, 0), 4, v(Space.SPM, 0, DType.U8, 0), 1,
        v(Space.SPM, 1, DType.U8, 0), zero=False)
    assert get(mem, Space.ACC, 0, DType.I32, (1,))[0] == -(2**31) + 255 * 255 - 1


@MODELS
@pytest.mark.parametrize("dt", [DType.F16, DType.F32])
def test_matmul_float_matches_sequential_numpy_f32(run, dt):
    rng = np.random.default_rng(3)
    m, k, n = 4, 7, 5
    a, b = (rng.standard_normal(s).astype(NP[dt]) for s in ((m, k), (k, n)))
    init = rng.standard_normal((m, n)).astype(np.float32)
    mem = new_memory()
    put(mem, Space.SPM, 0, a)
    put(mem, Space.SPM, 300, b)
    put(mem, Space.ACC, 0, init)
    _mm(mem, run, (1,), m, k, n, v(Space.ACC, 0, DType.F32, 0), 4 * n, v(Space.SPM, 0, dt, 0), k * dt.size,
        v(Space.SPM, 300, dt, 0), zero=False)
    acc = init.copy()
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    for q in range(k):
        acc = acc + a32[:, q:q + 1] * b32[q:q + 1, :]  # two f32 ufuncs: no fused multiply-add
    assert np.array_equal(get(mem, Space.ACC, 0, DType.F32, (m, n)).view(np.uint32), acc.view(np.uint32))


@MODELS
@pytest.mark.parametrize("ad,bd", [(DType.F32, DType.I8), (DType.F16, DType.U8)])
def test_matmul_weight_only_float_by_codes_matches_numpy(run, ad, bd):
    """A float A by i8/u8 codes B (one byte a weight, B at an odd address): each code is the exact f32 of its
    integer, then the float rule: acc = f32(acc + f32(a * b)) in order q = 0, 1, ...; two loop points with acc stride
    0 accumulate."""
    rng = np.random.default_rng(4)
    m, k, n = 3, 5, 6
    a = (rng.standard_normal((2, m, k)) * 3).astype(NP[ad])
    b = rng.integers(-128, 128, (2, k, n)).astype(np.int8) if bd is DType.I8 else \
        rng.integers(0, 256, (2, k, n)).astype(np.uint8)
    init = rng.standard_normal((m, n)).astype(np.float32)
    mem = new_memory()
    put(mem, Space.SPM, 0, a)
    put(mem, Space.SPM, 301, b)
    put(mem, Space.ACC, 0, init)
    _mm(mem, run, (2,), m, k, n, v(Space.ACC, 0, DType.F32, 0), 4 * n, v(Space.SPM, 0, ad, m * k * ad.size),
        k * ad.size, v(Space.SPM, 301, bd, k * n), zero=False)
    acc = init.copy()
    for p in range(2):
        a32, b32 = a[p].astype(np.float32), b[p].astype(np.float32)
        for q in range(k):
            acc = acc + a32[:, q:q + 1] * b32[q:q + 1, :]   # two f32 ufuncs: no fused multiply-add
    assert np.array_equal(get(mem, Space.ACC, 0, DType.F32, (m, n)).view(np.uint32), acc.view(np.uint32))


# ---------------------------------------------------------------- VPU


@MODELS
def test_reduction_with_and_without_z(run):
    mem = new_memory()
    x = np.arange(-6, 6, dtype=np.int8).reshape(3, 4)
    put(mem, Space.SPM, 0, x)
    put(mem, Space.ACC, 0, np.full(4, 100, np.int32))
    red = dict(op=BinOp.MUL, shape=(3, 4), dst=v(Space.ACC, 0, DType.I32, 0, 4), src0=v(Space.SPM, 0, DType.I8, 4, 1),
               imm=2, reduce=Reduce.SUM)
    run(VecBinary(**red), mem)
    assert list(get(mem, Space.ACC, 0, DType.I32, (4,))) == list(100 + 2 * x.sum(0))
    run(VecBinary(**red, zero=True), mem)
    assert list(get(mem, Space.ACC, 0, DType.I32, (4,))) == list(2 * x.sum(0))
    put(mem, Space.SPM, 64, np.array([[1.5, -3.0], [0.25, 8.0]], np.float32))
    run(VecUnary(fn=Act.MOV, shape=(2, 2), dst=v(Space.SPM, 96, DType.F32, 4, 0), src=v(Space.SPM, 64, DType.F32, 8, 4),
                 reduce=Reduce.MAX, zero=True), mem)
    assert list(get(mem, Space.SPM, 96, DType.F32, (2,))) == [1.5, 8.0]
    put(mem, Space.SPM, 96, np.array([2.0, 2.0], np.float32))
    run(VecUnary(fn=Act.MOV, shape=(2, 2), dst=v(Space.SPM, 96, DType.F32, 4, 0), src=v(Space.SPM, 64, DType.F32, 8, 4),
                 reduce=Reduce.MAX), mem)
    assert list(get(mem, Space.SPM, 96, DType.F32, (2,))) == [2.0, 8.0]


@MODELS
def test_reduction_sums_f32_sequentially(run):
    mem = new_memory()
    put(mem, Space.SPM, 0, np.array([2.0**24, 1.0, 1.0, 1.0], np.float32))
    run(VecUnary(fn=Act.MOV, shape=(4,), dst=v(Space.SPM, 64, DType.F32, 0), src=v(Space.SPM, 0, DType.F32, 4),
                 reduce=Reduce.SUM, zero=True), mem)
    assert get(mem, Space.SPM, 64, DType.F32, (1,))[0] == 2.0**24  # each 2**24 + 1 rounds back to 2**24


@MODELS
def test_relu_and_clamp(run):
    x = np.array([-2, -0.5, 0, 0.5, 3, 7, np.nan], np.float32)
    assert list(unary(Act.RELU, x, DType.F32, DType.F32, run)[:6]) == [0, 0, 0, 0.5, 3, 7]
    assert list(unary(Act.CLAMP, x, DType.F32, DType.F16, run, lo=0, hi=6)[:6]) == [0, 0, 0, 0.5, 3, 6]
    assert np.isnan(unary(Act.RELU, x, DType.F32, DType.F32, run)[6])
    i = np.array([-128, -1, 0, 5, 127], np.int8)
    assert list(unary(Act.RELU, i, DType.I8, DType.I8, run)) == [0, 0, 0, 5, 127]
    assert list(unary(Act.CLAMP, i, DType.I8, DType.I8, run, lo=-3, hi=6)) == [-3, -1, 0, 5, 6]
    assert list(unary(Act.NEG, i, DType.I8, DType.I8, run)) == [127, 1, 0, -5, -127]  # -(-128) saturates


@MODELS
def test_transcendentals_round_once_from_f64(run):
    x = np.array([-3.0, -0.5, 0.0, 0.7, 2.0], np.float32)
    d = [float(t) for t in x]
    expect = {Act.EXP: [math.exp(t) for t in d], Act.TANH: [math.tanh(t) for t in d],
              Act.SIGMOID: [1 / (1 + math.exp(-t)) for t in d], Act.ERF: [math.erf(t) for t in d],
              Act.GELU: [0.5 * t * (1 + math.erf(t / math.sqrt(2))) for t in d]}
    for fn, e in expect.items():
        assert np.array_equal(unary(fn, x, DType.F32, DType.F32, run), np.array(e, np.float32)), fn
    y = np.array([4.0, 0.0, -0.0, -1.0], np.float32)
    assert list(unary(Act.RSQRT, y, DType.F32, DType.F32, run)[:3]) == [0.5, math.inf, -math.inf]
    logs = unary(Act.LOG, y, DType.F32, DType.F32, run)
    assert logs[1] == -math.inf and np.isnan(logs[3])


@MODELS
def test_float_binary_edge_cases(run):
    mem = new_memory()
    put(mem, Space.SPM, 0, np.array([1.0, 0.0, -1.0, np.nan, -0.0, 3.0], np.float32))
    put(mem, Space.SPM, 32, np.array([0.0, 0.0, 0.0, 1.0, 0.0, 3.0], np.float32))
    ops = {BinOp.DIV: [math.inf, None, -math.inf, None, None, 1.0], BinOp.MAX: [1.0, 0.0, 0.0, None, -0.0, 3.0],
           BinOp.CMPEQ: [0, 1, 0, 0, 1, 1], BinOp.CMPGT: [1, 0, 0, 0, 0, 0]}
    for op, expect in ops.items():
        run(VecBinary(op=op, shape=(6,), dst=v(Space.SPM, 64, DType.F32, 4), src0=v(Space.SPM, 0, DType.F32, 4),
                      src1=v(Space.SPM, 32, DType.F32, 4)), mem)
        got = get(mem, Space.SPM, 64, DType.F32, (6,))
        for g, e in zip(got, expect):
            assert (g.view(np.uint32) == 0x7FC00000) if e is None else (g == e and math.copysign(1, g) ==
                                                                        math.copysign(1, e)), (op, got)


@MODELS
def test_integer_binary_ops(run):
    mem = new_memory()
    put(mem, Space.SPM, 0, np.array([-5, 100, 7, -128], np.int8))
    put(mem, Space.SPM, 8, np.array([1, 2, -1, 70], np.int16))
    expect = {BinOp.SHR: [-3, 25, 7, -1], BinOp.SHL: [-10, 127, 7, 0], BinOp.ADD: [-4, 102, 6, -58],
              BinOp.MUL: [-5, 127, -7, -128], BinOp.XOR: [-6, 102, -8, -58], BinOp.CMPGT: [0, 1, 1, 0]}
    for op, e in expect.items():
        run(VecBinary(op=op, shape=(4,), dst=v(Space.SPM, 16, DType.I8, 1), src0=v(Space.SPM, 0, DType.I8, 1),
                      src1=v(Space.SPM, 8, DType.I16, 2)), mem)
        assert list(get(mem, Space.SPM, 16, DType.I8, (4,))) == e, op


FUSED = [(Act.RELU, 0, 0), (Act.CLAMP, -3, 6)]


@MODELS
@pytest.mark.parametrize(("act", "lo", "hi"), FUSED, ids=["relu", "clamp"])
@pytest.mark.parametrize(("sd", "dd"), [(DType.F32, DType.F32), (DType.I32, DType.I32), (DType.I8, DType.I8),
                                        (DType.I32, DType.I8), (DType.F32, DType.I8)])
def test_binary_with_fused_act_matches_numpy_and_the_unfused_pair(run, act, lo, hi, sd, dd):
    """act(a op b) then the conversion into dst (ints saturate, floats round half to even), bit for bit what
    vpu.<op> followed by vpu.act.<act> on its dst gives."""
    rng = np.random.default_rng(int(act) * 7 + sd.code * 3 + dd.code)
    n = 64
    if sd.is_float:
        a, b = (rng.normal(0, 100, n).astype(np.float32) for _ in range(2))
        a[:4] = [-0.0, np.nan, 1e30, -1e30]
    else:
        big = 2**31 - 1 if sd is DType.I32 else 127
        a, b = (rng.integers(-big, big, n, endpoint=True).astype(NP[sd]) for _ in range(2))
    wide = np.float32 if sd.is_float else np.int64   # the compute type (f32 rounds each op; i64 is exact here)
    # the ISA's max/min: NaN stays, the first input wins ties (relu(-0.0) = -0.0)
    fmax = lambda x, c: np.where((x >= c) | (x != x), x, wide(c))
    fmin = lambda x, c: np.where((x <= c) | (x != x), x, wide(c))
    for op in (BinOp.ADD, BinOp.MUL):
        mem = new_memory()
        put(mem, Space.SPM, 0, a)
        put(mem, Space.SPM, 256, b)
        src0, src1 = v(Space.SPM, 0, sd, sd.size), v(Space.SPM, 256, sd, sd.size)
        run(VecBinary(op=op, shape=(n,), dst=v(Space.ACC, 0, dd, dd.size), src0=src0, src1=src1, act=act, lo=lo,
                      hi=hi), mem)
        got = get(mem, Space.ACC, 0, dd, (n,))
        with np.errstate(all="ignore"):
            r = a.astype(wide) + b.astype(wide) if op is BinOp.ADD else a.astype(wide) * b.astype(wide)
            r = fmax(r, 0) if act is Act.RELU else fmin(fmax(r, lo), hi)
            if dd.is_float:
                expect = np.where(np.isnan(r), np.float32(np.nan), r).astype(np.float32)
                assert np.array_equal(got.view(np.uint32)[~np.isnan(r)], expect.view(np.uint32)[~np.isnan(r)]), op
                assert (got.view(np.uint32)[np.isnan(r)] == 0x7FC00000).all()
            else:
                lo_d, hi_d = np.iinfo(NP[dd]).min, np.iinfo(NP[dd]).max
                expect = np.where(np.isnan(r), 0, np.clip(np.rint(r.astype(np.float64)), lo_d, hi_d)).astype(NP[dd])
                assert np.array_equal(got, expect), op
        dst = v(Space.ACC, 512, dd, dd.size)
        run(VecBinary(op=op, shape=(n,), dst=dst, src0=src0, src1=src1), mem)
        run(VecUnary(fn=act, shape=(n,), dst=dst, src=dst, lo=lo, hi=hi), mem)
        assert np.array_equal(got.view(np.uint8), get(mem, Space.ACC, 512, dd, (n,)).view(np.uint8)), op


@MODELS
def test_in_place_update(run):
    mem = new_memory()
    put(mem, Space.SPM, 0, np.array([1, 126, 127, -3], np.int8))
    x = v(Space.SPM, 0, DType.I8, 1)
    run(VecBinary(op=BinOp.ADD, shape=(4,), dst=x, src0=x, imm=1), mem)
    assert list(get(mem, Space.SPM, 0, DType.I8, (4,))) == [2, 127, 127, -2]


@MODELS
def test_convert_rounds_half_to_even_and_saturates(run):
    mem = new_memory()
    put(mem, Space.SPM, 0, np.array([2.5, 3.5, -2.5, 0.5, 1.5, -0.5, 300, -300, np.nan, np.inf], np.float32))
    cvt = dict(shape=(10,), dst=v(Space.SPM, 64, DType.I8, 1), src=v(Space.SPM, 0, DType.F32, 4))
    run(VecConvert(**cvt), mem)
    assert list(get(mem, Space.SPM, 64, DType.I8, (10,))) == [2, 4, -2, 0, 2, 0, 127, -128, 0, 127]
    run(VecConvert(**cvt, scale=0.5, zp_in=1, zp_out=5), mem)  # (x - 1) * 0.5, rounded, + 5
    assert list(get(mem, Space.SPM, 64, DType.I8, (10,))) == [6, 6, 3, 5, 5, 4, 127, -128, 5, 127]


@MODELS
def test_convert_dequantize_to_bf16(run):
    mem = new_memory()
    put(mem, Space.SPM, 0, np.array([-128, 0, 3, 127], np.int8))
    run(VecConvert(shape=(4,), dst=v(Space.SPM, 64, DType.BF16, 2), src=v(Space.SPM, 0, DType.I8, 1), scale=0.25,
                   zp_in=3), mem)
    got = get(mem, Space.SPM, 64, DType.BF16, (4,)).astype(np.uint32) << 16
    assert list(got.view(np.float32)) == [-32.75, -0.75, 0.0, 31.0]


@MODELS
def test_float_narrowing(run):
    x = np.array([1 + 2**-8, 1 + 3 * 2**-8, 3.4028235e38, np.nan, -0.0, 1 + 2**-8 + 2**-20], np.float32)
    assert list(unary(Act.MOV, x, DType.F32, DType.BF16, run)) == [0x3F80, 0x3F82, 0x7F80, 0x7FC0, 0x8000, 0x3F81]
    h = np.array([65519, 65520, 2**-25, 1.5 * 2**-25, 1 + 2**-11, 1 + 3 * 2**-11], np.float32)
    got = unary(Act.MOV, h, DType.F32, DType.F16, run)
    assert list(got.view(np.uint16)) == [0x7BFF, 0x7C00, 0x0000, 0x0001, 0x3C00, 0x3C02]


@MODELS
def test_requant_rounds_half_to_even(run):
    mem = new_memory()
    x = np.array([1, 3, 5, -1, -3, -5, 7, 1000], np.int32)
    put(mem, Space.ACC, 0, x)
    put(mem, Space.SPM, 0, np.array([0, 1, 1], np.int32))  # bias, mult, shift
    rq = dict(shape=(8,), dst=v(Space.SPM, 64, DType.I8, 1), src=v(Space.ACC, 0, DType.I32, 4),
              prm=v(Space.SPM, 0, DType.I32, 0))
    run(VecRequant(**rq), mem)
    assert list(get(mem, Space.SPM, 64, DType.I8, (8,))) == [0, 2, 2, 0, -2, -2, 4, 127]
    run(VecRequant(**rq, zp=3, lo=-1, hi=10), mem)
    assert list(get(mem, Space.SPM, 64, DType.I8, (8,))) == [3, 5, 5, 3, 1, 1, 7, 10]


@MODELS
def test_requant_per_channel_large_values(run):
    mem = new_memory()
    put(mem, Space.ACC, 0, np.array([[2**31 - 1, -(2**31)], [12345, -12345]], np.int32))
    put(mem, Space.SPM, 0, np.array([[-1, 2**30, 31], [-(2**31), -(2**31), 40]], np.int32))
    run(VecRequant(shape=(2, 2), dst=v(Space.SPM, 64, DType.I32, 8, 4), src=v(Space.ACC, 0, DType.I32, 8, 4),
                   prm=v(Space.SPM, 0, DType.I32, 0, 12), lo=-(2**31), hi=2**31 - 1), mem)
    # (0, 1) is the one 64-bit overflow: (-2**31 - 2**31) * -2**31 = 2**63, >> 40 = 2**23 exactly
    expect = [[2**30 - 1, 2**23], [6172, 2**22 + 24]]  # (1, 1): (2**31 + 12345) / 2**9 = 2**22 + 24.11
    assert get(mem, Space.SPM, 64, DType.I32, (2, 2)).tolist() == expect


@MODELS
@pytest.mark.parametrize("shift", [63, -1])
def test_requant_bad_shift_raises_and_writes_nothing(run, shift):
    mem = new_memory()
    put(mem, Space.SPM, 12, np.array([0, 1, shift], np.int32))
    before = mem.spm.copy()
    with pytest.raises(SimulationError, match=f"not {shift}"):
        run(VecRequant(shape=(2,), dst=v(Space.SPM, 64, DType.I8, 1), src=v(Space.ACC, 0, DType.I32, 4),
                       prm=v(Space.SPM, 0, DType.I32, 12)), mem)
    assert np.array_equal(mem.spm, before)


@MODELS
def test_control_instructions_do_nothing(run):
    mem = new_memory()
    put(mem, Space.SPM, 0, np.arange(100, dtype=np.uint8))
    before = mem.spm.copy()
    for i in (Sync(on=Queue.VPU, signals=(SemOp("s"),)), Barrier(), Halt()):
        run(i, mem)
    assert np.array_equal(mem.spm, before)


@MODELS
def test_out_of_range_raises_without_writing(run):
    mem = new_memory()
    with pytest.raises(SimulationError, match="outside the 1024-byte ACC"):
        run(MatMul(shape=(2,), m=4, k=4, n=4, acc=v(Space.ACC, 1000, DType.I32, 0), acc_row=16,
                   a=v(Space.SPM, 0, DType.I8, 16), a_row=4, b=v(Space.SPM, 64, DType.I8, 16), zero=True), mem)
    assert not mem.acc.any()
