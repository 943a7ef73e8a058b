"""Closed-form cost of one instruction on one Arch, in integer cycles.

These pure functions are the timing model's formulas (``docs/timing.md`` writes each one down). The simulator
adds what depends on other units at run time: semaphore waits, full queues, DRAM bus and memory port contention.
The compiler's cost model calls the same functions, so the two never disagree.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from .arch import Arch, Memory
from .dtypes import Queue, Space
from .instructions import (
    Act,
    BinOp,
    DmaCopy,
    DmaFill,
    Gather,
    HostCall,
    Instr,
    MatMul,
    VecBinary,
    VecConvert,
    VecRequant,
    VecUnary,
)
from .view import View

ALU_BINOPS = frozenset({BinOp.ADD, BinOp.SUB, BinOp.MIN, BinOp.MAX, BinOp.AND, BinOp.OR, BinOp.XOR, BinOp.CMPGT,
                        BinOp.CMPEQ})
ALU_ACTS = frozenset({Act.MOV, Act.RELU, Act.CLAMP, Act.ABS, Act.NEG})


class Cost(NamedTuple):
    """Static cost of one instruction, before any run-time contention (all in cycles, bytes).

    ``cycles`` is the whole execution time in isolation; ``conflict`` of it are bank-conflict cycles and
    ``dram_latency`` the final cycles spent waiting for DRAM data; ``dram_window`` is how long it holds the shared
    DRAM bus (0 if it does not touch DRAM) and ``setup`` the cycles before that. ``row_hits`` and ``row_misses``
    count its DRAM bursts by row-buffer outcome (both 0 under ``dram.model = "bandwidth"``). ``spm_write`` and
    ``acc_write`` are the bytes of ``spm_bytes`` and ``acc_bytes`` that are writes (the rest are reads).
    """

    cycles: int
    conflict: int = 0
    setup: int = 0
    dram_window: int = 0
    dram_read: int = 0
    dram_write: int = 0
    spm_bytes: int = 0
    acc_bytes: int = 0
    macs: int = 0
    dram_latency: int = 0
    row_hits: int = 0
    row_misses: int = 0
    spm_write: int = 0
    acc_write: int = 0


# ---------------------------------------------------------------------------------------------------- matrix unit
def _stationary_run(shape: tuple[int, ...], strides: tuple[int, ...]) -> int:
    """Consecutive loop points that reuse the stationary operand: the innermost dimensions with stride 0."""
    run = 1
    for e, st in zip(reversed(shape), reversed(strides)):
        if st != 0:
            break
        run *= e
    return run


def mxu_folds(mm: MatMul, arch: Arch) -> tuple[int, int]:
    """(folds, stream length in cycles per fold) of ``mm`` under the configured dataflow.

    ws: the k x n weight tile is stationary, m rows stream.
    os: an R x C block of outputs is stationary, k reduction steps stream; ceil(m / R) folds per point.
    is: an m x k input block is stationary (k on rows, m on columns), n columns stream; ceil(m / C) folds per point.
    Consecutive loop points that keep the same stationary operand (innermost loop dimensions where its stride is 0:
    the same B tile for ws, accumulating into the same rows for os, the same A block for is) extend one fold's stream
    instead of starting a new fold.
    """
    points = math.prod(mm.shape)
    df, rows, cols = arch.matrix.dataflow, arch.matrix.rows, arch.matrix.cols
    if df == "ws":
        run = _stationary_run(mm.shape, mm.b.strides)
        return points // run, mm.m * run
    if df == "os":
        run = _stationary_run(mm.shape, mm.acc.strides)
        return points // run * -(-mm.m // rows), mm.k * run
    run = _stationary_run(mm.shape, mm.a.strides)
    return points // run * -(-mm.m // cols), mm.n * run


def mxu_cycles(mm: MatMul, arch: Arch) -> int:
    """Cycles of one mxu.mm on an R x C array.

    One fold alone: ``P + s + R + C - 2``: P cycles to preload the stationary operand (R for ws and is; 0 for os,
    whose stationary values are the outputs themselves), then s streamed vectors plus R + C - 2 to fill and drain
    the skewed wavefront. Without overlap F folds cost ``F * (P + s + R + C - 2)`` (SCALE-Sim's accounting). With
    ``matrix.fold_overlap`` the next fold's preload (or, for os, the output drain) hides under the current stream
    and folds follow each other every ``max(s, R)`` cycles: ``P + s + (F - 1) * max(s, R) + R + C - 2``.
    """
    folds, s = mxu_folds(mm, arch)
    r, c = arch.matrix.rows, arch.matrix.cols
    preload = 0 if arch.matrix.dataflow == "os" else r
    if not arch.matrix.fold_overlap:
        return folds * (preload + s + r + c - 2)
    return preload + s + (folds - 1) * max(s, r) + r + c - 2


# ---------------------------------------------------------------------------------------------------- memories
def _addresses(base: int, dims: tuple[tuple[int, int], ...]) -> np.ndarray:
    """Byte addresses of every element in row-major iteration order."""
    addr = np.array([base], dtype=np.int64)
    for e, s in dims:
        addr = (addr[:, None] + np.arange(e, dtype=np.int64) * s).ravel()
    return addr


@lru_cache(maxsize=8192)
def _bank_cycles(base: int, dims: tuple[tuple[int, int], ...], es: int, banks: int, width: int,
                 beat: int) -> tuple[int, int]:
    addr = _addresses(base, dims)
    n = addr.size
    nbeats = -(-n // beat)
    words = np.full(nbeats * beat, -1, dtype=np.int64)
    words[:n] = addr // width
    words = np.sort(words.reshape(nbeats, beat), axis=1)
    distinct = np.ones_like(words, dtype=bool)
    distinct[:, 1:] = words[:, 1:] != words[:, :-1]
    distinct &= words >= 0
    bank = np.where(distinct, words % banks, banks)  # banks = "not counted"
    counts = np.zeros((nbeats, banks + 1), dtype=np.int64)
    np.add.at(counts, (np.repeat(np.arange(nbeats), beat), bank.ravel()), 1)
    actual = int(counts[:, :banks].max(axis=1).sum())
    ideal = int((-(-distinct.sum(axis=1) // banks)).sum())
    return actual, ideal


def bank_cycles(view: View, shape: tuple[int, ...], mem: Memory, beat_elems: int,
                extra: tuple[tuple[int, int], ...] = ()) -> tuple[int, int]:
    """(cycles, conflict-free cycles) to stream a view through a banked SRAM, ``beat_elems`` elements per beat.

    Elements are taken in row-major iteration order, ``beat_elems`` per beat. A beat costs the largest number of
    distinct ``bank_width``-byte words it needs from any one bank (a bank delivers one word per cycle); the
    conflict-free cost is ``ceil(distinct words / banks)``.
    """
    period = mem.banks * mem.bank_width
    dims = tuple(zip(shape, view.strides[: len(shape)])) + tuple(extra)
    return _bank_cycles(view.base % period, dims, view.dtype.size, mem.banks, mem.bank_width, max(1, beat_elems))


# ---------------------------------------------------------------------------------------------------- DRAM
def _runs(offset: int, dims: tuple[tuple[int, int], ...], es: int) -> tuple[np.ndarray, int]:
    """(start offsets, bytes) of the contiguous runs of a view: innermost dimensions merged while they are dense."""
    run, k = es, len(dims)
    if dims and dims[-1][1] == es:
        run, k = es * dims[-1][0], k - 1
        while k > 0 and dims[k - 1][1] == run:
            run, k = run * dims[k - 1][0], k - 1
    return _addresses(offset, dims[:k]), run


def _bursts(offset: int, dims: tuple[tuple[int, int], ...], es: int, burst: int) -> tuple[np.ndarray, np.ndarray]:
    """(aligned start offset, bytes) of every burst of a view, in issue order: each contiguous run is cut at
    multiples of ``burst``, so a run starting or ending mid-burst has a partial first or last burst."""
    starts, run = _runs(offset, dims, es)
    off = starts % burst
    nb = -(-(off + run) // burst)
    of_run = np.repeat(np.arange(starts.size), nb)
    first = starts - off                                       # aligned start of each run's first burst
    addr = first[of_run] + (np.arange(int(nb.sum()), dtype=np.int64) - (np.cumsum(nb) - nb)[of_run]) * burst
    lo, hi = starts[of_run], starts[of_run] + run
    return addr, np.minimum(addr + burst, hi) - np.maximum(addr, lo)


def _row_delay(pages: np.ndarray, issue: np.ndarray, banks: int, row_miss: int, outstanding: int) -> tuple[int, int]:
    """(row misses, cycles they add to the window) of bursts to ``pages`` issuing at ``issue`` cycles (the schedule
    without row delays), every bank's row closed at the start; see :func:`dram_window`."""
    n = pages.size
    new = np.flatnonzero(np.concatenate(([True], pages[1:] != pages[:-1])))  # first bursts of same-page groups:
    last = np.append(new[1:], n) - 1                                        # only they can miss
    bank = pages[new] % banks
    order = np.argsort(bank, kind="stable")                                 # each bank's groups, in issue order
    b, p, j = bank[order], pages[new][order], new[order]
    same = np.concatenate(([False], b[1:] == b[:-1]))
    miss = ~same | np.concatenate(([True], p[1:] != p[:-1]))
    prev = np.where(same, np.concatenate(([-1], last[order][:-1])), -1)     # previous burst to the same bank
    j, prev = j[miss], prev[miss]
    seen = np.maximum(j - outstanding, prev)           # the burst at whose issue the activation starts (< 0: start)
    delay = np.where(seen < 0, 0, np.maximum(row_miss - (issue[j] - issue[np.maximum(seen, 0)]), 0))
    return int(j.size), row_miss + int(delay.sum())    # activations from the start overlap the first burst's


def burst_interval(data_cycles, latency: int, outstanding: int):
    """Cycles between the issue of successive DRAM bursts that each hold the bus ``data_cycles``: ``max(d,
    ceil((latency + d) / outstanding))``, the bus or the requests in flight (Little's law), whichever is slower.
    Takes integers or numpy arrays of ``data_cycles``."""
    return np.maximum(data_cycles, -(-(latency + data_cycles) // outstanding))


def dma_stream_bandwidth(arch: Arch) -> float:
    """Bytes/cycle a long stream of full ``dma.burst_bytes`` bursts sustains on one DMA channel:
    ``burst_bytes / burst_interval(ceil(burst_bytes / dram.bandwidth))``. At most ``dram.bandwidth``; lower when
    ``dma.outstanding`` bursts cannot cover the round trip ``dram.latency + d`` (the DMA's memory roof)."""
    b = arch.dma.burst_bytes
    d = -(-b // arch.dram.bandwidth)
    return b / float(burst_interval(d, arch.dram.latency, arch.dma.outstanding))


class DramWindow(NamedTuple):
    """How one DRAM view moves over the bus: cycles the bus is held, bursts, and their row-buffer outcome."""

    cycles: int
    bursts: int
    row_hits: int = 0
    row_misses: int = 0


def dram_window(view: View, shape: tuple[int, ...], arch: Arch) -> DramWindow:
    """Cycles the DRAM bus is held, bursts, row hits and row misses to move a DRAM view.

    The view splits into contiguous runs; each run into bursts aligned to ``dma.burst_bytes``. A burst of b bytes
    takes ``d = ceil(b / dram.bandwidth)`` bus cycles, and bursts issue ``I = max(d, ceil((dram.latency + d) /
    dma.outstanding))`` apart (bandwidth or in-flight limit). The window runs from the first burst's issue to the
    last burst's data: the sum of intervals less the last interval plus its data cycles.

    ``dram.model = "rowbuffer"``: byte offset o in its region (regions start page-aligned and share no page) is in
    page ``o // dram.page_bytes`` of bank ``page % dram.banks``. Every bank's row is closed when the instruction
    starts; a burst whose bank's open row is not its page is a miss and opens that row (``dram.row_miss_latency``
    cycles). Bank-level parallelism: the controller sees burst j once burst ``j - dma.outstanding`` has issued (at
    the start if j < outstanding) and activates its row then, but not before the previous burst to the same bank has
    issued. The first burst waits ``row_miss_latency``; a miss seen at the start activates alongside it and adds
    nothing; any other miss delays its own issue and every later burst by ``max(0, row_miss_latency - (t[j] -
    t[s]))``, s the later of those two bursts and t the issue cycles without row delays (``I * min(outstanding,
    bursts since the bank's previous burst)`` when all bursts are full). The window grows by the sum of the delays.
    """
    d, b = arch.dram, arch.dma.burst_bytes
    if d.model == "rowbuffer":
        # translating every page by the same amount only renames the banks: the offset within a page is enough
        return _dram(view.base % d.page_bytes, tuple(zip(shape, view.strides)), view.dtype.size, b,
                     float(d.bandwidth), d.latency, arch.dma.outstanding, d.page_bytes, d.banks, d.row_miss_latency)
    return _dram(view.base % b, tuple(zip(shape, view.strides)), view.dtype.size, b, float(d.bandwidth), d.latency,
                 arch.dma.outstanding, 0, 0, 0)


@lru_cache(maxsize=8192)
def _dram(offset: int, dims: tuple[tuple[int, int], ...], es: int, burst: int, bandwidth: float, latency: int,
          outstanding: int, page: int, banks: int, row_miss: int) -> DramWindow:
    """:func:`dram_window` on plain values (page = 0: bandwidth model), cached: programs repeat a few patterns."""
    addr, nbytes = _bursts(offset, dims, es, burst)
    d = np.ceil(nbytes / bandwidth).astype(np.int64)
    issue = np.concatenate(([0], np.cumsum(burst_interval(d, latency, outstanding)[:-1])))
    window = int(issue[-1] + d[-1])
    if not page:
        return DramWindow(window, addr.size)
    misses, delay = _row_delay(addr // page, issue, banks, row_miss, outstanding)
    return DramWindow(window + delay, addr.size, addr.size - misses, misses)


# ---------------------------------------------------------------------------------------------------- per kind
def _mem(arch: Arch, space: Space) -> Memory:
    return arch.spm if space is Space.SPM else arch.acc


def _onchip(view: View, shape: tuple[int, ...], arch: Arch, beat_elems: int | None = None,
            extra: tuple[tuple[int, int], ...] = ()) -> tuple[int, int, int]:
    """(cycles, ideal cycles, bytes) of an SPM/ACC view; a DMA moves one memory line per beat by default."""
    mem = _mem(arch, view.space)
    if beat_elems is None:
        beat_elems = mem.banks * mem.bank_width // view.dtype.size
    actual, ideal = bank_cycles(view, shape, mem, beat_elems, extra)
    return actual, ideal, math.prod(shape) * math.prod(e for e, _ in extra) * view.dtype.size


def vpu_class(instr: Instr) -> str:
    """Operation class of a vector instruction: ``alu``, ``mul`` or ``special`` (``vpu.gather`` is alu)."""
    if isinstance(instr, Gather):
        return "alu"
    if isinstance(instr, VecBinary):
        return "alu" if instr.op in ALU_BINOPS else "special" if instr.op is BinOp.DIV else "mul"
    if isinstance(instr, VecUnary):
        return "alu" if instr.fn in ALU_ACTS else "special"
    return "mul"


def vpu_latency(instr: Instr, arch: Arch) -> int:
    """Pipeline depth (cycles) of a vector instruction's operation class."""
    return getattr(arch.vector, vpu_class(instr) + "_latency")


def vpu_interval(instr: Instr, arch: Arch) -> int:
    """Initiation interval (cycles per vector of ``lanes`` elements) of a vector instruction's operation class."""
    return getattr(arch.vector, vpu_class(instr) + "_interval")


def dma_cost(instr: DmaCopy | DmaFill, arch: Arch) -> Cost:
    """DMA: ``setup + max(DRAM window, on-chip cycles) + latency`` when DRAM is involved, else ``setup + on-chip``.

    A copy between two DRAM views holds the bus for both windows and pays the latency twice. The final latency
    cycles are ``dram_latency`` (the unit waits for data), not busy.
    """
    sides = [(instr.dst, instr.shape, False)]
    if type(instr) is DmaCopy and all(src_shape := instr.src_shape):
        sides.append((instr.src, src_shape, True))
    window = onchip = ideal = dram_r = dram_w = spm = acc = latency = hits = misses = spm_w = acc_w = 0
    for view, shape, read in sides:
        if view.space is Space.DRAM:
            w = dram_window(view, shape, arch)
            window, hits, misses = window + w.cycles, hits + w.row_hits, misses + w.row_misses
            latency += arch.dram.latency
            nbytes = math.prod(shape) * view.dtype.size
            if read:
                dram_r += nbytes
            else:
                dram_w += nbytes
        else:
            a, i, nbytes = _onchip(view, shape, arch)
            onchip, ideal = max(onchip, a), max(ideal, i)
            written = 0 if read else nbytes
            if view.space is Space.SPM:
                spm, spm_w = spm + nbytes, spm_w + written
            else:
                acc, acc_w = acc + nbytes, acc_w + written
    setup = arch.dma.setup_latency
    body = max(window, onchip)
    return Cost(setup + body + latency, body - max(window, ideal), setup, window, dram_r, dram_w, spm, acc, 0, latency,
                hits, misses, spm_w, acc_w)


def vpu_cost(instr: VecBinary | VecUnary | VecConvert | VecRequant, arch: Arch) -> Cost:
    """Vector unit: ``latency + max(ceil(elements / lanes) * interval, slowest operand's SRAM cycles)``.

    Latency and interval are those of the operation class (:func:`vpu_class`). Each operand streams
    ``vector.lanes`` elements per beat through its memory's banks.
    """
    lanes = arch.vector.lanes
    compute = -(-math.prod(instr.shape) // lanes) * vpu_interval(instr, arch)
    mem = ideal = spm = acc = spm_w = acc_w = 0
    for role, view, _extra in instr.views():
        a, i, nbytes = _onchip(view, instr.shape, arch, lanes)  # an rq record counts as one word per point
        mem, ideal = max(mem, a), max(ideal, i)
        written = nbytes if role == "dst" else 0
        if view.space is Space.SPM:
            spm, spm_w = spm + nbytes, spm_w + written
        else:
            acc, acc_w = acc + nbytes, acc_w + written
    body = max(compute, mem)
    return Cost(cycles=vpu_latency(instr, arch) + body, conflict=body - max(compute, ideal), spm_bytes=spm,
                acc_bytes=acc, spm_write=spm_w, acc_write=acc_w)


def mxu_cost(mm: MatMul, arch: Arch) -> Cost:
    """Matrix unit: :func:`mxu_cycles`; operands stream through dedicated array ports (no bank conflicts)."""
    es = mm.a.dtype.size
    pts = math.prod(mm.shape)
    spm = pts * (mm.m * mm.k + mm.k * mm.n) * es
    written = pts * mm.m * mm.n * 4
    acc = written * (1 if mm.zero else 2)
    return Cost(cycles=mxu_cycles(mm, arch), spm_bytes=spm, acc_bytes=acc, macs=mm.macs, acc_write=written)


def host_cost(call: HostCall, arch: Arch) -> Cost:
    """Host unit: ``launch + ceil((rd + wr) / bandwidth) + ceil(ops / ops_per_cycle)``; its DRAM bytes are counted
    but do not hold the NPU's DRAM bus."""
    h = arch.host
    cycles = h.launch + math.ceil((call.rd + call.wr) / h.bandwidth) + math.ceil(call.ops / h.ops_per_cycle)
    return Cost(cycles=cycles, dram_read=call.rd, dram_write=call.wr)


# ---------------------------------------------------------------------------------------------------- gather
@lru_cache(maxsize=4096)
def _row_offsets(base: int, stride: int, rows: int, period: int) -> np.ndarray:
    """The distinct offsets ``(base + i*stride) mod period`` of the starts of rows ``i < rows``, sorted."""
    n = min(rows, period // math.gcd(stride % period, period))      # the offsets repeat with this period
    return np.unique((base + np.arange(n, dtype=np.int64) * stride) % period)


def gather_row_lines(g: Gather, line: int) -> int:
    """SRAM lines of ``line`` bytes the worst row of the table touches: ``ceil(b / L)``, or one more when some row
    ``i < N`` straddles a line boundary more than that (``b = row * es``). The same for every index value."""
    b = g.row_bytes
    o = _row_offsets(g.table.base, g.table.strides[0], g.rows, line)
    return int(-(-(int(o.max()) + b) // line)) if o.size else -(-b // line)


class GatherBursts(NamedTuple):
    """The DRAM side of a ``dma.ld.gather``: the bus window of P rows and the bursts of one row."""

    window: int
    row_bursts: int


def gather_bursts(g: Gather, arch: Arch) -> GatherBursts:
    """Bus cycles of ``P`` table rows from DRAM and bursts per row, both independent of the index values.

    A row of ``b`` bytes at region offset ``t + i*rs`` is cut into bursts aligned to ``dma.burst_bytes``, each taking
    ``d = ceil(bytes / dram.bandwidth)`` bus cycles and issuing ``I = max(d, ceil((dram.latency + d) /
    dma.outstanding))`` after the previous one (:func:`burst_interval`). Every row is charged as the table row whose
    cut gives the longest window (when ``rs % burst_bytes == 0`` all rows are cut alike):
    ``window = max over row offsets of (P * sum(I of the row) - I(last) + d(last))``.
    """
    burst, bw, d = arch.dma.burst_bytes, float(arch.dram.bandwidth), arch.dram
    best = (-1, 0)
    for o in _row_offsets(g.table.base, g.table.strides[0], g.rows, burst).tolist():
        _, nbytes = _bursts(o, ((g.row_bytes, 1),), 1, burst)
        cycles = np.ceil(nbytes / bw).astype(np.int64)
        interval = burst_interval(cycles, d.latency, arch.dma.outstanding)
        window = g.points * int(interval.sum()) - int(interval[-1]) + int(cycles[-1])
        best = max(best, (window, int(nbytes.size)))
    return GatherBursts(*best)


def gather_cost(g: Gather, arch: Arch) -> Cost:
    """Row gather, ``P`` index points of ``b = row * es`` bytes each; priced alike for every index value (a negative
    index, which writes ``fill``, is charged as a row), so pricing and timing-only runs are exact.

    ``r``: the SRAM lines (``banks * bank_width`` bytes of the table's memory) the worst table row touches
    (:func:`gather_row_lines`: ``ceil(b / L)`` when no row straddles a line, as when ``rs % L == 0`` with an aligned
    table, or ``rs`` divides L and ``b <= rs``; else one more). dst and idx stream through their banks as
    :func:`bank_cycles` says.

    - ``vpu.gather``: ``vector.alu_latency + max(ceil(P / G) * r, dst SRAM cycles, idx SRAM cycles)``, ``G =
      vector.gather_rows`` rows per cycle, dst and idx ``vector.lanes`` elements per beat. A row reads whole
      distinct words of distinct banks, so the table read has no bank conflicts.
    - ``dma.ld.gather`` from SPM: ``dma.setup_latency + max(P * dma.gather_issue, P * r, dst SRAM cycles)``.
    - ``dma.ld.gather`` from DRAM: ``W = max(P * dma.gather_issue, bus window) + dram.row_miss_latency`` (the bus
      window of :func:`gather_bursts`; the row-miss term only under ``dram.model = "rowbuffer"``: one activation, the
      others hidden behind bursts to other banks, every burst counted a row miss), ``cycles = setup + max(W, dst
      SRAM cycles) + dram.latency``; busy, ``dram_latency`` and ``bank_conflict`` split as :func:`dma_cost` does.
      DRAM bytes read: ``P * b``.
    """
    p, b, dma = g.points, g.row_bytes, g.queue is Queue.DMA_LD
    dst_extra = ((g.row, g.dst.strides[-1]),)
    dst = _onchip(g.dst, g.shape, arch, None if dma else arch.vector.lanes, dst_extra)
    idx = _onchip(g.idx, g.shape, arch, None if dma else arch.vector.lanes)
    moved = {Space.SPM: [0, 0], Space.ACC: [0, 0], Space.DRAM: [0, 0]}   # space -> [bytes, of them written]
    moved[g.dst.space][0] += dst[2]
    moved[g.dst.space][1] += dst[2]
    moved[g.idx.space][0] += idx[2]
    moved[g.table.space][0] += p * b
    common = dict(spm_bytes=moved[Space.SPM][0], acc_bytes=moved[Space.ACC][0], spm_write=moved[Space.SPM][1],
                  acc_write=moved[Space.ACC][1])
    if g.table.space is Space.DRAM:
        bus = gather_bursts(g, arch)
        rowbuffer = arch.dram.model == "rowbuffer"
        window = max(p * arch.dma.gather_issue, bus.window) + (arch.dram.row_miss_latency if rowbuffer else 0)
        body, setup, latency = max(window, dst[0]), arch.dma.setup_latency, arch.dram.latency
        return Cost(setup + body + latency, body - max(window, dst[1]), setup, window, dram_read=p * b,
                    dram_latency=latency, row_misses=p * bus.row_bursts if rowbuffer else 0, **common)
    mem = _mem(arch, g.table.space)
    r = gather_row_lines(g, mem.banks * mem.bank_width)
    if dma:
        issue = max(p * arch.dma.gather_issue, p * r)
        body = max(issue, dst[0])
        return Cost(arch.dma.setup_latency + body, body - max(issue, dst[1]), arch.dma.setup_latency, **common)
    rows = -(-p // arch.vector.gather_rows) * r
    body = max(rows, dst[0], idx[0])
    return Cost(arch.vector.alu_latency + body, body - max(rows, dst[1], idx[1]), **common)


FREE = Cost(cycles=0)
_COST = {MatMul: mxu_cost, DmaCopy: dma_cost, DmaFill: dma_cost, VecBinary: vpu_cost, VecUnary: vpu_cost,
         VecConvert: vpu_cost, VecRequant: vpu_cost, Gather: gather_cost, HostCall: host_cost}


def instr_cost(instr: Instr, arch: Arch) -> Cost:
    """Static cost of any instruction (sync, barrier and halt cost 0 cycles)."""
    f = _COST.get(type(instr))
    return f(instr, arch) if f is not None else FREE


def program_estimate(program, arch: Arch) -> int:
    """Predicted cycles of a software-pipelined program (compilers rank tilings with it): the busiest unit queue or
    the DRAM bus (every DMA's window), whichever is longer, plus what nothing overlaps: the loads before the first
    compute instruction (matrix or vector) and the compute and stores after the last matrix instruction (or, with
    none, the stores after the last vector instruction). Cycles."""
    busy: dict = {}
    bus = 0
    costs, queues = [], [i.queue for i in program.instrs]
    for instr, q in zip(program.instrs, queues):
        c = instr_cost(instr, arch)
        costs.append(c.cycles)
        busy[q] = busy.get(q, 0) + c.cycles
        bus += c.dram_window
    busy.pop(Queue.CTRL, None)
    compute = [k for k, q in enumerate(queues) if q in (Queue.MXU, Queue.VPU)]
    if not compute:
        return max(max(busy.values(), default=0), bus)
    head = sum(c for c, q in zip(costs[:compute[0]], queues) if q is Queue.DMA_LD)
    last = max((k for k in compute if queues[k] is Queue.MXU), default=compute[-1])
    tail = sum(c for k, (c, q) in enumerate(zip(costs, queues)) if k > last and
               (q is Queue.DMA_ST or (q is Queue.VPU and queues[last] is Queue.MXU)))
    return max(max(busy.values(), default=0), bus) + head + tail


def clear_caches() -> None:
    """Forget the memoised SRAM and DRAM costs (benchmarks use it to measure cold runs)."""
    _bank_cycles.cache_clear()
    _dram.cache_clear()
    _row_offsets.cache_clear()
