"""Multi-scale deformable attention in one pass per (head, query tile) (docs/perception.md#deformable-attention): the
``MSDeformAttn`` node of :mod:`compiler.passes.fuse_msda`.

Per head ``b`` (of ``n = batch*heads``) and tile of ``pt`` queries, every level's ``P`` samples per query are
gathered from that level's channels-last table ``X_l (n, H_l, W_l, D)``, weighted bilinearly in onnxruntime's
product order (:func:`compiler.kernels.resample.weighting`), then times the attention weight and summed over the ``L*P``
samples in sequence (``vpu.mul`` of sample 0, ``vpu.mul.sum`` without ``.z`` over the rest): the order of
:func:`npusim.functional.sampling_reference.ms_deform_attn`, bit for bit. The samples ``(pt, L*P, D)`` live only in the
SPM; the result ``(pt, D)`` is stored channels-last, ``Y (n, Q, D)``.

Two placements of the level tables (:data:`TABLES`):

- ``spm``: all levels of one head are loaded into the SPM once per head (two table buffers, alternating by head, so
  the next head's tables load while this head's last tiles compute); the coordinates are computed in the same step
  on the vector unit (class 3, docs/perception.md#sample2d-classes;
  :func:`compiler.kernels.grid_sample.coordinate_ops`), the taps read by ``vpu.gather``. Reads each table once per head.
- ``dram``: the tables stay in DRAM and each tile's taps are ``dma.ld.gather`` rows (4 per sample); the indices and
  bilinear weights come from the class-3 coordinate program of each level (:func:`compiler.kernels.grid_sample
  .grid_coordinates`), 32 bytes per sample written and read back (the sampled tensor is ``4*D`` bytes per sample).

:func:`choose_tables` picks the one :func:`isa.cost.program_estimate` prices faster (``spm`` only where two heads'
tables fit next to the tiles, :func:`tables_that_fit`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.errors import CompileError, TilingError
from compiler.kernels import grid_sample as gs
from compiler.kernels.common.pipeline import RingPipeline, vector_config
from compiler.kernels.common.target import Target
from compiler.kernels.resample import ES, pixel_pitch, weighting
from isa import BinOp, DmaCopy, DType, Gather, Program, Queue, Reduce, Region, Space, VecBinary, View
from isa.cost import program_estimate
from isa.instructions import MAX_TABLE_ROWS
from isa.view import MAX_EXTENT

F32, I32 = DType.F32, DType.I32
TABLES = ("spm", "dram")
MAX_LEVELS = 4   # regions: X, G (or I and Wt) per level, K, A, Y within the 16 a program may have


@dataclass(frozen=True)
class MsdaSpec:
    """One fused deformable attention: ``n`` heads (batch x heads), ``d`` channels per head, ``q`` queries,
    ``p`` points per level, ``levels`` the ``(H_l, W_l)`` of each level."""

    n: int
    d: int
    q: int
    p: int
    levels: tuple[tuple[int, int], ...]
    heads: int = 0
    """0: the planar form (one tensor per level, ``X_l (n, H_l, W_l, D)``, ``G_l (n, Q, P, 2)``, ``A (n, Q, L*P)``,
    ``Y (n, Q, D)``); else mmcv's own layouts with ``n = bs*heads``: ``V (bs, sum H*W, heads, D)``, ``G (bs, Q,
    heads, L, P, 2)``, ``A (bs, Q, heads, L, P)``, ``Y (bs, Q, heads*D)`` (:meth:`at`)."""

    def at(self, what: str, b: int, q0: int, level: int = 0) -> tuple[int, int]:
        """(byte offset, byte stride between queries) of head ``b``'s query ``q0`` in region ``what`` (V: level
        ``level``'s first pixel, then the stride between pixels; G: level ``level``'s grid; A; Y)."""
        nl, h = len(self.levels), self.heads
        row = {"V": self.d, "G": 2 * self.p, "A": self.lp, "Y": self.d}[what] * ES
        if not h:
            if what == "V":
                hw = self.levels[level][0] * self.levels[level][1]
                return b * hw * self.d * ES, self.d * ES
            return (b * self.q + q0) * row, row
        bb, hh = divmod(b, h)
        if what == "V":
            start = sum(y * x for y, x in self.levels[:level])
            return ((bb * self.pixels + start) * h + hh) * self.d * ES, h * self.d * ES
        per = nl * row if what == "G" else row      # G holds every level of a (query, head)
        return ((bb * self.q + q0) * h + hh) * per + (level * row if what == "G" else 0), h * per

    @property
    def pixels(self) -> int:
        return sum(h * w for h, w in self.levels)

    @property
    def lp(self) -> int:
        return len(self.levels) * self.p

    def level(self, i: int) -> gs.GridSpec:
        """Level ``i`` as the GridSample it fuses (linear, zeros, align_corners=0; ``q x p`` points)."""
        h, w = self.levels[i]
        return gs.GridSpec(self.n, self.d, h, w, self.q, self.p, "linear", "zeros", 0)

    def check(self) -> str | None:
        """Why the fused lowering cannot take this shape, or None."""
        if not 1 <= len(self.levels) <= MAX_LEVELS:
            return f"{len(self.levels)} levels; the fused lowering takes 1 to {MAX_LEVELS}"
        if self.d > MAX_EXTENT or self.lp > MAX_EXTENT:
            return f"D = {self.d} channels or L*P = {self.lp} samples per query is more than {MAX_EXTENT}"
        if any(h * w > MAX_TABLE_ROWS for h, w in self.levels):
            return "a level has more pixels than a gather table holds"
        return None


def msda_constants(spec: MsdaSpec) -> np.ndarray:
    """Region K: each level's 8 words of :func:`compiler.kernels.grid_sample.grid_constants`."""
    return np.concatenate([gs.grid_constants(spec.level(i)) for i in range(len(spec.levels))])


def _up(n: int, a: int) -> int:
    return -(-n // a) * a


@dataclass(frozen=True)
class _Layout:
    """SPM offsets of one ring slot (per ``pt`` queries) and of the fixed areas above the two slots."""

    pt: int
    tp: int            # bytes per gathered row (a pixel's D channels, padded) and per sample row
    g: int             # spm: the grids of all levels; dram: indices then weights of all levels
    a: int
    idx: int
    w: int
    tmp: int
    taps: int          # spm: one level's taps (reused); dram: every level's
    s: int
    y: int
    slot: int
    tables: int        # spm: the two table buffers (bytes each), dram: 0
    k: int             # the constants (spm only)
    top: int


def _layout(spec: MsdaSpec, target: Target, tables: str, pt: int) -> _Layout:
    line, tp, nl = target.bank_row, pixel_pitch(spec.d, (1,), target), len(spec.levels)
    npts = pt * spec.p
    at = 0

    def take(nbytes: int) -> int:
        nonlocal at
        at, off = at + _up(nbytes, line), at
        return off

    if tables == "spm":
        g, a = take(nl * _up(8 * npts, line)), take(4 * spec.lp * pt)
        idx, w, tmp, taps = take(16 * npts), take(16 * npts), take(80 * npts), take(4 * tp * npts)
    else:
        g, a = take(nl * 2 * _up(16 * npts, line)), take(4 * spec.lp * pt)
        idx = w = tmp = g
        taps = take(nl * 4 * tp * npts)
    s, y = take(spec.lp * tp * pt), take(4 * spec.d * pt)
    slot = at
    tb = sum(_up(h * w * tp, line) for h, w in spec.levels) if tables == "spm" else 0
    k = 2 * slot + 2 * tb
    return _Layout(pt, tp, g, a, idx, w, tmp, taps, s, y, slot, tb, k, k + _up(32 * nl, line))


def _tiling(spec: MsdaSpec, target: Target, tables: str, pt: int | None) -> _Layout:
    if pt is None:
        lo, hi = 1, max(1, min(spec.q, MAX_EXTENT // max(4 * spec.p, spec.lp, spec.d)))
        if _layout(spec, target, tables, lo).top > target.spm:
            raise TilingError(f"fused deformable attention with {tables} tables needs "
                              f"{_layout(spec, target, tables, lo).top} B of SPM for one query, the target has "
                              f"{target.spm} B")
        while lo < hi:   # the most queries per tile that fit
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if _layout(spec, target, tables, mid).top <= target.spm else (lo, mid - 1)
        pt = min(lo, max(8, -(-spec.q // 4)))   # keep a few tiles for the pipeline to overlap
    lay = _layout(spec, target, tables, pt)
    if lay.top > target.spm:
        raise TilingError(f"fused deformable attention tiles of {pt} queries need {lay.top} B of SPM, the target has "
                          f"{target.spm} B")
    return lay


def tables_that_fit(spec: MsdaSpec, target: Target) -> str:
    """``spm`` when two heads' level tables fit the SPM next to tiles of at least 8 queries, else ``dram``."""
    return "spm" if _layout(spec, target, "spm", min(8, spec.q)).top <= target.spm else "dram"


def choose_tables(spec: MsdaSpec, target: Target) -> str:
    """The placement :func:`isa.cost.program_estimate` prices faster: ``spm`` (when it fits, :func:`tables_that_fit`)
    or ``dram`` (its coordinate program included). The SPM tables read each table once, but their ``vpu.gather``
    shares the vector unit with the weighting; ``dma.ld.gather`` runs beside it."""
    if tables_that_fit(spec, target) == "dram":
        return "dram"
    spm = program_estimate(msda_program(spec, target, "spm"), target.arch)
    dram = sum(program_estimate(p, target.arch) for p in (msda_coordinates(spec, target),
                                                           msda_program(spec, target, "dram")))
    return "spm" if spm <= dram else "dram"


def _attention(spec: MsdaSpec, np_: int, s: int, a: int, y: int, tp: int) -> list[VecBinary]:
    """``y[q] = ((s_0*a_0 + s_1*a_1) + ...) + s_{LP-1}*a_{LP-1}``: ``vpu.mul`` then ``vpu.mul.sum`` without ``.z``."""
    lp, d = spec.lp, spec.d
    out = [VecBinary(op=BinOp.MUL, shape=(np_, d), dst=View(Space.SPM, y, F32, (d * ES, ES)),
                     src0=View(Space.SPM, s, F32, (lp * tp, ES)), src1=View(Space.SPM, a, F32, (lp * ES, 0)))]
    if lp > 1:
        out.append(VecBinary(op=BinOp.MUL, reduce=Reduce.SUM, shape=(np_, lp - 1, d),
                             dst=View(Space.SPM, y, F32, (d * ES, 0, ES)),
                             src0=View(Space.SPM, s + tp, F32, (lp * tp, tp, ES)),
                             src1=View(Space.SPM, a + ES, F32, (lp * ES, ES, 0))))
    return out


def _region(spec: MsdaSpec, what: str, level: int) -> str:
    """The region name of ``what`` (V or G) for ``level``: one per level in the planar form, one in mmcv's."""
    return what if spec.heads else {"V": "X", "G": "G"}[what] + str(level)


def _grid_loads(spec: MsdaSpec, b: int, q0: int, np_: int, g: int, gstep: int) -> list[DmaCopy]:
    """The DMAs of head ``b``'s grids of queries ``q0 .. q0+np_`` for every level to ``g + level*gstep`` (``[q][p][x,
    y]``, contiguous)."""
    out = []
    for i in range(len(spec.levels)):
        off, stride = spec.at("G", b, q0, i)
        out.append(DmaCopy(queue=Queue.DMA_LD, shape=(np_, 2 * spec.p), dst=View(Space.SPM, g + i * gstep, F32,
                                                                                    (2 * spec.p * ES, ES)),
                           src=View(Space.DRAM, off, F32, (stride, ES), _region(spec, "G", i))))
    return out


def _regions(spec: MsdaSpec, names: list[tuple[str, int]]) -> tuple[Region, ...]:
    return tuple(Region(name, k, size) for k, (name, size) in enumerate(names))


def _io_regions(spec: MsdaSpec) -> list[tuple[str, int]]:
    """Regions V (or X<l>), G (or G<l>) of the inputs."""
    samples = spec.n * spec.q * spec.p
    if spec.heads:
        return [("V", spec.n * spec.pixels * spec.d * ES), ("G", samples * len(spec.levels) * 8)]
    return [(f"X{i}", spec.n * h * w * spec.d * ES) for i, (h, w) in enumerate(spec.levels)] + \
        [(f"G{i}", samples * 8) for i in range(len(spec.levels))]


def msda_coordinates(spec: MsdaSpec, target: Target, pt: int | None = None) -> Program:
    """The coordinate program of the ``dram`` placement: regions V/X (unused, for one binding), G, K
    (:func:`msda_constants`) in; ``I<l>`` ``(n, Q*P, 4)`` i32 and ``W<l>`` ``(n, Q*P, 4)`` f32 out (per level the
    indices ``y*W + x`` or -1 and the product-order weights of :func:`compiler.kernels.grid_sample.grid_taps`)."""
    why = spec.check()
    if why:
        raise CompileError(why)
    nl, p, line = len(spec.levels), spec.p, target.bank_row
    per = nl * (8 + 32) + 80                                   # bytes per sample: grids, indices + weights, temps
    if pt is None:
        pt = max(1, min(spec.q, (target.spm - 4 * nl * line - 64 * line) // (2 * per * p), MAX_EXTENT // (4 * p)))
    npts = pt * p
    gstep, ostep = _up(8 * npts, line), _up(16 * npts, line)
    g, o = 0, nl * gstep
    tmp = o + 2 * nl * ostep
    slot = tmp + _up(80 * npts, line)
    k = 2 * slot
    if k + 32 * nl > target.spm:
        raise TilingError(f"deformable attention coordinates of {pt} queries need {k + 32 * nl} B of SPM, the target "
                          f"has {target.spm} B")
    pipe = RingPipeline()
    for b in range(spec.n):
        for q0 in range(0, spec.q, pt):
            np_ = min(pt, spec.q - q0)
            base = pipe.slot * slot
            loads = [] if pipe.steps else [DmaCopy(queue=Queue.DMA_LD, shape=(8 * nl,),
                                                   dst=View(Space.SPM, k, F32, (ES,)),
                                                   src=View(Space.DRAM, 0, F32, (ES,), "K"))]
            loads += _grid_loads(spec, b, q0, np_, base + g, gstep)
            compute, stores = [], []
            first = (b * spec.q + q0) * p
            for i in range(nl):
                oi, ow = base + o + 2 * i * ostep, base + o + (2 * i + 1) * ostep
                compute += gs.coordinate_ops(spec.level(i), np_ * p, base + g + i * gstep, k + 32 * i, oi, ow,
                                              base + tmp)
                stores += [DmaCopy(queue=Queue.DMA_ST, shape=(np_ * p * 4,), src=View(Space.SPM, oi, I32, (ES,)),
                                   dst=View(Space.DRAM, first * 16, I32, (ES,), f"I{i}")),
                           DmaCopy(queue=Queue.DMA_ST, shape=(np_ * p * 4,), src=View(Space.SPM, ow, F32, (ES,)),
                                   dst=View(Space.DRAM, first * 16, F32, (ES,), f"W{i}"))]
            pipe.step(loads, compute, stores)
    samples = spec.n * spec.q * p
    names = [n for n in _io_regions(spec) if n[0].startswith("G")] + [("K", 32 * nl)]
    names += [(f"{w}{i}", samples * 16) for i in range(nl) for w in "IW"]
    return pipe.program(vector_config(target.spm), _regions(spec, names))


def msda_program(spec: MsdaSpec, target: Target, tables: str | None = None, pt: int | None = None) -> Program:
    """The fused program. Regions: the values (``X<l>`` ``(n, H_l, W_l, D)`` per level, or mmcv's ``V``), ``A``
    and ``Y`` (:class:`MsdaSpec`); with ``spm`` tables also the grids (``G<l>`` ``(n, Q, P, 2)`` or mmcv's ``G``)
    and ``K`` (:func:`msda_constants`), with ``dram`` tables ``I<l>``, ``W<l>`` of :func:`msda_coordinates`.
    ``pt`` queries per tile (None: chosen)."""
    why = spec.check()
    if why:
        raise CompileError(why)
    tables = tables or tables_that_fit(spec, target)
    if tables not in TABLES:
        raise CompileError(f"tables must be one of {TABLES}, not {tables!r}")
    lay = _tiling(spec, target, tables, pt)
    line = target.bank_row
    offs = np.cumsum([0] + [_up(h * w * lay.tp, line) for h, w in spec.levels]).tolist()
    pipe = RingPipeline()
    for b in range(spec.n):
        for q0 in range(0, spec.q, lay.pt):
            loads, compute, store = _msda_step(spec, lay, tables, offs, line, b, q0, pipe.slot * lay.slot)
            pipe.step(loads, compute, [store])
    samples, nl = spec.n * spec.q * spec.p, len(spec.levels)
    names = _io_regions(spec)
    if tables == "spm":
        names.append(("K", 32 * nl))
    else:
        names = [n for n in names if not n[0].startswith("G")]
        names += [(f"{w}{i}", samples * 16) for i in range(nl) for w in "IW"]
    names += [("A", spec.n * spec.q * spec.lp * ES), ("Y", spec.n * spec.q * spec.d * ES)]
    return pipe.program(vector_config(target.spm), _regions(spec, names))


def _msda_step(spec: MsdaSpec, lay: _Layout, tables: str, offs: list[int], line: int, b: int, q0: int,
               base: int) -> tuple[list, list, DmaCopy]:
    """The loads, compute and store of head ``b``'s queries ``q0..`` (``lay.pt`` at most) in the ring slot at SPM
    byte ``base``: per level its taps gathered (from the SPM tables or DRAM) and weighted, then the attention."""
    p, d, tp = spec.p, spec.d, lay.tp
    np_ = min(lay.pt, spec.q - q0)
    loads, compute = [], []
    gstep = _up(8 * lay.pt * p, line)
    tab = 2 * lay.slot + (b % 2) * lay.tables
    if tables == "spm":
        loads += _spm_table_loads(spec, lay, offs, tab, b, q0)
        loads += _grid_loads(spec, b, q0, np_, base + lay.g, gstep)
    for i, (h, w) in enumerate(spec.levels):
        if tables == "spm":
            idx, wts, taps = base + lay.idx, base + lay.w, base + lay.taps
            compute += gs.coordinate_ops(spec.level(i), np_ * p, base + lay.g + i * gstep, lay.k + 32 * i, idx,
                                         wts, base + lay.tmp)
            compute.append(Gather(queue=Queue.VPU, shape=(np_ * p, 4), row=d, rows=h * w,
                                  dst=View(Space.SPM, taps, F32, (4 * tp, tp, ES)),
                                  table=View(Space.SPM, tab + offs[i], F32, (tp,)),
                                  idx=View(Space.SPM, idx, I32, (16, 4))))
        else:
            wts, taps, level_loads = _dram_taps(spec, lay, line, i, b, q0, np_, base)
            loads += level_loads
        compute += weighting((np_, p), d, View(Space.SPM, base + lay.s + i * p * tp, F32, (spec.lp * tp, tp, ES)),
                             View(Space.SPM, taps, F32, (p * 4 * tp, 4 * tp, tp, ES)),
                             View(Space.SPM, wts, F32, (p * 16, 16, ES)))
    off, stride = spec.at("A", b, q0)
    loads.append(DmaCopy(queue=Queue.DMA_LD, shape=(np_, spec.lp),
                         dst=View(Space.SPM, base + lay.a, F32, (spec.lp * ES, ES)),
                         src=View(Space.DRAM, off, F32, (stride, ES), "A")))
    compute += _attention(spec, np_, base + lay.s, base + lay.a, base + lay.y, tp)
    off, stride = spec.at("Y", b, q0)
    store = DmaCopy(queue=Queue.DMA_ST, shape=(np_, d), src=View(Space.SPM, base + lay.y, F32, (d * ES, ES)),
                    dst=View(Space.DRAM, off, F32, (stride, ES), "Y"))
    return loads, compute, store


def _spm_table_loads(spec: MsdaSpec, lay: _Layout, offs: list[int], tab: int, b: int, q0: int) -> list[DmaCopy]:
    """The constants (the first step only) and, at a head's first queries, its level tables into the SPM buffer at
    byte ``tab``."""
    loads = []
    if b == 0 and q0 == 0:
        loads.append(DmaCopy(queue=Queue.DMA_LD, shape=(8 * len(spec.levels),), dst=View(Space.SPM, lay.k, F32, (ES,)),
                             src=View(Space.DRAM, 0, F32, (ES,), "K")))
    for i, (h, w) in enumerate(spec.levels):
        if q0 == 0:   # this head's tables, once
            off, rs = spec.at("V", b, 0, i)
            loads.append(DmaCopy(queue=Queue.DMA_LD, shape=(h, w, spec.d),
                                 dst=View(Space.SPM, tab + offs[i], F32, (w * lay.tp, lay.tp, ES)),
                                 src=View(Space.DRAM, off, F32, (w * rs, rs, ES), _region(spec, "V", i))))
    return loads


def _dram_taps(spec: MsdaSpec, lay: _Layout, line: int, i: int, b: int, q0: int, np_: int,
               base: int) -> tuple[int, int, list]:
    """Level ``i`` with ``dram`` tables: its indices and weights loaded, its taps gathered from DRAM by the DMA; (SPM
    byte of the weights, of the taps, the loads)."""
    h, w = spec.levels[i]
    npts, tp = np_ * spec.p, lay.tp
    per = 2 * _up(16 * lay.pt * spec.p, line)
    idx = base + lay.g + i * per
    wts = idx + per // 2
    taps = base + lay.taps + i * 4 * tp * lay.pt * spec.p
    first = (b * spec.q + q0) * spec.p
    off, rs = spec.at("V", b, 0, i)
    return wts, taps, [DmaCopy(queue=Queue.DMA_LD, shape=(npts * 4,), dst=View(Space.SPM, idx, I32, (ES,)),
                               src=View(Space.DRAM, first * 16, I32, (ES,), f"I{i}")),
                       DmaCopy(queue=Queue.DMA_LD, shape=(npts * 4,), dst=View(Space.SPM, wts, F32, (ES,)),
                               src=View(Space.DRAM, first * 16, F32, (ES,), f"W{i}")),
                       Gather(queue=Queue.DMA_LD, shape=(npts, 4), row=spec.d, rows=h * w,
                              dst=View(Space.SPM, taps, F32, (4 * tp, tp, ES)),
                              table=View(Space.DRAM, off, F32, (rs,), _region(spec, "V", i)),
                              idx=View(Space.SPM, idx, I32, (16, 4)))]
