"""Cast on the vector unit, one element-wise stream: to a float (vpu.act.mov converts, rounding to nearest even), to
a bool (``x != 0``: ``(x == 0) xor 1``, so NaN is true and -0.0 false), and between integers with C's wrap-around
(``x & 0xFF`` for a byte, ``((x & 0xFF) ^ 0x80) - 0x80`` for a signed one), as onnxruntime casts."""

from __future__ import annotations

import math
from dataclasses import dataclass

from compiler.kernels.common.pipeline import RingPipeline, vector_config
from compiler.kernels.common.target import Target
from compiler.kernels.vector.streams import Operand, stream
from compiler.kernels.vector.strides import row_major
from isa import Act, BinOp, DType, Region, VecBinary, VecUnary


@dataclass(frozen=True)
class Conversion:
    """What a cast computes on the NPU's storage types: ``src`` to ``dst``; ``to_bool``: ``x != 0``; ``bits``:
    wrap an integer to that many bits (``signed``) first (0: no wrap, a plain conversion)."""

    src: DType
    dst: DType
    to_bool: bool = False
    bits: int = 0
    signed: bool = False


def _ops(c: Conversion, y, x, scratch, s) -> list:
    if c.to_bool:
        return [VecBinary(op=BinOp.CMPEQ, shape=s, dst=y, src0=x, imm=0),
                VecBinary(op=BinOp.XOR, shape=s, dst=y, src0=y, imm=1)]
    if not c.bits:
        return [VecUnary(fn=Act.MOV, shape=s, dst=y, src=x)]
    mask = (1 << c.bits) - 1
    if not c.signed:
        return [VecBinary(op=BinOp.AND, shape=s, dst=y, src0=x, imm=mask)]
    half = 1 << (c.bits - 1)
    return [VecBinary(op=BinOp.AND, shape=s, dst=scratch, src0=x, imm=mask),
            VecBinary(op=BinOp.XOR, shape=s, dst=scratch, src0=scratch, imm=half),
            VecBinary(op=BinOp.SUB, shape=s, dst=y, src0=scratch, imm=half)]


def cast(shape: tuple[int, ...], c: Conversion, target: Target):
    """``Y = cast(X)`` as ``c`` says, row-major; regions X (``c.src``), Y (``c.dst``)."""
    pipe = RingPipeline()
    scratch = (DType.I32,) if c.bits and c.signed else ()
    stream(pipe, tuple(shape), [Operand("X", row_major(shape))], Operand("Y", row_major(shape)), [c.src], c.dst,
           target.spm, lambda y, xs, s: _ops(c, y, xs[0], xs[1] if scratch else None, s), scratch)
    n = max(1, math.prod(shape))
    return pipe.program(vector_config(target.spm), (Region("X", 0, n * c.src.size), Region("Y", 1, n * c.dst.size)))
