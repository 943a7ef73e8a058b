"""The staged strided copy that layout ops done by the DMA alone (Concat, Slice, Pad in :mod:`compiler.ops.layout`)
and the patch extraction of :mod:`compiler.kernels.patchify` are built on.

:func:`staged_copy` turns a list of :class:`Box` es -- "copy this strided view of a source region (or a fill value)
into that strided view of a destination region, padding on the fly" -- into one program: each box is cut into tiles
of at most ``tile_bytes``; per tile ``dma.ld`` brings the source view into a dense SPM slot (the DMA inserts the
padding) and ``dma.st`` writes the slot to the destination view. The two slots are a ring of 2 (semaphores
``cp_full`` dma.ld -> dma.st and ``cp_empty`` back), so tile i+1 loads while tile i stores; no compute unit takes
part. Staging through SPM keeps the shape :func:`compiler.link.linker.link` expects (a segment starts with a ``dma.ld``
and ends with a ``dma.st``) and lets both DRAM sides be arbitrary strided views.

Refinements the lowerings rely on:

- Adjacent dimensions both views walk contiguously are merged, unit dimensions dropped, so a tile is one
  instruction of at most 5 dimensions with extents <= 65535 whatever the tensor rank.
- Padding wider than the DMA's 15 elements per side is peeled off into fill boxes (``dma.ld.fill`` into the slot,
  then a store), and tiles lying wholly in the padding are fills too.
- A negative source stride (Slice with a negative step) is walked forwards in DRAM and reversed on the SPM side, so
  DRAM still sees contiguous runs.
- A source stride of 0 (a broadcast: Expand, Tile, Pad's edge mode) is not read again and again: the load holds one
  element along that dimension and the store reads the slot with stride 0 there.
- ``Box.src_order``: the load walks the source in its own memory order (the slot holds the tile in that order) and
  the store reads the slot across it, so a copy that permutes dimensions (DepthToSpace) moves long runs on both DRAM
  sides; the reordering happens between SRAM and DRAM on the store.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from compiler.errors import CompileError
from compiler.kernels.common.pipeline import vector_config
from compiler.kernels.common.target import Target
from compiler.kernels.vector.strides import row_major
from isa import DmaCopy, DmaFill, DType, Halt, Pad, Program, Queue, Region, SemDecl, SemOp, Space, View
from isa.instructions import MAX_PAD
from isa.view import MAX_EXTENT

F32 = DType.F32
MAX_TILE_DIMS = 5
TILE_BYTES = 1 << 22
"""Default bytes of one staged tile: big enough to amortize a DMA's setup and DRAM latency, small enough that loads
and stores of consecutive tiles overlap."""
SEMS = (SemDecl("cp_full", 0), SemDecl("cp_empty", 2))


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
    src_order: bool = False
    """Load each tile in the source's memory order (for copies that permute dimensions), not the destination's."""

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
    out.append(Box(tuple(shape), Operand(box.dst.region, off, box.dst.strides), box.src, tuple(pads), box.fill,
                   box.src_order))
    return out


def collapse_box(box: Box) -> Box:
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
               tuple(d[1] for d in merged), box.fill, box.src_order)


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
    es, n = dtype.size, len(t.shape)
    store_dst = View(Space.DRAM, t.dst_off * es, dtype, tuple(s * es for s in t.dst_strides), box.dst.region)
    if t.src_off is None:
        slot = View(Space.SPM, slot_base, dtype, tuple(s * es for s in row_major(t.shape)))
        return DmaFill(queue=Queue.DMA_LD, shape=t.shape, value=box.fill, dst=slot), \
            DmaCopy(queue=Queue.DMA_ST, shape=t.shape, src=slot, dst=store_dst)
    # dimensions the source broadcasts are loaded once; the load walks the tile in ``order``, the slot dense in it
    held = tuple(1 if s == 0 and p == (0, 0) else e for e, s, p in zip(t.shape, t.src_strides, t.pads))
    order = sorted(range(n), key=lambda k: -abs(t.src_strides[k])) if box.src_order else list(range(n))
    dense = row_major(tuple(held[k] for k in order))
    slot_str = [0] * n
    for j, k in enumerate(order):
        slot_str[k] = dense[j] if held[k] == t.shape[k] else 0
    store = DmaCopy(queue=Queue.DMA_ST, shape=t.shape, dst=store_dst,
                    src=View(Space.SPM, slot_base, dtype, tuple(s * es for s in slot_str)))
    shape = [held[k] for k in order]
    spm_base, spm_str, src_off, src_str = slot_base, list(dense), t.src_off, [t.src_strides[k] for k in order]
    pads = [t.pads[k] for k in order]
    for j, (e, (lo, hi)) in enumerate(zip(shape, pads)):
        if src_str[j] < 0 and not lo and not hi:  # walk DRAM forwards, reverse on the SPM side
            src_off += (e - 1) * src_str[j]
            spm_base += (e - 1) * spm_str[j] * es
            src_str[j], spm_str[j] = -src_str[j], -spm_str[j]
    load = DmaCopy(queue=Queue.DMA_LD, shape=tuple(shape), pad=tuple(Pad(j, lo, hi) for j, (lo, hi) in enumerate(pads)
                                                                       if lo or hi), fill=box.fill,
                   dst=View(Space.SPM, spm_base, dtype, tuple(s * es for s in spm_str)),
                   src=View(Space.DRAM, src_off * es, dtype, tuple(s * es for s in src_str), box.src.region))
    return load, store


def staged_copy(boxes: list[Box], dtype: DType, regions: tuple[Region, ...], target: Target,
                tile_bytes: int = TILE_BYTES) -> Program:
    """One program performing every box in order (see the module docstring); ``regions`` declares the DRAM regions
    the boxes name (sizes in bytes)."""
    es, spm = dtype.size, target.spm
    slot = max(es, min(spm // 2, tile_bytes)) // es * es
    prog: list = []
    n = 0
    for box in boxes:
        for part in _peel(box):
            part = collapse_box(part)
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
