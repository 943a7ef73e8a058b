"""Cast on the vector unit (:mod:`compiler.kernels.vector.cast`): to a float, to a bool, and between integers with
onnxruntime's wrap-around, on the types as the NPU holds them (int64 as int32, bool as u8); a cast to the type a
tensor has is an Identity. Float to integer (truncation toward zero, undefined out of range) stays on the host."""

from __future__ import annotations

import numpy as np

from compiler.errors import CompileError
from compiler.frontend.canonical import CanonContext
from compiler.frontend.dtypes import npu_dtype
from compiler.ir import Graph, Node
from compiler.kernels.vector.cast import Conversion, cast
from compiler.ops.context import LoweringContext
from compiler.ops.spec import OpSpec
from isa import DType

WRAPPED = {np.dtype(np.int8): (8, True), np.dtype(np.uint8): (8, False), np.dtype(np.int16): (16, True),
           np.dtype(np.uint16): (16, False)}
"""The integer types narrower than the NPU's int32 that a cast wraps into: (bits, signed)."""


def conversion(src: np.dtype, dst: np.dtype) -> Conversion | str:
    """What casting graph type ``src`` to ``dst`` computes on the NPU, or why it does not run there."""
    src, dst = np.dtype(src), np.dtype(dst)
    try:
        s, d = npu_dtype(src), npu_dtype(dst)
    except CompileError as e:   # (a type with no NPU storage)
        return str(e)
    if s is DType.BF16 or d is DType.BF16:
        return "bfloat16 casts run on the host"
    if dst == np.bool_:
        return Conversion(s, DType.U8, to_bool=True)
    if dst.kind == "f":
        return Conversion(s, d)
    if src.kind == "f":
        return "a float to integer cast (truncation toward zero) runs on the host"
    if dst in WRAPPED and src != np.bool_ and not _fits(src, dst):
        bits, signed = WRAPPED[dst]
        return Conversion(s, d, bits=bits, signed=signed)
    if dst.kind == "u" and dst.itemsize >= 4 and src.kind == "i":
        return f"a cast of signed {src} to {dst} (negative values wrap beyond what the NPU holds) runs on the host"
    return Conversion(s, d)


def _fits(src: np.dtype, dst: np.dtype) -> bool:
    """Whether every value of integer type ``src`` is one of ``dst`` (no wrap needed)."""
    return np.iinfo(dst).min <= np.iinfo(src).min and np.iinfo(src).max <= np.iinfo(dst).max


def _cast(node: Node, ctx: CanonContext) -> Node:
    """A Cast to the type it already has is an Identity."""
    if ctx.tensors[node.inputs[0]].dtype == ctx.tensors[node.outputs[0]].dtype:
        return Node(node.name, "Identity", node.inputs[:1], node.outputs)
    return node


def _check(node: Node, graph: Graph) -> str | None:
    c = conversion(graph.tensor(node.inputs[0]).dtype, graph.tensor(node.outputs[0]).dtype)
    return c if isinstance(c, str) else None


def lower_cast(low: LoweringContext, n: Node) -> None:
    """One stream over the tensor in its layout."""
    g = low.graph
    c = conversion(g.tensor(n.inputs[0]).dtype, g.tensor(n.outputs[0]).dtype)
    x = low.bind[n.inputs[0]]
    y = low.alloc(x.shape, x.layout, c.dst)
    low.emit(n, cast(x.phys, c, low.target), {"X": ("ACT", x.offset), "Y": ("ACT", y.offset)})
    low.bind[n.outputs[0]] = y


OPS = (
    OpSpec("Cast", lower_cast, _cast, _check, dtypes=None,
           npu="vector unit: to a float (rounding to nearest even), to a bool (x != 0), between integers with "
               "wrap-around; a cast to its own type is an Identity; float to integer on the host"),
)
