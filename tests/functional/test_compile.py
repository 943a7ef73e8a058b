"""The hot kernels compile once: new shapes, strides, dtypes and ops reuse the same numba signature."""

from __future__ import annotations

import numpy as np

from isa import (
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
    Space,
    VecBinary,
    VecConvert,
    VecRequant,
    VecUnary,
    View,
)
from npusim.functional import kernels as K
from npusim.functional.execute import execute
from npusim.functional.memory import DeviceMemory


def spm(base: int, dt: DType, *strides: int) -> View:
    return View(Space.SPM, base, dt, strides)


def batch(nd: int, dt: DType, ft: DType) -> list:
    """One instruction per hot kernel, with ``nd`` loop dimensions, integer dtype ``dt`` and float dtype ``ft``."""
    shape, st = (2,) * nd, tuple(8 * 4**i for i in reversed(range(nd)))
    red = tuple(0 if i == 0 else s for i, s in enumerate(st))
    return [
        DmaCopy(queue=Queue.DMA_LD, shape=shape, dst=spm(0, dt, *st), src=spm(512, dt, *st), pad=(Pad(0, 1, 0),)),
        DmaFill(queue=Queue.DMA_LD, shape=shape, dst=spm(0, ft, *st), value=1.5),
        MatMul(shape=shape, m=2, k=3, n=2, acc=View(Space.ACC, 0, DType.I32, st), acc_row=8, a=spm(0, dt, *st),
               a_row=4, b=spm(256, DType.I8, *st), zero=nd == 2),
        MatMul(shape=shape, m=3, k=2, n=1, acc=View(Space.ACC, 0, DType.F32, red), acc_row=4, a=spm(0, ft, *st),
               a_row=4, b=spm(256, ft, *st), zero=True),
        VecBinary(op=BinOp.ADD, shape=shape, dst=spm(0, ft, *red), src0=spm(512, ft, *st), imm=1.0, reduce=Reduce.SUM),
        VecBinary(op=BinOp.XOR, shape=shape, dst=spm(0, dt, *st), src0=spm(512, dt, *st), src1=spm(640, DType.I8, *st)),
        VecUnary(fn=Act.TANH, shape=shape, dst=spm(0, dt, *st), src=spm(512, ft, *st)),
        VecUnary(fn=Act.CLAMP, shape=shape, dst=spm(0, ft, *red), src=spm(512, dt, *st), lo=-2, hi=3,
                 reduce=Reduce.MAX, zero=True),
        VecConvert(shape=shape, dst=spm(0, dt, *st), src=spm(512, ft, *st), scale=0.5, zp_out=1),
        VecRequant(shape=shape, dst=spm(0, DType.I8, *st), src=spm(512, DType.I32, *st), prm=spm(900, DType.I32,
                                                                                                 *(0,) * nd)),
        # row stride 0: every index in [0, rows) reads the same row, whatever the random index bytes are
        Gather(queue=Queue.VPU, shape=shape, row=3, rows=2**31 - 1, dst=spm(0, ft, *st, ft.size),
               table=spm(1024, ft, 0), idx=spm(512, DType.I32, *st), fill=-1.0),
    ]


def run(instrs) -> dict[str, int]:
    mem = DeviceMemory(2048, 2048, {})
    mem.spm[:] = np.random.default_rng(0).integers(0, 8, mem.spm.size)
    mem.spm[900:912] = np.array([1, 3, 2], np.int32).view(np.uint8)  # the rq record: bias, mult, shift
    for i in instrs:
        execute(i, mem)
    return {k.__name__: len(k.signatures) for k in K.HOT_KERNELS}


def test_kernel_codes_match_the_isa():
    assert [d.code for d in DType] == [K.I8, K.U8, K.I16, K.I32, K.F16, K.BF16, K.F32]
    assert [int(d.size) for d in DType] == list(K.SIZE)
    assert all(getattr(K, o.name) == o for o in BinOp) and all(getattr(K, f.name) == f for f in Act)
    assert all(getattr(K, f"R_{r.name}") == r for r in Reduce)


def test_hot_kernels_compile_once():
    first = run(batch(1, DType.I8, DType.F16))
    assert all(n == 1 for n in first.values()), first
    later = run(batch(3, DType.U8, DType.BF16) + batch(2, DType.I8, DType.F32) + batch(4, DType.U8, DType.F16))
    assert later == first
