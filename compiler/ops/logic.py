"""Comparisons, logic and masks on the vector unit (:mod:`compiler.kernels.vector.logic`), bools held as u8 0/1:
Equal, Greater, Less, GreaterOrEqual, LessOrEqual, And, Or, Xor, Not, IsNaN with numpy broadcasting, Where with a
run-time condition (bit for bit; :func:`lower_where_runtime`, which :mod:`compiler.ops.layout`'s Where calls when
the condition is not a constant), and Trilu (an and with a constant triangular mask)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from compiler.errors import UnsupportedOpError
from compiler.frontend.canonical import CanonContext
from compiler.frontend.dtypes import npu_constant
from compiler.ir import Graph, Node
from compiler.kernels.vector import logic, streams
from compiler.ops.context import LoweringContext
from compiler.ops.elementwise import operands
from compiler.ops.spec import NUMBERS, OpSpec
from isa import BinOp, DType

COMPARE = {"Equal": "eq", "Greater": "gt", "Less": "lt", "GreaterOrEqual": "ge", "LessOrEqual": "le"}
LOGIC = {"And": "and", "Or": "or", "Xor": "xor"}

BOOL = frozenset({np.dtype(np.uint8)})
"""A bool as the NPU holds it."""
FLOATS = frozenset({np.dtype(np.float32), np.dtype(np.float16)})


def stored(low: LoweringContext, name: str) -> np.ndarray:
    """Constant ``name`` as the NPU holds it (:func:`compiler.frontend.dtypes.npu_constant`: a bool as uint8 0/1,
    int64 as int32, range-checked, float64 as float32)."""
    return npu_constant(name, low.data(name))


def _npu_type(low: LoweringContext, name: str) -> DType:
    """The NPU type of activation or constant ``name``."""
    return low.bind[name].dtype if not low.graph.is_const(name) else DType.from_numpy(stored(low, name).dtype)


def _in_layout(shape: tuple[int, ...], layout: str) -> tuple[int, ...]:
    return (shape[0], shape[2], shape[3], shape[1]) if layout == "nhwc" else tuple(shape)


def _emit(low: LoweringContext, n: Node, regions: str, dtype: DType, build) -> None:
    """Bind ``n``'s output (``dtype``) and emit ``build(shapes, out_shape)`` over inputs ``n.inputs`` named
    ``regions`` (in the layout :func:`compiler.ops.elementwise.operands` picks) and region Y."""
    out_shape = low.graph.tensor(n.outputs[0]).shape
    layout, locs, shapes = operands(low, n.inputs[:len(regions)], out_shape, lambda t: stored(low, t))
    y = low.alloc(out_shape, layout, dtype)
    low.emit(n, build(shapes, _in_layout(out_shape, layout)), {**dict(zip(regions, locs)), "Y": ("ACT", y.offset)})
    low.bind[n.outputs[0]] = y


def lower_compare(low: LoweringContext, n: Node) -> None:
    """``A op B`` into a bool, numpy broadcasting, in the inputs' type."""
    dtype = _npu_type(low, n.inputs[0])
    _emit(low, n, "AB", DType.U8, lambda s, out: logic.compare(COMPARE[n.op], s[0], s[1], dtype, low.target))


def lower_logic(low: LoweringContext, n: Node) -> None:
    """And, Or, Xor of bools, numpy broadcasting."""
    _emit(low, n, "AB", DType.U8, lambda s, out: logic.logical(LOGIC[n.op], s[0], s[1], low.target))


def lower_not(low: LoweringContext, n: Node) -> None:
    _emit(low, n, "X", DType.U8, lambda s, out: logic.logical_not(s[0], low.target))


def lower_isnan(low: LoweringContext, n: Node) -> None:
    dtype = _npu_type(low, n.inputs[0])
    _emit(low, n, "X", DType.U8, lambda s, out: logic.isnan(s[0], dtype, low.target))


def lower_where_runtime(low: LoweringContext, n: Node) -> None:
    """Where whose condition is computed at run time: per tile a mask from the bool, then a bit-for-bit select
    (:func:`compiler.kernels.vector.logic.where`); constant branches live in the weights."""
    dtype = _npu_type(low, next((t for t in n.inputs[1:3] if not low.graph.is_const(t)), n.inputs[1]))
    _emit(low, n, "CXZ", dtype, lambda s, out: logic.where(s[0], s[1], s[2], dtype, low.target))


def where_check(node: Node, graph: Graph) -> str | None:
    """A run-time condition must be a bool and the branches elements of 1, 2 or 4 bytes (every NPU type is)."""
    if graph.is_const(node.inputs[0]):
        return None
    if graph.tensor(node.inputs[0]).dtype != np.bool_:
        return f"the condition must be a bool tensor, not {graph.tensor(node.inputs[0]).dtype}"
    return None


# -- Trilu ----------------------------------------------------------------------------------------------------------

def _trilu(node: Node, ctx: CanonContext) -> Node:
    """``k`` (an optional constant scalar input, default 0) and ``upper`` (default 1) in ``attrs``."""
    k = ctx.const(node, 1, "k")
    if k is not None and np.asarray(k).size != 1:
        raise UnsupportedOpError(node.name, node.op, f"k must be a scalar, not shape {np.asarray(k).shape}")
    if len(ctx.shape(node.inputs[0])) < 2:
        raise UnsupportedOpError(node.name, node.op, "the input must have at least 2 dimensions")
    return dataclasses.replace(node, attrs={"k": 0 if k is None else int(np.asarray(k).reshape(())),
                                            "upper": int(node.attrs.get("upper", 1))})


def trilu_mask(rows: int, cols: int, k: int, upper: bool) -> np.ndarray:
    """Which elements of a ``rows x cols`` matrix Trilu keeps: ``j - i >= k`` (upper) or ``j - i <= k`` (lower)."""
    diag = np.arange(cols)[None, :] - np.arange(rows)[:, None]
    return diag >= k if upper else diag <= k


def lower_trilu(low: LoweringContext, n: Node) -> None:
    """``X and M`` on the integer view of the bytes, ``M`` all ones where the constant triangular mask keeps an
    element (broadcast over the leading dimensions, stored once in the weights): one vector instruction per tile,
    and what is cleared is +0 whatever it held (NaN included), as onnxruntime writes."""
    x = low.want(n.inputs[0], "rm")
    it = {1: DType.I8, 2: DType.I16, 4: DType.I32}[x.dtype.size]
    rows, cols = x.shape[-2:]
    mask = np.where(trilu_mask(rows, cols, n.attrs["k"], bool(n.attrs["upper"])), -1, 0).astype(it.storage)
    y = low.alloc(x.shape, "rm", x.dtype)
    prog = streams.binary(BinOp.AND, x.shape, mask.shape, it, low.target)
    low.emit(n, prog, {"A": ("ACT", x.offset), "B": ("W", low.const(mask)), "Y": ("ACT", y.offset)})
    low.bind[n.outputs[0]] = y


def _trilu_check(node: Node, graph: Graph) -> str | None:
    rows, cols = graph.tensor(node.inputs[0]).shape[-2:]
    if math.prod((rows, cols)) * 4 > 1 << 26:
        return f"a {rows} x {cols} mask is more than 64 MiB of weights"
    return None


OPS = (
    *(OpSpec(op, lower_compare, dtypes=NUMBERS | BOOL, const_operands=True,
             npu=f"vector unit, numpy broadcasting, into a bool (u8 0/1){note}")
      for op, note in (("Equal", ""), ("Greater", ""), ("Less", " (greater, operands swapped)"),
                       ("GreaterOrEqual", ": max(a, b) == a, false with NaN"),
                       ("LessOrEqual", ": min(a, b) == a, false with NaN"))),
    *(OpSpec(op, lower_logic, dtypes=BOOL, npu="vector unit, numpy broadcasting, bools as u8 0/1")
      for op in LOGIC),
    OpSpec("Not", lower_not, dtypes=BOOL, npu="vector unit: x xor 1"),
    OpSpec("IsNaN", lower_isnan, dtypes=FLOATS | BOOL, npu="vector unit: (x == x) xor 1, into a bool"),
    OpSpec("Trilu", lower_trilu, _trilu, _trilu_check, dtypes=NUMBERS, const_operands=True,
           npu="vector unit: one and per tile with a constant triangular mask (any k, upper or lower, batched)"),
)
