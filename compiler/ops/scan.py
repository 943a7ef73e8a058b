"""CumSum on the vector unit: a sequential scan in onnxruntime's order along any axis, exclusive and reverse, in the
tensor's own type (:mod:`compiler.kernels.vector.scan`)."""

from __future__ import annotations

import dataclasses

import numpy as np

from compiler.errors import UnsupportedOpError
from compiler.frontend.canonical import CanonContext, norm_axis
from compiler.ir import Node
from compiler.kernels.vector.scan import cumsum, cumsum_shape
from compiler.ops.context import LoweringContext
from compiler.ops.spec import OpSpec

SCAN_DTYPES = frozenset({np.dtype(np.float32), np.dtype(np.int32)})
"""What CumSum scans on the NPU (as the NPU holds it: an int64 tensor is int32 there)."""


def _cumsum(node: Node, ctx: CanonContext) -> Node:
    """The axis (a constant scalar input) made non-negative in ``attrs``, with ``exclusive`` and ``reverse``."""
    axis = ctx.const(node, 1, "the axis")
    if axis is None or np.asarray(axis).size != 1:
        raise UnsupportedOpError(node.name, node.op, "the axis must be a scalar")
    rank = len(ctx.shape(node.inputs[0]))
    return dataclasses.replace(node, attrs={"axis": norm_axis(int(np.asarray(axis).reshape(())), rank, node.name,
                                                              node.op),
                                            "exclusive": int(node.attrs.get("exclusive", 0)),
                                            "reverse": int(node.attrs.get("reverse", 0))})


def lower_cumsum(low: LoweringContext, n: Node) -> None:
    """One scan program over the row-major tensor seen as ``(pre, L, post)`` around the axis."""
    x = low.want(n.inputs[0], "rm")
    y = low.alloc(x.shape, "rm", x.dtype)
    a = n.attrs
    prog = cumsum(cumsum_shape(x.shape, a["axis"]), x.dtype, low.target, bool(a["exclusive"]), bool(a["reverse"]))
    low.emit(n, prog, {"X": ("ACT", x.offset), "Y": ("ACT", y.offset)})
    low.bind[n.outputs[0]] = y


OPS = (
    OpSpec("CumSum", lower_cumsum, _cumsum, dtypes=SCAN_DTYPES, const_operands=True,
           npu="vector unit: a sequential scan in onnxruntime's order (bit for bit), any axis, exclusive, reverse; "
               "one instruction per position over a tile's cross-section; float32 and int32 (int64 held as int32)"),
)
