"""The numba functional model against the plain-Python reference: bit-exact on random instructions and memories."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from isa import (
    INT_RANGE,
    Act,
    BinOp,
    DmaCopy,
    DmaFill,
    DType,
    Gather,
    MatMul,
    Pad,
    Queue,
    Reduce,
    SimulationError,
    Space,
    VecBinary,
    VecConvert,
    VecRequant,
    VecUnary,
    View,
)
from isa.instructions import FLOAT_ONLY_ACTS, FLOAT_ONLY_BINOPS, INT_ONLY_BINOPS
from npusim.functional.execute import execute
from npusim.functional.memory import DeviceMemory
from npusim.functional.reference import execute_reference

SIZE = 384
FLOATS, INTS = (DType.F16, DType.BF16, DType.F32), (DType.I8, DType.U8, DType.I16, DType.I32)
NICE = {DType.F16: np.float16, DType.BF16: np.float32, DType.F32: np.float32}
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def new_memory() -> DeviceMemory:
    return DeviceMemory(SIZE, SIZE, {"D": SIZE})


def buffers(mem: DeviceMemory) -> list[np.ndarray]:
    return [mem.spm, mem.acc, mem.dram["D"]]


@st.composite
def memories(draw) -> DeviceMemory:
    """Random bytes, or a buffer of small values (with ties, infs and NaNs) of one dtype."""
    mem, seed = new_memory(), draw(st.integers(0, 2**32 - 1))
    rng, mode = np.random.default_rng(seed), draw(st.sampled_from(["bytes", "values"]))
    dtype = draw(st.sampled_from(list(DType)))
    for buf in buffers(mem):
        if mode == "bytes":
            buf[:] = rng.integers(0, 256, buf.size)
            continue
        n = buf.size // dtype.size
        if dtype.is_float:
            vals = rng.integers(-5000, 5000, n) / rng.choice([1, 4, 256, 4096], n)  # with f16 and bf16 ties
            vals[rng.random(n) < 0.05] = rng.choice([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e30, 3e-42])
            with np.errstate(all="ignore"):
                vals = vals.astype(np.float32) * np.float32(rng.choice([1, 1, 1e-3, 1e5]))
                data = (vals.view(np.uint32) >> 16).astype(np.uint16) if dtype is DType.BF16 else \
                    vals.astype(NICE[dtype])
        else:
            lo, hi = INT_RANGE[dtype]
            data = rng.integers(max(lo, -300), min(hi, 300), n).astype(np.int64)
            data[rng.random(n) < 0.1] = rng.choice([lo, hi, hi - 300])
            data = data.astype(dtype.storage)
        buf[: n * dtype.size] = np.ascontiguousarray(data).view(np.uint8)
    return mem


@st.composite
def shapes(draw, max_dims: int = 3, max_extent: int = 4) -> tuple[int, ...]:
    return tuple(draw(st.lists(st.integers(1, max_extent), min_size=1, max_size=max_dims)))


@st.composite
def views(draw, shape, dtype: DType, spaces=(Space.SPM, Space.ACC), extra=(), zero_ok=True, zero_dims=(), unit=0):
    """A view over ``shape`` that fits the memory; strides may be 0 (if allowed), negative or unaligned, or multiples
    of ``unit`` if given."""
    space = draw(st.sampled_from(spaces))
    es = dtype.size
    strides = []
    for d, e in enumerate(shape):
        if d in zero_dims:
            strides.append(0)
            continue
        multiples = st.integers(-4, 8).map(lambda k: k * (unit or es))
        s = draw(multiples if unit else st.one_of(multiples, st.integers(-20, 40)))
        if s == 0 and not zero_ok and e > 1:
            s = es
        strides.append(s)
    lo = hi = 0
    for e, s in list(zip(shape, strides)) + list(extra):
        lo, hi = (lo, hi + (e - 1) * s) if s > 0 else (lo + (e - 1) * s, hi)
    assume(hi + es - lo <= SIZE)
    base = draw(st.integers(-lo, SIZE - hi - es))
    if draw(st.booleans()) and (base - base % es) >= -lo:
        base -= base % es
    return View(space, base, dtype, tuple(strides), "D" if space is Space.DRAM else None)


def float_values():
    return st.one_of(st.sampled_from([0.0, -0.0, 2.5, -3.5, 1.00390625, 65520.0, 1e-40, float("inf"), float("nan")]),
                     st.floats(-1e6, 1e6, width=32))


def check(instr, mem: DeviceMemory) -> None:
    """Run both models on copies of ``mem``; they must agree on errors and on every byte."""
    fast, ref = new_memory(), new_memory()
    for a, b, c in zip(buffers(fast), buffers(ref), buffers(mem)):
        a[:], b[:] = c, c
    errors = []
    for run, m in ((execute, fast), (execute_reference, ref)):
        try:
            run(instr, m)
            errors.append(None)
        except SimulationError as e:
            errors.append(str(e))
    assert errors[0] == errors[1]
    for a, b, c in zip(buffers(fast), buffers(ref), buffers(mem)):
        if errors[0] is not None:
            assert np.array_equal(a, c), "a failing instruction must not write"
        diff = np.nonzero(a != b)[0]
        assert diff.size == 0, f"bytes differ at {diff[:8]}: {a[diff[:8]]} vs {b[diff[:8]]}"


@SETTINGS
@given(st.data(), memories())
def test_dma_copy(data, mem):
    shape = data.draw(shapes(max_dims=3, max_extent=5))
    size = data.draw(st.sampled_from([1, 2, 4]))
    same_size = [d for d in DType if d.size == size]
    dd, sd = data.draw(st.sampled_from(same_size)), data.draw(st.sampled_from(same_size))
    pads = []
    for d, e in enumerate(shape):
        if data.draw(st.booleans()):
            lo = data.draw(st.integers(0, e))
            pads.append(Pad(d, lo, data.draw(st.integers(0, e - lo))))
    src_shape = [e for e in shape]
    for p in pads:
        src_shape[p.dim] -= p.lo + p.hi
    all_spaces = (Space.DRAM, Space.SPM, Space.ACC)
    dst = data.draw(views(shape, dd, all_spaces))
    src = data.draw(views(tuple(max(e, 1) for e in src_shape), sd, all_spaces))
    fill = data.draw(float_values()) if dd.is_float else data.draw(st.integers(*{1: (0, 127), 2: (-99, 99), 4: (-9, 9)}[
        dd.size]))
    check(DmaCopy(queue=Queue.DMA_LD, shape=shape, dst=dst, src=src, pad=tuple(pads), fill=fill), mem)


@SETTINGS
@given(st.data(), memories())
def test_dma_fill(data, mem):
    shape = data.draw(shapes())
    dt = data.draw(st.sampled_from(list(DType)))
    dst = data.draw(views(shape, dt, (Space.DRAM, Space.SPM, Space.ACC)))
    value = data.draw(float_values()) if dt.is_float else data.draw(st.integers(0, 100))
    check(DmaFill(queue=Queue.DMA_ST, shape=shape, dst=dst, value=value), mem)


@SETTINGS
@given(st.data(), memories())
def test_matmul(data, mem):
    shape = data.draw(shapes(max_dims=3, max_extent=3))
    m, k, n = (data.draw(st.integers(1, 3)) for _ in range(3))
    kind = data.draw(st.sampled_from(("float", "int", "weight-only")))
    if kind == "int":
        ad, bd = (data.draw(st.sampled_from([DType.I8, DType.U8])) for _ in range(2))
        accd = DType.I32
    else:   # float x float, or float x i8/u8 codes
        ad = data.draw(st.sampled_from(FLOATS))
        bd = ad if kind == "float" else data.draw(st.sampled_from([DType.I8, DType.U8]))
        accd = DType.F32
    es = ad.size
    acc_row = data.draw(st.one_of(st.sampled_from([4 * n, 0, 4]), st.integers(-16, 32)))
    a_row = data.draw(st.one_of(st.just(k * es), st.integers(-8, 16)))
    zero_dims = tuple(d for d in range(len(shape)) if data.draw(st.booleans()))
    acc = data.draw(views(shape, accd, (Space.ACC,), extra=((m, acc_row), (n, 4)), zero_dims=zero_dims))
    a = data.draw(views(shape, ad, (Space.SPM,), extra=((m, a_row), (k, es))))
    b = data.draw(views(shape, bd, (Space.SPM,), extra=((k * n, bd.size),)))
    if data.draw(st.booleans()):  # accumulators near the i32 limits (wrap-around) or f32 extremes
        extremes = [2**31 - 1, -(2**31), 2**31 - 200, 0x7F7FFFFF, 0x7F800000, 0xFF800000]
        mem.acc[:] = np.random.default_rng(data.draw(st.integers(0, 99))).choice(extremes, SIZE // 4).astype(
            np.uint32).view(np.uint8)
    check(MatMul(shape=shape, m=m, k=k, n=n, acc=acc, acc_row=acc_row, a=a, a_row=a_row, b=b,
                 zero=data.draw(st.booleans())), mem)


def _reduction(data, shape):
    """(reduce, zero, dims with dst stride 0)."""
    red = data.draw(st.sampled_from(list(Reduce)))
    if red is Reduce.NONE:
        return red, False, ()
    return red, data.draw(st.booleans()), tuple(d for d in range(len(shape)) if data.draw(st.booleans()))


def _dst(data, shape, dt, zero_dims, alias: View):
    broadcast = any(s == 0 and e > 1 for e, s in zip(shape, alias.strides))
    if not zero_dims and not broadcast and data.draw(st.integers(0, 3)) == 0:
        v = View(alias.space, alias.base, dt, alias.strides)
        lo, hi = v.span(shape)
        if lo >= 0 and hi <= SIZE:
            return v
    return data.draw(views(shape, dt, zero_ok=False, zero_dims=zero_dims))


@SETTINGS
@given(st.data(), memories())
def test_vec_binary(data, mem):
    shape = data.draw(shapes())
    flt = data.draw(st.booleans())
    d0, d1 = (data.draw(st.sampled_from(FLOATS if flt else INTS)) for _ in range(2))
    op = data.draw(st.sampled_from([o for o in BinOp if o not in (INT_ONLY_BINOPS if flt else FLOAT_ONLY_BINOPS)]))
    src0 = data.draw(views(shape, d0))
    src1 = data.draw(views(shape, d1)) if data.draw(st.booleans()) else None
    ints = st.one_of(st.integers(-70, 70), st.integers(-(2**31), 2**31 - 1))
    imm = data.draw(float_values() if flt else ints)
    red, zero, zdims = _reduction(data, shape)
    dst = _dst(data, shape, data.draw(st.sampled_from(list(DType))), zdims, src0)
    act = data.draw(st.sampled_from([None, Act.RELU, Act.CLAMP])) if red is Reduce.NONE else None
    bound = st.floats(-100, 100, width=32) if flt else st.integers(-200, 200)
    lo, hi = sorted(data.draw(st.tuples(bound, bound))) if act is Act.CLAMP else (0, 0)
    check(VecBinary(op=op, shape=shape, dst=dst, src0=src0, src1=src1, imm=imm, reduce=red, zero=zero, act=act,
                    lo=lo, hi=hi), mem)


@SETTINGS
@given(st.data(), memories())
def test_vec_unary(data, mem):
    shape = data.draw(shapes())
    flt = data.draw(st.booleans())
    sd = data.draw(st.sampled_from(FLOATS if flt else INTS))
    fn = data.draw(st.sampled_from([f for f in Act if flt or f not in FLOAT_ONLY_ACTS]))
    src = data.draw(views(shape, sd))
    lo, hi = sorted(data.draw(st.floats(-100, 100, width=32)) if flt else data.draw(st.integers(-200, 200))
                    for _ in range(2))
    red, zero, zdims = _reduction(data, shape)
    dst = _dst(data, shape, data.draw(st.sampled_from(list(DType))), zdims, src)
    check(VecUnary(fn=fn, shape=shape, dst=dst, src=src, lo=lo, hi=hi, reduce=red, zero=zero), mem)


@SETTINGS
@given(st.data(), memories())
def test_vec_convert(data, mem):
    shape = data.draw(shapes())
    src = data.draw(views(shape, data.draw(st.sampled_from(list(DType)))))
    dst = _dst(data, shape, data.draw(st.sampled_from(list(DType))), (), src)
    scale = data.draw(st.one_of(st.sampled_from([1.0, 0.5, 0.25, -2.0, 0.1, 1e-30, 1e30]),
                                st.floats(-10, 10, width=32)))
    zp_in, zp_out = (data.draw(st.one_of(st.integers(-3, 3), st.integers(-32768, 32767))) for _ in range(2))
    check(VecConvert(shape=shape, dst=dst, src=src, scale=scale, zp_in=zp_in, zp_out=zp_out), mem)


@SETTINGS
@given(st.data(), memories())
def test_vec_requant(data, mem):
    shape = data.draw(shapes())
    src = data.draw(views(shape, DType.I32))
    prm = data.draw(views(shape, DType.I32, extra=((3, 4),), unit=12))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    if data.draw(st.booleans()):  # small inputs, so that rounding ties and the clamp both matter
        for idx in np.ndindex(*shape):
            at = src.base + sum(i * s for i, s in zip(idx, src.strides))
            mem.buffer(src)[at:at + 4] = np.array([rng.integers(-300, 300)], np.int32).view(np.uint8)
    bad = rng.random() < 0.1
    for idx in np.ndindex(*shape):  # plausible records (later ones may overlap earlier ones and the inputs)
        at = prm.base + sum(i * s for i, s in zip(idx, prm.strides))
        big = rng.random(3) < 0.3
        rec = [rng.integers(-2**31, 2**31) if big[0] else rng.integers(-500, 500),
               rng.integers(-2**31, 2**31) if big[1] else rng.integers(1, 20),
               rng.integers(63, 70) if bad else rng.integers(0, 63) if big[2] else rng.integers(0, 5)]
        mem.buffer(prm)[at:at + 12] = np.array(rec, np.int64).astype(np.int32).view(np.uint8)
    dt = data.draw(st.sampled_from(INTS))
    dst = _dst(data, shape, dt, (), src)
    lo, hi = INT_RANGE[dt] if data.draw(st.booleans()) else sorted(data.draw(st.integers(*INT_RANGE[dt]))
                                                                   for _ in range(2))
    zp = data.draw(st.integers(max(INT_RANGE[dt][0], -5), min(INT_RANGE[dt][1], 5)))
    check(VecRequant(shape=shape, dst=dst, src=src, prm=prm, zp=zp, lo=lo, hi=hi), mem)


@SETTINGS
@given(st.data(), memories())
def test_gather(data, mem):
    queue = data.draw(st.sampled_from([Queue.VPU, Queue.DMA_LD]))
    shape = data.draw(shapes(max_dims=3))
    row, rows = data.draw(st.integers(1, 4)), data.draw(st.integers(1, 6))
    size = data.draw(st.sampled_from([1, 2, 4]))
    same = [d for d in DType if d.size == size]
    dd, td = data.draw(st.sampled_from(same)), data.draw(st.sampled_from(same))
    dst = data.draw(views(shape + (row,), dd))
    table = data.draw(views((rows,), td, {Queue.VPU: (Space.SPM, Space.ACC), Queue.DMA_LD: (Space.DRAM, Space.SPM)}[
        queue], extra=((row, size),)))
    idx = data.draw(views(shape, DType.I32, unit=4))   # whole indices: no two overlap in part
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    points = list(np.ndindex(*shape))
    bad = points[rng.integers(len(points))] if rng.random() < 0.2 else None   # both models must name it
    for p in points:   # the indices may overlap each other, the table and dst (aliasing)
        at = idx.base + sum(i * s for i, s in zip(p, idx.strides))
        value = rows + rng.integers(0, 3) if p == bad else rng.integers(-2, rows)
        mem.buffer(idx)[at:at + 4] = np.array([value], np.int32).view(np.uint8)
    fill = data.draw(float_values()) if dd.is_float else data.draw(st.integers(*INT_RANGE[dd]))
    check(Gather(queue=queue, shape=shape, row=row, rows=rows, dst=dst, table=table, idx=idx, fill=fill), mem)


@pytest.mark.parametrize("space", [Space.SPM, Space.ACC])
def test_out_of_range_raises_in_both(space):
    mem = new_memory()
    i = VecUnary(fn=Act.MOV, shape=(4, 4), dst=View(space, SIZE - 8, DType.I8, (4, 1)),
                 src=View(Space.SPM, 0, DType.I8, (4, 1)))
    for run in (execute, execute_reference):
        with pytest.raises(SimulationError, match="outside"):
            run(i, mem)



@pytest.mark.parametrize("dtypes", [(DType.F32, DType.F32), (DType.I8, DType.I8), (DType.U8, DType.I8),
                                    (DType.I8, DType.U8), (DType.F32, DType.I8), (DType.F32, DType.U8)])
@pytest.mark.parametrize("seed", range(6))
def test_matmul_whole_tiles(seed, dtypes):
    """Tiles as compilers emit them (k, n up to 16, word-aligned rows, several points sharing or stepping B and ACC,
    NaN/inf among f32 values, i32 accumulators near their limits; f32 activations by i8/u8 codes): the word kernels
    (npusim.functional.kernels.matmul_f32, matmul_f32_codes, matmul_int) equal the reference bit for bit."""
    rng = np.random.default_rng(seed)
    size = 8192
    mems = [DeviceMemory(size, size, {}) for _ in range(2)]
    ad, bd = dtypes
    es, bes = ad.size, bd.size
    if ad is DType.F32:
        vals = rng.standard_normal(size // 4).astype(np.float32)
        vals[rng.random(vals.size) < 0.03] = rng.choice([np.inf, -np.inf, np.nan, -0.0])
        acc0 = rng.permutation(vals).view(np.uint8)
    else:
        vals = rng.integers(0, 256, size, dtype=np.uint8)
        acc0 = rng.choice([2**31 - 1, -(2**31), 2**31 - 200, 5, -7], size // 4).astype(np.int32).view(np.uint8)
    k, n = (int(x) for x in rng.choice([3, 8, 11, 16], 2))
    m, points = int(rng.integers(1, 5)), int(rng.integers(1, 4))
    b = View(Space.SPM, bes * int(rng.integers(0, 8)), bd, (bes * k * n * (seed % 2),))
    a = View(Space.SPM, es * ((points + 1) * k * n + int(rng.integers(0, 8))), ad, (es * k * m,))
    acc = View(Space.ACC, 4 * int(rng.integers(0, 8)), DType.F32 if ad is DType.F32 else DType.I32,
               (4 * n * m * (seed // 2 % 2),))
    instr = MatMul(shape=(points,), m=m, k=k, n=n, acc=acc, acc_row=4 * n, a=a, a_row=es * k, b=b, zero=seed == 5)
    for mem, run in zip(mems, (execute, execute_reference)):
        mem.spm[:], mem.acc[:] = vals.view(np.uint8), acc0
        run(instr, mem)
    assert np.array_equal(mems[0].acc, mems[1].acc) and np.array_equal(mems[0].spm, mems[1].spm)
    assert not np.array_equal(mems[0].acc, acc0)
