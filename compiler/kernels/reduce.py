"""Reductions over any set of axes and group normalisations on the vector unit.

The tensor is read in its memory order; the reduced dimensions get destination stride 0 in the vector instruction,
so one instruction reduces a whole tile into the output elements it touches, whatever the axes. Adjacent dimensions
that are both reduced or both kept are merged first (at most 5 dimensions remain). A tile holds whole reductions
when they fit (then several output rows per tile, double-buffered); when one does not, its tiles are reduced one
after another into an on-chip f32 accumulator (steps without a store), and the result is stored after the last.

Normalisations (InstanceNormalization, GroupNormalization) reduce the same way for the mean and the centred variance
and normalise the tile in place: one DRAM pass when a group fits a tile, else three (mean, variance, normalise)
over the group's tiles, still one program.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from compiler.errors import CompileError, TilingError
from compiler.kernels.common.pipeline import RingPipeline, vector_config
from compiler.kernels.common.target import Target
from compiler.kernels.vector.streams import overlap_cap
from compiler.kernels.vector.strides import row_major
from isa import Act, BinOp, DmaCopy, DType, Program, Queue, Reduce, Region, Space, VecBinary, VecUnary, View
from isa.view import MAX_EXTENT

F32 = DType.F32
MAX_DIMS = 5


@dataclass(frozen=True)
class Kind:
    """One reduction: how values combine, what is applied to each input first (``square``: x * x) and to each
    result after (``divide``: by the count of reduced elements, else a unary function)."""

    reduce: Reduce
    pre: Act | str = Act.MOV
    post: Act | str | None = None


KINDS = {
    "ReduceSum": Kind(Reduce.SUM), "ReduceMean": Kind(Reduce.SUM, post="divide"),
    "ReduceMax": Kind(Reduce.MAX), "ReduceMin": Kind(Reduce.MIN),
    "ReduceSumSquare": Kind(Reduce.SUM, "square"), "ReduceL2": Kind(Reduce.SUM, "square", Act.SQRT),
    "ReduceL1": Kind(Reduce.SUM, Act.ABS), "ReduceLogSum": Kind(Reduce.SUM, post=Act.LOG),
}
"""The reductions by ONNX op (onnxruntime's ReduceMean divides the sum by the count)."""


@dataclass(frozen=True)
class Space5:
    """A tensor's memory order collapsed to at most 5 dimensions: extents, input strides, output strides (0 on the
    reduced dimensions) and extra per-dimension strides (a normalisation's channel index), all in elements."""

    shape: tuple[int, ...]
    reduced: tuple[bool, ...]
    x: tuple[int, ...]
    y: tuple[int, ...]
    chan: tuple[int, ...]

    @property
    def group(self) -> int:
        """Elements reduced into each output element."""
        return math.prod(e for e, r in zip(self.shape, self.reduced) if r)


def space(shape: tuple[int, ...], reduced: tuple[bool, ...], y: tuple[int, ...] | None = None,
          chan: tuple[int, ...] | None = None) -> Space5:
    """``shape`` (memory order) with ``reduced`` dimensions, output strides ``y`` (default: the kept dimensions
    row-major in this order) and channel strides ``chan``, collapsed; CompileError beyond 5 dimensions."""
    n = len(shape)
    if y is None:
        kept = row_major(tuple(e for e, r in zip(shape, reduced) if not r))
        it = iter(kept)
        y = tuple(0 if r else next(it) for r in reduced)
    y = tuple(0 if r else s for r, s in zip(reduced, y))
    chan = chan or (0,) * n
    dims = [[e, r, xs, ys, c] for e, r, xs, ys, c in zip(shape, reduced, row_major(tuple(shape)), y, chan) if e != 1]
    merged: list[list] = []
    for d in dims:
        p = merged[-1] if merged else None
        if p and p[1] == d[1] and p[0] * d[0] <= MAX_EXTENT and all(p[k] == d[k] * d[0] for k in (2, 3, 4)):
            p[0], p[2], p[3], p[4] = p[0] * d[0], d[2], d[3], d[4]
        else:
            merged.append(list(d))
    merged = merged or [[1, False, 1, 1, 0]]
    if len(merged) > MAX_DIMS:
        raise CompileError(f"reducing axes {tuple(i for i, r in enumerate(reduced) if r)} of {tuple(shape)} leaves "
                           f"{len(merged)} alternating groups of dimensions; the vector unit takes {MAX_DIMS}")
    return Space5(*(tuple(d[k] for d in merged) for k in range(5)))


def _tile(sp: Space5, limit: int) -> tuple[int, ...]:
    """Tile extents: the reduced dimensions whole when a group fits ``limit`` elements, with kept ones added from the
    innermost; else every dimension from the innermost, the first that does not fit chunked and the outer ones 1."""
    n, t = len(sp.shape), [1] * len(sp.shape)
    whole = sp.group <= limit
    order = [i for i in reversed(range(n)) if not sp.reduced[i]] if whole else list(reversed(range(n)))
    rem = limit // sp.group if whole else limit
    for i in range(n):
        if whole and sp.reduced[i]:
            t[i] = sp.shape[i]
    for i in order:
        t[i] = max(1, min(sp.shape[i], rem, MAX_EXTENT))
        rem //= t[i]
        if t[i] < sp.shape[i]:
            break
    return tuple(t)


def _boxes(sp: Space5, t: tuple[int, ...]):
    """Yield (output box: start per dimension and extents, [(start, extents) of each input tile in it]): output boxes
    over the kept dimensions in order, the tiles of each over the reduced dimensions."""
    def grid(dims):
        return itertools.product(*(range(0, sp.shape[i], t[i]) if i in dims else (0,) for i in range(len(t))))
    kept = {i for i, r in enumerate(sp.reduced) if not r}
    red = set(range(len(t))) - kept
    for k in grid(kept):
        tiles = []
        for r in grid(red):
            start = tuple(r[i] if i in red else k[i] for i in range(len(t)))
            tiles.append((start, tuple(min(t[i], sp.shape[i] - start[i]) for i in range(len(t)))))
        yield tiles


class _Layout:
    """SPM addresses of one program: two input and two output ring slots of ``slot`` and ``out_slot`` elements,
    ``stats`` f32 buffers of ``box`` elements (accumulators, mean, 1/std), then ``extra`` (gamma and beta)."""

    def __init__(self, slot: int, out_slot: int, box: int, stats: int, es: int):
        self.slot, self.out_slot, self.es = slot, out_slot, es
        self.stats = [2 * slot * es + 2 * out_slot * es + k * box * 4 for k in range(stats)]
        self.extra = 2 * slot * es + 2 * out_slot * es + stats * box * 4

    def x(self, ring: int) -> int:
        return ring * self.slot * self.es

    def y(self, ring: int) -> int:
        return 2 * self.slot * self.es + ring * self.out_slot * self.es


def _dense(ext: tuple[int, ...], es: int, keep: tuple[bool, ...] | None = None) -> tuple[int, ...]:
    """Byte strides of a dense row-major box of extents ``ext`` (only the dimensions where ``keep``; 0 on the rest)."""
    keep = keep or (True,) * len(ext)
    inner = row_major(tuple(e for e, k in zip(ext, keep) if k))
    it = iter(inner)
    return tuple(next(it) * es if k else 0 for k in keep)


def _dram(start, strides, es: int, region: str) -> View:
    return View(Space.DRAM, sum(i * s for i, s in zip(start, strides)) * es, F32, tuple(s * es for s in strides),
                region)


def _kept(ext, reduced):
    """The kept dimensions' extents (at least one)."""
    return tuple(e for e, r in zip(ext, reduced) if not r) or (1,)


def reduce(op: str, sp: Space5, target: Target, dtype: DType = F32) -> Program:
    """The reduction ``op`` (a key of :data:`KINDS`) over :func:`space` ``sp``; regions X (the tensor in memory
    order) and Y (the outputs at ``sp.y`` strides). f32 accumulation in the order of the elements."""
    if dtype is not F32:
        raise CompileError(f"{op} is lowered for f32, not {dtype.text}")
    kind, es = KINDS[op], dtype.size
    spm = target.spm
    total = math.prod(sp.shape)
    limit = spm // (2 * es + 3 * 4)                       # two input slots, two output slots, one accumulator
    limit = min(limit, overlap_cap(total, max(4096, min(sp.group, limit))))
    t = _tile(sp, limit)
    box = math.prod(_kept(t, sp.reduced))
    lay = _Layout(math.prod(t), box, box, 1, es)
    keep = tuple(not r for r in sp.reduced)
    pipe = RingPipeline()
    for tiles in _boxes(sp, t):
        kept_ext = _kept(tiles[0][1], sp.reduced)
        y = View(Space.SPM, lay.y(pipe.out_slot), F32, _dense(kept_ext, 4))
        acc = y.base if len(tiles) == 1 else lay.stats[0]    # a box of several tiles accumulates apart
        for k, (start, ext) in enumerate(tiles):
            x = View(Space.SPM, lay.x(pipe.slot), dtype, _dense(ext, es))
            dst = View(Space.SPM, acc, F32, _dense(ext, 4, keep))
            red = dict(reduce=kind.reduce, zero=k == 0)
            compute = [VecBinary(op=BinOp.MUL, shape=ext, dst=dst, src0=x, src1=x, **red) if kind.pre == "square"
                       else VecUnary(fn=kind.pre, shape=ext, dst=dst, src=x, **red)]
            stores = []
            if k == len(tiles) - 1:
                src = View(Space.SPM, acc, F32, y.strides)
                if kind.post == "divide":
                    compute.append(VecBinary(op=BinOp.DIV, shape=kept_ext, dst=y, src0=src, imm=sp.group))
                elif kind.post is not None or len(tiles) > 1:
                    compute.append(VecUnary(fn=kind.post or Act.MOV, shape=kept_ext, dst=y, src=src))
                at = tuple(i for i, kp in zip(start, keep) if kp) or (0,)
                stores.append(DmaCopy(queue=Queue.DMA_ST, shape=kept_ext, src=y,
                                      dst=_dram(at, _kept(sp.y, sp.reduced), es, "Y")))
            pipe.step([DmaCopy(queue=Queue.DMA_LD, shape=ext, dst=x, src=_dram(start, sp.x, es, "X"))], compute, stores)
    regions = (Region("X", 0, total * es), Region("Y", 1, (total // sp.group) * es))
    return pipe.program(vector_config(spm), regions)




@dataclass(frozen=True)
class _Norm:
    """The vector instructions of a normalisation over :class:`Space5` ``sp`` laid out as ``lay``."""

    sp: Space5
    lay: _Layout
    n_affine: int   # gamma values (as many beta values follow them)
    eps: float
    fold: bool   # gamma is constant over a group: folded into its 1/std

    @property
    def keep(self) -> tuple[bool, ...]:
        return tuple(not r for r in self.sp.reduced)

    def stats(self, ext) -> list[View]:
        """The group mean and 1/std buffers read (or reduced into) over a tile of extents ``ext``."""
        return [View(Space.SPM, a, F32, _dense(ext, 4, self.keep)) for a in self.lay.stats]

    def affine(self, start, ext, beta: bool = False, kept: bool = False) -> View:
        """gamma (or beta) for a tile at ``start`` (over its kept dimensions alone when ``kept``)."""
        chan = [c for c, k in zip(self.sp.chan, self.keep) if k or not kept] or [0]
        return View(Space.SPM, self.lay.extra + 4 * (sum(i * c for i, c in zip(start, self.sp.chan))
                                                     + beta * self.n_affine), F32, tuple(c * 4 for c in chan))

    def total(self, x, ext, first: bool) -> list:
        return [VecUnary(fn=Act.MOV, shape=ext, dst=self.stats(ext)[0], src=x, reduce=Reduce.SUM, zero=first)]

    def mean(self, kept) -> list:
        m = View(Space.SPM, self.lay.stats[0], F32, _dense(kept, 4))
        return [VecBinary(op=BinOp.DIV, shape=kept, dst=m, src0=m, imm=self.sp.group)]

    def squares(self, x, ext, first: bool) -> list:
        """x - mean in place, and its squares summed."""
        m, r = self.stats(ext)
        return [VecBinary(op=BinOp.SUB, shape=ext, dst=x, src0=x, src1=m),
                VecBinary(op=BinOp.MUL, shape=ext, dst=r, src0=x, src1=x, reduce=Reduce.SUM, zero=first)]

    def rstd(self, start, kept) -> list:
        """1 / sqrt(squares / n + eps) (times gamma when folded)."""
        r = View(Space.SPM, self.lay.stats[1], F32, _dense(kept, 4))
        out = [VecBinary(op=BinOp.DIV, shape=kept, dst=r, src0=r, imm=self.sp.group),
               VecBinary(op=BinOp.ADD, shape=kept, dst=r, src0=r, imm=self.eps),
               VecUnary(fn=Act.RSQRT, shape=kept, dst=r, src=r)]
        gamma = self.affine(start, kept, kept=True)
        return out + ([VecBinary(op=BinOp.MUL, shape=kept, dst=r, src0=r, src1=gamma)] if self.fold else [])

    def scale(self, x, y, start, ext, centred: bool) -> list:
        """y = (x - mean) * rstd * gamma + beta (x centred in place unless it already is)."""
        m, r = self.stats(ext)
        out = [] if centred else [VecBinary(op=BinOp.SUB, shape=ext, dst=x, src0=x, src1=m)]
        out.append(VecBinary(op=BinOp.MUL, shape=ext, dst=y, src0=x, src1=r))
        if not self.fold:
            out.append(VecBinary(op=BinOp.MUL, shape=ext, dst=y, src0=y, src1=self.affine(start, ext)))
        return out + [VecBinary(op=BinOp.ADD, shape=ext, dst=y, src0=y, src1=self.affine(start, ext, beta=True))]


def normalize(sp: Space5, channels: int, eps: float, target: Target, dtype: DType = F32) -> Program:
    """``(x - mean) / sqrt(var + eps) * gamma[c] + beta[c]`` with the mean and the (biased, centred) variance over
    the reduced dimensions of ``sp`` for each of its output elements (a group), and ``c`` an element's channel
    (``sp.chan`` strides); regions X, GB (f32 gamma then beta, ``channels`` each, loaded once) and Y (X's layout).

    Per tile: sum, centre, sum of squares, scale, shift (five or six vector passes over the tile; the per-group
    arithmetic on the group vectors). When gamma is constant over a group (InstanceNormalization) it is folded into
    the group's 1/std. A group larger than a tile takes three passes over its tiles: mean, variance, normalise."""
    if dtype is not F32:
        raise CompileError(f"normalisation is lowered for f32, not {dtype.text}")
    es, spm, total = dtype.size, target.spm, math.prod(sp.shape)
    limit = (spm - 8 * channels) // (4 * es + 2 * 4)       # two input, two output slots; mean and 1/std per group
    if limit < 1 or channels > MAX_EXTENT:
        raise TilingError(f"{channels} channels of scale and bias do not fit the SPM")
    limit = min(limit, overlap_cap(total, max(4096, min(sp.group, limit))))
    t = _tile(sp, limit)
    lay = _Layout(math.prod(t), math.prod(t), math.prod(_kept(t, sp.reduced)), 2, es)
    norm = _Norm(sp, lay, channels, eps, all(c == 0 for c, r in zip(sp.chan, sp.reduced) if r))
    pipe = RingPipeline()
    first = [DmaCopy(queue=Queue.DMA_LD, shape=(2, channels), dst=View(Space.SPM, lay.extra, F32, (channels * 4, 4)),
                     src=View(Space.DRAM, 0, F32, (channels * 4, 4), "GB"))]
    for tiles in _boxes(sp, t):
        kept = _kept(tiles[0][1], sp.reduced)
        group = tiles[0][0]
        for p in ("one",) if len(tiles) == 1 else ("mean", "var", "norm"):
            for k, (start, ext) in enumerate(tiles):
                last = k == len(tiles) - 1
                x = View(Space.SPM, lay.x(pipe.slot), dtype, _dense(ext, es))
                y = View(Space.SPM, lay.y(pipe.out_slot), dtype, _dense(ext, es))
                if p == "one":
                    compute = norm.total(x, ext, True) + norm.mean(kept) + norm.squares(x, ext, True) \
                        + norm.rstd(group, kept) + norm.scale(x, y, start, ext, True)
                elif p == "mean":
                    compute = norm.total(x, ext, k == 0) + (norm.mean(kept) if last else [])
                elif p == "var":
                    compute = norm.squares(x, ext, k == 0) + (norm.rstd(group, kept) if last else [])
                else:
                    compute = norm.scale(x, y, start, ext, False)
                loads = [DmaCopy(queue=Queue.DMA_LD, shape=ext, dst=x, src=_dram(start, sp.x, es, "X"))] + first
                first = []
                stores = [DmaCopy(queue=Queue.DMA_ST, shape=ext, src=y, dst=_dram(start, sp.x, es, "Y"))] \
                    if p in ("one", "norm") else []
                pipe.step(loads, compute, stores)
    regions = (Region("X", 0, total * es), Region("GB", 1, 8 * channels), Region("Y", 2, total * es))
    return pipe.program(vector_config(spm), regions)
