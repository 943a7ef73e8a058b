"""Layout ops: Transpose (vector unit, :mod:`compiler.kernels.transpose`); Concat, Slice, Split, Pad, DepthToSpace,
SpaceToDepth, Expand, Tile, Gather and Where (the DMA alone, :func:`compiler.kernels.staged_copy.staged_copy`; Where
with many runs on the vector unit); and the reshapes that cost nothing (Reshape, Flatten; Squeeze and Unsqueeze become
Reshape on import).

They work on row-major (``rm``) tensors and keep a 4-D channels-last (``nhwc``) tensor in that layout, mapping the
logical axes to physical ones (so a channel Concat of NHWC tensors copies each input into its channel range of every
pixel). A DMA-only op is a list of boxes (a strided view of a source, or a fill, into a strided view of the output);
an output that is one contiguous range of its input (Slice, Split, Expand to the same shape) is a free alias.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np

from compiler.errors import CompileError, UnsupportedOpError
from compiler.frontend.canonical import CanonContext, axis_attr, const_inputs, norm_axis
from compiler.ir import Graph, Node
from compiler.kernels import transpose
from compiler.kernels.staged_copy import Box, Operand, collapse_box, staged_copy
from compiler.kernels.vector import streams
from compiler.kernels.vector.strides import row_major
from compiler.ops import host, index, logic
from compiler.ops.context import Binding, LoweringContext
from compiler.ops.spec import F32_INT8, NUMBERS, OpSpec
from isa import DType, Region
from isa.program import MAX_REGIONS

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


def _axis_strides(b: Binding) -> tuple[int, ...]:
    """Element stride in memory of each logical axis of ``b``."""
    out = [0] * len(b.shape)
    for i, s in zip(_perm(b.layout, len(b.shape)), row_major(b.phys)):
        out[i] = s
    return tuple(out)


def _emit_boxes(low: LoweringContext, n: Node, boxes: list[Box], operands: dict[str, tuple[tuple[str, int], int]],
                dtype: DType) -> None:
    """``boxes`` as staged-copy segments, as few as the regions a program may name allow; ``operands`` maps each
    region a box names to (where it lives: (ACT | W, offset), bytes)."""
    chunks: list[tuple[list[Box], list[str]]] = []
    for box in boxes:
        names = [r for r in dict.fromkeys((box.src.region if box.src else None, box.dst.region)) if r]
        if not chunks or len(set(chunks[-1][1]) | set(names)) > MAX_REGIONS:
            chunks.append(([], []))
        chunks[-1][0].append(box)
        chunks[-1][1].extend(r for r in names if r not in chunks[-1][1])
    for ci, (part, names) in enumerate(chunks):
        regions = tuple(Region(r, i, max(1, operands[r][1])) for i, r in enumerate(names))
        low.emit(n, staged_copy(part, dtype, regions, low.target), {r: operands[r][0] for r in names},
                 suffix=f".{ci}" if len(chunks) > 1 else "")


def _check_shape(n: Node, low: LoweringContext, shape: tuple[int, ...], index: int = 0) -> None:
    declared = low.graph.tensor(n.outputs[index]).shape
    if tuple(shape) != declared:
        raise CompileError(f"node {n.name!r} ({n.op}): computed shape {tuple(shape)} differs from declared {declared}")


def _copy(low: LoweringContext, n: Node, x: Binding, y: Binding, dims: list[tuple[int, int, int]],
          src_order: bool = False) -> None:
    """Y from X by one box: ``dims`` holds (extent, X's element stride, Y's element stride) per dimension of the
    copy (any order, strides 0 where X is broadcast); the box walks them in Y's memory order."""
    dims = sorted((d for d in dims if d[0] != 1), key=lambda d: -d[2]) or [(1, 0, 1)]
    box = Box(tuple(e for e, _, _ in dims), Operand("Y", 0, tuple(s for _, _, s in dims)),
              Operand("X", 0, tuple(s for _, s, _ in dims)), src_order=src_order)
    if math.prod(y.shape):
        _emit_boxes(low, n, [box], {"X": (("ACT", x.offset), x.nbytes), "Y": (("ACT", y.offset), y.nbytes)},
                    x.dtype)
    low.bind[n.outputs[0]] = y


def lower_constant_output(low: LoweringContext, name: str) -> None:
    """A graph output that is a constant (a model whose result folds, such as a Where of constants): the DMA copies
    its value from the weights (region W) into an activation the caller reads, as segment ``<name>.const``."""
    t = low.graph.tensor(name)
    y = low.alloc(t.shape, "rm", host.storage_dtype(t))
    data = np.ascontiguousarray(t.data, y.dtype.storage)
    if data.size:
        box = Box((data.size,), Operand("Y", 0, (1,)), Operand("X", 0, (1,)))
        _emit_boxes(low, Node(f"{name}.const", "Constant", (), (name,)), [box],
                    {"X": (("W", low.const(data)), data.nbytes), "Y": (("ACT", y.offset), y.nbytes)}, y.dtype)
    low.bind[name] = y


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


def _window(x: Binding, params: list[tuple[int, int, int]], region: str):
    """The part of ``x`` that (start, length, step) per logical axis selects, as (its shape, a free alias of it or
    None, the box copying it into a dense tensor of region ``region`` in ``x``'s layout)."""
    shape = tuple(length for _, length, _ in params)
    perm, xstr = _perm(x.layout, len(shape)), row_major(x.phys)
    phys = tuple(shape[p] for p in perm)
    src_off = sum(params[p][0] * s for p, s in zip(perm, xstr))
    box = collapse_box(Box(phys, Operand(region, 0, row_major(phys)),
                           Operand("X", src_off, tuple(s * params[p][2] for p, s in zip(perm, xstr)))))
    alias = None
    if len(box.shape) == 1 and box.src.strides == (1,) or not math.prod(shape):   # a contiguous range
        alias = dataclasses.replace(x, offset=x.offset + src_off * x.dtype.size, shape=shape)
    return shape, alias, box


def lower_slice(low: LoweringContext, n: Node) -> None:
    """Slice with constant starts/ends/axes/steps (negative ones too): one strided DMA view of the input. A slice
    that is one contiguous range of the input's memory is a free alias of it."""
    layout = _layout(low, n.inputs[0])
    x = low.want(n.inputs[0], layout)
    shape, alias, box = _window(x, _slice_params(low, n, x.shape), "Y")
    _check_shape(n, low, shape)
    if not math.prod(shape):
        low.bind[n.outputs[0]] = low.alloc(shape, layout)
        return
    if alias is not None:
        low.bind[n.outputs[0]] = alias
        return
    y = low.alloc(shape, layout)
    regions = (Region("X", 0, _nbytes(x.phys)), Region("Y", 1, _nbytes(y.phys)))
    low.emit(n, staged_copy([box], F32, regions, low.target), {"X": ("ACT", x.offset), "Y": ("ACT", y.offset)})
    low.bind[n.outputs[0]] = y


def lower_split(low: LoweringContext, n: Node) -> None:
    """Split along any axis into the given sizes: each part is a window of the input (a free alias where it is one
    contiguous range, as splitting the outermost axis); the others are copied by one DMA program."""
    layout = _layout(low, n.inputs[0])
    x = low.want(n.inputs[0], layout)
    axis, boxes, operands, start = n.attrs["axis"], [], {"X": (("ACT", x.offset), x.nbytes)}, 0
    for i, (out, size) in enumerate(zip(n.outputs, n.attrs["split"])):
        params = [(start, size, 1) if a == axis else (0, e, 1) for a, e in enumerate(x.shape)]
        start += size
        if not out:
            continue
        shape, alias, box = _window(x, params, f"Y{i}")
        _check_shape(n, low, shape, i)
        if alias is None:
            y = low.alloc(shape, layout, x.dtype)
            boxes.append(box)
            operands[f"Y{i}"] = (("ACT", y.offset), y.nbytes)
        low.bind[out] = alias or y
    if boxes:
        _emit_boxes(low, n, boxes, operands, x.dtype)


def _pad_values(low: LoweringContext, n: Node, rank: int) -> tuple[list[int], float]:
    """The pads (begin..., end...) and the constant value of a Pad node."""
    pads = _const_ints(low, n, 1, "pads")
    if pads is None:
        pads = list(n.attrs.get("pads", ()))
    if len(pads) != 2 * rank:
        raise UnsupportedOpError(n.name, n.op, f"pads needs {2 * rank} entries, not {len(pads)}")
    if len(n.inputs) > 2 and n.inputs[2]:
        if not low.graph.is_const(n.inputs[2]):
            raise UnsupportedOpError(n.name, n.op, "constant_value must be a constant")
        value = float(np.asarray(low.data(n.inputs[2])).ravel()[0]) if low.data(n.inputs[2]).size else 0.0
    else:
        value = float(n.attrs.get("value", 0.0))
    return pads, value


def _border(mode: str, lo: int, e: int, hi: int) -> list[tuple[int, int, int, int]]:
    """The parts of one padded axis of ``e`` source elements: (first output index, extent, first source index,
    source step): the middle copies, ``edge`` repeats the border element (step 0), ``reflect`` mirrors without it
    (step -1), ``wrap`` continues from the other end."""
    if mode == "edge":
        ends = [(0, lo, 0, 0), (lo + e, hi, e - 1, 0)]
    elif mode == "reflect":
        ends = [(0, lo, lo, -1), (lo + e, hi, e - 2, -1)]
    else:
        ends = [(0, lo, e - lo, 1), (lo + e, hi, 0, 1)]
    return [p for p in (ends[0], (lo, e, 0, 1), ends[1]) if p[1]]


def lower_pad(low: LoweringContext, n: Node) -> None:
    """Pad. Mode constant: the DMA pads on the fly while staging the input (at most 15 per side and dimension; wider
    padding is written as separate fills). Modes edge, reflect and wrap: one DMA box per combination of the parts of
    each axis (begin, middle, end), the borders read through stride-0 (edge) or negative-stride (reflect) views of the
    input. Negative pads crop first."""
    mode = n.attrs.get("mode", "constant")
    layout = _layout(low, n.inputs[0])
    x = low.want(n.inputs[0], layout)
    rank = len(x.shape)
    pads, value = _pad_values(low, n, rank)
    out_shape, start, lohi, kept = [], [], [], []
    for a, e in enumerate(x.shape):
        lo, hi = pads[a], pads[rank + a]
        xs = max(e - max(-lo, 0) - max(-hi, 0), 0)
        start.append(max(-lo, 0) if xs else 0)
        lohi.append((max(lo, 0), max(hi, 0)))
        kept.append(xs)
        out_shape.append(max(lo, 0) + xs + max(hi, 0))
    out_shape = tuple(out_shape)
    _check_shape(n, low, out_shape)
    y = low.alloc(out_shape, layout, x.dtype)
    low.bind[n.outputs[0]] = y
    if not math.prod(out_shape):
        return
    perm = _perm(layout, rank)
    xstr = row_major(x.phys)
    phys = tuple(out_shape[p] for p in perm)
    regions = (Region("X", 0, _nbytes(x.phys, x.dtype)), Region("Y", 1, _nbytes(phys, x.dtype)))
    bind = {"X": ("ACT", x.offset), "Y": ("ACT", y.offset)}
    if mode == "constant":
        box = Box(phys, Operand("Y", 0, row_major(phys)), Operand("X", sum(start[p] * s for p, s in zip(perm, xstr)),
                                                                   xstr), tuple(lohi[p] for p in perm), value)
        low.emit(n, staged_copy([box], x.dtype, regions, low.target), bind)
        return
    ystr = row_major(phys)
    boxes = []
    for parts in itertools.product(*(_border(mode, lohi[p][0], kept[p], lohi[p][1]) for p in perm)):
        boxes.append(Box(tuple(ext for _, ext, _, _ in parts),
                         Operand("Y", sum(o * s for (o, _, _, _), s in zip(parts, ystr)), ystr),
                         Operand("X", sum((start[p] + i) * s for p, (_, _, i, _), s in zip(perm, parts, xstr)),
                                 tuple(step * s for (_, _, _, step), s in zip(parts, xstr)))))
    low.emit(n, staged_copy(boxes, x.dtype, regions, low.target), bind)


def lower_depth_space(low: LoweringContext, n: Node) -> None:
    """DepthToSpace and SpaceToDepth (modes DCR, CRD): one DMA copy, no vector pass. The output keeps the input's
    layout; each of (n, c, h, block row, w, block column) is one dimension of the copy with its stride on both sides,
    and the load walks the input in its memory order (long runs), the store the output in its own."""
    layout = _layout(low, n.inputs[0])
    x = low.want(n.inputs[0], layout)
    b, (N, C, H, W) = n.attrs["blocksize"], x.shape
    if n.op == "DepthToSpace":
        c = C // (b * b)
        y = low.alloc((N, c, H * b, W * b), layout, x.dtype)
        xs, ys = _axis_strides(x), _axis_strides(y)
        cs = (1, b * c, c) if n.attrs["mode"] == "DCR" else (b * b, b, 1)   # input channel of (c, bh, bw)
        dims = [(N, xs[0], ys[0]), (c, cs[0] * xs[1], ys[1]), (H, xs[2], b * ys[2]), (b, cs[1] * xs[1], ys[2]),
                (W, xs[3], b * ys[3]), (b, cs[2] * xs[1], ys[3])]
    else:
        y = low.alloc((N, C * b * b, H // b, W // b), layout, x.dtype)
        xs, ys = _axis_strides(x), _axis_strides(y)
        cs = (1, b * C, C) if n.attrs["mode"] == "DCR" else (b * b, b, 1)   # output channel of (c, bh, bw)
        dims = [(N, xs[0], ys[0]), (C, xs[1], cs[0] * ys[1]), (H // b, b * xs[2], ys[2]), (b, xs[2], cs[1] * ys[1]),
                (W // b, b * xs[3], ys[3]), (b, xs[3], cs[2] * ys[1])]
    _check_shape(n, low, y.shape)
    _copy(low, n, x, y, dims, src_order=True)


def lower_expand(low: LoweringContext, n: Node) -> None:
    """Expand: one DMA copy reading the input through stride-0 views along the broadcast axes (each distinct element
    is loaded once per tile and repeated from SRAM); a 4-D channels-last input stays channels-last. An Expand to the
    input's own shape is a free alias."""
    shape = low.graph.tensor(n.outputs[0]).shape
    layout = _layout(low, n.inputs[0]) if len(shape) == len(low.bind[n.inputs[0]].shape) else "rm"
    x = low.want(n.inputs[0], layout)
    if x.shape == shape:
        low.bind[n.outputs[0]] = x
        return
    y = low.alloc(shape, layout, x.dtype)
    lead = len(shape) - len(x.shape)
    xs = (0,) * lead + tuple(0 if e == 1 else s for e, s in zip(x.shape, _axis_strides(x)))
    _copy(low, n, x, y, list(zip(shape, xs, _axis_strides(y))))


def lower_tile(low: LoweringContext, n: Node) -> None:
    """Tile: one DMA copy; each axis is two dimensions of the copy, the repeats (input stride 0: loaded once,
    repeated from SRAM) and the input's extent."""
    layout = _layout(low, n.inputs[0])
    x = low.want(n.inputs[0], layout)
    reps = _const_ints(low, n, 1, "repeats")
    y = low.alloc(tuple(e * r for e, r in zip(x.shape, reps)), layout, x.dtype)
    _check_shape(n, low, y.shape)
    dims = []
    for e, r, xs, ys in zip(x.shape, reps, _axis_strides(x), _axis_strides(y)):
        dims += [(r, 0, e * ys), (e, xs, ys)]
    _copy(low, n, x, y, dims)


def _runs(values: np.ndarray) -> list[tuple[int, int, int, int]]:
    """Maximal arithmetic runs of a 1-D integer array: (position, length, first value, step)."""
    out, k = [], 0
    while k < len(values):
        step = int(values[k + 1] - values[k]) if k + 1 < len(values) else 1
        j = k + 1
        while j < len(values) and values[j] - values[j - 1] == step:
            j += 1
        out.append((k, j - k, int(values[k]), step if j - k > 1 else 1))
        k = j
    return out


def lower_gather(low: LoweringContext, n: Node) -> None:
    """Gather with constant indices along any axis: each run of indices in arithmetic progression (consecutive,
    repeated or reversed ones) is one DMA box, a strided view of the input. A 4-D channels-last input with 1-D
    indices stays channels-last. Run-time indices: rows gathered by the DMA
    (:func:`compiler.ops.index.lower_gather_runtime`)."""
    if not low.graph.is_const(n.inputs[1]):
        return index.lower_gather_runtime(low, n)
    axis, idx = n.attrs["axis"], np.asarray(low.data(n.inputs[1])).astype(np.int64)
    layout = _layout(low, n.inputs[0]) if idx.ndim == 1 else "rm"
    x = low.want(n.inputs[0], layout)
    flat = np.where(idx < 0, idx + x.shape[axis], idx).ravel()
    view = x.shape[:axis] + (flat.size,) + x.shape[axis + 1:]       # the output with the indices flattened
    _check_shape(n, low, x.shape[:axis] + idx.shape + x.shape[axis + 1:])
    y = low.alloc(view, layout, x.dtype)
    low.bind[n.outputs[0]] = dataclasses.replace(y, shape=low.graph.tensor(n.outputs[0]).shape) \
        if idx.ndim != 1 else y
    if not math.prod(view):
        return
    perm, xs, ys = _perm(layout, len(view)), _axis_strides(x), _axis_strides(y)
    boxes = []
    for pos, length, first, step in _runs(flat):
        shape = [length if a == axis else e for a, e in enumerate(view)]
        boxes.append(Box(tuple(shape[p] for p in perm), Operand("Y", pos * ys[axis], tuple(ys[p] for p in perm)),
                         Operand("X", first * xs[axis], tuple(step * xs[p] if p == axis else xs[p] for p in perm))))
    _emit_boxes(low, n, boxes, {"X": (("ACT", x.offset), x.nbytes), "Y": (("ACT", y.offset), y.nbytes)}, x.dtype)


def _value_runs(line: np.ndarray) -> list[tuple[int, int]]:
    """(start, length) of each maximal run of equal values of a 1-D array."""
    cuts = np.flatnonzero(line[1:] != line[:-1]) + 1
    starts = np.concatenate(([0], cuts))
    return list(zip(starts.tolist(), np.diff(np.append(starts, len(line))).tolist()))


WHERE_MAX_COPIES = 16
"""A Where whose condition cuts the output into more runs than this selects on the vector unit (bit for bit) rather
than with one DMA box per run, each of which pays a DMA's setup and DRAM latency."""


def lower_where(low: LoweringContext, n: Node) -> None:
    """Where with a constant condition, exact whatever the values (NaN or inf in the branch not taken cannot leak).
    The output is cut into runs where the condition holds one value (along its innermost varying axis); up to
    :data:`WHERE_MAX_COPIES` runs, each is copied by the DMA from X or Y through broadcast views (the other branch is
    never read; a scalar constant branch is a fill), else the vector unit selects bit for bit
    (:func:`compiler.kernels.vector.streams.select`, the condition as a mask in the weights). Constant branches live in
    the weights; 4-D channels-last inputs keep that layout. A condition computed at run time selects on the vector
    unit (:func:`compiler.ops.logic.lower_where_runtime`)."""
    g = low.graph
    if not g.is_const(n.inputs[0]):
        return logic.lower_where_runtime(low, n)
    shape = g.tensor(n.outputs[0]).shape
    rank = len(shape)
    acts = [t for t in n.present_inputs[1:] if not g.is_const(t)]
    layout = "nhwc" if rank == 4 and any(_layout(low, t) == "nhwc" for t in acts) else "rm"
    perm = _perm(layout, rank)
    y = low.alloc(shape, layout, low.bind[acts[0]].dtype if acts else DType.F32)
    low.bind[n.outputs[0]] = y
    if not math.prod(shape):
        return
    phys = tuple(shape[p] for p in perm)

    def constant(data: np.ndarray, dtype) -> tuple[tuple[tuple[str, int], int], tuple[int, ...]]:
        """``data`` (broadcastable to the output) stored in the weights in the output's layout: (where, bytes) and
        its element strides per physical dimension."""
        data = np.ascontiguousarray(data.reshape((1,) * (rank - data.ndim) + data.shape).astype(dtype).transpose(perm))
        return (("W", low.const(data)), data.nbytes), tuple(0 if e == 1 else s
                                                            for e, s in zip(data.shape, row_major(data.shape)))

    operands, strides, consts = {"Y": (("ACT", y.offset), y.nbytes)}, {}, {}
    for name, t in zip(("X", "Z"), n.inputs[1:3]):
        if g.is_const(t):
            consts[name] = g.tensor(t).data
            continue
        b = low.want(t, layout if len(low.bind[t].shape) == rank else "rm")
        full = (0,) * (rank - len(b.shape)) + tuple(0 if e == 1 else s for e, s in zip(b.shape, _axis_strides(b)))
        operands[name], strides[name] = (("ACT", b.offset), b.nbytes), tuple(0 if o == 1 else full[p]
                                                                            for o, p in zip(phys, perm))
    cond = np.asarray(low.data(n.inputs[0]), bool)
    runs = _where_runs(np.broadcast_to(cond.reshape((1,) * (rank - cond.ndim) + cond.shape), shape).transpose(perm))
    by_dma = len(runs) <= WHERE_MAX_COPIES
    for name, data in consts.items():
        if not (by_dma and data.size == 1):   # a scalar copied by the DMA is a fill
            operands[name], strides[name] = constant(data, y.dtype.storage)
    if by_dma:
        ystr, boxes = row_major(phys), []
        for at, box_shape, take in runs:
            name = "X" if take else "Z"
            dst = Operand("Y", sum(at.get(d, 0) * s for d, s in enumerate(ystr)), ystr)
            if name not in strides:
                boxes.append(Box(box_shape, dst, fill=float(consts[name].ravel()[0])))
            else:
                src = Operand(name, sum(at.get(d, 0) * s for d, s in enumerate(strides[name])), strides[name])
                boxes.append(Box(box_shape, dst, src))
        _emit_boxes(low, n, boxes, operands, y.dtype)
        return
    it = {1: DType.I8, 2: DType.I16, 4: DType.I32}[y.dtype.size]
    operands["M"], strides["M"] = constant(np.where(cond, -1, 0), it.storage)
    prog = streams.select(phys, tuple(strides[r] for r in "XZM"), tuple(operands[r][1] for r in "XZM"), it,
                         low.target)
    low.emit(n, prog, {r: operands[r][0] for r in "XZMY"})


def _where_runs(cond: np.ndarray) -> list[tuple[dict, tuple[int, ...], bool]]:
    """The runs of a condition broadcast to the output's physical shape: (index of its first element on the fixed
    dimensions, its extents, the value), along the innermost dimension where the condition varies."""
    rank, phys = cond.ndim, cond.shape
    varying = [d for d in range(rank) if phys[d] > 1 and cond.strides[d] != 0]
    inner, runs = (varying or [None])[-1], []
    for where in np.ndindex(*(phys[d] for d in varying[:-1])):
        fixed = dict(zip(varying[:-1], where))
        line = np.atleast_1d(cond[tuple(slice(None) if d == inner else fixed.get(d, 0) for d in range(rank))])
        for k, length in _value_runs(line):
            at = {**fixed, inner: k}
            runs.append((at, tuple(length if d == inner else 1 if d in at else e for d, e in enumerate(phys)),
                         bool(line[k])))
    return runs


def lower_transpose(low: LoweringContext, n: Node) -> None:
    """Transpose of a row-major tensor: the DMA reads tiles in the input's order, the vector unit permutes them."""
    x = low.want(n.inputs[0], "rm")
    perm = tuple(n.attrs.get("perm", tuple(reversed(range(len(x.shape))))))
    y = low.alloc(tuple(x.shape[p] for p in perm), "rm")
    low.emit(n, transpose.permute(x.shape, perm, F32, low.target), {"X": ("ACT", x.offset), "Y": ("ACT", y.offset)})
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
    """A permutation that moves only axes of size 1 (a decode step's one token) is a Reshape: the same bytes."""
    shape = ctx.shape(node.inputs[0])
    perm = tuple(node.attrs.get("perm") or range(len(shape) - 1, -1, -1))
    moved = [p for p in perm if shape[p] != 1]
    if moved == sorted(moved) and not ctx.tensors[node.inputs[0]].is_const:
        return _to_reshape(node, ctx)
    return dataclasses.replace(node, attrs={"perm": perm})


def _concat(node: Node, ctx: CanonContext) -> Node:
    """``axis`` made non-negative; empty inputs (a prefill's empty past key) dropped while one is left."""
    node = axis_attr(0)(node, ctx)
    full = tuple(t for t in node.inputs if t and math.prod(ctx.shape(t)))
    return dataclasses.replace(node, inputs=full) if full and len(full) < len(node.inputs) else node


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


def _split(node: Node, ctx: CanonContext) -> Node:
    """Split at any opset (sizes as input, as attribute, equal parts or ``num_outputs``): the axis and the part
    sizes, which shape inference gave every output."""
    shape = ctx.shape(node.inputs[0])
    axis = norm_axis(int(node.attrs.get("axis", 0)), len(shape), node.name, node.op)
    ctx.const(node, 1, "split")
    sizes = tuple(ctx.shape(o)[axis] for o in node.outputs)
    if sum(sizes) != shape[axis]:
        raise UnsupportedOpError(node.name, node.op, f"the parts {sizes} do not add up to axis {axis} ({shape[axis]})")
    return dataclasses.replace(node, inputs=node.inputs[:1], attrs={"axis": axis, "split": sizes})


def _depth_space(node: Node, ctx: CanonContext) -> Node:
    mode = node.attrs.get("mode", "DCR")   # SpaceToDepth has a mode from opset 28 on
    attrs = {"blocksize": int(node.attrs["blocksize"])} if "blocksize" in node.attrs else {}
    return dataclasses.replace(node, attrs={**attrs, "mode": mode})


def _depth_space_check(node: Node, graph: Graph) -> str | None:
    shape, b = graph.tensor(node.inputs[0]).shape, node.attrs.get("blocksize", 0)
    if len(shape) != 4 or b < 1:
        return f"needs a 4-D input and a blocksize >= 1, not {shape} and {b}"
    if node.attrs["mode"] not in ("DCR", "CRD"):
        return f"mode {node.attrs['mode']!r} is neither DCR nor CRD"
    if node.op == "DepthToSpace" and shape[1] % (b * b) or node.op == "SpaceToDepth" and (shape[2] % b or
                                                                                           shape[3] % b):
        return f"blocksize {b} does not divide the input {shape}"
    return None


def _gather(node: Node, ctx: CanonContext) -> Node:
    rank = len(ctx.shape(node.inputs[0]))
    return dataclasses.replace(node, attrs={"axis": norm_axis(int(node.attrs.get("axis", 0)), rank, node.name,
                                                               node.op)})


def _gather_check(node: Node, graph: Graph) -> str | None:
    if not graph.is_const(node.inputs[1]):   # run-time indices: checked as the gather reads them
        return None
    idx, dim = graph.tensor(node.inputs[1]).data, graph.tensor(node.inputs[0]).shape[node.attrs["axis"]]
    if idx.size and not (-dim <= idx.min() and idx.max() < dim):
        return f"indices must lie in [{-dim}, {dim}) for axis {node.attrs['axis']}, not [{idx.min()}, {idx.max()}]"
    return None


PAD_MODES = ("constant", "edge", "reflect", "wrap")


def _pad_check(node: Node, graph: Graph) -> str | None:
    mode = node.attrs.get("mode", "constant")
    if mode not in PAD_MODES:
        return f"mode {mode!r} is not lowered (modes: {', '.join(PAD_MODES)})"
    pads = node.attrs.get("pads") if len(node.inputs) < 2 or not node.inputs[1] else graph.tensor(node.inputs[1]).data
    if mode == "constant" or pads is None:
        return None
    shape, pads = graph.tensor(node.inputs[0]).shape, [int(p) for p in np.asarray(pads).ravel()]
    rank = len(shape)
    for a, e in enumerate(shape):
        lo, hi = pads[a], pads[rank + a]
        kept = e - max(-lo, 0) - max(-hi, 0)
        limit = kept - 1 if mode == "reflect" else kept if mode == "wrap" else kept and max(lo, hi)
        if max(lo, hi) > limit:
            return f"mode {mode!r} pads axis {a} by up to {limit} (it keeps {kept} elements), not {max(lo, hi)}"
    return None


_ALIAS = dict(lower=lower_alias, dtypes=F32_INT8 | {np.dtype(np.int32)}, const_operands=True,
              npu="free: a new shape over the same bytes (a 4-D channels-last input is transposed first unless it is "
              "1x1); also int32 (and int64 ids, held as int32)")
OPS = (
    OpSpec("Reshape", canonical=_reshape, **_ALIAS),
    OpSpec("Flatten", canonical=axis_attr(1, inclusive=True), **_ALIAS),
    OpSpec("Squeeze", canonical=_to_reshape, **_ALIAS),
    OpSpec("Unsqueeze", canonical=_to_reshape, **_ALIAS),
    OpSpec("Transpose", lower_transpose, _transpose, npu="vector unit: tiles read in the input's order, permuted "
           "in SPM; one that moves only axes of size 1 is a free Reshape"),
    OpSpec("Concat", lower_concat, _concat, npu="DMA only: each input copied into its slice of the output (empty "
           "inputs dropped)"),
    OpSpec("Slice", lower_slice, const_inputs("starts", "ends", "axes", "steps"), const_operands=True,
           npu="DMA only (a strided view; a contiguous slice is free); constant starts, ends, axes, steps"),
    OpSpec("Split", lower_split, _split, dtypes=F32_INT8, const_operands=True,
           npu="DMA only: each part a window of the input (free when it is one contiguous range); sizes from the "
           "input, the attribute, equal parts or num_outputs"),
    OpSpec("DepthToSpace", lower_depth_space, _depth_space, _depth_space_check, dtypes=F32_INT8,
           npu="DMA only (modes DCR and CRD): one copy, each input run loaded in its memory order"),
    OpSpec("SpaceToDepth", lower_depth_space, _depth_space, _depth_space_check, dtypes=F32_INT8,
           npu="DMA only: one copy, each input run loaded in its memory order"),
    OpSpec("Expand", lower_expand, const_inputs("shape"), dtypes=F32_INT8, const_operands=True,
           npu="DMA only: the input read through stride-0 views (an Expand to its own shape is free); constant shape"),
    OpSpec("Tile", lower_tile, const_inputs("repeats"), dtypes=F32_INT8, const_operands=True,
           npu="DMA only: the input read through stride-0 views; constant repeats"),
    OpSpec("Gather", lower_gather, _gather, _gather_check, dtypes=NUMBERS, const_operands=True,
           npu="any axis; constant indices: DMA only, one strided box per run of indices in arithmetic progression; "
               "run-time indices (an embedding): rows gathered by the DMA (dma.ld.gather), an index out of range "
               "stops the run"),
    OpSpec("Where", lower_where, check=logic.where_check, dtypes=NUMBERS, const_operands=True,
           npu="exact (NaN/inf in the branch not taken cannot leak). A constant condition: up to 16 runs of equal "
           "condition copied by the DMA from X or Y, more selected bit for bit on the vector unit (xor, and, xor); a "
           "bool computed at run time: the vector unit makes its mask and selects bit for bit, numpy broadcasting"),
    OpSpec("Pad", lower_pad, _pad, _pad_check, const_operands=True,
           npu="DMA only; constant pads and value. Mode constant: the DMA pads on the fly; edge, reflect, wrap: the "
           "borders copied through stride-0 / negative-stride views (reflect pads < the axis, wrap pads <= it)"),
)
