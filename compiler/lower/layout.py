"""Layout ops: Transpose (vector unit), Concat, Slice and Pad (the DMA alone, :func:`compiler.staged_copy.staged_copy`)
and the reshapes that cost nothing (Reshape, Flatten; Squeeze and Unsqueeze become Reshape on import).

They work on row-major (``rm``) tensors and keep a 4-D channels-last (``nhwc``) tensor in that layout, mapping the
logical axes to physical ones (so a channel Concat of NHWC tensors copies each input into its channel range of every
pixel).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from isa import DType, Region
from isa.program import MAX_REGIONS

from .. import vector
from ..canonical import CanonContext, axis_attr, const_inputs, norm_axis
from ..errors import CompileError, UnsupportedOpError
from ..ir import Graph, Node
from ..staged_copy import Box, Operand, collapse_box, staged_copy
from ..vector import row_major
from .context import Binding, LoweringContext
from .spec import F32_INT8, OpSpec

F32 = DType.F32
NHWC_PERM = (0, 2, 3, 1)
"""Physical dimension i of an ``nhwc`` binding is logical dimension ``NHWC_PERM[i]``."""


def _layout(low: LoweringContext, name: str) -> str:
    """The layout an op that can work in either keeps ``name`` in: nhwc for a 4-D nhwc tensor, else rm."""
    b = low.bind[name]
    return "nhwc" if b.layout == "nhwc" and len(b.shape) == 4 else "rm"


def _perm(layout: str, rank: int) -> tuple[int, ...]:
    return NHWC_PERM if layout == "nhwc" else tuple(range(rank))


def _nbytes(shape: tuple[int, ...], dtype: DType = F32) -> int:
    return max(1, math.prod(shape) * dtype.size)


def _const_ints(low: LoweringContext, n: Node, index: int, what: str) -> list[int] | None:
    """Constant integer input ``index`` of node ``n`` as a list (None when absent); refuses a computed one."""
    if index >= len(n.inputs) or not n.inputs[index]:
        return None
    if not low.graph.is_const(n.inputs[index]):
        raise UnsupportedOpError(n.name, n.op, f"{what} must be a constant (computed {what} are not supported)")
    return [int(v) for v in np.asarray(low.data(n.inputs[index])).ravel().tolist()]


def lower_concat(low: LoweringContext, n: Node) -> None:
    """Concat along any axis: each input is copied by the DMA into its slice of the output. A 4-D output is kept
    nhwc when any (non-constant) input is, else row-major; constant inputs are stored in the weights."""
    g = low.graph
    out_shape = g.tensor(n.outputs[0]).shape
    rank = len(out_shape)
    axis = n.attrs.get("axis", 0) % max(rank, 1)
    acts = [t for t in n.present_inputs if not g.is_const(t)]
    layout = "nhwc" if rank == 4 and any(_layout(low, t) == "nhwc" for t in acts) else "rm"
    perm = _perm(layout, rank)
    phys_out, pax = tuple(out_shape[p] for p in perm), perm.index(axis)
    ystr = row_major(phys_out)
    y = low.alloc(out_shape, layout)
    items, off = [], 0
    for t in n.present_inputs:
        shape = g.tensor(t).shape
        pshape = tuple(shape[p] for p in perm)
        if math.prod(shape):
            if g.is_const(t):
                data = np.ascontiguousarray(low.data(t).astype(np.float32).transpose(perm))
                loc = ("W", low.const(data))
            else:
                loc = ("ACT", low.want(t, layout).offset)
            items.append((pshape, off * ystr[pax], loc))
        off += shape[axis]
    if off != out_shape[axis]:
        raise CompileError(f"node {n.name!r} (Concat): inputs add up to {off} along axis {axis}, not "
                           f"{out_shape[axis]}")
    per = MAX_REGIONS - 1
    chunks = [items[i:i + per] for i in range(0, len(items), per)]
    for ci, chunk in enumerate(chunks):
        boxes, bind = [], {"Y": ("ACT", y.offset)}
        regions = [Region("Y", 0, _nbytes(out_shape))]
        for i, (pshape, dst_off, loc) in enumerate(chunk):
            boxes.append(Box(pshape, Operand("Y", dst_off, ystr), Operand(f"X{i}", 0, row_major(pshape))))
            bind[f"X{i}"] = loc
            regions.append(Region(f"X{i}", i + 1, _nbytes(pshape)))
        low.emit(n, staged_copy(boxes, F32, tuple(regions), low.target), bind,
                 suffix=f".{ci}" if len(chunks) > 1 else "")
    low.bind[n.outputs[0]] = y


def _slice_params(low: LoweringContext, n: Node, shape: tuple[int, ...]) -> list[tuple[int, int, int]]:
    """(start, length, step) per logical axis, with ONNX's clamping of starts and ends."""
    rank = len(shape)
    starts = _const_ints(low, n, 1, "starts")
    if starts is None:  # opset < 10: attributes
        starts, ends = list(n.attrs.get("starts", ())), list(n.attrs.get("ends", ()))
        axes, steps = n.attrs.get("axes"), None
        axes = list(axes) if axes is not None else None
    else:
        ends, axes, steps = _const_ints(low, n, 2, "ends"), _const_ints(low, n, 3, "axes"), \
            _const_ints(low, n, 4, "steps")
    axes = list(range(len(starts))) if axes is None else [a % rank for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    if not len(starts) == len(ends) == len(axes) == len(steps) or 0 in steps or len(set(axes)) != len(axes):
        raise UnsupportedOpError(n.name, n.op, "starts, ends, axes and steps need one entry per distinct axis and "
                                 "nonzero steps")
    out = [(0, e, 1) for e in shape]
    for s, e, a, st in zip(starts, ends, axes, steps):
        r = range(shape[a])[slice(s, e, st)]
        out[a] = (r.start if len(r) else 0, len(r), st)
    return out


def lower_slice(low: LoweringContext, n: Node) -> None:
    """Slice with constant starts/ends/axes/steps (negative ones too): one strided DMA view of the input. A slice
    that is one contiguous range of the input's memory is a free alias of it."""
    g = low.graph
    layout = _layout(low, n.inputs[0])
    x = low.want(n.inputs[0], layout)
    params = _slice_params(low, n, x.shape)
    out_shape = tuple(length for _, length, _ in params)
    declared = g.tensor(n.outputs[0]).shape
    if out_shape != declared:
        raise CompileError(f"node {n.name!r} (Slice): computed shape {out_shape} differs from declared {declared}")
    perm = _perm(layout, len(out_shape))
    xstr = row_major(x.phys)
    phys = tuple(out_shape[p] for p in perm)
    src_off = sum(params[p][0] * s for p, s in zip(perm, xstr))
    src = Operand("X", src_off, tuple(s * params[p][2] for p, s in zip(perm, xstr)))
    if not math.prod(out_shape):
        low.bind[n.outputs[0]] = low.alloc(out_shape, layout)
        return
    box = collapse_box(Box(phys, Operand("Y", 0, row_major(phys)), src))
    if len(box.shape) == 1 and box.src.strides == (1,):  # a contiguous range: alias it
        low.bind[n.outputs[0]] = dataclasses.replace(x, offset=x.offset + src_off * x.dtype.size, shape=out_shape)
        return
    y = low.alloc(out_shape, layout)
    regions = (Region("X", 0, _nbytes(x.phys)), Region("Y", 1, _nbytes(phys)))
    low.emit(n, staged_copy([box], F32, regions, low.target), {"X": ("ACT", x.offset), "Y": ("ACT", y.offset)})
    low.bind[n.outputs[0]] = y


def lower_pad(low: LoweringContext, n: Node) -> None:
    """Pad, constant mode: the DMA pads on the fly while staging the input (at most 15 per side and dimension;
    wider padding is written as separate fills); negative pads crop."""
    g = low.graph
    layout = _layout(low, n.inputs[0])
    x = low.want(n.inputs[0], layout)
    rank = len(x.shape)
    pads = _const_ints(low, n, 1, "pads")
    if pads is None:
        pads = list(n.attrs.get("pads", ()))
    axes = _const_ints(low, n, 3, "axes")
    if axes is not None:
        full = [0] * (2 * rank)
        for j, a in enumerate(axes):
            full[a % rank], full[rank + a % rank] = pads[j], pads[len(axes) + j]
        pads = full
    if len(pads) != 2 * rank:
        raise UnsupportedOpError(n.name, n.op, f"pads needs {2 * rank} entries, not {len(pads)}")
    if len(n.inputs) > 2 and n.inputs[2]:
        if not g.is_const(n.inputs[2]):
            raise UnsupportedOpError(n.name, n.op, "constant_value must be a constant")
        value = float(np.asarray(low.data(n.inputs[2])).ravel()[0]) if low.data(n.inputs[2]).size else 0.0
    else:
        value = float(n.attrs.get("value", 0.0))
    out_shape, start, lohi = [], [], []
    for a, e in enumerate(x.shape):
        lo, hi = pads[a], pads[rank + a]
        xs = max(e - max(-lo, 0) - max(-hi, 0), 0)
        start.append(max(-lo, 0) if xs else 0)
        lohi.append((max(lo, 0), max(hi, 0)))
        out_shape.append(max(lo, 0) + xs + max(hi, 0))
    out_shape = tuple(out_shape)
    declared = g.tensor(n.outputs[0]).shape
    if out_shape != declared:
        raise CompileError(f"node {n.name!r} (Pad): computed shape {out_shape} differs from declared {declared}")
    y = low.alloc(out_shape, layout)
    low.bind[n.outputs[0]] = y
    if not math.prod(out_shape):
        return
    perm = _perm(layout, rank)
    xstr = row_major(x.phys)
    phys = tuple(out_shape[p] for p in perm)
    box = Box(phys, Operand("Y", 0, row_major(phys)), Operand("X", sum(start[p] * s for p, s in zip(perm, xstr)), xstr),
              tuple(lohi[p] for p in perm), value)
    regions = (Region("X", 0, _nbytes(x.phys)), Region("Y", 1, _nbytes(phys)))
    low.emit(n, staged_copy([box], F32, regions, low.target), {"X": ("ACT", x.offset), "Y": ("ACT", y.offset)})


def lower_transpose(low: LoweringContext, n: Node) -> None:
    """Transpose of a row-major tensor: the DMA reads tiles in the input's order, the vector unit permutes them."""
    x = low.want(n.inputs[0], "rm")
    perm = tuple(n.attrs.get("perm", tuple(reversed(range(len(x.shape))))))
    y = low.alloc(tuple(x.shape[p] for p in perm), "rm")
    low.emit(n, vector.permute(x.shape, perm, F32, low.target), {"X": ("ACT", x.offset), "Y": ("ACT", y.offset)})
    low.bind[n.outputs[0]] = y


def lower_alias(low: LoweringContext, n: Node) -> None:
    """A reshape: the output is the input's row-major bytes under another shape (an nhwc input is made rm first,
    unless it is 1x1 spatially, where both layouts are the same bytes)."""
    x = low.bind[n.inputs[0]]
    if x.layout == "nhwc" and math.prod(x.shape[2:]) != 1:
        x = low.want(n.inputs[0], "rm")
    low.bind[n.outputs[0]] = Binding(x.offset, low.graph.tensor(n.outputs[0]).shape, x.dtype, "rm")


# -- canonical forms -----------------------------------------------------------------------------------------------

def _reshape(node: Node, ctx: CanonContext) -> Node:
    ctx.const(node, 1, "shape")
    return dataclasses.replace(node, attrs={"allowzero": int(node.attrs.get("allowzero", 0))})


def _to_reshape(node: Node, ctx: CanonContext) -> Node:
    """Squeeze / Unsqueeze of an activation: a Reshape to the inferred shape."""
    target = np.asarray(ctx.shape(node.outputs[0]), np.int64)
    return Node(node.name, "Reshape", (node.inputs[0], ctx.add_const(f"{node.name}_shape", target)), node.outputs,
                {"allowzero": 0})


def _transpose(node: Node, ctx: CanonContext) -> Node:
    rank = len(ctx.shape(node.inputs[0]))
    return dataclasses.replace(node, attrs={"perm": tuple(node.attrs.get("perm") or range(rank - 1, -1, -1))})


def _pad(node: Node, ctx: CanonContext) -> Node:
    pads = ctx.const(node, 1, "pads")
    ctx.const(node, 2, "constant_value")
    axes = ctx.const(node, 3, "axes")
    mode = node.attrs.get("mode", "constant")
    inputs = node.inputs[:3]
    if axes is not None:  # opset 18: pads for the listed axes only
        rank = len(ctx.shape(node.inputs[0]))
        full = np.zeros(2 * rank, np.int64)
        for j, ax in enumerate(norm_axis(int(x), rank, node.name, node.op) for x in axes.tolist()):
            full[ax], full[rank + ax] = pads[j], pads[len(axes) + j]
        inputs = (inputs[0], ctx.add_const(f"{node.name}_pads", full)) + inputs[2:]
    return dataclasses.replace(node, inputs=tuple(inputs), attrs={"mode": mode})


def _pad_check(node: Node, graph: Graph) -> str | None:
    mode = node.attrs.get("mode", "constant")
    return None if mode == "constant" else f"only mode='constant' is supported, not {mode!r}"


_ALIAS = dict(lower=lower_alias, dtypes=F32_INT8, const_operands=True, npu="free: a new shape over the same bytes "
              "(a 4-D channels-last input is transposed first unless it is 1x1)")
OPS = (
    OpSpec("Reshape", canonical=_reshape, **_ALIAS),
    OpSpec("Flatten", canonical=axis_attr(1, inclusive=True), **_ALIAS),
    OpSpec("Squeeze", canonical=_to_reshape, **_ALIAS),
    OpSpec("Unsqueeze", canonical=_to_reshape, **_ALIAS),
    OpSpec("Transpose", lower_transpose, _transpose, npu="vector unit: tiles read in the input's order, permuted "
           "in SPM"),
    OpSpec("Concat", lower_concat, axis_attr(0), npu="DMA only: each input copied into its slice of the output"),
    OpSpec("Slice", lower_slice, const_inputs("starts", "ends", "axes", "steps"), const_operands=True,
           npu="DMA only (a strided view; a contiguous slice is free); constant starts, ends, axes, steps"),
    OpSpec("Pad", lower_pad, _pad, _pad_check, const_operands=True,
           npu="DMA only, mode 'constant' (the DMA pads on the fly); constant pads and value"),
)
