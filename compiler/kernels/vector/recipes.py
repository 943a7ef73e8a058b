"""Element-wise recipes: the few vector instructions per tile of an op that is no single instruction (LeakyRelu,
PRelu, Elu/Selu, HardSigmoid/HardSwish, Swish, Softplus, Mish, Pow, Sum/Min/Max/Mean, a per-channel affine), run
as one stream by :func:`compiler.kernels.vector.streams.pointwise`."""

from __future__ import annotations

import numpy as np

from compiler.errors import CompileError
from compiler.kernels.vector.streams import Recipe
from isa import Act, BinOp, VecBinary, VecConvert, VecUnary, View


def _bin(op: BinOp, s, dst: View, a: View, b: View | None = None, imm: float = 0.0, **kw) -> VecBinary:
    return VecBinary(op=op, shape=s, dst=dst, src0=a, src1=b, imm=imm, **kw)


def _act(fn: Act, s, dst: View, src: View, **kw) -> VecUnary:
    return VecUnary(fn=fn, shape=s, dst=dst, src=src, **kw)


def leaky_relu(alpha: float) -> Recipe:
    """``x >= 0 ? x : alpha * x``: max(x, alpha x) for alpha in [0, 1], min for alpha > 1, else relu(x) +
    relu(alpha x) (exact in every case)."""
    def tile(y, xs, s):
        x = xs[0]
        if alpha >= 0:
            return [_bin(BinOp.MUL, s, y, x, imm=alpha), _bin(BinOp.MAX if alpha <= 1 else BinOp.MIN, s, y, x, y)]
        return [_bin(BinOp.MUL, s, y, x, imm=alpha, act=Act.RELU), _act(Act.RELU, s, x, x), _bin(BinOp.ADD, s, y, x, y)]
    return tile


def prelu(slopes: str) -> Recipe:
    """``x >= 0 ? x : slope * x`` with the slope the second input: max(x, slope x) when every slope is in [0, 1]
    (``slopes="unit"``), min when every slope is >= 1 (``"steep"``), else relu(x) + slope min(x, 0) (``"any"``)."""
    def tile(y, xs, s):
        x, a = xs
        if slopes != "any":
            return [_bin(BinOp.MUL, s, y, x, a), _bin(BinOp.MAX if slopes == "unit" else BinOp.MIN, s, y, x, y)]
        return [_bin(BinOp.MIN, s, y, x, imm=0.0), _bin(BinOp.MUL, s, y, y, a), _act(Act.RELU, s, x, x),
                _bin(BinOp.ADD, s, y, x, y)]
    return tile


def elu(alpha: float, gamma: float | None = None) -> Recipe:
    """Elu ``x > 0 ? x : alpha (exp(x) - 1)`` as relu(x) + alpha (exp(min(x, 0)) - 1), the last two steps one
    vpu.cvt; Selu multiplies that by ``gamma``."""
    def tile(y, xs, s):
        x = xs[0]
        out = [_bin(BinOp.MIN, s, y, x, imm=0.0), _act(Act.EXP, s, y, y),
               VecConvert(shape=s, dst=y, src=y, scale=alpha, zp_in=1),   # (e - 1) * alpha
               _act(Act.RELU, s, x, x), _bin(BinOp.ADD, s, y, x, y)]
        return out + ([_bin(BinOp.MUL, s, y, y, imm=gamma)] if gamma is not None else [])
    return tile


def hard_sigmoid(alpha: float, beta: float, times_x: bool = False) -> Recipe:
    """``clamp(alpha x + beta, 0, 1)`` (the clamp fused into the add); ``times_x``: multiplied by x (HardSwish)."""
    def tile(y, xs, s):
        x = xs[0]
        out = [_bin(BinOp.MUL, s, y, x, imm=alpha), _bin(BinOp.ADD, s, y, y, imm=beta, act=Act.CLAMP, lo=0.0, hi=1.0)]
        return out + ([_bin(BinOp.MUL, s, y, x, y)] if times_x else [])
    return tile


def swish(alpha: float = 1.0) -> Recipe:
    """``x * sigmoid(alpha x)`` (SiLU for alpha = 1)."""
    def tile(y, xs, s):
        x = xs[0]
        scaled = [_bin(BinOp.MUL, s, y, x, imm=alpha)] if alpha != 1 else []
        return scaled + [_act(Act.SIGMOID, s, y, y if scaled else x), _bin(BinOp.MUL, s, y, x, y)]
    return tile


def softplus() -> Recipe:
    """``log(1 + exp(x))`` as relu(x) - log(sigmoid(|x|)), which cannot overflow (exp(x) is inf from x = 88.7)."""
    def tile(y, xs, s):
        x = xs[0]
        return [_act(Act.ABS, s, y, x), _act(Act.SIGMOID, s, y, y), _act(Act.LOG, s, y, y), _act(Act.RELU, s, x, x),
                _bin(BinOp.SUB, s, y, x, y)]
    return tile


def mish() -> Recipe:
    """``x * tanh(log(1 + exp(x)))`` (an overflowing exp gives log inf = inf, tanh 1: y = x, as it should)."""
    def tile(y, xs, s):
        x = xs[0]
        return [_act(Act.EXP, s, y, x), _bin(BinOp.ADD, s, y, y, imm=1.0), _act(Act.LOG, s, y, y),
                _act(Act.TANH, s, y, y), _bin(BinOp.MUL, s, y, x, y)]
    return tile


MAX_POW = 32
"""Largest integer part of a Pow exponent done by multiplication: n multiplications of f32 values lose up to about
n / 2 units in the last place."""


def power(e: float) -> Recipe:
    """``x ** e`` for a constant exponent ``e`` = n + f (n = trunc(e), |n| <= :data:`MAX_POW`): x^n by
    multiplication (x*x, x*x*x: onnxruntime's own products for 2 and 3), x^f by sqrt (0.5), rsqrt (-0.5) or
    exp(f log x); then x^n * x^f (a division for n < 0). A negative base with f != 0 gives NaN, as in onnxruntime."""
    n = int(e)
    f = float(np.float32(e)) - n
    if abs(n) > MAX_POW:
        raise CompileError(f"Pow exponent {e}: integer part beyond {MAX_POW}")
    bits = bin(abs(n))[2:]

    def tile(y, xs, s):
        x = xs[0]
        if f == 0:   # x^|n| left to right (square, times x per set bit), then 1/that for n < 0
            if n == 0:
                return [_act(Act.CLAMP, s, y, x, lo=1.0, hi=1.0)]
            out = [_act(Act.MOV, s, y, x)] if n in (1, -1) else []
            for k, bit in enumerate(bits[1:]):
                out.append(_bin(BinOp.MUL, s, y, x if k == 0 else y, x if k == 0 else y))
                if bit == "1":
                    out.append(_bin(BinOp.MUL, s, y, y, x))
            return out + ([_act(Act.RECIP, s, y, y)] if n < 0 else [])
        if f in (0.5, -0.5):
            out = [_act(Act.SQRT if f > 0 else Act.RSQRT, s, y, x)]
        else:
            out = [_act(Act.LOG, s, y, x), _bin(BinOp.MUL, s, y, y, imm=f), _act(Act.EXP, s, y, y)]
        op = BinOp.MUL if n > 0 else BinOp.DIV
        for k, bit in enumerate(reversed(bits) if n else ()):   # x^|n| right to left, squaring x in place
            if bit == "1":
                out.append(_bin(op, s, y, y, x))
            if k < len(bits) - 1:
                out.append(_bin(BinOp.MUL, s, x, x, x))
        return out
    return tile


def variadic(op: BinOp, count: int, mean: bool = False) -> Recipe:
    """``((x0 op x1) op x2) ...`` over ``count`` inputs (Sum, Min, Max); ``mean``: the sum times 1/count, as
    onnxruntime's Mean."""
    def tile(y, xs, s):
        out = [_bin(op, s, y, xs[0], xs[1])] if count > 1 else [_act(Act.MOV, s, y, xs[0])]
        out += [_bin(op, s, y, y, x) for x in xs[2:]]
        return out + ([_bin(BinOp.MUL, s, y, y, imm=1.0 / count)] if mean and count > 1 else [])
    return tile


def affine() -> Recipe:
    """``x * scale + shift`` with scale and shift the second and third inputs (a BatchNormalization's per-channel
    ``gamma / sqrt(var + eps)`` and ``beta - mean * that``, onnxruntime's own two steps)."""
    def tile(y, xs, s):
        x, a, b = xs
        return [_bin(BinOp.MUL, s, y, x, a), _bin(BinOp.ADD, s, y, y, b)]
    return tile
