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

import heapq
import itertools
import math
from dataclasses import dataclass, replace
from functools import lru_cache, partial
from typing import NamedTuple

import numpy as np

from compiler.errors import CompileError, TilingError
from compiler.kernels.common.epilogue import NO_EPILOGUE, Epilogue, epilogue_ops, synced_epilogue
from compiler.kernels.common.pipeline import synced, with_sync
from compiler.kernels.common.target import Target
from isa import DmaCopy, DType, Halt, MatMul, Program, Queue, Region, SemDecl, Space, View
from isa.cost import Cost, instr_costs
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


@lru_cache(maxsize=256)
def search_tiling(M: int, N: int, K: int, dtype: DType, target: Target, b_packed: bool = False,
                  epilogue: Epilogue = NO_EPILOGUE) -> GemmTiling:
    """The tiling (tile sizes, loop order, B split) for ``C = A @ B`` on ``target``: of the ``SEARCH_PRICED`` best
    candidates of :func:`gemm_candidates`, the best-ranked one whose :func:`isa.cost.program_estimate`
    (:func:`gemm_estimate`, the same sums without building the program) is within ``NEAR_TIE`` of the least. The
    candidates are priced in rank order, each only until its estimate is known to be above that window (``bound``).
    TilingError when no tiling fits."""
    ranked = gemm_candidates(M, N, K, dtype, target, b_packed, epilogue, costs := {})   # (one instr_costs memo)
    prices: list[int] = []
    groups: dict = {}
    for t in ranked:
        bound = int(min(prices) * (1 + NEAR_TIE)) + 1 if prices else None   # an estimate at or above it cannot win
        prices.append(gemm_estimate(M, N, K, dtype, target, t, b_packed, epilogue, costs, bound, groups))
    window = min(prices) * (1 + NEAR_TIE)
    return next(t for t, price in zip(ranked, prices) if price <= window)


def gemm_candidates(M: int, N: int, K: int, dtype: DType, target: Target, b_packed: bool = False,
                    epilogue: Epilogue = NO_EPILOGUE, costs: dict | None = None) -> list[GemmTiling]:
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
    ep, costs = epilogue, {} if costs is None else costs
    arch, rows, cols, es, at = target.arch, target.rows, target.cols, dtype.size, ACC_TYPE[dtype]
    dataflow, max_rows = target.dataflow, target.max_rows
    tms = sorted({min(M, v) for v in (max_rows, 384, 256, 192, 128, 96, 64, 48, 32, 16, rows) if v <= max_rows})
    tns = sorted({min(_up(N, cols), cols * k) for k in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)})
    tks = sorted({min(_up(K, rows), rows * k) for k in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128)})

    sums: dict[tuple, tuple[int, int]] = {}

    def a_load(tm: int, tk: int) -> list:
        return [DmaCopy(queue=Queue.DMA_LD, shape=(tm, tk), dst=View(Space.SPM, 0, dtype, (tk * es, es)),
                        src=View(Space.DRAM, 0, dtype, (K * es, es), "A"))]

    def cost(key: tuple, build, *args) -> tuple[int, int]:
        """(cycles, DRAM bus window) of the instructions ``build(*args)`` gives, run one after the other; once per
        ``key`` (what they depend on besides the search's fixed M, N, K, dtype and target)."""
        got = sums.get(key)
        if got is None:
            cs = instr_costs(build(*args), arch, costs)
            got = sums[key] = sum(c.cycles for c in cs), sum(c.dram_window for c in cs)
        return got

    ranked: list = []   # a max-heap (negated keys) of the best SEARCH_PRICED (est, steps, split, index, tiling)
    index = 0
    for t in (GemmTiling(tm, tn, tk) for tm in tms[::-1] for tn in tns[::-1] for tk in tks[::-1]):  # large first
        a, b, c = slot_bytes(t, dtype, target)
        if 2 * (a + b) + epilogue_bytes(N, t, ep, dtype, target) > target.spm or 2 * c > target.acc:
            continue
        tm, tn, tk = min(t.tm, M), min(t.tn, N), min(t.tk, K)
        nb_max = -(-t.tn // cols)
        lay = _LAYOUTS[dataflow](es, at, rows, cols, N, t, -(-t.tk // rows), nb_max,
                                 is_pitch(rows, es, target.bank_width))
        wide = t.tn if dataflow == "is" else 0   # (is keeps B and the accumulators in strides of the whole tile)
        a_cyc, a_bus = cost(("a", tm, tk), a_load, tm, tk)
        n_m, n_n, n_k = -(-M // t.tm), -(-N // t.tn), -(-K // t.tk)
        tiles, steps = n_m * n_n, n_m * n_n * n_k
        blk = b // nb_max
        mm = cost(("mm", tm, t.tk, wide, tn), lay.matmuls, 0, 0, 2 * a, tm, tk, tn, dtype, True)[0]
        if len(ranked) == SEARCH_PRICED and steps * mm + a_cyc > -ranked[0][0]:   # a lower bound of every
            continue                                                                # estimate below
        st_cyc, st_bus = cost(("st", tm, wide, 0, tn), lay.stores, 0, 0, 0, tm, tn)
        ep_base = _up(2 * (a + b), 64)
        scratch = ep_base + (_up(N * 4, 64) if ep.bias else 0)
        ep_ops = partial(lay.epilogue, ep, 0, ep_base, scratch, 0)
        ep_key = ("ep", tm, wide, ep_base % target.bank_width, scratch % target.bank_width)
        epi = cost(ep_key + (0, tn), ep_ops, 0, tn, tm)[0] if ep.active else 0
        res_cyc, res_bus = cost(("r", tm, wide, tn), lay.residual_loads, 0, 0, 0, tm, tn) if ep.residual \
            else (0, 0)
        piece: dict[int, tuple] = {}   # columns -> (B load cycles, bus), matmul, store and epilogue cycles of a piece
        for split in (1, 2, 4, 8) if dataflow != "is" else (1,):
            if split > nb_max:
                break
            pieces = _pieces(tn, t, cols, split)
            for j, w in pieces:
                if w not in piece:
                    at_b = (2 * a + j // cols * blk) % target.bank_width
                    piece[w] = (cost(("bp", at_b, j // cols * blk, b if dataflow == "is" else -(-w // cols) * blk),
                                     _contiguous, Space.SPM, 2 * a + j // cols * blk, "B", j // cols * blk,
                                     b if dataflow == "is" else -(-w // cols) * blk, dtype)
                                if b_packed else cost(("b", at_b, t.tk, wide, j, w),
                                                      lay.b_loads, 2 * a + j // cols * blk, 0, j, tk, w, dtype),
                                cost(("mm", tm, t.tk, wide, w), lay.matmuls, 0, 0, 2 * a, tm, tk, w, dtype,
                                     True)[0],
                                cost(("st", tm, wide, j, w), lay.stores, 0, 0, j, tm, w)[0],
                                cost(ep_key + (j, w), ep_ops, j, w, tm)[0] if ep.active else 0)
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
                est = max(busy, bus, queues, tiles * epi) + prologue + tail
                entry = (-est, -steps, -split, -index, replace(t, order=order, split=split))
                index += 1
                if len(ranked) < SEARCH_PRICED:
                    heapq.heappush(ranked, entry)
                elif entry[:4] > ranked[0][:4]:
                    heapq.heapreplace(ranked, entry)
    if not ranked:
        raise TilingError(f"no GEMM tiling of {M}x{N}x{K} {dtype.text} fits {target.spm} B of SPM and "
                          f"{target.acc} B of ACC")
    return [e[4] for e in sorted(ranked, reverse=True)]   # (best first; the unique index spares comparing tilings)


def _groups(total: int, block: int) -> list[tuple[int, int, int]]:
    """(first block index, count, size) runs of equal-sized blocks covering ``total``: full blocks, then the rest."""
    full, rest = divmod(total, block)
    return ([(0, full, block)] if full else []) + ([(full, 1, rest)] if rest else [])


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


class _Plan(NamedTuple):
    """One tiled GEMM's fixed choices (:func:`_gemm_plan`): sizes, tiling, layout and where everything lives in SPM
    and ACC (bytes)."""

    M: int
    N: int
    K: int
    dtype: DType
    target: Target
    t: GemmTiling
    ep: Epilogue
    b_packed: bool
    lay: _Layout
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


def _gemm_plan(M: int, N: int, K: int, dtype: DType, target: Target, tiling: GemmTiling | None, b_packed: bool,
               ep: Epilogue) -> _Plan:
    """:func:`tiled_gemm`'s checks and layout; TilingError or CompileError when it cannot take them."""
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
    kb_max, nb_max = -(-t.tk // rows), -(-t.tn // cols)
    lay = _LAYOUTS[dataflow](es, at, rows, cols, N, t, kb_max, nb_max, is_pitch(rows, es, target.bank_width))
    bias_base = _up(2 * (a_slot + b_slot), 64)
    return _Plan(M, N, K, dtype, target, t, ep, b_packed, lay, 1 if dataflow == "is" else min(t.split, nb_max),
                 a_slot, b_slot, acc_slot, b_slot // nb_max, t.tm * cols * 4, bias_base,
                 bias_base + (_up(N * 4, 64) if ep.bias else 0))


def _walk(p: _Plan):
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


def _bias_load(p: _Plan) -> DmaCopy:
    """The whole bias, once, before anything else."""
    at = ACC_TYPE[p.dtype]
    return DmaCopy(queue=Queue.DMA_LD, shape=(p.N,), dst=View(Space.SPM, p.bias_base, at, (4,)),
                   src=View(Space.DRAM, 0, at, (4,), "Bias"))


def _a_load(p: _Plan, s: _Step) -> DmaCopy:
    es, dtype = p.dtype.size, p.dtype
    return DmaCopy(queue=Queue.DMA_LD, shape=(s.tm, s.tk), dst=View(Space.SPM, s.a_base, dtype, (s.tk * es, es)),
                   src=View(Space.DRAM, (s.m0 * p.K + s.k0) * es, dtype, (p.K * es, es), "A"))


def _b_loads(p: _Plan, s: _Step, j: int, w: int) -> list:
    """The loads of columns ``[j, j + w)`` of the step's new B tile."""
    blk = j // p.target.cols
    if p.b_packed:
        return _contiguous(Space.SPM, s.b_base + blk * p.block_b, "B", _packed_b_offset(p, s) + blk * p.block_b,
                           p.b_slot if p.target.dataflow == "is" else -(-w // p.target.cols) * p.block_b, p.dtype)
    return p.lay.b_loads(s.b_base + blk * p.block_b, s.k0, s.n0 + j, s.tk, w, p.dtype)


def _packed_b_offset(p: _Plan, s: _Step) -> int:
    """Bytes into :func:`pack_b`'s image (one ``b_slot`` per B tile, k tiles innermost) of the step's B tile."""
    return ((s.n0 // p.t.tn) * -(-p.K // p.t.tk) + s.k0 // p.t.tk) * p.b_slot


def _matmuls(p: _Plan, s: _Step, j: int, w: int) -> list:
    """The matrix work on columns ``[j, j + w)``; the first k tile zeroes the accumulators unless a residual is
    loaded into them."""
    blk = j // p.target.cols
    return p.lay.matmuls(s.acc_base + blk * p.block_acc, s.a_base, s.b_base + blk * p.block_b, s.tm, s.tk, w,
                         p.dtype, s.first_k and not p.ep.residual)


def _drain(p: _Plan, s: _Step) -> list[tuple[list, list]]:
    """(epilogue, stores) of each piece of the step's finished tile: the last step's pieces, else the whole tile."""
    return [(p.lay.epilogue(p.ep, s.acc_base, p.bias_base, p.scratch_base, s.n0, j, w, s.tm) if p.ep.active else [],
             p.lay.stores(s.acc_base + j // p.target.cols * p.block_acc, s.m0, s.n0 + j, s.tm, w))
            for j, w in (s.pieces if s.final else [(0, s.tn)])]


def _step_instrs(p: _Plan, s: _Step) -> tuple[list, list]:
    """The step's loads and matrix work, and (its last k tile) the tile's epilogue and stores, with semaphores."""
    ep, out = p.ep, []
    if s.new_a:
        out.append(with_sync(_a_load(p, s), waits=("a_empty",), signals=("a_full",)))
    last_piece = len(s.pieces) - 1
    for n, (j, w) in enumerate(s.pieces):
        if s.new_b:
            loads = _b_loads(p, s, j, w)
            loads[0] = with_sync(loads[0], waits=("b_empty",) if n == 0 else ())
            loads[-1] = with_sync(loads[-1], signals=("b_full",))
            out += loads
        first, last = n == 0, n == last_piece
        if ep.residual and s.first_k and first:   # the tile's sum starts from the residual's tile
            out += synced(p.lay.residual_loads(s.acc_base, s.m0, s.n0, s.tm, s.tn), ("acc_empty",), ("res_full",))
        out += synced(_matmuls(p, s, j, w),
                      (("a_full",) if s.new_a and first else ()) + (("b_full",) if s.new_b else ())
                      + (("res_full" if ep.residual else "acc_empty",) if s.first_k and first else ()),
                      (("a_empty",) if s.last_a and last else ()) + (("b_empty",) if s.last_b and last else ())
                      + (("acc_full",) if s.last_k and (last or s.final) else ()))
    drain: list = []
    if s.last_k:
        for k, (epi, stores) in enumerate(_drain(p, s)):
            if ep.active:
                drain += synced_epilogue(ep, epi, first=s.tile == 0 and k == 0)
            stores[0] = with_sync(stores[0], waits=("out_full" if ep.active else "acc_full",))
            drain += stores
        drain[-1] = with_sync(drain[-1], signals=("acc_empty",))
    return out, drain


def tiled_gemm(M: int, N: int, K: int, dtype: DType, target: Target, tiling: GemmTiling | None = None,
               b_packed: bool = False, epilogue: Epilogue = NO_EPILOGUE) -> Program:
    """The program for ``C = A @ B`` on ``target`` (its array, SRAM sizes, dataflow, and SPM bank width, used to pad
    layouts against bank conflicts); ``tiling`` defaults to :func:`choose_tiling`'s.

    b_packed: region B holds :func:`pack_b`'s image (B pre-blocked offline, as weights are): every B load is one
    contiguous copy instead of short strided runs.
    epilogue: fused into each output tile (:class:`~compiler.kernels.common.epilogue.Epilogue`: divisor, bias from
    region Bias (``N`` accumulator-type elements), activation; residual from region R, ``M x N`` like C); no
    requantization."""
    ep = epilogue
    p = _gemm_plan(M, N, K, dtype, target, tiling, b_packed, ep)
    prog: list = [with_sync(_bias_load(p), signals=("bias_ready",))] if ep.bias else []
    pending: list = []   # a tile's epilogue and stores, issued after the next step (so a long epilogue waiting for
    for s in _walk(p):   # its tile does not fill the vector queue ahead of the next loads)
        body, drain = _step_instrs(p, s)
        prog += body
        prog += pending   # the previous tile's epilogue and stores, behind this step's loads and matrix work
        pending = []
        if ep.active and not s.final:
            pending = drain
        else:
            prog += drain
    prog.append(Halt())
    t, es = p.t, dtype.size
    regions = (Region("A", 0, M * K * es), Region("B", 1, -(-N // t.tn) * -(-K // t.tk) * p.b_slot if b_packed
                                                  else K * N * es), Region("C", 2, M * N * 4))
    regions += (Region("Bias", 3, N * 4),) if ep.bias else ()
    regions += (Region("R", len(regions), M * N * 4),) if ep.residual else ()
    sems = (SemDecl("a_full", 0), SemDecl("a_empty", 2), SemDecl("b_full", 0), SemDecl("b_empty", 2),
            SemDecl("acc_full", 0), SemDecl("acc_empty", 2))
    sems += (SemDecl("out_full", 0),) if ep.active else ()
    sems += (SemDecl("bias_ready", 0),) if ep.bias else ()
    sems += (SemDecl("res_full", 0),) if ep.residual else ()
    return Program(config=target.config, regions=regions, sems=sems, instrs=tuple(prog))


def gemm_estimate(M: int, N: int, K: int, dtype: DType, target: Target, tiling: GemmTiling | None = None,
                  b_packed: bool = False, epilogue: Epilogue = NO_EPILOGUE, costs: dict | None = None,
                  bound: int | None = None, groups: dict | None = None) -> int:
    """:func:`isa.cost.program_estimate` of ``tiled_gemm(M, N, K, dtype, target, tiling, b_packed, epilogue)``
    without building that program (cycles): the same sums of the same :func:`isa.cost.instr_cost` terms.

    The steps are walked (:func:`_walk`) but not emitted: each step's instructions fall into groups (its A load, its
    B loads, its residual loads, its matrix work, its tile's epilogue and stores) whose costs depend only on a few
    numbers: the extents, the pieces, the slot bases modulo the SRAM bank width and the DRAM offsets modulo what
    :func:`isa.cost.dram_window` reads (the page, or the burst). Each group of each distinct key is built once and
    priced through :func:`isa.cost.instr_costs`; its per-queue busy cycles and bus window are added once per step
    that has it. program_estimate's head is the first step's loads before its first matrix instruction (and the
    bias), its tail the epilogues and stores after the last one: the last tile's and, with an epilogue, the one
    before it (issued behind the last step's matrix work).

    ``costs``: an :func:`isa.cost.instr_costs` memo to share with other estimates on the same target; ``groups``: a
    memo of priced instruction groups to share with estimates of other tilings of the same GEMM (same ``M``, ``N``,
    ``K``, ``dtype``, ``target``, ``b_packed`` and ``epilogue``; its keys hold the tile sizes). ``bound`` (what a
    search cannot use, e.g. :func:`search_tiling`'s near-tie window's edge): the exact estimate when it is below
    ``bound``, else some value at least ``bound`` (the walk stops once the head plus a queue's busy cycles or the bus
    reach it)."""
    p = _gemm_plan(M, N, K, dtype, target, tiling, b_packed, epilogue)
    arch, ep, es = target.arch, epilogue, dtype.size
    costs = {} if costs is None else costs
    bound = math.inf if bound is None else bound
    dram = arch.dram.page_bytes if arch.dram.model == "rowbuffer" else arch.dma.burst_bytes
    sbw, abw = arch.spm.bank_width, arch.acc.bank_width
    groups = {} if groups is None else groups   # key -> busy cycles of dma.ld, dma.st, mxu, vpu and bus window
    sizes = (p.t.tm, p.t.tn, p.t.tk)   # (what the layout's strides and slots depend on)

    def price(key: tuple, build, *args) -> tuple[int, ...]:
        key += sizes
        sums = groups.get(key)
        if sums is None:
            instrs = build(p, *args)
            sums = groups[key] = _sums(instrs, instr_costs(instrs, arch, costs))
        return sums

    # program_estimate's head: the bias and the first step's loads before its first matrix instruction
    walk = _walk(p)
    first = next(walk)
    bias = [_bias_load(p)] if ep.bias else []
    body = bias + _step_instrs(p, first)[0]
    k0 = next(k for k, i in enumerate(body) if i.queue in (Queue.MXU, Queue.VPU))
    head = sum(c.cycles for i, c in zip(body[:k0], instr_costs(body[:k0], arch, costs)) if i.queue is Queue.DMA_LD)
    bound -= head
    ld, st, mx, vp, bus = _sums(bias, instr_costs(bias, arch, costs))   # (the bias: once, before everything)
    prev = drain = None
    steps: dict[tuple, tuple] = {}   # a step's key -> (its sums, its tile's drain or None)
    for s in itertools.chain((first,), walk):
        b_off = _packed_b_offset(p, s) if b_packed else (s.k0 * N + s.n0) * es
        key = (s.tm, s.tn, s.tk, s.new_a, s.new_b, s.first_k, s.last_k, s.final, s.a_base % sbw, s.b_base % sbw,
               s.acc_base % abw, s.n0 * 4 % sbw, (s.m0 * K + s.k0) * es % dram, b_off % dram,
               (s.m0 * N + s.n0) * 4 % dram)
        got = steps.get(key)
        if got is None:
            got = steps[key] = _step_sums(p, s, price, key)
        sums, tile = got
        ld, st, mx, vp, bus = ld + sums[0], st + sums[1], mx + sums[2], vp + sums[3], bus + sums[4]
        prev = drain if ep.active else None   # the drain held back behind this step's matrix work (or None)
        drain = tile
        if max(ld, st, mx, vp, bus) >= bound:
            return bound + head
    # the tail: the epilogue and stores after the last step's matrix work (the tile before it too when its epilogue
    # was held back)
    tail = drain[1] + drain[3] + (prev[1] + prev[3] if prev is not None else 0)
    return max(ld, st, mx, vp, bus) + head + tail


def _step_sums(p: _Plan, s: _Step, price, key: tuple) -> tuple[tuple[int, ...], tuple[int, ...] | None]:
    """:func:`gemm_estimate`'s sums of one step (busy cycles of dma.ld, dma.st, mxu, vpu, bus window) and of its
    tile's epilogue and stores (None unless its k tile is the last), from its instruction groups priced by ``price``
    once per group key (``key``: the step's, from which each group takes what its costs read)."""
    tm, tn, tk, _, _, first_k, _, final, a_at, b_at, acc_at, bias_at, a_off, b_off, c_off = key
    split = p.split if s.new_b or final else 0   # (the pieces)
    parts = [price(("mm", tm, tk, tn, split, first_k), _step_matmuls, s)]
    if s.new_a:
        parts.append(price(("a", tm, tk, a_at, a_off), _a_loads, s))
    if s.new_b:
        parts.append(price(("b", tn, tk, b_at, b_off, split), _step_b_loads, s))
    if p.ep.residual and first_k:
        parts.append(price(("r", tm, tn, acc_at, c_off), _residual_loads, s))
    drain = price(("d", tm, tn, final and split, acc_at, bias_at, c_off), _drains, s) if s.last_k else None
    if drain is not None:
        parts.append(drain)
    return tuple(map(sum, zip(*parts))), drain


def _sums(instrs: list, costs: list[Cost]) -> tuple[int, int, int, int, int]:
    """Busy cycles of dma.ld, dma.st, mxu and vpu and the DRAM bus window of ``instrs`` priced ``costs``."""
    out = [0, 0, 0, 0, 0]
    for i, c in zip(instrs, costs):
        q = i.queue
        if q in _QUEUE_INDEX:
            out[_QUEUE_INDEX[q]] += c.cycles
        out[4] += c.dram_window
    return tuple(out)


_QUEUE_INDEX = {Queue.DMA_LD: 0, Queue.DMA_ST: 1, Queue.MXU: 2, Queue.VPU: 3}


def _a_loads(p: _Plan, s: _Step) -> list:
    return [_a_load(p, s)]


def _step_b_loads(p: _Plan, s: _Step) -> list:
    return [c for j, w in s.pieces for c in _b_loads(p, s, j, w)]


def _step_matmuls(p: _Plan, s: _Step) -> list:
    return [m for j, w in s.pieces for m in _matmuls(p, s, j, w)]


def _residual_loads(p: _Plan, s: _Step) -> list:
    return p.lay.residual_loads(s.acc_base, s.m0, s.n0, s.tm, s.tn)


def _drains(p: _Plan, s: _Step) -> list:
    return [i for epi, stores in _drain(p, s) for i in epi + stores]


@dataclass(frozen=True)
class _Layout:
    """Where one dataflow keeps B and the accumulators, and the instructions that load, multiply and store."""

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
                for nb0, nbc, n in _groups(tn, c)]

    def residual_loads(self, acc_base: int, m0: int, n0: int, tm: int, tn: int) -> list[DmaCopy]:
        """dma.ld of the residual's tile (region R, laid out like C) into the accumulators: the stores reversed."""
        return [DmaCopy(queue=Queue.DMA_LD, shape=c.shape, dst=c.src, src=replace(c.dst, region="R"))
                for c in self.stores(acc_base, m0, n0, tm, tn)]

    def epilogue(self, ep: Epilogue, acc_base: int, bias_base: int, scratch_base: int, n0: int, j: int, w: int,
                 tm: int) -> list:
        """The epilogue's instructions on columns ``[j, j + w)`` of the tile at ``acc_base`` (output columns from
        ``n0``), one run of equal column blocks at a time (ACC ``[nb][tm][cols]``)."""
        c, t, ops = self.cols, self.t, []
        for nb0, nbc, n in _groups(w, c):
            off, strides = (j // c + nb0) * t.tm * c * 4, (t.tm * c * 4, c * 4, 4)
            ops += epilogue_ops(ep, (nbc, tm, n), View(Space.ACC, acc_base + off, self.at, strides),
                                View(Space.SPM, bias_base + (n0 + j + nb0 * c) * 4, self.at, (c * 4, 0, 4)),
                                scratch=View(Space.SPM, scratch_base + off, DType.F32, strides))
        return ops


class _WsLayout(_Layout):
    def b_loads(self, b_base, k0, n0, tk, tn, dtype):
        es, r, c, N, kbm = self.es, self.rows, self.cols, self.N, self.kb_max
        return [DmaCopy(queue=Queue.DMA_LD, shape=(nbc, kbc, k, n),
                        dst=View(Space.SPM, b_base + (nb0 * kbm + kb0) * r * c * es, dtype,
                                 (kbm * r * c * es, r * c * es, n * es, es)),
                        src=View(Space.DRAM, ((k0 + kb0 * r) * N + n0 + nb0 * c) * es, dtype,
                                 (c * es, r * N * es, N * es, es), "B"))
                for nb0, nbc, n in _groups(tn, c) for kb0, kbc, k in _groups(tk, r)]

    def matmuls(self, acc_base, a_base, b_base, tm, tk, tn, dtype, first):
        es, r, c, kbm, t = self.es, self.rows, self.cols, self.kb_max, self.t
        return [MatMul(shape=(nbc, kbc), m=tm, k=k, n=n, zero=first and kb0 == 0,
                       acc=View(Space.ACC, acc_base + nb0 * t.tm * c * 4, self.at, (t.tm * c * 4, 0)), acc_row=c * 4,
                       a=View(Space.SPM, a_base + kb0 * r * es, dtype, (0, r * es)), a_row=tk * es,
                       b=View(Space.SPM, b_base + (nb0 * kbm + kb0) * r * c * es, dtype,
                              (kbm * r * c * es, r * c * es)))
                for nb0, nbc, n in _groups(tn, c) for kb0, kbc, k in _groups(tk, r)]


class _OsLayout(_Layout):
    def b_loads(self, b_base, k0, n0, tk, tn, dtype):
        es, c, N, tkm = self.es, self.cols, self.N, self.t.tk
        return [DmaCopy(queue=Queue.DMA_LD, shape=(nbc, tk, n),
                        dst=View(Space.SPM, b_base + nb0 * tkm * c * es, dtype, (tkm * c * es, c * es, es)),
                        src=View(Space.DRAM, (k0 * N + n0 + nb0 * c) * es, dtype, (c * es, N * es, es), "B"))
                for nb0, nbc, n in _groups(tn, c)]

    def matmuls(self, acc_base, a_base, b_base, tm, tk, tn, dtype, first):
        es, c, t = self.es, self.cols, self.t
        return [MatMul(shape=(nbc, tk), m=tm, k=1, n=n, zero=first,
                       acc=View(Space.ACC, acc_base + nb0 * t.tm * c * 4, self.at, (t.tm * c * 4, 0)), acc_row=c * 4,
                       a=View(Space.SPM, a_base, dtype, (0, es)), a_row=tk * es,
                       b=View(Space.SPM, b_base + nb0 * t.tk * c * es, dtype, (t.tk * c * es, c * es)))
                for nb0, nbc, n in _groups(tn, c)]


class _IsLayout(_Layout):
    def b_loads(self, b_base, k0, n0, tk, tn, dtype):
        es, r, N, tnm, p = self.es, self.rows, self.N, self.t.tn, self.pitch
        return [DmaCopy(queue=Queue.DMA_LD, shape=(kbc, k, tn),
                        dst=View(Space.SPM, b_base + kb0 * tnm * p, dtype, (tnm * p, es, p)),
                        src=View(Space.DRAM, ((k0 + kb0 * r) * N + n0) * es, dtype, (r * N * es, N * es, es), "B"))
                for kb0, kbc, k in _groups(tk, r)]

    def matmuls(self, acc_base, a_base, b_base, tm, tk, tn, dtype, first):
        es, r, tnm, p = self.es, self.rows, self.t.tn, self.pitch
        return [MatMul(shape=(kbc, tn), m=tm, k=k, n=1, zero=first and kb0 == 0,
                       acc=View(Space.ACC, acc_base, self.at, (0, 4)), acc_row=tnm * 4,
                       a=View(Space.SPM, a_base + kb0 * r * es, dtype, (r * es, 0)), a_row=tk * es,
                       b=View(Space.SPM, b_base + kb0 * tnm * p, dtype, (tnm * p, p)))
                for kb0, kbc, k in _groups(tk, r)]

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


_LAYOUTS = {"ws": _WsLayout, "os": _OsLayout, "is": _IsLayout}


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
    lay = _LAYOUTS[target.dataflow](es, ACC_TYPE[dtype], rows, cols, N, t, -(-t.tk // rows), -(-t.tn // cols),
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
