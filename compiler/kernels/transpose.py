"""Transposes on the vector unit with conflict-free SPM layouts: :func:`permute`.

Per tile the DMA reads X's box in X's own order into an SPM buffer (long DRAM runs), the vector unit moves it into a
second buffer in Y's order, and the DMA writes Y's box (long runs again). The move walks one of the two buffers
across its rows: with dense rows whose pitch is a multiple of the SPM line (banks x bank width), every element of a
beat sits in the same bank and a beat of ``lanes`` elements takes ``lanes`` cycles instead of ``lanes / banks`` (an
NCHW -> NHWC transpose of 64 x 32 x 32 f32 on mid32 lost 61,440 of its 67,892 cycles to bank conflicts). So that
buffer's pitch is skewed by whole bank words. Which buffer the move walks across (it iterates Y's order reading X's
buffer, or X's order writing Y's buffer) and the skew (0 to banks - 1 words) are picked by pricing the tile's
instructions with :mod:`isa.cost`: per walk the first skew that leaves the move no conflict cycles (a skew by whole
words does not change which elements share a word, so every conflict-free skew of a walk costs the same), then the
walk whose move is cheaper, then the one whose DMAs' SRAM sides lose fewer cycles (hidden behind DRAM time, except
for an operand kept on chip).

Tiles are blocks over X's innermost dimension and Y's innermost dimension (both DMAs then move long runs); three
shapes are tried (Y's runs whole first, X's runs whole first, both grown alternately from a DRAM burst; each with
partial extents rounded to whole bursts or not) and the one whose DMAs are estimated fastest by :mod:`isa.cost`
wins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from compiler.errors import CompileError, TilingError
from compiler.kernels.common.pipeline import RingPipeline, vector_config
from compiler.kernels.common.target import Target
from compiler.kernels.vector.strides import collapse, row_major
from isa import Act, DmaCopy, DType, Program, Queue, Region, Space, VecUnary, View
from isa.cost import bank_cycles, instr_cost
from isa.view import MAX_EXTENT

MAX_TILE = 1 << 15
"""Elements of one tile at most (pricing a candidate layout walks every element of a tile once)."""
MIN_TILES = 8
"""A transpose of more than 4096 elements runs in at least this many tiles, so loads, moves and stores overlap."""


@dataclass(frozen=True)
class _Layout:
    """The SPM buffers of a tile: byte strides of X's and Y's buffer per output dimension, their bytes (whole SPM
    lines), and the move's iteration order."""

    x: tuple[int, ...]
    y: tuple[int, ...]
    x_bytes: int
    y_bytes: int
    order: tuple[int, ...]


@dataclass(frozen=True)
class _Transpose:
    """A transpose collapsed to at most 5 output dimensions: their extents ``shape``, X's and Y's element strides
    ``xs``/``ys`` per output dimension, and ``x_order`` (the output dimensions in X's memory order)."""

    shape: tuple[int, ...]
    xs: tuple[int, ...]
    ys: tuple[int, ...]
    x_order: tuple[int, ...]
    dtype: DType
    target: Target

    @property
    def y_order(self) -> tuple[int, ...]:
        return tuple(range(len(self.shape)))

    def buffer(self, ext: tuple[int, ...], mem: tuple[int, ...], skew_dim: int | None, skew: int):
        """Byte strides and bytes (whole lines) of a buffer holding ``ext`` dense in the order ``mem``, except that
        dimension ``skew_dim``'s pitch is rounded up to whole bank words plus ``skew`` words."""
        word, line = self.target.bank_width, self.target.bank_row
        strides, acc = [0] * len(ext), self.dtype.size
        for d in reversed(mem):
            if d == skew_dim:
                acc = (-(-acc // word) + skew) * word
            strides[d] = acc
            acc *= ext[d]
        return tuple(strides), -(-acc // line) * line

    def layout(self, ext: tuple[int, ...], walk: str = "y", k: int | None = None, skew: int = 0) -> _Layout:
        """Buffers for tiles of ``ext``: the move iterates Y's order (``walk`` y: X's buffer is read across its rows,
        its dimension ``k`` skewed) or X's order (``walk`` x: Y's buffer written across its rows, ``k`` skewed)."""
        sx, xb = self.buffer(ext, self.x_order, k if walk == "y" else None, skew)
        sy, yb = self.buffer(ext, self.y_order, k if walk == "x" else None, skew)
        return _Layout(sx, sy, xb, yb, self.y_order if walk == "y" else self.x_order)

    def walks(self, ext: tuple[int, ...]):
        """(walk, dimension to skew) of each walk worth trying: the innermost dimension of the move's iteration that
        the walked buffer does not hold contiguously (when both buffers share their innermost dimension, the next
        one out)."""
        def inner(order, skip=None):
            dims = [d for d in order if ext[d] > 1 and d != skip]
            return dims[-1] if dims else None

        for walk, order, other in (("y", self.y_order, self.x_order), ("x", self.x_order, self.y_order)):
            k = inner(order)
            yield walk, inner(order, skip=k) if k is not None and inner(other) == k else k
            if self.x_order == self.y_order:
                return

    def instrs(self, lay: _Layout, first: tuple[int, ...], t: tuple[int, ...], base: int = 0):
        """The load, move and store of the tile of extents ``t`` at output index ``first``; buffers from ``base``."""
        dt, es = self.dtype, self.dtype.size
        x_buf, y_buf, xo, o = base, base + lay.x_bytes, self.x_order, lay.order
        load = DmaCopy(queue=Queue.DMA_LD, shape=tuple(t[d] for d in xo),
                       dst=View(Space.SPM, x_buf, dt, tuple(lay.x[d] for d in xo)),
                       src=View(Space.DRAM, sum(i * s for i, s in zip(first, self.xs)) * es, dt,
                                tuple(self.xs[d] * es for d in xo), "X"))
        move = VecUnary(fn=Act.MOV, shape=tuple(t[d] for d in o), dst=View(Space.SPM, y_buf, dt,
                                                                          tuple(lay.y[d] for d in o)),
                        src=View(Space.SPM, x_buf, dt, tuple(lay.x[d] for d in o)))
        store = DmaCopy(queue=Queue.DMA_ST, shape=t, src=View(Space.SPM, y_buf, dt, lay.y),
                        dst=View(Space.DRAM, sum(i * s for i, s in zip(first, self.ys)) * es, dt,
                                 tuple(s * es for s in self.ys), "Y"))
        return load, move, store

    def price(self, lay: _Layout, shapes: dict[tuple[int, ...], int]) -> tuple[int, int, int]:
        """(conflict cycles of the moves, cycles of the moves, cycles the DMAs' SRAM sides lose to conflicts) over
        tiles of ``shapes`` (extents -> how many)."""
        arch, conflict, cycles, dma = self.target.arch, 0, 0, 0
        beat = self.target.bank_row // self.dtype.size
        for t, count in shapes.items():
            load, move, store = self.instrs(lay, (0,) * len(t), t)
            c = instr_cost(move, arch)
            conflict, cycles = conflict + c.conflict * count, cycles + c.cycles * count
            for view, shape in ((load.dst, load.shape), (store.src, store.shape)):
                actual, ideal = bank_cycles(view, shape, arch.spm, beat)
                dma += (actual - ideal) * count
        return conflict, cycles, dma

    def choose(self, ext: tuple[int, ...]) -> _Layout | None:
        """The cheapest layout for tiles of ``ext`` that fits the SPM twice (see the module docstring), or None."""
        shapes: dict[tuple[int, ...], int] = {}
        for _, t in self.tiles(ext):
            shapes[t] = shapes.get(t, 0) + 1
        best = None
        for walk, k in self.walks(ext):
            for skew in range(self.target.arch.spm.banks if k is not None else 1):
                lay = self.layout(ext, walk, k, skew)
                if 2 * (lay.x_bytes + lay.y_bytes) > self.target.spm:
                    continue
                price = self.price(lay, shapes)
                if best is None or price < best[0]:
                    best = price, lay
                if price[0] == 0:
                    break
        return None if best is None else best[1]

    def tiles(self, ext: tuple[int, ...]) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
        """(first output index, extents) of every tile of at most ``ext``, in order."""
        grid = [range(0, e, t) for e, t in zip(self.shape, ext)]
        firsts = [tuple(r[i] for r, i in zip(grid, idx)) for idx in np.ndindex(*map(len, grid))]
        return [(f, tuple(min(t, e - i) for t, e, i in zip(ext, self.shape, f))) for f in firsts]

    def extents(self, limit: int, first: str, whole_bursts: bool) -> tuple[int, ...]:
        """Tile extents of at most ``limit`` elements. X's innermost dimension a and Y's innermost b grow first:
        ``first`` = ``"b"`` grows b as far as it goes, then a (long stores), ``"a"`` the other way round (long
        loads), ``"even"`` doubles them alternately from a DRAM burst of elements, the shorter first;
        ``whole_bursts`` rounds a partial extent of either down to whole bursts. Once both are whole, the other
        dimensions grow, innermost first, in X's order for ``"a"``, else in Y's."""
        shape, a, b = self.shape, self.x_order[-1], len(self.shape) - 1
        run = max(1, self.target.arch.dma.burst_bytes // self.dtype.size)
        t = [1] * len(shape)

        def grow(k: int, to: int) -> bool:
            g = min(shape[k], to, limit // (math.prod(t) // t[k]), MAX_EXTENT)
            if whole_bursts and k in (a, b) and run <= g < shape[k]:
                g -= g % run
            grew, t[k] = g > t[k], max(t[k], g)
            return grew

        if first == "even":
            while growing := [k for k in dict.fromkeys((a, b)) if t[k] < shape[k]]:
                k = min(growing, key=lambda d: t[d])
                if not grow(k, max(2 * t[k], run)):
                    return tuple(t)
        else:
            for k in ((b, a) if first == "b" else (a, b)):
                grow(k, shape[k])
                if t[k] < shape[k]:
                    return tuple(t)
        for d in reversed(self.x_order if first == "a" else self.y_order):
            if d not in (a, b):
                grow(d, shape[d])
                if t[d] < shape[d]:
                    break
        return tuple(t)

    def dma_estimate(self, ext: tuple[int, ...]) -> int:
        """Cycles the DMAs of tiles of ``ext`` need (dense buffers): the busier DMA queue or the DRAM bus."""
        lay, arch = self.layout(ext), self.target.arch
        ld = st = bus = 0
        for first, t in self.tiles(ext):
            load, _, store = self.instrs(lay, first, t)
            cl, cs = instr_cost(load, arch), instr_cost(store, arch)
            ld, st, bus = ld + cl.cycles, st + cs.cycles, bus + cl.dram_window + cs.dram_window
        return max(ld, st, bus)


def permute(in_shape: tuple[int, ...], perm: tuple[int, ...], dtype: DType, target: Target) -> Program:
    """``Y = transpose(X, perm)`` (row-major in and out); regions X, Y (see the module docstring)."""
    out = tuple(in_shape[p] for p in perm)
    xst = row_major(tuple(in_shape))
    shape, (xs, ys) = collapse(out, tuple(xst[p] for p in perm), row_major(out))
    if len(shape) > 5:
        raise CompileError(f"transpose of {in_shape} by {perm} does not collapse to 5 dimensions")
    tr = _Transpose(shape, xs, ys, tuple(sorted(range(len(shape)), key=lambda d: -xs[d])), dtype, target)
    total, es = math.prod(shape), dtype.size
    limit = min(MAX_TILE, max(-(-total // MIN_TILES), 4096), max(1, target.spm * 7 // (32 * es)))
    while True:
        candidates = {tr.extents(limit, first, whole) for first in ("b", "a", "even") for whole in (True, False)}
        ext = min(candidates, key=lambda e: (tr.dma_estimate(e), e))
        lay = tr.choose(ext)
        if lay is not None:
            break
        if limit == 1:
            raise TilingError(f"transpose of {in_shape}: one element per tile does not fit {target.spm} bytes of SPM")
        limit //= 2
    pipe = RingPipeline()
    for first, t in tr.tiles(ext):
        load, move, store = tr.instrs(lay, first, t, pipe.slot * (lay.x_bytes + lay.y_bytes))
        pipe.step([load], [move], [store])
    nbytes = total * es
    return pipe.program(vector_config(target.spm), (Region("X", 0, nbytes), Region("Y", 1, nbytes)))
