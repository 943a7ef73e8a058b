"""QuantizeLinear, DequantizeLinear and the requantization of int32 accumulators, each one element-wise stream
(:func:`compiler.kernels.vector.streams.stream`), rounding as onnxruntime does."""

from __future__ import annotations

import math

from compiler.kernels.common.pipeline import RingPipeline, vector_config
from compiler.kernels.common.target import Target
from compiler.kernels.vector.streams import Operand, stream
from compiler.kernels.vector.strides import row_major
from isa import BinOp, DType, Region, VecBinary, VecConvert, View

F32 = DType.F32


def quantize(shape: tuple[int, ...], out: DType, scale: float, zp: int, target: Target):
    """QuantizeLinear ``Y = saturate(round_half_even(X / scale) + zp)``, f32 X to integer ``out``; regions X, Y.

    A true f32 division (onnxruntime divides; a multiply by 1/scale rounds differently), done in place in the input
    tile, then vpu.cvt rounds, adds the zero point and saturates."""
    spm = target.spm
    pipe = RingPipeline()

    def compute(dst, srcs, s):
        return [VecBinary(op=BinOp.DIV, shape=s, dst=srcs[0], src0=srcs[0], imm=scale),
                VecConvert(shape=s, dst=dst, src=srcs[0], zp_out=zp)]

    stream(pipe, tuple(shape), [Operand("X", row_major(shape))], Operand("Y", row_major(shape)), [F32], out, spm,
           compute)
    n = math.prod(shape)
    return pipe.program(vector_config(spm), (Region("X", 0, n * 4), Region("Y", 1, n * out.size)))


def dequantize(shape: tuple[int, ...], src: DType, scale: float, zp: int, target: Target):
    """DequantizeLinear ``Y = f32(X - zp) * scale`` (one vpu.cvt; the difference is exact in f32); regions X, Y."""
    spm = target.spm
    pipe = RingPipeline()
    stream(pipe, tuple(shape), [Operand("X", row_major(shape))], Operand("Y", row_major(shape)), [src], F32, spm,
           lambda dst, srcs, s: [VecConvert(shape=s, dst=dst, src=srcs[0], scale=scale, zp_in=zp)])
    n = math.prod(shape)
    return pipe.program(vector_config(spm), (Region("X", 0, n * src.size), Region("Y", 1, n * 4)))


def requantize(M: int, N: int, out: DType, zp: int, target: Target):
    """``Y = saturate(round_half_even(f32(C + Bias) * Scale) + zp)`` over ``[M][N]``: i32 C, per-column i32 Bias and
    f32 Scale (N elements each), integer ``out`` Y; regions C, Bias, Scale, Y (onnxruntime's requantization)."""
    spm = target.spm
    pipe = RingPipeline()

    def compute(dst, srcs, s):
        c, bias, scale = srcs
        f = View(c.space, c.base, F32, c.strides)
        return [VecBinary(op=BinOp.ADD, shape=s, dst=c, src0=c, src1=bias), VecConvert(shape=s, dst=f, src=c),
                VecBinary(op=BinOp.MUL, shape=s, dst=f, src0=f, src1=scale),
                VecConvert(shape=s, dst=dst, src=f, zp_out=zp)]

    col = (0, 1)
    stream(pipe, (M, N), [Operand("C", (N, 1)), Operand("Bias", col), Operand("Scale", col)], Operand("Y", (N, 1)),
           [DType.I32, DType.I32, F32], out, spm, compute)
    return pipe.program(vector_config(spm), (Region("C", 0, M * N * 4), Region("Bias", 1, N * 4),
                                             Region("Scale", 2, N * 4), Region("Y", 3, M * N * out.size)))
