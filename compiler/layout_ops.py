"""Layout ops done by the DMA alone: Concat, Slice and Pad, and the staged strided copy they (and the patch
extraction of :mod:`compiler.patchify`) are built on.

:func:`staged_copy` turns a list of :class:`Box` es -- "copy this strided view of a source region (or a fill value)
into that strided view of a destination region, padding on the fly" -- into one program: each box is cut into tiles
of at most ``tile_bytes``; per tile ``dma.ld`` brings the source view into a dense SPM slot (the DMA inserts the
padding) and ``dma.st`` writes the slot to the destination view. The two slots are a ring of 2 (semaphores
``cp_full`` dma.ld -> dma.st and ``cp_empty`` back), so tile i+1 loads while tile i stores; no compute unit takes
part. Staging through SPM keeps the shape :func:`compiler.link.link` expects (a segment starts with a ``dma.ld`` and
ends with a ``dma.st``) and lets both DRAM sides be arbitrary strided views.

Refinements the lowerings rely on:

- Adjacent dimensions both views walk contiguously are merged, unit dimensions dropped, so a tile is one
  instruction of at most 5 dimensions with extents <= 65535 whatever the tensor rank.
- Padding wider than the DMA's 15 elements per side is peeled off into fill boxes (``dma.ld.fill`` into the slot,
  then a store), and tiles lying wholly in the padding are fills too.
- A negative source stride (Slice with a negative step) is walked forwards in DRAM and reversed on the SPM side, so
  DRAM still sees contiguous runs.

Lowerings (``lower_concat``, ``lower_slice``, ``lower_pad``) have the signature of :data:`compiler.model.LOWER`. They
work on row-major (``rm``) tensors and keep a 4-D channels-last (``nhwc``) tensor in that layout, mapping the logical
axes to physical ones (so a channel Concat of NHWC tensors copies each input into its channel range of every pixel).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from isa import DmaCopy, DmaFill, DType, Halt, Pad, Program, Queue, Region, SemDecl, SemOp, Space, View
from isa.instructions import MAX_PAD
from isa.view import MAX_EXTENT

from .errors import CompileError, UnsupportedOpError
from .pipeline import vector_config
from .vector import row_major

F32 = DType.F32
MAX_TILE_DIMS = 5
MAX_REGIONS = 16
TILE_BYTES = 1 << 22
"""Default bytes of one staged tile: big enough to amortize a DMA's setup and DRAM latency, small enough that loads
and stores of consecutive tiles overlap."""
SEMS = (SemDecl("cp_full", 0), SemDecl("cp_empty", 2))
NHWC_PERM = (0, 2, 3, 1)
"""Physical dimension i of an ``nhwc`` binding is logical dimension ``NHWC_PERM[i]``."""


@dataclass(frozen=True)
class Operand:
    """A strided view of a DRAM region: first element at ``offset`` and ``strides``, both in elements (signed)."""

    region: str
    offset: int
    strides: tuple[int, ...]


@dataclass(frozen=True)
class Box:
    """Write ``shape`` elements of ``dst``: from ``src`` (iterated over the shape less the padding), or all ``fill``
    when ``src`` is None. ``pads`` holds (lo, hi) per dimension (any size >= 0): destination index i of a padded
    dimension reads source index i - lo, and the first lo / last hi indices get ``fill``."""

    shape: tuple[int, ...]
    dst: Operand
    src: Operand | None = None
    pads: tuple[tuple[int, int], ...] | None = None
    fill: float = 0.0

    def __post_init__(self) -> None:
        if self.pads is None:
            object.__setattr__(self, "pads", ((0, 0),) * len(self.shape))
        if not (len(self.pads) == len(self.shape) == len(self.dst.strides)) or \
                self.src is not None and len(self.src.strides) != len(self.shape):
            raise CompileError(f"box {self.shape}: dst/src strides and pads need one entry per dimension")
        for e, (lo, hi) in zip(self.shape, self.pads):
            if e < 0 or lo < 0 or hi < 0 or lo + hi > e:
                raise CompileError(f"box {self.shape}: bad extent/padding {e} ({lo}/{hi})")

    @property
    def src_shape(self) -> tuple[int, ...]:
        return tuple(e - lo - hi for e, (lo, hi) in zip(self.shape, self.pads))


def _peel(box: Box) -> list[Box]:
    """``box`` as fill boxes for every padding wider than the DMA's MAX_PAD, then the rest (pads <= MAX_PAD)."""
    if box.src is None or 0 in box.src_shape:
        return [Box(box.shape, box.dst, fill=box.fill)]
    out = []
    shape, pads, off = list(box.shape), list(box.pads), box.dst.offset
    for k, (lo, hi) in enumerate(box.pads):
        s = box.dst.strides[k]
        if lo > MAX_PAD:
            out.append(Box(tuple(shape[:k]) + (lo,) + tuple(shape[k + 1:]), Operand(box.dst.region, off,
                                                                                      box.dst.strides), fill=box.fill))
            off += lo * s
            shape[k] -= lo
            pads[k] = (0, pads[k][1])
        if hi > MAX_PAD:
            out.append(Box(tuple(shape[:k]) + (hi,) + tuple(shape[k + 1:]),
                           Operand(box.dst.region, off + (shape[k] - hi) * s, box.dst.strides), fill=box.fill))
            shape[k] -= hi
            pads[k] = (pads[k][0], 0)
    out.append(Box(tuple(shape), Operand(box.dst.region, off, box.dst.strides), box.src, tuple(pads), box.fill))
    return out


def _collapse(box: Box) -> Box:
    """Drop unit dimensions, merge neighbours both views walk contiguously (and neither pads)."""
    keep = [k for k, e in enumerate(box.shape) if e != 1] or [len(box.shape) - 1]
    dims = [[box.shape[k], box.pads[k], box.dst.strides[k], box.src.strides[k] if box.src else 0] for k in keep]
    merged = [dims[0]]
    for d in dims[1:]:
        p = merged[-1]
        if p[1] == (0, 0) == d[1] and p[0] * d[0] <= MAX_EXTENT and p[2] == d[2] * d[0] and p[3] == d[3] * d[0]:
            merged[-1] = [p[0] * d[0], (0, 0), d[2], d[3]]
        else:
            merged.append(d)
    return Box(tuple(d[0] for d in merged), Operand(box.dst.region, box.dst.offset, tuple(d[2] for d in merged)),
               box.src and Operand(box.src.region, box.src.offset, tuple(d[3] for d in merged)),
               tuple(d[1] for d in merged), box.fill)


@dataclass(frozen=True)
class _Tile:
    shape: tuple[int, ...]
    dst_off: int
    dst_strides: tuple[int, ...]
    src_off: int | None  # None: the tile is all fill
    src_strides: tuple[int, ...]
    pads: tuple[tuple[int, int], ...]


def _tiles(box: Box, limit: int):
    """Tiles of <= ``limit`` elements and <= 5 dimensions covering ``box`` (collapsed, pads <= MAX_PAD)."""
    shape, n = box.shape, len(box.shape)
    d = next(i for i in range(n) if math.prod(shape[i + 1:]) <= limit and max(shape[i + 1:], default=1) <= MAX_EXTENT
             and n - i <= MAX_TILE_DIMS)
    inner = math.prod(shape[d + 1:])
    chunk = max(1, min(limit // inner, MAX_EXTENT))
    ds, ss = box.dst.strides, box.src.strides if box.src else (0,) * n
    for outer in np.ndindex(*shape[:d]):
        dst_off, src_off = box.dst.offset, box.src.offset if box.src else None
        for k, i in enumerate(outer):
            lo, hi = box.pads[k]
            dst_off += i * ds[k]
            if src_off is not None:
                src_off = None if not lo <= i < shape[k] - hi else src_off + (i - lo) * ss[k]
        lo, hi = box.pads[d]
        for c0 in range(0, shape[d], chunk):
            c = min(chunk, shape[d] - c0)
            tlo, thi = min(max(lo - c0, 0), c), min(max(c0 + c - (shape[d] - hi), 0), c)
            so = None if src_off is None or tlo + thi == c else src_off + max(c0 - lo, 0) * ss[d]
            yield _Tile((c,) + shape[d + 1:], dst_off + c0 * ds[d], ds[d:], so, ss[d:],
                        ((tlo, thi),) + box.pads[d + 1:])


def _step(t: _Tile, box: Box, dtype: DType, slot_base: int) -> tuple[DmaCopy | DmaFill, DmaCopy]:
    """The load into the SPM slot and the store out of it for one tile."""
    es = dtype.size
    dense = row_major(t.shape)
    slot = View(Space.SPM, slot_base, dtype, tuple(s * es for s in dense))
    store = DmaCopy(queue=Queue.DMA_ST, shape=t.shape, src=slot,
                    dst=View(Space.DRAM, t.dst_off * es, dtype, tuple(s * es for s in t.dst_strides), box.dst.region))
    if t.src_off is None:
        return DmaFill(queue=Queue.DMA_LD, shape=t.shape, value=box.fill, dst=slot), store
    spm_base, spm_str, src_off, src_str = slot_base, list(dense), t.src_off, list(t.src_strides)
    for k, (e, (lo, hi)) in enumerate(zip(t.shape, t.pads)):
        if src_str[k] < 0 and not lo and not hi:  # walk DRAM forwards, reverse on the SPM side
            src_off += (e - 1) * src_str[k]
            spm_base += (e - 1) * spm_str[k] * es
            src_str[k], spm_str[k] = -src_str[k], -spm_str[k]
    pads = tuple(Pad(k, lo, hi) for k, (lo, hi) in enumerate(t.pads) if lo or hi)
    load = DmaCopy(queue=Queue.DMA_LD, shape=t.shape, pad=pads, fill=box.fill,
                   dst=View(Space.SPM, spm_base, dtype, tuple(s * es for s in spm_str)),
                   src=View(Space.DRAM, src_off * es, dtype, tuple(s * es for s in src_str), box.src.region))
    return load, store


def staged_copy(boxes: list[Box], dtype: DType, regions: tuple[Region, ...], spm: int,
                tile_bytes: int = TILE_BYTES) -> Program:
    """One program performing every box in order (see the module docstring); ``regions`` declares the DRAM regions
    the boxes name (sizes in bytes)."""
    es = dtype.size
    slot = max(es, min(spm // 2, tile_bytes)) // es * es
    prog: list = []
    n = 0
    for box in boxes:
        for part in _peel(box):
            part = _collapse(part)
            if 0 in part.shape:
                continue
            for t in _tiles(part, slot // es):
                load, store = _step(t, part, dtype, (n % 2) * slot)
                prog += [dataclasses.replace(load, waits=(SemOp("cp_empty"),), signals=(SemOp("cp_full"),)),
                         dataclasses.replace(store, waits=(SemOp("cp_full"),), signals=(SemOp("cp_empty"),))]
                n += 1
    if not prog:
        raise CompileError("staged_copy: nothing to copy (every box is empty)")
    return Program(vector_config(spm), regions, SEMS, tuple(prog) + (Halt(),))


# ------------------------------------------------------------------------------------------------------ lowerings

def _layout(low, name: str) -> str:
    """The layout an op that can work in either keeps ``name`` in: nhwc for a 4-D nhwc tensor, else rm."""
    b = low.bind[name]
    return "nhwc" if b.layout == "nhwc" and len(b.shape) == 4 else "rm"


def _perm(layout: str, rank: int) -> tuple[int, ...]:
    return NHWC_PERM if layout == "nhwc" else tuple(range(rank))


def _nbytes(shape: tuple[int, ...], dtype: DType = F32) -> int:
    return max(1, math.prod(shape) * dtype.size)


def _const_ints(low, n, index: int, what: str) -> list[int] | None:
    """Constant integer input ``index`` of node ``n`` as a list (None when absent); refuses a computed one."""
    if index >= len(n.inputs) or not n.inputs[index]:
        return None
    if not low.graph.is_const(n.inputs[index]):
        raise UnsupportedOpError(n.name, n.op, f"{what} must be a constant (computed {what} are not supported)")
    return [int(v) for v in np.asarray(low.data(n.inputs[index])).ravel().tolist()]


def lower_concat(low, n) -> None:
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
        low.emit(n, staged_copy(boxes, F32, tuple(regions), low.spm), bind,
                 suffix=f".{ci}" if len(chunks) > 1 else "")
    low.bind[n.outputs[0]] = y


def _slice_params(low, n, shape: tuple[int, ...]) -> list[tuple[int, int, int]]:
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


def lower_slice(low, n) -> None:
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
    box = _collapse(Box(phys, Operand("Y", 0, row_major(phys)), src))
    if len(box.shape) == 1 and box.src.strides == (1,):  # a contiguous range: alias it
        low.bind[n.outputs[0]] = dataclasses.replace(x, offset=x.offset + src_off * x.dtype.size, shape=out_shape)
        return
    y = low.alloc(out_shape, layout)
    regions = (Region("X", 0, _nbytes(x.phys)), Region("Y", 1, _nbytes(phys)))
    low.emit(n, staged_copy([box], F32, regions, low.spm), {"X": ("ACT", x.offset), "Y": ("ACT", y.offset)})
    low.bind[n.outputs[0]] = y


def lower_pad(low, n) -> None:
    """Pad, constant mode: the DMA pads on the fly while staging the input (at most 15 per side and dimension;
    wider padding is written as separate fills); negative pads crop."""
    g = low.graph
    mode = n.attrs.get("mode", "constant")
    if mode != "constant":
        raise UnsupportedOpError(n.name, n.op, f"only mode='constant' is supported, not {mode!r}")
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
    low.emit(n, staged_copy([box], F32, regions, low.spm), {"X": ("ACT", x.offset), "Y": ("ACT", y.offset)})
