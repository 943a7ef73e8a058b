"""The IR's canonical attribute forms, in one place for the ONNX importer, the graph builder and the registry's
per-op canonicalisers: axes made non-negative, sliding-window attributes (kernel, strides, pads, dilations) with
``auto_pad`` resolved, window output sizes, and :class:`CanonContext`, what a canonicaliser sees of the graph.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from compiler.errors import CompileError, UnsupportedOpError
from compiler.ir import Graph, Node, Tensor

Error = Callable[[str, str, str], CompileError]
"""An error class taking (node, op, reason): :class:`UnsupportedOpError` or :class:`~compiler.errors.ShapeError`."""


def norm_axis(axis: int, rank: int, node: str, op: str, error: Error = UnsupportedOpError,
              inclusive: bool = False) -> int:
    """``axis`` made non-negative for a tensor of ``rank`` (``inclusive``: ``rank`` itself is allowed, as Flatten's
    axis); ``error(node, op, reason)`` when it is out of range."""
    hi = rank + 1 if inclusive else rank
    if not -hi <= axis < hi:
        raise error(node, op, f"axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def window_out(size: int, kernel: int, stride: int, pad_begin: int, pad_end: int, dilation: int = 1,
               ceil: bool = False) -> int:
    """Output length of a sliding window (conv or pool) over ``size`` elements padded by ``pad_begin``/``pad_end``.

    With ``ceil`` (pooling's ceil_mode) a last window that would start in the end padding is dropped, as
    onnxruntime and PyTorch do (ONNX's shape inference keeps it).
    """
    span = size + pad_begin + pad_end - dilation * (kernel - 1) - 1
    out = (-(-span // stride) if ceil else span // stride) + 1
    return out - 1 if ceil and (out - 1) * stride >= size + pad_begin else out


def window_attrs(node: Node, spatial: int, kernel: Sequence[int], attrs: dict[str, Any],
                 sizes: Sequence[int] | None = None) -> dict[str, Any]:
    """``kernel_shape``, ``strides``, ``pads`` (``(begin..., end...)``) and ``dilations`` of a conv or pool over
    ``spatial`` dims of input ``sizes``, defaults filled in and ``auto_pad`` resolved to explicit pads.

    SAME_UPPER / SAME_LOWER pad so that ``out = ceil(size / stride)``: ``total = max(0, (out - 1) * stride +
    (kernel - 1) * dilation + 1 - size)`` split in half, the odd one at the end (UPPER) or the beginning (LOWER),
    as ONNX defines it; VALID is no padding."""
    auto = attrs.get("auto_pad", "NOTSET")
    if isinstance(auto, bytes):
        auto = auto.decode()
    if auto not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise UnsupportedOpError(node.name, node.op, f"attribute auto_pad={auto!r} is not valid")
    k = spatial
    out = {"kernel_shape": tuple(attrs.get("kernel_shape") or kernel),
           "strides": tuple(attrs.get("strides") or (1,) * k),
           "pads": (0,) * 2 * k if auto == "VALID" else tuple(attrs.get("pads") or (0,) * 2 * k),
           "dilations": tuple(attrs.get("dilations") or (1,) * k)}
    if auto.startswith("SAME"):
        if sizes is None:
            raise UnsupportedOpError(node.name, node.op, f"auto_pad={auto!r} needs the input's spatial sizes")
        begin, end = [], []
        for size, kern, stride, dil in zip(sizes, out["kernel_shape"], out["strides"], out["dilations"]):
            total = max(0, (-(-size // stride) - 1) * stride + (kern - 1) * dil + 1 - size)
            small = total // 2
            begin.append(small if auto == "SAME_UPPER" else total - small)
            end.append(total - begin[-1])
        out["pads"] = (*begin, *end)
    return out


class CanonContext:
    """What a canonicaliser sees: the graph's tensors (to which it may add constants) and its uses."""

    def __init__(self, graph: Graph):
        self.graph, self.tensors = graph, dict(graph.tensors)

    def shape(self, name: str) -> tuple[int, ...]:
        return self.tensors[name].shape

    def const(self, node: Node, index: int, what: str) -> np.ndarray | None:
        """The constant value of input ``index`` (None if absent); UnsupportedOpError if it is not constant."""
        if index >= len(node.inputs) or not node.inputs[index]:
            return None
        t = self.tensors[node.inputs[index]]
        if not t.is_const:
            raise UnsupportedOpError(node.name, node.op, f"input {index} ({what}, {t.name!r}) must be a constant "
                                     f"(it does not fold to one)")
        return t.data

    def add_const(self, name: str, value: np.ndarray) -> str:
        """A new constant tensor named ``name`` (suffixed with ``_`` until unique); its name."""
        while name in self.tensors:
            name += "_"
        self.tensors[name] = Tensor.const(name, value)
        return name

    def drop_extra_outputs(self, node: Node, what: str) -> tuple[str, ...]:
        """``node``'s first output alone; UnsupportedOpError if another output is used."""
        for o in node.outputs[1:]:
            if o and (self.graph.consumers(o) or o in self.graph.outputs):
                raise UnsupportedOpError(node.name, node.op, f"only the first output is supported; {what} "
                                         f"({o!r}) is used")
        return node.outputs[:1]


def const_inputs(*what: str) -> Callable[[Node, CanonContext], Node]:
    """Canonicaliser for ops whose inputs after the first must be constants (attributes kept as they are)."""
    def canon(node: Node, ctx: CanonContext) -> Node:
        for i, w in enumerate(what, 1):
            ctx.const(node, i, w)
        return node
    return canon


def axis_attr(default: int, inclusive: bool = False) -> Callable[[Node, CanonContext], Node]:
    """Canonicaliser for ops whose only attribute is an ``axis`` (default ``default``), made non-negative."""
    def canon(node: Node, ctx: CanonContext) -> Node:
        rank = len(ctx.shape(node.inputs[0]))
        axis = norm_axis(int(node.attrs.get("axis", default)), rank, node.name, node.op, inclusive=inclusive)
        return replace(node, attrs={"axis": axis})
    return canon
