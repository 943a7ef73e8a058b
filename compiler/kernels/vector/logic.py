"""Comparisons, logic and selection on the vector unit, each one element-wise stream
(:func:`compiler.kernels.vector.streams.stream`) with numpy broadcasting: a comparison of two tensors into a bool
(``u8`` holding 0 or 1, the NPU's bool), And/Or/Xor/Not of bools, IsNaN, and Where with a run-time condition, bit for
bit. Tensors are row-major in DRAM."""

from __future__ import annotations

import math

import numpy as np

from compiler.errors import CompileError
from compiler.kernels.common.pipeline import RingPipeline, vector_config
from compiler.kernels.common.target import Target
from compiler.kernels.vector.streams import Operand, Recipe, stream
from compiler.kernels.vector.strides import broadcast_strides, row_major
from isa import BinOp, DType, Program, Region, VecBinary

BOOL = DType.U8
"""How the NPU holds a bool: one byte, 0 or 1."""

COMPARISONS = ("eq", "gt", "lt", "ge", "le")
LOGIC = {"and": BinOp.AND, "or": BinOp.OR, "xor": BinOp.XOR}


def _bin(op: BinOp, s, dst, a, b=None, imm=0):
    return VecBinary(op=op, shape=s, dst=dst, src0=a, src1=b, imm=imm)


def _compare_recipe(op: str) -> Recipe:
    """``a op b`` into 0/1: eq and gt are one instruction, lt is gt with the operands swapped; ge is
    ``max(a, b) == a`` and le ``min(a, b) == a`` (false when either is NaN, as a >= b is; max and min keep the first
    input on ties, so -0.0 >= +0.0 holds), the max or min in a scratch tile of the inputs' type."""
    def tile(y, xs, s):
        a, b = xs[0], xs[1]
        if op in ("eq", "gt", "lt"):
            return [_bin(BinOp.CMPEQ if op == "eq" else BinOp.CMPGT, s, y, *((b, a) if op == "lt" else (a, b)))]
        return [_bin(BinOp.MAX if op == "ge" else BinOp.MIN, s, xs[2], a, b), _bin(BinOp.CMPEQ, s, y, xs[2], a)]
    return tile


def _program(pipe: RingPipeline, target: Target, inputs: list[tuple[str, tuple[int, ...], DType]],
             out: tuple[int, ...], out_dtype: DType) -> Program:
    regions = tuple(Region(name, k, max(1, math.prod(shape) * d.size)) for k, (name, shape, d) in enumerate(inputs))
    return pipe.program(vector_config(target.spm),
                        regions + (Region("Y", len(inputs), max(1, math.prod(out) * out_dtype.size)),))


def _stream(recipe: Recipe, inputs: list[tuple[str, tuple[int, ...], DType]], out_dtype: DType, target: Target,
            scratch: tuple[DType, ...] = ()) -> Program:
    """One stream of ``recipe`` over ``inputs`` (name, shape, type) broadcast together, into region Y."""
    out = _broadcast([shape for _, shape, _ in inputs])
    pipe = RingPipeline()
    stream(pipe, out, [Operand(name, broadcast_strides(shape, out)) for name, shape, _ in inputs],
           Operand("Y", row_major(out)), [d for _, _, d in inputs], out_dtype, target.spm, recipe, scratch)
    return _program(pipe, target, inputs, out, out_dtype)


def _broadcast(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*map(tuple, shapes)))
    except ValueError:
        raise CompileError(f"shapes {', '.join(map(str, shapes))} do not broadcast together") from None


def compare(op: str, a_shape: tuple[int, ...], b_shape: tuple[int, ...], dtype: DType, target: Target) -> Program:
    """``Y = A op B`` (op: eq, gt, lt, ge, le) with numpy broadcasting: A and B of ``dtype``, Y a bool (u8 0/1);
    regions A, B, Y. Floats compare as IEEE does (NaN is unequal to everything, -0.0 equals +0.0)."""
    if op not in COMPARISONS:
        raise CompileError(f"comparison {op!r}: one of {', '.join(COMPARISONS)}")
    scratch = (dtype,) if op in ("ge", "le") else ()
    return _stream(_compare_recipe(op), [("A", a_shape, dtype), ("B", b_shape, dtype)], BOOL, target, scratch)


def logical(op: str, a_shape: tuple[int, ...], b_shape: tuple[int, ...], target: Target) -> Program:
    """``Y = A op B`` (op: and, or, xor) of bools with numpy broadcasting; regions A, B, Y (u8 0/1)."""
    fn = LOGIC[op]
    return _stream(lambda y, xs, s: [_bin(fn, s, y, xs[0], xs[1])], [("A", a_shape, BOOL), ("B", b_shape, BOOL)],
                   BOOL, target)


def logical_not(shape: tuple[int, ...], target: Target) -> Program:
    """``Y = not X`` of a bool: ``x xor 1``; regions X, Y (u8 0/1)."""
    return _stream(lambda y, xs, s: [_bin(BinOp.XOR, s, y, xs[0], imm=1)], [("X", shape, BOOL)], BOOL, target)


def isnan(shape: tuple[int, ...], dtype: DType, target: Target) -> Program:
    """``Y = isnan(X)`` of a float tensor: ``(x == x) xor 1`` (only NaN is unequal to itself); regions X, Y (u8)."""
    return _stream(lambda y, xs, s: [_bin(BinOp.CMPEQ, s, y, xs[0], xs[0]), _bin(BinOp.XOR, s, y, y, imm=1)],
                   [("X", shape, dtype)], BOOL, target)


def where(c_shape: tuple[int, ...], x_shape: tuple[int, ...], z_shape: tuple[int, ...], dtype: DType,
          target: Target) -> Program:
    """``Y = C ? X : Z`` with numpy broadcasting, C a bool (u8 0/1) and X, Z, Y of ``dtype``, bit for bit whatever
    the values (NaN or inf in the branch not taken cannot leak): per tile the mask ``M = C * -1`` (all ones where C
    holds) in the integer type of the elements' size, then ``Z ^ ((X ^ Z) & M)`` on the integer view of the bytes;
    regions C, X, Z, Y."""
    it = {1: DType.I8, 2: DType.I16, 4: DType.I32}.get(dtype.size)
    if it is None:
        raise CompileError(f"Where selects elements of 1, 2 or 4 bytes, not {dtype.text}")

    def tile(y, xs, s):
        c, x, z, m = xs
        return [_bin(BinOp.MUL, s, m, c, imm=-1), _bin(BinOp.XOR, s, y, x, z), _bin(BinOp.AND, s, y, y, m),
                _bin(BinOp.XOR, s, y, y, z)]

    return _stream(tile, [("C", c_shape, BOOL), ("X", x_shape, it), ("Z", z_shape, it)], it, target, (it,))
