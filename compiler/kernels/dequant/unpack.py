"""The vector unit's work on weight tiles (column-block-major, :mod:`compiler.kernels.dequant.plan`): unpacking 4-bit
codes into one byte each, and (``vector`` scheme) dequantizing codes into the f32 weights of an ``mxu.mm``.

Unpacking works on 32-bit words when the array's columns allow it (a multiple of 8): a word of packed bytes holds the
low nibbles of four codes and the high nibbles of four others, ``w & 0x0F0F0F0F`` gives the first four one byte each
and ``(w >> 4) & 0x0F0F0F0F`` the other four (the arithmetic shift's sign bits are masked off), three instructions
per eight codes; otherwise ``and 0x0F`` and ``shr 4`` on bytes, two per two codes.

fp8 E4M3 bytes: ``vpu.cvt`` i8 -> i32 (sign-extended), ``vpu.shl`` 20 and ``vpu.and 0x87FFFFFF`` put sign,
exponent and mantissa into an f32 whose exponent is biased by 120 too little, ``vpu.mul 2**120`` rescales it exactly
(subnormals included), then ``vpu.mul`` by the scale. NaN codes are refused before (a weight has none)."""

from __future__ import annotations

from compiler.kernels.dequant.plan import DequantPlan, up
from isa import BinOp, DType, Space, VecBinary, VecConvert, View

F32, U8, I32 = DType.F32, DType.U8, DType.I32
FP8_RESCALE = float(2.0 ** 120)
"""2**(127 - 7): the f32 exponent bias less E4M3's."""
LOW_NIBBLES = 0x0F0F0F0F


def unpack_nibbles(p: DequantPlan, qb: int, ub: int) -> list:
    """The instructions writing one byte per code ``[nb][tk][cols]`` at ``ub`` from the packed tile at ``qb``."""
    c, tk, nbm = p.target.cols, p.t.tk, p.nbm
    half = c // 2
    if c % 8 == 0:
        shape, dt, mask = (nbm, tk, c // 8), I32, LOW_NIBBLES
        strides, out = (tk * half, half, 4), (tk * c, c, 4)
    else:
        shape, dt, mask = (nbm, tk, half), U8, 0x0F
        strides, out = (tk * half, half, 1), (tk * c, c, 1)
    packed = View(Space.SPM, qb, dt, strides)
    lo, hi = View(Space.SPM, ub, dt, out), View(Space.SPM, ub + half, dt, out)
    ops = [VecBinary(op=BinOp.AND, shape=shape, dst=lo, src0=packed, imm=mask),
           VecBinary(op=BinOp.SHR, shape=shape, dst=hi, src0=packed, imm=4)]
    return ops + ([VecBinary(op=BinOp.AND, shape=shape, dst=hi, src0=hi, imm=mask)] if dt is I32 else [])


def weight_view(p: DequantPlan, base: int, dtype: DType) -> View:
    """A ``[nb][tk][cols]`` tile at ``base`` as ``[nb][blk][bs][cols]`` (``dtype``-sized elements)."""
    c, es = p.target.cols, dtype.size
    return View(Space.SPM, base, dtype, (p.t.tk * c * es, p.bs * c * es, c * es, es))


def block_rows(p: DequantPlan, base: int) -> View:
    """A ``[nb][nblk][cols]`` f32 image at ``base`` broadcast over each block's rows, as ``[nb][blk][bs][cols]``."""
    c = p.target.cols
    return View(Space.SPM, base, F32, (p.nblk * c * 4, c * 4, 0, 4))


def to_f32(p: DequantPlan, qb: int, bb: int, nb: int) -> list:
    """``vector`` scheme: the instructions writing the first ``nb`` column blocks of the f32 weight slot at ``bb``
    from the q slot at ``qb`` (codes, scales, zero points) and, for 4-bit codes, the unpacked bytes (ring ``u``):
    ``(q - zp) * scale``, one f32 rounding as onnxruntime's."""
    fmt, shape = p.fmt, (nb, p.nblk, p.bs, p.target.cols)
    sb = qb + up(p.q_bytes, 64)
    scale, bf = block_rows(p, sb), weight_view(p, bb, F32)
    if fmt.kind == "fp8":
        bi = weight_view(p, bb, I32)
        return [VecConvert(shape=shape, dst=bi, src=weight_view(p, qb, DType.I8)),
                VecBinary(op=BinOp.SHL, shape=shape, dst=bi, src0=bi, imm=20),
                VecBinary(op=BinOp.AND, shape=shape, dst=bi, src0=bi, imm=0x87FFFFFF - 2**32),
                VecBinary(op=BinOp.MUL, shape=shape, dst=bf, src0=bf, imm=FP8_RESCALE),
                VecBinary(op=BinOp.MUL, shape=shape, dst=bf, src0=bf, src1=scale)]
    codes = weight_view(p, p.base["u"] if fmt.nibbles else qb, fmt.code_dtype)
    ops = [VecConvert(shape=shape, dst=bf, src=codes, zp_in=0 if fmt.per_block_zp else fmt.stored_zp)]
    if fmt.per_block_zp:
        ops.append(VecBinary(op=BinOp.SUB, shape=shape, dst=bf, src0=bf, src1=block_rows(p, sb + up(p.s_bytes, 64))))
    return ops + [VecBinary(op=BinOp.MUL, shape=shape, dst=bf, src0=bf, src1=scale)]
