"""A hand-scheduled, double-buffered tiled GEMM: ``C[M,N] = A[M,K] @ B[K,N]``, the first lowering of the compiler.

DRAM: A and B row-major in their operand dtype, C row-major in the accumulator type (i32 for i8/u8, f32 for floats).
Two SPM slots each for an A tile ``[tm][tk]`` and a B tile, two ACC tiles; six semaphores make DMA, the matrix unit
and the store overlap by construction: ``a_full``/``a_empty`` and ``b_full``/``b_empty`` (dma.ld <-> mxu, rings of
2) and ``acc_full``/``acc_empty`` (mxu <-> dma.st, ring of 2). A tile is loaded only when the step needs another one:
with a single k tile, an A tile stays for all its n tiles (loop order ``mn``) or a B tile for all its m tiles
(``nm``). A new B tile may come in ``split`` pieces, each followed by its own matrix work, and the last output tile
leaves in the same pieces, so the pipeline fills and drains in small steps. The store writes each C row of a tile as
one contiguous DRAM run (``tn * 4`` bytes), not one run per array-column block. Ragged edges get their own
instructions, so any M, N, K works.

An :class:`~compiler.kernels.common.epilogue.Epilogue` (fusion) applies a divisor, a per-column bias (region Bias,
loaded into SPM once) and an activation to each finished accumulator tile on the vector unit before the store (semaphore
``out_full``), and a residual (region R, shaped like C) is loaded into the accumulators before the tile's first
products, so none of them costs a pass through DRAM of its own.

The matrix instructions are shaped for the array's dataflow so that each fold streams as long as the hardware can:

- ws: B pre-blocked into array tiles ``[nb][kb][k][n]``; ``mxu.mm`` loops ``[nb, kb]``, streams the tm rows of A.
- os: B as rows ``[nb][tk][cols]``; ``mxu.mm`` with k = 1 loops ``[nb, q < tk]`` accumulating into the same rows
  (acc stride 0), so one fold streams the whole reduction.
- is: B transposed per row block ``[kb][tn][rows]``; ``mxu.mm`` with n = 1 loops ``[kb, j < tn]`` over the same A
  block (a stride 0), so one fold streams every output column.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import lru_cache, partial
from typing import ClassVar, NamedTuple

import numpy as np

from compiler.errors import CompileError, TilingError
from compiler.kernels.common.blocks import equal_blocks
from compiler.kernels.common.epilogue import NO_EPILOGUE, Epilogue, epilogue_ops, synced_epilogue
from compiler.kernels.common.pipeline import synced, with_sync
from compiler.kernels.common.search import (
    Ranking,
    SearchRule,
    TilingSearch,
    check_program_max,
    on_array_blocks,
    under_program_max,
)
from compiler.kernels.common.sink import EstimateSink, PriceMemo, ProgramSink, Sink
from compiler.kernels.common.target import Target
from isa import DmaCopy, DType, Halt, MatMul, Program, Queue, Region, SemDecl, Space, View
from isa.cost import instr_costs
from isa.dtypes import INT_RANGE, f32_to_bf16, to_compute

ACC_TYPE = {DType.I8: DType.I32, DType.U8: DType.I32, DType.F16: DType.F32, DType.BF16: DType.F32,
            DType.F32: DType.F32}
ORDERS = ("mn", "nm")


@dataclass(frozen=True)
class GemmTiling:
    """Tile sizes in elements: tm rows of A per tile, tn output columns, tk reduction depth.

    order: ``"mn"`` walks n tiles inside m tiles (with a single k tile, an A tile stays loaded across its n tiles),
    ``"nm"`` the other way round (a B tile stays across its m tiles). split: steps that load a new B tile load it in
    ``split`` pieces of whole array-column blocks, and their matrix work follows piece by piece, so it starts after
    the first piece; the last output tile is stored in the same pieces, so little is left to store at the end
    (ws and os; ``is`` keeps 1)."""

    tm: int
    tn: int
    tk: int
    order: str = "mn"
    split: int = 1


def _up(x: int, q: int) -> int:
    return -(-x // q) * q


def is_pitch(rows: int, es: int, bank_width: int) -> int:
    """Bytes between two B columns under is: ``rows`` elements, padded by one bank word when the column would be an
    even number of words (then a DMA beat writing consecutive columns would use only every other bank)."""
    pitch = rows * es
    return pitch + bank_width if pitch % bank_width == 0 and (pitch // bank_width) % 2 == 0 else pitch


def slot_bytes(t: GemmTiling, dtype: DType, target: Target) -> tuple[int, int, int]:
    """Bytes of one A slot, one B slot (SPM) and one accumulator tile (ACC) for tiling ``t``."""
    es, rows, cols, dataflow = dtype.size, target.rows, target.cols, target.dataflow
    if dataflow == "ws":
        b = _up(t.tn, cols) * _up(t.tk, rows) * es
    elif dataflow == "os":
        b = _up(t.tn, cols) * t.tk * es
    else:
        b = -(-t.tk // rows) * t.tn * is_pitch(rows, es, target.bank_width)
    acc = t.tm * (t.tn if dataflow == "is" else _up(t.tn, cols)) * 4
    return t.tm * t.tk * es, b, acc


def epilogue_bytes(N: int, t: GemmTiling, ep: Epilogue, dtype: DType, target: Target) -> int:
    """SPM bytes an epilogue takes after the A/B slots: the bias (N accumulator-type elements) and, for an activation
    that needs one, a scratch tile the size of an accumulator tile (each start aligned to 64 bytes)."""
    if not ep.active:
        return 0
    bias = _up(N * 4, 64) if ep.bias else 0
    return 64 + bias + (slot_bytes(t, dtype, target)[2] if ep.scratch else 0)


def choose_tiling(M: int, N: int, K: int, dtype: DType, target: Target) -> GemmTiling:
    """The largest tiles that fit two A/B slots in half the SPM and two accumulator tiles in the ACC."""
    rows, cols, spm, acc, max_rows = target.rows, target.cols, target.spm, target.acc, target.max_rows

    def fits(t: GemmTiling, spm_budget: int) -> bool:
        a, b, c = slot_bytes(t, dtype, target)
        return 2 * (a + b) <= spm_budget and 2 * c <= acc

    t = GemmTiling(min(M, max_rows), min(_up(N, cols), cols * max(1, (acc // 2) // (min(M, max_rows) * cols * 4))),
                   _up(K, rows))
    while not fits(t, spm) and t.tm > 1 and 2 * slot_bytes(t, dtype, target)[2] > acc:
        t = replace(t, tm=max(1, t.tm // 2))
    while t.tk > rows and not fits(t, spm // 2):
        t = replace(t, tk=t.tk - rows)
    while t.tn > cols and not fits(t, spm):
        t = replace(t, tn=t.tn - cols)
    return GemmTiling(t.tm, min(t.tn, _up(N, cols)), min(t.tk, _up(K, rows)))


SEARCH_PRICED = 8
"""GEMM candidates, the best by :func:`gemm_candidates`' first-step heuristic, that :func:`search_tiling` prices exactly
(:func:`gemm_estimate`)."""

NEAR_TIE = 0.10
"""Estimates within this fraction of the least are near-ties, among which the heuristic's rank decides: on the zoo's
GEMMs the heuristic ranks tilings of nearly equal :func:`isa.cost.program_estimate` better than it does (see
docs/compiler.md)."""


@dataclass(frozen=True)
class GemmSearch(TilingSearch[GemmTiling]):
    """The tiling search of ``C = A @ B`` (``M x K`` by ``K x N``) on ``target``
    (:mod:`compiler.kernels.common.search`): candidates ranked by a first-step heuristic (:meth:`rank`), the best
    ``SEARCH_PRICED`` priced by :func:`gemm_estimate` with the search's
    :class:`~compiler.kernels.common.sink.PriceMemo`, the best-ranked within ``NEAR_TIE`` of the least chosen."""

    M: int
    N: int
    K: int
    dtype: DType
    target: Target
    b_packed: bool = False
    epilogue: Epilogue = NO_EPILOGUE
    memo: PriceMemo = field(default_factory=PriceMemo, compare=False)
    rule: ClassVar[SearchRule] = SearchRule(SEARCH_PRICED, NEAR_TIE)

    def rank(self, ranking: Ranking[GemmTiling]) -> None:
        """Offer every tiling that fits (see :func:`gemm_candidates`), ranked (cycles, steps, split)."""
        _FirstStep(self).rank(ranking)
        if not ranking:
            raise TilingError(f"no GEMM tiling of {self.M}x{self.N}x{self.K} {self.dtype.text} fits "
                              f"{self.target.spm} B of SPM and {self.target.acc} B of ACC")

    def price(self, candidate: GemmTiling, bound: float | None) -> int:
        return gemm_estimate(self.M, self.N, self.K, self.dtype, self.target, candidate, self.b_packed,
                             self.epilogue, self.memo, bound)


@lru_cache(maxsize=256)
def search_tiling(M: int, N: int, K: int, dtype: DType, target: Target, b_packed: bool = False,
                  epilogue: Epilogue = NO_EPILOGUE) -> GemmTiling:
    """The tiling (tile sizes, loop order, B split) for ``C = A @ B`` on ``target``: of the ``SEARCH_PRICED`` best
    candidates of :func:`gemm_candidates`, the best-ranked one whose :func:`isa.cost.program_estimate`
    (:func:`gemm_estimate`: the program emitted into an estimating sink) is within ``NEAR_TIE`` of the least
    (:class:`GemmSearch`). The candidates are priced in rank order, each only until its estimate is known to be above
    that window. TilingError when no tiling fits."""
    return GemmSearch(M, N, K, dtype, target, b_packed, epilogue).choose()


def gemm_on_array(M: int, N: int, K: int, dtype: DType, target: Target, b_packed: bool = False,
                  epilogue: Epilogue = NO_EPILOGUE, blocks: bool = True) -> tuple[Target, GemmTiling]:
    """The target the program and :func:`pack_b` are built for, and the tiling: :func:`search_tiling`'s on
    ``target`` or, when no tiling fits its whole array (and ``blocks``), on the block of the array that
    :func:`~compiler.kernels.common.search.on_array_blocks` finds (smaller k and n blocks, B tiles and accumulator
    tiles, priced by :func:`gemm_estimate`). TilingError when not even a 1 x 1 block fits."""
    return on_array_blocks(target, lambda t: search_tiling(M, N, K, dtype, t, b_packed, epilogue),
                           lambda t, tiling: gemm_estimate(M, N, K, dtype, t, tiling, b_packed, epilogue), blocks)


def gemm_candidates(M: int, N: int, K: int, dtype: DType, target: Target, b_packed: bool = False,
                    epilogue: Epilogue = NO_EPILOGUE) -> list[GemmTiling]:
    """The ``SEARCH_PRICED`` tilings :func:`search_tiling` prices, best first by a first-step heuristic (cycles) that
    needs no walk of the steps. TilingError when none fits.

    Each candidate that fits (two A/B slots in the SPM, two accumulator tiles in the ACC) is priced by its first
    step's real instructions with :func:`isa.cost.instr_cost`: the matrix unit's cycles per step, the DRAM bus time
    of each A load, B load and tile store (bursts, row misses and all) times how many of them the loop order needs
    (an A tile is loaded once per m tile when there is one k tile and n is the inner loop, a B tile once per n tile
    in the other order), and each DMA queue's own time. The prediction is the busiest of the matrix unit, the bus
    and the two DMA queues, plus the first A load and B piece (nothing to multiply before them) and the last store;
    ties go to fewer steps, then a smaller split, then the larger tiles.

    An active ``epilogue`` takes its SPM (bias, scratch tile) from the slots' budget, adds the vector unit (its
    instructions on one tile, per tile) to the units that can be the busiest, its residual tile loads to the load
    queue and the bus, and the last tile's epilogue to the tail.
    """
    return GemmSearch(M, N, K, dtype, target, b_packed, epilogue).candidates()


class _Tile(NamedTuple):
    """A tiling as :class:`_FirstStep` prices it: the tiling, its first step's extents, its A and B slot bytes, its
    layout, the accumulators' row stride that varies with it (``wide``: ``is`` keeps B and the accumulators in
    strides of the whole tile, else 0) and the epilogue's instructions on a piece (and their memo key)."""

    t: GemmTiling
    tm: int
    tn: int
    tk: int
    a: int
    b: int
    lay: GemmLayout
    wide: int
    ep_ops: Callable
    ep_key: tuple


class _Piece(NamedTuple):
    """:class:`_FirstStep`'s costs of one piece of a step's columns (cycles): its B load (cycles, bus cycles),
    matrix work, stores and epilogue."""

    b: tuple[int, int]
    mm: int
    store: int
    epilogue: int


class _FirstStep:
    """:meth:`GemmSearch.rank`'s heuristic (see :func:`gemm_candidates`): every tiling priced by the instructions of
    its first step, each distinct group of them built and priced once per search (:meth:`cost`)."""

    def __init__(self, search: GemmSearch) -> None:
        self.s, self.arch = search, search.target.arch
        self.es, self.at = search.dtype.size, ACC_TYPE[search.dtype]
        self.sums: dict[tuple, tuple[int, int]] = {}

    def cost(self, key: tuple, build, *args) -> tuple[int, int]:
        """(cycles, DRAM bus window) of the instructions ``build(*args)`` gives, run one after the other; once per
        ``key`` (what they depend on besides the search's fixed M, N, K, dtype and target)."""
        got = self.sums.get(key)
        if got is None:
            cs = instr_costs(build(*args), self.arch, self.s.memo.costs[False])
            got = self.sums[key] = sum(c.cycles for c in cs), sum(c.dram_window for c in cs)
        return got

    def a_load(self, tm: int, tk: int) -> list:
        es, dtype = self.es, self.s.dtype
        return [DmaCopy(queue=Queue.DMA_LD, shape=(tm, tk), dst=View(Space.SPM, 0, dtype, (tk * es, es)),
                        src=View(Space.DRAM, 0, dtype, (self.s.K * es, es), "A"))]

    def tilings(self):
        """(tiling, A slot bytes, B slot bytes) of every tiling of the menus that fits, the largest first."""
        s = self.s
        M, N, K, target = s.M, s.N, s.K, s.target
        rows, cols, max_rows = target.rows, target.cols, target.max_rows
        tms = sorted({min(M, v) for v in (max_rows, 384, 256, 192, 128, 96, 64, 48, 32, 16, rows) if v <= max_rows})
        tns = sorted({min(_up(N, cols), cols * k) for k in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)})
        tks = sorted({min(_up(K, rows), rows * k) for k in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)})
        for t in (GemmTiling(tm, tn, tk) for tm in tms[::-1] for tn in tns[::-1] for tk in tks[::-1]):
            if not under_program_max(-(-M // t.tm) * -(-N // t.tn) * -(-K // t.tk)):
                continue
            a, b, c = slot_bytes(t, s.dtype, target)
            if 2 * (a + b) + epilogue_bytes(N, t, s.epilogue, s.dtype, target) <= target.spm and 2 * c <= target.acc:
                yield t, a, b

    def rank(self, ranking: Ranking[GemmTiling]) -> None:
        """Offer every split and loop order of every tiling that fits, ranked (cycles, steps, split); a tiling whose
        matrix work alone cannot beat the worst of a full ranking is left out."""
        s, target = self.s, self.s.target
        M, N, K, ep, cols, rows, bw = s.M, s.N, s.K, s.epilogue, target.cols, target.rows, target.bank_width
        layout, pitch = LAYOUTS[target.dataflow], is_pitch(rows, self.es, bw)
        for t, a, b in self.tilings():
            tm, tn, tk = min(t.tm, M), min(t.tn, N), min(t.tk, K)
            lay = layout(self.es, self.at, rows, cols, N, t, -(-t.tk // rows), -(-t.tn // cols), pitch)
            wide = t.tn if target.dataflow == "is" else 0
            a_cost = self.cost(("a", tm, tk), self.a_load, tm, tk)
            steps = -(-M // t.tm) * -(-N // t.tn) * -(-K // t.tk)
            mm = self.cost(("mm", tm, t.tk, wide, tn), lay.matmuls, 0, 0, 2 * a, tm, tk, tn, s.dtype, True)[0]
            worst = ranking.worst()
            if worst is not None and steps * mm + a_cost[0] > worst[0]:   # a lower bound of every estimate below
                continue
            ep_base = _up(2 * (a + b), 64)
            scratch = ep_base + (_up(N * 4, 64) if ep.bias else 0)
            self.offer_splits(ranking, _Tile(t, tm, tn, tk, a, b, lay, wide,
                                             partial(lay.epilogue, ep, 0, ep_base, scratch, 0),
                                             ("ep", tm, wide, ep_base % bw, scratch % bw)), a_cost, mm)

    def offer_splits(self, ranking: Ranking[GemmTiling], tile: _Tile, a_cost: tuple[int, int], mm: int) -> None:
        """Offer ``tile`` with each B split and loop order (``a_cost``: cycles and bus cycles of an A load, ``mm``:
        matrix cycles of a step): the busiest of the matrix unit, the bus, the DMA queues and the vector unit over
        the whole GEMM, plus what the first step waits for before its matrix work and the last tile's epilogue and
        stores after it."""
        s, (t, tm, tn, _, _, _, lay, wide, ep_ops, ep_key) = self.s, tile
        M, N, K, ep, cols = s.M, s.N, s.K, s.epilogue, s.target.cols
        (a_cyc, a_bus), (st_cyc, st_bus) = a_cost, self.cost(("st", tm, wide, 0, tn), lay.stores, 0, 0, 0, tm, tn)
        epi = self.cost(ep_key + (0, tn), ep_ops, 0, tn, tm)[0] if ep.active else 0
        res_cyc, res_bus = self.cost(("r", tm, wide, tn), lay.residual_loads, 0, 0, 0, tm, tn) if ep.residual \
            else (0, 0)
        n_m, n_n, n_k = -(-M // t.tm), -(-N // t.tn), -(-K // t.tk)
        tiles, steps = n_m * n_n, n_m * n_n * n_k
        piece: dict[int, _Piece] = {}   # columns -> its costs
        for split in (1, 2, 4, 8) if s.target.dataflow != "is" else (1,):
            if split > -(-t.tn // cols):
                break
            pieces = _pieces(tn, t, cols, split)
            for j, w in pieces:
                if w not in piece:
                    piece[w] = self.piece(tile, j, w)
            b_cost, mms, piece_stores, piece_eps = zip(*(piece[w] for _, w in pieces))
            # the first step waits for its A tile and first B piece, then for any piece that loads slower than the
            # matrix works through the one before; the last tile's pieces store (after their epilogue) behind the
            # tile stored before it
            prologue = a_cyc + res_cyc + b_cost[0][0] + max(0, sum(c for c, _ in b_cost[1:]) - sum(mms[:-1]))
            tail = max(piece_eps[-1] + piece_stores[-1], (st_cyc + epi if tiles > 1 else 0) + sum(piece_stores)
                       + sum(piece_eps) - sum(mms))
            for order in ORDERS if n_m > 1 and n_n > 1 else ORDERS[:1]:   # (else both are one program)
                a_loads = n_m if n_k == 1 and (order == "mn" or n_m == 1) else steps
                b_loads = n_n if n_k == 1 and (order == "nm" or n_n == 1) else steps
                bus = a_loads * a_bus + b_loads * sum(w for _, w in b_cost) + tiles * (st_bus + res_bus)
                queues = max(a_loads * a_cyc + b_loads * sum(c for c, _ in b_cost) + tiles * res_cyc,
                             tiles * st_cyc)
                busy = steps * mm + (min(b_loads + 1, steps) * (sum(mms) - mm) if split > 1 else 0)
                rank = (max(busy, bus, queues, tiles * epi) + prologue + tail, steps, split)
                if ranking.admits(rank):
                    ranking.offer(rank, replace(t, order=order, split=split))

    def piece(self, tile: _Tile, j: int, w: int) -> _Piece:
        """The costs of the piece of columns ``[j, j + w)`` of ``tile``'s first step."""
        s, (t, tm, _, tk, a, b, lay, wide, ep_ops, ep_key) = self.s, tile
        cols, dtype = s.target.cols, s.dtype
        blk = b // -(-t.tn // cols)   # (bytes of one B column block)
        at_b = (2 * a + j // cols * blk) % s.target.bank_width
        span = b if s.target.dataflow == "is" else -(-w // cols) * blk
        b_cost = self.cost(("bp", at_b, j // cols * blk, span), _contiguous, Space.SPM, 2 * a + j // cols * blk, "B",
                           j // cols * blk, span, dtype) if s.b_packed \
            else self.cost(("b", at_b, t.tk, wide, j, w), lay.b_loads, 2 * a + j // cols * blk, 0, j, tk, w, dtype)
        return _Piece(b_cost, self.cost(("mm", tm, t.tk, wide, w), lay.matmuls, 0, 0, 2 * a, tm, tk, w, dtype,
                                        True)[0],
                      self.cost(("st", tm, wide, j, w), lay.stores, 0, 0, j, tm, w)[0],
                      self.cost(ep_key + (j, w), ep_ops, j, w, tm)[0] if s.epilogue.active else 0)


def _steps(M: int, N: int, K: int, t: GemmTiling) -> list[tuple[int, int, int]]:
    """(m0, n0, k0) of every step in issue order: k innermost, then n or m as ``t.order`` says."""
    ms, ns, ks = range(0, M, t.tm), range(0, N, t.tn), range(0, K, t.tk)
    if t.order == "nm":
        return [(m0, n0, k0) for n0 in ns for m0 in ms for k0 in ks]
    return [(m0, n0, k0) for m0 in ms for n0 in ns for k0 in ks]


def _pieces(tn: int, t: GemmTiling, cols: int, split: int) -> list[tuple[int, int]]:
    """(first column, columns) of the ``split`` pieces of a tile of ``tn`` columns: whole array-column blocks."""
    blocks = -(-t.tn // cols)
    per = -(-blocks // split) * cols if split > 1 else _up(tn, cols)
    return [(j, min(per, tn - j)) for j in range(0, tn, max(per, cols))]


class GemmPlan(NamedTuple):
    """One tiled GEMM's fixed choices (:func:`gemm_plan`): sizes, tiling, layout and where everything lives in SPM
    and ACC (bytes)."""

    M: int
    N: int
    K: int
    dtype: DType
    target: Target
    t: GemmTiling
    ep: Epilogue
    b_packed: bool
    lay: GemmLayout
    split: int        # B pieces of a step that loads a new B tile (1 under is)
    a_slot: int
    b_slot: int
    acc_slot: int
    block_b: int      # bytes of one column block of a B slot
    block_acc: int    # ... of an ACC tile
    bias_base: int    # the epilogue's SPM: bias, then the scratch tile
    scratch_base: int


class _Step(NamedTuple):
    """One step of :func:`tiled_gemm`'s loop (:func:`_walk`): its tile origin and extents (elements), whether it
    loads a new A or B tile or uses one for the last time, whether its k tile is the first or the last of its output
    tile, whether it is the last step, its A and B slots and ACC tile (bytes), how many output tiles were finished
    before, and the (first column, columns) pieces its B loads, matrix work and (last step) stores come in."""

    m0: int
    n0: int
    k0: int
    tm: int
    tn: int
    tk: int
    new_a: bool
    last_a: bool
    new_b: bool
    last_b: bool
    first_k: bool
    last_k: bool
    final: bool
    a_base: int
    b_base: int
    acc_base: int
    tile: int
    pieces: list


def gemm_plan(M: int, N: int, K: int, dtype: DType, target: Target, tiling: GemmTiling | None, b_packed: bool,
               ep: Epilogue) -> GemmPlan:
    """:func:`tiled_gemm`'s checks and layout (what :func:`emit_gemm` emits); TilingError or CompileError when it
    cannot take them."""
    rows, cols, dataflow = target.rows, target.cols, target.dataflow
    t = tiling or choose_tiling(M, N, K, dtype, target)
    if t.order not in ORDERS or t.split < 1:
        raise TilingError(f"tiling {t}: order must be one of {ORDERS} and split >= 1")
    es, at = dtype.size, ACC_TYPE[dtype]
    if ep.out is not None:
        raise CompileError("the GEMM epilogue does not requantize; QLinearMatMul has a requantization pass")
    if at is not DType.F32 and (ep.divisor is not None or ep.act not in (None, "relu", "clamp")):
        raise CompileError(f"a {at.text} accumulator takes only a bias, relu and clamp in its epilogue, not {ep}")
    a_slot, b_slot, acc_slot = slot_bytes(t, dtype, target)
    extra = epilogue_bytes(N, t, ep, dtype, target)
    if 2 * (a_slot + b_slot) + extra > target.spm or 2 * acc_slot > target.acc:
        raise TilingError(f"tiling {t} needs {2 * (a_slot + b_slot) + extra} B of SPM and {2 * acc_slot} B of ACC")
    check_program_max(-(-M // t.tm) * -(-N // t.tn) * -(-K // t.tk), t, f"a {M}x{N}x{K} GEMM")
    kb_max, nb_max = -(-t.tk // rows), -(-t.tn // cols)
    lay = LAYOUTS[dataflow](es, at, rows, cols, N, t, kb_max, nb_max, is_pitch(rows, es, target.bank_width))
    bias_base = _up(2 * (a_slot + b_slot), 64)
    return GemmPlan(M, N, K, dtype, target, t, ep, b_packed, lay, 1 if dataflow == "is" else min(t.split, nb_max),
                 a_slot, b_slot, acc_slot, b_slot // nb_max, t.tm * cols * 4, bias_base,
                 bias_base + (_up(N * 4, 64) if ep.bias else 0))


def _walk(p: GemmPlan):
    """:func:`tiled_gemm`'s steps in issue order (:class:`_Step`); A and B slots and ACC tiles are rings of 2."""
    M, N, K, t, cols = p.M, p.N, p.K, p.t, p.target.cols
    steps = _steps(M, N, K, t)
    a_n = b_n = tiles = 0  # A slots, B slots and ACC tiles used so far
    prev, last = None, len(steps) - 1
    pieces: dict[tuple[int, bool], list] = {}   # (columns, split or not) -> pieces
    for s, (m0, n0, k0) in enumerate(steps):
        tm, tn, tk = min(t.tm, M - m0), min(t.tn, N - n0), min(t.tk, K - k0)
        nxt = steps[s + 1] if s < last else None
        new_a, last_a = prev is None or prev[::2] != (m0, k0), nxt is None or nxt[::2] != (m0, k0)
        new_b, last_b = prev is None or prev[1:] != (n0, k0), nxt is None or nxt[1:] != (n0, k0)
        a_n, b_n = a_n + new_a, b_n + new_b
        last_k, split = k0 + t.tk >= K, new_b or nxt is None
        cut = pieces.get((tn, split))
        if cut is None:
            cut = pieces[tn, split] = _pieces(tn, t, cols, p.split if split else 1)
        yield _Step(m0, n0, k0, tm, tn, tk, new_a, last_a, new_b, last_b, k0 == 0, last_k, nxt is None,
                    ((a_n - 1) % 2) * p.a_slot, 2 * p.a_slot + ((b_n - 1) % 2) * p.b_slot, (tiles % 2) * p.acc_slot,
                    tiles, cut)
        tiles += last_k
        prev = (m0, n0, k0)


def _bias_load(p: GemmPlan) -> DmaCopy:
    """The whole bias, once, before anything else."""
    at = ACC_TYPE[p.dtype]
    return DmaCopy(queue=Queue.DMA_LD, shape=(p.N,), dst=View(Space.SPM, p.bias_base, at, (4,)),
                   src=View(Space.DRAM, 0, at, (4,), "Bias"))


def _a_load(p: GemmPlan, s: _Step) -> DmaCopy:
    es, dtype = p.dtype.size, p.dtype
    return DmaCopy(queue=Queue.DMA_LD, shape=(s.tm, s.tk), dst=View(Space.SPM, s.a_base, dtype, (s.tk * es, es)),
                   src=View(Space.DRAM, (s.m0 * p.K + s.k0) * es, dtype, (p.K * es, es), "A"))


def _b_loads(p: GemmPlan, s: _Step, j: int, w: int) -> list:
    """The loads of columns ``[j, j + w)`` of the step's new B tile."""
    blk = j // p.target.cols
    if p.b_packed:
        return _contiguous(Space.SPM, s.b_base + blk * p.block_b, "B", _packed_b_offset(p, s) + blk * p.block_b,
                           p.b_slot if p.target.dataflow == "is" else -(-w // p.target.cols) * p.block_b, p.dtype)
    return p.lay.b_loads(s.b_base + blk * p.block_b, s.k0, s.n0 + j, s.tk, w, p.dtype)


def _packed_b_offset(p: GemmPlan, s: _Step) -> int:
    """Bytes into :func:`pack_b`'s image (one ``b_slot`` per B tile, k tiles innermost) of the step's B tile."""
    return ((s.n0 // p.t.tn) * -(-p.K // p.t.tk) + s.k0 // p.t.tk) * p.b_slot


def _matmuls(p: GemmPlan, s: _Step, j: int, w: int) -> list:
    """The matrix work on columns ``[j, j + w)``; the first k tile zeroes the accumulators unless a residual is
    loaded into them."""
    blk = j // p.target.cols
    return p.lay.matmuls(s.acc_base + blk * p.block_acc, s.a_base, s.b_base + blk * p.block_b, s.tm, s.tk, w,
                         p.dtype, s.first_k and not p.ep.residual)


def _drain(p: GemmPlan, s: _Step) -> list[tuple[list, list]]:
    """(epilogue, stores) of each piece of the step's finished tile: the last step's pieces, else the whole tile."""
    return [(p.lay.epilogue(p.ep, s.acc_base, p.bias_base, p.scratch_base, s.n0, j, w, s.tm) if p.ep.active else [],
             p.lay.stores(s.acc_base + j // p.target.cols * p.block_acc, s.m0, s.n0 + j, s.tm, w))
            for j, w in (s.pieces if s.final else [(0, s.tn)])]


def _a_group(p: GemmPlan, s: _Step, sync: bool) -> list:
    """The step's A load (``sync``: with its semaphores)."""
    load = _a_load(p, s)
    return [with_sync(load, waits=("a_empty",), signals=("a_full",)) if sync else load]


def _b_group(p: GemmPlan, s: _Step, n: int, sync: bool) -> list:
    """The loads of the step's new B tile's ``n``-th piece (``sync``: with their semaphores)."""
    loads = _b_loads(p, s, *s.pieces[n])
    if sync:
        loads[0] = with_sync(loads[0], waits=("b_empty",) if n == 0 else ())
        loads[-1] = with_sync(loads[-1], signals=("b_full",))
    return loads


def _residual_group(p: GemmPlan, s: _Step, sync: bool) -> list:
    """The loads of the residual's tile into the accumulators, where the tile's sum starts (``sync``: with their
    semaphores)."""
    loads = p.lay.residual_loads(s.acc_base, s.m0, s.n0, s.tm, s.tn)
    return synced(loads, ("acc_empty",), ("res_full",)) if sync else loads


def _matmul_group(p: GemmPlan, s: _Step, n: int, sync: bool) -> list:
    """The matrix work on the step's ``n``-th piece (``sync``: with its semaphores)."""
    mms = _matmuls(p, s, *s.pieces[n])
    if not sync:
        return mms
    first, last = n == 0, n == len(s.pieces) - 1
    return synced(mms, (("a_full",) if s.new_a and first else ()) + (("b_full",) if s.new_b else ())
                  + (("res_full" if p.ep.residual else "acc_empty",) if s.first_k and first else ()),
                  (("a_empty",) if s.last_a and last else ()) + (("b_empty",) if s.last_b and last else ())
                  + (("acc_full",) if s.last_k and (last or s.final) else ()))


def _emit_pieces(p: GemmPlan, s: _Step, sink: Sink, keys: _GroupKeys | None) -> None:
    """The step's B loads, residual loads and matrix work, piece by piece (a run of an estimating sink, whose
    groups are priced once per search)."""
    key, sync = keys and keys.pieces(s), sink.semaphores
    if sink.recall(key) is not None:
        return
    sink.begin()
    for n in range(len(s.pieces)):
        if s.new_b:
            sink.group(keys and keys.b(s, n), _b_group, p, s, n, sync)
        if p.ep.residual and s.first_k and n == 0:
            sink.group(keys and keys.residual(s), _residual_group, p, s, sync)
        sink.group(keys and keys.matmuls(s, n), _matmul_group, p, s, n, sync)
    sink.end(key)


def _drain_group(p: GemmPlan, s: _Step, sync: bool) -> list:
    """The epilogue and stores of the step's finished tile (its k tile is the last; ``sync``: with their
    semaphores)."""
    ep, out = p.ep, []
    for k, (epi, stores) in enumerate(_drain(p, s)):
        if not sync:
            out += epi + stores
            continue
        if ep.active:
            out += synced_epilogue(ep, epi, first=s.tile == 0 and k == 0)
        stores[0] = with_sync(stores[0], waits=("out_full" if ep.active else "acc_full",))
        out += stores
    if sync:
        out[-1] = with_sync(out[-1], signals=("acc_empty",))
    return out


class _GroupKeys:
    """What the costs of a step's instruction groups read (:func:`emit_gemm`'s memo keys for an estimating sink):
    extents, flags, pieces, SRAM bases modulo the bank width, DRAM offsets modulo ``dram`` (what
    :func:`isa.cost.dram_window` reads) and, for keys shared by every tiling of a search, the tile sizes (the step keys
    and a step's pieces are priced per tiling)."""

    def __init__(self, p: GemmPlan, dram: int) -> None:
        arch = p.target.arch
        self.p, self.dram, self.sbw, self.abw = p, dram, arch.spm.bank_width, arch.acc.bank_width
        self.sizes = (p.t.tm, p.t.tn, p.t.tk)

    def step(self, s: _Step, held: _Step | None, own_drain: bool) -> tuple:
        """The key of the step's groups, the drain ``held`` back behind it and (``own_drain``) its own (per tiling):
        what its A load, pieces and drains read, and nothing they do not (more steps share a key)."""
        p, es, dram, sbw = self.p, self.p.dtype.size, self.dram, self.sbw
        acc = (own_drain or p.ep.residual and s.first_k) and (s.acc_base % self.abw, (s.m0 * p.N + s.n0) * 4 % dram)
        return (s.tm, s.tn, s.tk, s.first_k, s.new_b or s.final,
                s.new_a and (s.a_base % sbw, (s.m0 * p.K + s.k0) * es % dram),
                s.new_b and (s.b_base % sbw, (_packed_b_offset(p, s) if p.b_packed else (s.k0 * p.N + s.n0) * es)
                             % dram),
                acc, own_drain and (s.final, s.n0 * 4 % sbw), held and self.drain(held))

    def a(self, s: _Step) -> tuple:
        p = self.p
        return ("a", s.tm, s.tk, s.a_base % self.sbw, (s.m0 * p.K + s.k0) * p.dtype.size % self.dram) + self.sizes

    def pieces(self, s: _Step) -> tuple:
        p, es = self.p, self.p.dtype.size
        b_off = _packed_b_offset(p, s) if p.b_packed else (s.k0 * p.N + s.n0) * es
        return ("p", s.tm, s.tk, s.tn, s.first_k, s.new_b or s.final,
                s.new_b and (s.b_base % self.sbw, b_off % self.dram),
                p.ep.residual and s.first_k and (s.acc_base % self.abw, (s.m0 * p.N + s.n0) * 4 % self.dram))

    def b(self, s: _Step, n: int) -> tuple:
        p, es = self.p, self.p.dtype.size
        b_off = _packed_b_offset(p, s) if p.b_packed else (s.k0 * p.N + s.n0) * es
        return ("b", s.tk, s.pieces[n], s.b_base % self.sbw, b_off % self.dram) + self.sizes

    def residual(self, s: _Step) -> tuple:
        p = self.p
        return ("r", s.tm, s.tn, s.acc_base % self.abw, (s.m0 * p.N + s.n0) * 4 % self.dram) + self.sizes

    def matmuls(self, s: _Step, n: int) -> tuple:
        return ("mm", s.tm, s.tk, s.pieces[n][1], s.first_k) + self.sizes

    def drain(self, s: _Step) -> tuple:
        p = self.p
        return ("d", s.tm, s.tn, s.final and p.split, s.acc_base % self.abw, s.n0 * 4 % self.sbw,
                (s.m0 * p.N + s.n0) * 4 % self.dram) + self.sizes


def emit_gemm(p: GemmPlan, sink: Sink) -> None:
    """:func:`tiled_gemm`'s instructions, in program order, into ``sink`` (the Halt too; none after an estimating
    sink stops). A tile's epilogue and stores are issued after the next step (so a long epilogue waiting for its
    tile does not fill the vector queue ahead of the next loads). For an estimating sink each step is priced once
    per key (:class:`_GroupKeys`), and each of its groups (its A load, its pieces, a drain) once per search."""
    if p.ep.bias:
        sink.extend([with_sync(_bias_load(p), signals=("bias_ready",))])
    keys = _GroupKeys(p, sink.dram_modulus) if sink.pricing else None
    held = None   # the step whose tile's epilogue and stores wait behind this step
    for s in _walk(p):
        hold = p.ep.active and not s.final
        key = keys.step(s, held, s.last_k and not hold) if keys is not None else None
        if sink.recall(key) is None:
            sink.begin()
            if s.new_a:
                sink.group(keys and keys.a(s), _a_group, p, s, sink.semaphores)
            _emit_pieces(p, s, sink, keys)
            if held is not None:
                sink.group(keys and keys.drain(held), _drain_group, p, held, sink.semaphores)
            if s.last_k and not hold:
                sink.group(keys and keys.drain(s), _drain_group, p, s, sink.semaphores)
            sink.end(key)
        held = s if hold and s.last_k else None
        if sink.check():
            return
    sink.extend([Halt()])


def tiled_gemm(M: int, N: int, K: int, dtype: DType, target: Target, tiling: GemmTiling | None = None,
               b_packed: bool = False, epilogue: Epilogue = NO_EPILOGUE) -> Program:
    """The program for ``C = A @ B`` on ``target`` (its array, SRAM sizes, dataflow, and SPM bank width, used to pad
    layouts against bank conflicts); ``tiling`` defaults to :func:`choose_tiling`'s.

    b_packed: region B holds :func:`pack_b`'s image (B pre-blocked offline, as weights are): every B load is one
    contiguous copy instead of short strided runs.
    epilogue: fused into each output tile (:class:`~compiler.kernels.common.epilogue.Epilogue`: divisor, bias from
    region Bias (``N`` accumulator-type elements), activation; residual from region R, ``M x N`` like C); no
    requantization."""
    p = gemm_plan(M, N, K, dtype, target, tiling, b_packed, epilogue)
    sink = ProgramSink()
    emit_gemm(p, sink)
    ep, t, es = epilogue, p.t, dtype.size
    regions = (Region("A", 0, M * K * es), Region("B", 1, -(-N // t.tn) * -(-K // t.tk) * p.b_slot if b_packed
                                                  else K * N * es), Region("C", 2, M * N * 4))
    regions += (Region("Bias", 3, N * 4),) if ep.bias else ()
    regions += (Region("R", len(regions), M * N * 4),) if ep.residual else ()
    sems = (SemDecl("a_full", 0), SemDecl("a_empty", 2), SemDecl("b_full", 0), SemDecl("b_empty", 2),
            SemDecl("acc_full", 0), SemDecl("acc_empty", 2))
    sems += (SemDecl("out_full", 0),) if ep.active else ()
    sems += (SemDecl("bias_ready", 0),) if ep.bias else ()
    sems += (SemDecl("res_full", 0),) if ep.residual else ()
    return Program(config=target.config, regions=regions, sems=sems, instrs=tuple(sink.instrs))


def gemm_estimate(M: int, N: int, K: int, dtype: DType, target: Target, tiling: GemmTiling | None = None,
                  b_packed: bool = False, epilogue: Epilogue = NO_EPILOGUE, memo: PriceMemo | None = None,
                  bound: int | None = None) -> int:
    """:func:`isa.cost.program_estimate` of ``tiled_gemm(M, N, K, dtype, target, tiling, b_packed, epilogue)``
    without building that program (cycles): its instructions emitted (:func:`emit_gemm`) into an estimating sink.

    The steps are walked, but a step whose key (its extents, flags, pieces, slot bases modulo the SRAM bank width,
    DRAM offsets modulo the page or burst) was seen before adds that step's priced parts, and a new step builds only
    its instruction groups (A load, B loads with residual loads and matrix work, the epilogue and stores of a tile)
    not seen before in the search.

    ``memo``: the search's :class:`~compiler.kernels.common.sink.PriceMemo`, shared by the estimates of every tiling
    of the same GEMM (same ``M``, ``N``, ``K``, ``dtype``, ``target``, ``b_packed`` and ``epilogue``). ``bound`` (what
    a search cannot use, e.g. :func:`search_tiling`'s near-tie window's edge): the exact estimate when it is below
    ``bound``, else some value at least ``bound`` (the walk stops once the head plus a unit's busy cycles or the bus
    reach it)."""
    p = gemm_plan(M, N, K, dtype, target, tiling, b_packed, epilogue)
    sink = EstimateSink(target.arch, memo, ("gemm", p.t), bound=bound)
    emit_gemm(p, sink)
    return bound if sink.stopped else sink.estimate.cycles


@dataclass(frozen=True)
class GemmLayout:
    """Where one dataflow keeps B and the accumulators, and the instructions that load, multiply and store
    (:data:`LAYOUTS` has one subclass per dataflow; ``pitch``: bytes between B columns, under ``is`` only)."""

    es: int
    at: DType
    rows: int
    cols: int
    N: int
    t: GemmTiling
    kb_max: int
    nb_max: int
    pitch: int  # is only: bytes between B columns

    def stores(self, acc_base: int, m0: int, n0: int, tm: int, tn: int) -> list[DmaCopy]:
        """ACC ``[nb][tm][cols]`` to C (ws and os), row by row: each C row of the tile is one contiguous DRAM run of
        ``tn * 4`` bytes (a ragged last column block is a second copy)."""
        c, t, N = self.cols, self.t, self.N
        return [DmaCopy(queue=Queue.DMA_ST, shape=(tm, nbc, n),
                        dst=View(Space.DRAM, (m0 * N + n0 + nb0 * c) * 4, self.at, (N * 4, c * 4, 4), "C"),
                        src=View(Space.ACC, acc_base + nb0 * t.tm * c * 4, self.at, (c * 4, t.tm * c * 4, 4)))
                for nb0, nbc, n in equal_blocks(tn, c)]

    def residual_loads(self, acc_base: int, m0: int, n0: int, tm: int, tn: int) -> list[DmaCopy]:
        """dma.ld of the residual's tile (region R, laid out like C) into the accumulators: the stores reversed."""
        return [DmaCopy(queue=Queue.DMA_LD, shape=c.shape, dst=c.src, src=replace(c.dst, region="R"))
                for c in self.stores(acc_base, m0, n0, tm, tn)]

    def epilogue(self, ep: Epilogue, acc_base: int, bias_base: int, scratch_base: int, n0: int, j: int, w: int,
                 tm: int) -> list:
        """The epilogue's instructions on columns ``[j, j + w)`` of the tile at ``acc_base`` (output columns from
        ``n0``), one run of equal column blocks at a time (ACC ``[nb][tm][cols]``)."""
        c, t, ops = self.cols, self.t, []
        for nb0, nbc, n in equal_blocks(w, c):
            off, strides = (j // c + nb0) * t.tm * c * 4, (t.tm * c * 4, c * 4, 4)
            ops += epilogue_ops(ep, (nbc, tm, n), View(Space.ACC, acc_base + off, self.at, strides),
                                View(Space.SPM, bias_base + (n0 + j + nb0 * c) * 4, self.at, (c * 4, 0, 4)),
                                scratch=View(Space.SPM, scratch_base + off, DType.F32, strides))
        return ops


class WsLayout(GemmLayout):
    """ws: B blocked into array tiles ``[nb][kb][k][n]``; ``mxu.mm`` loops ``[nb, kb]`` and streams the A rows."""

    def b_loads(self, b_base, k0, n0, tk, tn, dtype):
        es, r, c, N, kbm = self.es, self.rows, self.cols, self.N, self.kb_max
        return [DmaCopy(queue=Queue.DMA_LD, shape=(nbc, kbc, k, n),
                        dst=View(Space.SPM, b_base + (nb0 * kbm + kb0) * r * c * es, dtype,
                                 (kbm * r * c * es, r * c * es, n * es, es)),
                        src=View(Space.DRAM, ((k0 + kb0 * r) * N + n0 + nb0 * c) * es, dtype,
                                 (c * es, r * N * es, N * es, es), "B"))
                for nb0, nbc, n in equal_blocks(tn, c) for kb0, kbc, k in equal_blocks(tk, r)]

    def matmuls(self, acc_base, a_base, b_base, tm, tk, tn, dtype, first):
        es, r, c, kbm, t = self.es, self.rows, self.cols, self.kb_max, self.t
        return [MatMul(shape=(nbc, kbc), m=tm, k=k, n=n, zero=first and kb0 == 0,
                       acc=View(Space.ACC, acc_base + nb0 * t.tm * c * 4, self.at, (t.tm * c * 4, 0)), acc_row=c * 4,
                       a=View(Space.SPM, a_base + kb0 * r * es, dtype, (0, r * es)), a_row=tk * es,
                       b=View(Space.SPM, b_base + (nb0 * kbm + kb0) * r * c * es, dtype,
                              (kbm * r * c * es, r * c * es)))
                for nb0, nbc, n in equal_blocks(tn, c) for kb0, kbc, k in equal_blocks(tk, r)]


class OsLayout(GemmLayout):
    """os: B as rows ``[nb][tk][cols]``; ``mxu.mm`` with k = 1 loops ``[nb, q < tk]`` into the same rows."""

    def b_loads(self, b_base, k0, n0, tk, tn, dtype):
        es, c, N, tkm = self.es, self.cols, self.N, self.t.tk
        return [DmaCopy(queue=Queue.DMA_LD, shape=(nbc, tk, n),
                        dst=View(Space.SPM, b_base + nb0 * tkm * c * es, dtype, (tkm * c * es, c * es, es)),
                        src=View(Space.DRAM, (k0 * N + n0 + nb0 * c) * es, dtype, (c * es, N * es, es), "B"))
                for nb0, nbc, n in equal_blocks(tn, c)]

    def matmuls(self, acc_base, a_base, b_base, tm, tk, tn, dtype, first):
        es, c, t = self.es, self.cols, self.t
        return [MatMul(shape=(nbc, tk), m=tm, k=1, n=n, zero=first,
                       acc=View(Space.ACC, acc_base + nb0 * t.tm * c * 4, self.at, (t.tm * c * 4, 0)), acc_row=c * 4,
                       a=View(Space.SPM, a_base, dtype, (0, es)), a_row=tk * es,
                       b=View(Space.SPM, b_base + nb0 * t.tk * c * es, dtype, (t.tk * c * es, c * es)))
                for nb0, nbc, n in equal_blocks(tn, c)]


class IsLayout(GemmLayout):
    """is: B transposed per row block ``[kb][tn][rows]``; ``mxu.mm`` with n = 1 loops ``[kb, j < tn]`` over one A
    block."""

    def b_loads(self, b_base, k0, n0, tk, tn, dtype):
        es, r, N, tnm, p = self.es, self.rows, self.N, self.t.tn, self.pitch
        return [DmaCopy(queue=Queue.DMA_LD, shape=(kbc, k, tn),
                        dst=View(Space.SPM, b_base + kb0 * tnm * p, dtype, (tnm * p, es, p)),
                        src=View(Space.DRAM, ((k0 + kb0 * r) * N + n0) * es, dtype, (r * N * es, N * es, es), "B"))
                for kb0, kbc, k in equal_blocks(tk, r)]

    def matmuls(self, acc_base, a_base, b_base, tm, tk, tn, dtype, first):
        es, r, tnm, p = self.es, self.rows, self.t.tn, self.pitch
        return [MatMul(shape=(kbc, tn), m=tm, k=k, n=1, zero=first and kb0 == 0,
                       acc=View(Space.ACC, acc_base, self.at, (0, 4)), acc_row=tnm * 4,
                       a=View(Space.SPM, a_base + kb0 * r * es, dtype, (r * es, 0)), a_row=tk * es,
                       b=View(Space.SPM, b_base + kb0 * tnm * p, dtype, (tnm * p, p)))
                for kb0, kbc, k in equal_blocks(tk, r)]

    def epilogue(self, ep, acc_base, bias_base, scratch_base, n0, j, w, tm):
        """The epilogue's instructions on columns ``[j, j + w)`` of the tile (ACC ``[tm][tn]``)."""
        strides = (self.t.tn * 4, 4)
        return epilogue_ops(ep, (tm, w), View(Space.ACC, acc_base + j * 4, self.at, strides),
                            View(Space.SPM, bias_base + (n0 + j) * 4, self.at, (0, 4)),
                            scratch=View(Space.SPM, scratch_base + j * 4, DType.F32, strides))

    def stores(self, acc_base, m0, n0, tm, tn):
        """ACC ``[tm][tn]`` to C."""
        return [DmaCopy(queue=Queue.DMA_ST, shape=(tm, tn),
                        dst=View(Space.DRAM, (m0 * self.N + n0) * 4, self.at, (self.N * 4, 4), "C"),
                        src=View(Space.ACC, acc_base, self.at, (self.t.tn * 4, 4)))]


LAYOUTS = {"ws": WsLayout, "os": OsLayout, "is": IsLayout}
"""The :class:`GemmLayout` of each dataflow."""


def _contiguous(space: Space, base: int, region: str, offset: int, nbytes: int, dtype: DType) -> list[DmaCopy]:
    """dma.ld copies of ``nbytes`` contiguous bytes from DRAM ``region`` + offset to ``space`` at ``base``: one copy of
    rows of a power-of-two length when that covers them exactly, else 2-D copies of at most 65535 x 65535 elements
    plus a 1-D remainder (each extra copy costs a DMA setup and a DRAM latency)."""
    es, n = dtype.size, nbytes // dtype.size
    row = min(n & -n, 0x8000)
    full, rest = (n // row, 0) if n and n // row <= 0xFFFF else divmod(n, 0xFFFF)
    row = row if not rest else 0xFFFF
    out = []
    if full:
        out.append(DmaCopy(queue=Queue.DMA_LD, shape=(full, row), dst=View(space, base, dtype, (row * es, es)),
                           src=View(Space.DRAM, offset, dtype, (row * es, es), region)))
    if rest:
        done = full * row * es
        out.append(DmaCopy(queue=Queue.DMA_LD, shape=(rest,), dst=View(space, base + done, dtype, (es,)),
                           src=View(Space.DRAM, offset + done, dtype, (es,), region)))
    return out


def pack_b(b: np.ndarray, K: int, N: int, dtype: DType, target: Target, tiling: GemmTiling) -> np.ndarray:
    """B (``K x N``, row-major) as the SPM images its B slots receive, one per (n tile, k tile) in load order, so a
    B load is a contiguous copy. Computed by applying the unpacked program's own B copies on the host."""
    t, es, rows, cols = tiling, dtype.size, target.rows, target.cols
    _, b_slot, _ = slot_bytes(t, dtype, target)
    lay = LAYOUTS[target.dataflow](es, ACC_TYPE[dtype], rows, cols, N, t, -(-t.tk // rows), -(-t.tn // cols),
                                    is_pitch(rows, es, target.bank_width))
    src = np.ascontiguousarray(b).view(np.uint8).ravel()
    k_tiles = -(-K // t.tk)
    out = np.zeros(-(-N // t.tn) * k_tiles * b_slot, np.uint8)
    for ni, n0 in enumerate(range(0, N, t.tn)):
        for ki, k0 in enumerate(range(0, K, t.tk)):
            base = (ni * k_tiles + ki) * b_slot
            for c in lay.b_loads(base, k0, n0, min(t.tk, K - k0), min(t.tn, N - n0), dtype):
                d = np.ndarray(c.shape, dtype.storage, buffer=out, offset=c.dst.base, strides=c.dst.strides)
                d[...] = np.ndarray(c.shape, dtype.storage, buffer=src, offset=c.src.base, strides=c.src.strides)
    return out


def gemm_inputs(M: int, N: int, K: int, dtype: DType, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded random A (M x K) and B (K x N) in ``dtype``'s storage type, keyed by DRAM region name."""
    rng = np.random.default_rng(seed)
    if not dtype.is_float:
        lo, hi = INT_RANGE[dtype]
        return {"A": rng.integers(lo, hi + 1, (M, K)).astype(dtype.storage),
                "B": rng.integers(lo, hi + 1, (K, N)).astype(dtype.storage)}
    a, b = rng.standard_normal((M, K), np.float32), rng.standard_normal((K, N), np.float32)
    if dtype is DType.BF16:
        return {"A": f32_to_bf16(a), "B": f32_to_bf16(b)}
    return {"A": a.astype(dtype.storage), "B": b.astype(dtype.storage)}


def gemm_reference(inputs: dict[str, np.ndarray], dtype: DType) -> np.ndarray:
    """numpy's C = A @ B: exact int64 for integer operands (as int32), float64 then float32 for float operands."""
    a, b = to_compute(inputs["A"], dtype), to_compute(inputs["B"], dtype)
    if dtype.is_float:
        return (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    return (a @ b).astype(np.int32)


def gemm_tolerance(K: int, dtype: DType, c_abs: np.ndarray) -> np.ndarray:
    """Elementwise bound on |npusim - reference| implied by fp32 accumulation of K products: K * eps32 * sum|a b|.

    ``c_abs`` is ``|A| @ |B|`` (the sum of absolute products); the products of f16/bf16/f32 inputs are exact in f32
    for f16/bf16 and rounded once for f32, and each of the K sequential additions rounds once.
    """
    return (K + 1) * np.finfo(np.float32).eps * c_abs
