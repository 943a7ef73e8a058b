"""The reference functional model: plain Python loops over numpy views, the readable twin of npusim.functional.execute.

Same rules as npusim.functional.execute (see its docstring), written as directly as possible: one iteration point at a
time, f32 values held in Python floats (every f32 operation is computed in f64 and rounded, which is exact for
+ - * / sqrt of f32 inputs), integers in Python ints wrapped to i64 where the rules say so. Slow; for small tests.
"""

from __future__ import annotations

import math
from itertools import product

import numpy as np

from isa import (
    INT_RANGE,
    Act,
    BinOp,
    DmaCopy,
    DmaFill,
    DType,
    Gather,
    Instr,
    MatMul,
    Reduce,
    SimulationError,
    VecBinary,
    VecConvert,
    VecRequant,
    VecUnary,
    View,
    reduction_dims,
)
from npusim.functional.execute import gather_error
from npusim.functional.kernels import narrow, scalar_bytes, widen
from npusim.functional.memory import DeviceMemory

I64 = (-(2**63), 2**63 - 1)


def f32(x: float) -> float:
    """Round to the nearest f32 (ties to even), as a Python float."""
    return float(np.float32(x))


def wrap64(v: int) -> int:
    return (v + 2**63) % 2**64 - 2**63


def to_int(x: float, lo: int, hi: int) -> int:
    """Round half to even and saturate to [lo, hi]; NaN -> 0."""
    if math.isnan(x):
        return 0
    return lo if x <= lo else hi if x >= hi else min(max(round(x), lo), hi)


def fmax(a, b):
    """The larger; NaN if either is NaN; a when equal."""
    return a if (a >= b or a != a) else b


def fmin(a, b):
    return a if (a <= b or a != a) else b


def fdiv(a: float, b: float) -> float:
    if b == 0:
        return math.nan if a == 0 or a != a else math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def _exp(d: float) -> float:
    try:
        return math.exp(d)
    except OverflowError:
        return math.inf


def _sqrt(d: float) -> float:
    return math.nan if d < 0 else math.sqrt(d)


def _log(d: float) -> float:
    return math.nan if d < 0 or d != d else -math.inf if d == 0 else math.log(d)


def float_binop(op: BinOp, a: float, b: float) -> float:
    return {BinOp.ADD: lambda: f32(a + b), BinOp.SUB: lambda: f32(a - b), BinOp.MUL: lambda: f32(a * b),
            BinOp.DIV: lambda: f32(fdiv(a, b)), BinOp.MIN: lambda: fmin(a, b), BinOp.MAX: lambda: fmax(a, b),
            BinOp.CMPGT: lambda: float(a > b), BinOp.CMPEQ: lambda: float(a == b)}[op]()


def int_binop(op: BinOp, a: int, b: int) -> int:
    s = min(max(b, 0), 63)
    return wrap64({BinOp.ADD: a + b, BinOp.SUB: a - b, BinOp.MUL: a * b, BinOp.MIN: min(a, b), BinOp.MAX: max(a, b),
                   BinOp.SHL: a << s, BinOp.SHR: a >> s, BinOp.AND: a & b, BinOp.OR: a | b, BinOp.XOR: a ^ b,
                   BinOp.CMPGT: int(a > b), BinOp.CMPEQ: int(a == b)}[op])


def float_act(fn: Act, x: float, lo: float, hi: float) -> float:
    simple = {Act.MOV: lambda: x, Act.RELU: lambda: fmax(x, 0.0), Act.CLAMP: lambda: fmin(fmax(x, lo), hi),
              Act.ABS: lambda: abs(x), Act.NEG: lambda: -x}
    if fn in simple:
        return simple[fn]()
    f64 = {Act.EXP: _exp, Act.LOG: _log, Act.RECIP: lambda d: fdiv(1.0, d), Act.SQRT: _sqrt,
           Act.RSQRT: lambda d: fdiv(1.0, _sqrt(d)), Act.SIGMOID: lambda d: 1.0 / (1.0 + _exp(-d)),
           Act.TANH: math.tanh, Act.GELU: lambda d: 0.5 * d * (1.0 + math.erf(d / math.sqrt(2.0))),
           Act.ERF: math.erf}[fn]
    return f32(f64(x))


def int_act(fn: Act, x: int, lo: int, hi: int) -> int:
    return {Act.MOV: x, Act.RELU: max(x, 0), Act.CLAMP: min(max(x, lo), hi), Act.ABS: abs(x), Act.NEG: -x}[fn]


def read_f32(arr: np.ndarray, dtype: DType) -> np.ndarray:
    """A snapshot of a typed view as f32 values."""
    return widen(arr.copy(), dtype)


def read_i64(arr: np.ndarray, dtype: DType) -> np.ndarray:
    """A snapshot of a typed view as Python ints (floats: round half to even, saturate to i64, NaN -> 0)."""
    if dtype.is_float:
        return np.vectorize(lambda x: to_int(float(x), *I64), otypes=[object])(widen(arr.copy(), dtype))
    return arr.astype(object)


def store(arr: np.ndarray, idx: tuple[int, ...], value: int | float, dtype: DType, is_float: bool) -> None:
    """Write a compute-type value (f32 as float, or i64 as int) to ``arr[idx]``, converting to ``dtype``."""
    if not is_float:
        if not dtype.is_float:
            arr[idx] = min(max(value, INT_RANGE[dtype][0]), INT_RANGE[dtype][1])
            return
        value = float(np.array([value], np.int64).astype(np.float32)[0])  # i64 -> f32, round to nearest even
    arr[idx] = narrow(np.array([value], np.float32), dtype)[0]


def _copy(i: DmaCopy, mem: DeviceMemory) -> None:
    src_shape = i.src_shape
    dst = mem.array(i.dst, i.shape)
    src = mem.array(i.src, src_shape).copy().view(dst.dtype) if all(src_shape) else None
    fill = scalar_bytes(i.fill, i.dst.dtype).view(dst.dtype)[0]
    lo = [0] * len(i.shape)
    for p in i.pad:
        lo[p.dim] = p.lo
    for idx in np.ndindex(*i.shape):
        s = tuple(x - d for x, d in zip(idx, lo))
        inside = all(0 <= x < e for x, e in zip(s, src_shape))
        dst[idx] = src[s] if inside else fill


def _fill(i: DmaFill, mem: DeviceMemory) -> None:
    dst = mem.array(i.dst, i.shape)
    value = scalar_bytes(i.value, i.dst.dtype).view(dst.dtype)[0]
    for idx in np.ndindex(*i.shape):
        dst[idx] = value


def _matmul(i: MatMul, mem: DeviceMemory) -> None:
    flt = i.a.dtype.is_float   # (B i8/u8 under a float A: weight-only, the codes widened to f32 exactly)
    acc = mem.array(i.acc, i.shape, ((i.m, i.acc_row), (i.n, 4)))
    a = mem.array(i.a, i.shape, ((i.m, i.a_row), (i.k, i.a.dtype.size)))
    b = mem.array(i.b, i.shape, ((i.k * i.n, i.b.dtype.size),))
    a, b = (read_f32(a, i.a.dtype), read_f32(b, i.b.dtype)) if flt else (a.astype(int), b.astype(int))
    points = list(np.ndindex(*i.shape))
    if i.zero:
        for p, r, j in product(points, range(i.m), range(i.n)):
            acc[p + (r, j)] = 0
    for p, r, j in product(points, range(i.m), range(i.n)):
        s = acc[p + (r, j)].item()
        for q in range(i.k):
            if flt:
                s = f32(s + f32(float(a[p + (r, q)]) * float(b[p + (q * i.n + j,)])))
            else:
                s += int(a[p + (r, q)]) * int(b[p + (q * i.n + j,)])
        if flt:
            store(acc, p + (r, j), s, DType.F32, True)
        else:
            acc[p + (r, j)] = (s + 2**31) % 2**32 - 2**31


def _vector(i: VecBinary | VecUnary, mem: DeviceMemory, srcs: tuple[View, ...], op) -> None:
    """Shared by the binary and unary ops: ``op(*inputs)`` per point, then reduction and conversion."""
    flt = srcs[0].dtype.is_float
    read = read_f32 if flt else read_i64
    inputs = [read(mem.array(v, i.shape), v.dtype) for v in srcs]  # sources first: dst may alias them
    dst = mem.array(i.dst, i.shape)
    values = {idx: op(*(float(x[idx]) if flt else int(x[idx]) for x in inputs)) for idx in np.ndindex(*i.shape)}
    if i.reduce is Reduce.NONE:
        for idx, v in values.items():
            store(dst, idx, v, i.dst.dtype, flt)
        return
    red = set(reduction_dims(i.shape, i.dst))
    group = lambda idx: tuple(0 if d in red else x for d, x in enumerate(idx))
    keys = dict.fromkeys(group(idx) for idx in values)  # row-major, deduplicated
    if i.zero:
        ident = {Reduce.SUM: 0.0, Reduce.MAX: -math.inf, Reduce.MIN: math.inf} if flt else \
            {Reduce.SUM: 0, Reduce.MAX: I64[0], Reduce.MIN: I64[1]}
        acc = {key: ident[i.reduce] for key in keys}
    else:
        cur = read(dst, i.dst.dtype)
        acc = {key: float(cur[key]) if flt else int(cur[key]) for key in keys}
    for idx, v in values.items():
        a, key = acc[group(idx)], group(idx)
        if i.reduce is Reduce.SUM:
            acc[key] = f32(a + v) if flt else wrap64(a + v)
        else:
            acc[key] = (fmax if i.reduce is Reduce.MAX else fmin)(a, v)
    for key, v in acc.items():
        store(dst, key, v, i.dst.dtype, flt)


def _binary(i: VecBinary, mem: DeviceMemory) -> None:
    flt = i.src0.dtype.is_float
    act = Act.MOV if i.act is None else i.act
    fn = (lambda a, b: float_act(act, float_binop(i.op, a, b), i.lo, i.hi)) if flt else \
        (lambda a, b: int_act(act, int_binop(i.op, a, b), i.lo, i.hi))
    if i.src1 is not None:
        _vector(i, mem, (i.src0, i.src1), fn)
    else:
        _vector(i, mem, (i.src0,), lambda a: fn(a, i.imm))


def _unary(i: VecUnary, mem: DeviceMemory) -> None:
    if i.src.dtype.is_float:
        _vector(i, mem, (i.src,), lambda x: float_act(i.fn, x, i.lo, i.hi))
    else:
        _vector(i, mem, (i.src,), lambda x: int_act(i.fn, x, i.lo, i.hi))


def _convert(i: VecConvert, mem: DeviceMemory) -> None:
    x = read_f32(mem.array(i.src, i.shape), i.src.dtype)
    dst = mem.array(i.dst, i.shape)
    for idx in np.ndindex(*i.shape):
        v = f32(f32(float(x[idx]) - i.zp_in) * i.scale)
        if i.dst.dtype.is_float:
            store(dst, idx, f32(v + i.zp_out), i.dst.dtype, True)
        else:
            y = i.zp_out if math.isnan(v) else to_int(v, -(2**40), 2**40) + i.zp_out
            store(dst, idx, y, i.dst.dtype, False)


def rshift_rne(v: int, s: int) -> int:
    """v / 2**s rounded half to even."""
    if s == 0:
        return v
    q, r, half = v >> s, v - ((v >> s) << s), 1 << (s - 1)
    return q + 1 if r > half or (r == half and q % 2 == 1) else q


def _requant(i: VecRequant, mem: DeviceMemory) -> None:
    x = mem.array(i.src, i.shape).astype(int)
    prm = mem.array(i.prm, i.shape, ((3, 4),)).astype(int)
    for idx in np.ndindex(*i.shape):
        if not 0 <= prm[idx][2] <= 62:
            raise SimulationError(f"vpu.rq shift must be in [0, 62], not {prm[idx][2]}")
    dst = mem.array(i.dst, i.shape)
    for idx in np.ndindex(*i.shape):
        bias, mult, shift = (int(v) for v in prm[idx])
        y = min(max(i.zp + rshift_rne((int(x[idx]) + bias) * mult, shift), i.lo), i.hi)
        store(dst, idx, y, i.dst.dtype, False)


def _gather(i: Gather, mem: DeviceMemory) -> None:
    es = i.dst.dtype.size
    dst = mem.array(i.dst, i.shape, ((i.row, i.dst.strides[-1]),))
    table = mem.array(i.table.with_strides(()), (), ((i.rows, i.table.strides[0]), (i.row, es)))
    idx = mem.array(i.idx, i.shape).copy()
    for p in np.ndindex(*i.shape):
        if idx[p] >= i.rows:
            raise gather_error(i, p, int(idx[p]))
    fill = np.full(i.row, scalar_bytes(i.fill, i.dst.dtype).view(dst.dtype)[0])
    rows = {p: fill if idx[p] < 0 else table[idx[p]].copy().view(dst.dtype) for p in np.ndindex(*i.shape)}
    for p, values in rows.items():   # every row is read before the first write
        for j in range(i.row):
            dst[p + (j,)] = values[j]


REFERENCE = {DmaCopy: _copy, DmaFill: _fill, MatMul: _matmul, VecBinary: _binary, VecUnary: _unary,
             VecConvert: _convert, VecRequant: _requant, Gather: _gather}


def execute_reference(instr: Instr, mem: DeviceMemory) -> None:
    """Apply one instruction to ``mem`` one element at a time (Sync, Barrier, Halt: nothing)."""
    with np.errstate(all="ignore"):
        if type(instr) in REFERENCE:
            REFERENCE[type(instr)](instr, mem)
