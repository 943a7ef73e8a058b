"""Closed-form cost of one instruction on one Arch, in integer cycles.

These pure functions are the timing model's formulas (``docs/timing.md`` writes each one down). The simulator
adds what depends on other units at run time: semaphore waits, full queues, DRAM bus and memory port contention.
The compiler's cost model calls the same functions, so the two never disagree.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from isa import stream
from isa.arch import Arch, Memory
from isa.dtypes import Space
from isa.errors import IsaError
from isa.instructions import (
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
from isa.speeds import bus_ticks
from isa.units import UNIT_OF, UNIT_QUEUES, Queue, Role, key_queue
from isa.view import View

ALU_BINOPS = frozenset({BinOp.ADD, BinOp.SUB, BinOp.MIN, BinOp.MAX, BinOp.AND, BinOp.OR, BinOp.XOR, BinOp.CMPGT,
                        BinOp.CMPEQ})
ALU_ACTS = frozenset({Act.MOV, Act.RELU, Act.CLAMP, Act.ABS, Act.NEG})


class Cost(NamedTuple):
    """Static cost of one instruction, before any run-time contention (all in cycles, bytes).

    ``cycles`` is the whole execution time in isolation; ``conflict`` of it are bank-conflict cycles and
    ``dram_latency`` the final cycles spent waiting for DRAM data; ``dram_window`` is how long it holds the shared
    DRAM bus (0 if it does not touch DRAM; its bursts' bus time counted in ticks and rounded up to whole cycles once
    per instruction, :mod:`isa.speeds`) and ``setup`` the cycles before that. ``row_hits`` and ``row_misses``
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
class _Banks:
    """Stream cost of a banked SRAM (:func:`bank_cycles`): costs (cycles, conflict-free cycles) of the full beats;
    the state is the beat still open (its elements' int64 offsets, as bytes). Moving the stream by bank_width bytes
    moves every word to the next bank, which changes no beat's cost: the modulus is bank_width."""

    zero, initial = (0, 0), b""

    def __init__(self, banks: int, width: int, beat: int):
        self.banks, self.modulus, self.beat = banks, width, beat

    def leaf(self, leaf: stream.Leaf, r: int, state: bytes) -> tuple[tuple[int, int], bytes]:
        addr = leaf.offsets + r
        if state:
            addr = np.concatenate((np.frombuffer(state, np.int64) + r, addr))
        nb = addr.size // self.beat
        cost = self.beats(addr[:nb * self.beat].reshape(nb, self.beat)) if nb else (0, 0)
        return cost, (addr[nb * self.beat:] - r).tobytes()

    def beats(self, addr: np.ndarray) -> tuple[int, int]:
        """(cycles, conflict-free cycles) of beats, one per row of byte addresses: the most distinct words one bank
        delivers, and ceil(distinct words / banks). Rows that step up by at most a word touch consecutive words,
        which consecutive banks deliver: both are ceil(words / banks) (most streams; no sort needed)."""
        nb, banks = addr.shape[0], self.banks
        if addr.shape[1] > 1:
            step = addr[:, 1:] - addr[:, :-1]
            if (step == step[:, :1]).all() and 0 < step[:, 0].min() and step[:, 0].max() <= self.modulus:
                n = int((-(-(addr[:, -1] // self.modulus - addr[:, 0] // self.modulus + 1) // banks)).sum())
                return n, n
        words = np.sort(addr // self.modulus, axis=1)
        distinct = np.ones(words.shape, dtype=bool)
        distinct[:, 1:] = words[:, 1:] != words[:, :-1]
        slot = np.arange(nb)[:, None] * banks + words % banks    # (beat, bank) of every element
        counts = np.bincount(slot[distinct], minlength=nb * banks).reshape(nb, banks)
        return int(counts.max(axis=1).sum()), int((-(-distinct.sum(axis=1) // banks)).sum())

    def shift(self, state: bytes, delta: int) -> bytes:
        return (np.frombuffer(state, np.int64) + delta).tobytes() if state and delta else state


@lru_cache(maxsize=8192)
def _bank_cycles(base: int, dims: tuple[tuple[int, int], ...], banks: int, width: int,
                 beat: int) -> tuple[int, int]:
    banked = _Banks(banks, width, beat)
    tree = stream.build(stream.canonical(dims), stream.Leaf(np.zeros(1, np.int64)), width, beat)
    (actual, ideal), rest = stream.evaluate(tree, banked, base)
    if rest:                                           # the last beat, partly filled
        a, i = banked.beats(np.frombuffer(rest, np.int64).reshape(1, -1) + base % width)
        actual, ideal = actual + a, ideal + i
    return actual, ideal


def bank_cycles(view: View, shape: tuple[int, ...], mem: Memory, beat_elems: int,
                extra: tuple[tuple[int, int], ...] = ()) -> tuple[int, int]:
    """(cycles, conflict-free cycles) to stream a view through a banked SRAM, ``beat_elems`` elements per beat.

    Elements are taken in row-major iteration order, ``beat_elems`` per beat. A beat costs the largest number of
    distinct ``bank_width``-byte words it needs from any one bank (a bank delivers one word per cycle); the
    conflict-free cost is ``ceil(distinct words / banks)``. Evaluated period by period (:mod:`isa.stream`): time and
    memory grow with the period of the view's address pattern, not with its size.
    """
    dims = tuple(zip(shape, view.strides[: len(shape)])) + tuple(extra)
    try:
        return _bank_cycles(view.base % mem.bank_width, dims, mem.banks, mem.bank_width, max(1, beat_elems))
    except stream.TooIrregular as e:
        raise IsaError(_irregular(view, shape, extra, e)) from None


def _irregular(view: View, shape: tuple[int, ...], extra: tuple[tuple[int, int], ...], e: Exception) -> str:
    from isa.asm import format_view

    points = math.prod(shape) * math.prod(x for x, _ in extra)
    return (f"the cost model cannot time operand {format_view(view)} over shape{list(shape)} ({points:,} elements): "
            f"its address pattern has no short period ({e}); split the instruction into smaller ones")


# ---------------------------------------------------------------------------------------------------- DRAM
def _runs(dims: tuple[tuple[int, int], ...], es: int) -> tuple[tuple[tuple[int, int], ...], int]:
    """(dimensions of the run starts, bytes of one run): a view's contiguous runs are its innermost dimensions,
    merged while they are dense."""
    run, k = es, len(dims)
    if dims and dims[-1][1] == es:
        run, k = es * dims[-1][0], k - 1
        while k > 0 and dims[k - 1][1] == run:
            run, k = run * dims[k - 1][0], k - 1
    return dims[:k], run


def _bursts(starts: np.ndarray, run: int, burst: int) -> tuple[np.ndarray, np.ndarray]:
    """(aligned start, bytes) of every burst of runs of ``run`` bytes at ``starts``, in issue order: each run is cut
    at multiples of ``burst``, so a run starting or ending mid-burst has a partial first or last burst."""
    off = starts % burst
    nb = -(-(off + run) // burst)
    of_run = np.repeat(np.arange(starts.size), nb)
    first = starts - off                                       # aligned start of each run's first burst
    addr = first[of_run] + (np.arange(int(nb.sum()), dtype=np.int64) - (np.cumsum(nb) - nb)[of_run]) * burst
    lo, hi = starts[of_run], starts[of_run] + run
    return addr, np.minimum(addr + burst, hi) - np.maximum(addr, lo)


def _row_misses(pages: np.ndarray, issue: np.ndarray, after: int, banks: int, row_miss: int,
                outstanding: int) -> tuple[int, int, list[tuple[int, int]]]:
    """(row misses, ticks they delay the stream, (burst, its delay) of each delayed burst) of the bursts from index
    ``after`` on, to ``pages``, issuing at ``issue`` ticks (the bursts before ``after`` at their actual times, the
    others as if no row delayed them); see :func:`dram_window`. The bursts before ``after`` are the history: the last
    ``outstanding`` bursts and, before them, the last burst to each other bank."""
    n = pages.size
    new = np.flatnonzero(np.concatenate(([True], pages[1:] != pages[:-1])))  # first bursts of same-page groups:
    last = np.append(new[1:], n) - 1                                        # only they can miss
    bank = pages[new] % banks
    order = np.argsort(bank, kind="stable")                                 # each bank's groups, in issue order
    b, p, j = bank[order], pages[new][order], new[order]
    same = np.concatenate(([False], b[1:] == b[:-1]))
    miss = ~same | np.concatenate(([True], p[1:] != p[:-1]))
    if after:
        miss &= j >= after
    prev = np.where(same, np.concatenate(([-1], last[order][:-1])), -1)     # previous burst to the same bank
    j, prev = j[miss], prev[miss]
    seen = np.maximum(j - outstanding, prev)           # the burst at whose issue the activation starts (< 0: start)
    short = np.where(seen < 0, 0, row_miss - (issue[j] - issue[np.maximum(seen, 0)]))   # activation still running
    hot = np.flatnonzero(short > 0)
    if not hot.size:
        return int(j.size), 0, []
    hot = hot[np.argsort(j[hot])]
    return (int(j.size), *_knock_on(j[hot].tolist(), seen[hot].tolist(), short[hot].tolist()))


def _knock_on(bursts: list[int], seen: list[int], short: list[int]) -> tuple[int, list[tuple[int, int]]]:
    """(total delay, (burst, its delay) of each delayed one) of row misses in issue order: burst j's activation,
    started at burst ``seen[j]``'s issue, ends ``short[j]`` ticks after j would issue without row delays; a delay
    postpones every later burst too, which shortens a later miss's own wait by what it added after that miss's
    ``seen`` burst. So burst j issues ``shift(j) = max(shift before j, shift(seen[j]) + short[j])`` late: the stream
    is never shorter when an activation is quicker to hide, whatever the bandwidth."""
    marks: list[int] = []    # the delayed bursts so far, in order, and the shift from each on
    shifts: list[int] = []
    total, out = 0, []
    for j, s, gap in zip(bursts, seen, short):
        k = bisect.bisect_right(marks, s)
        wait = gap + (shifts[k - 1] if k else 0) - total
        if wait > 0:
            total += wait
            marks.append(j)
            shifts.append(total)
            out.append((j, wait))
    return total, out


WALKED_GROUPS = 128
"""Same-page burst groups up to which :func:`_uniform_row_misses` walks them one by one (below this, numpy's
per-call overhead in :func:`_row_misses` costs more than the walk)."""


def _uniform_row_misses(pages: np.ndarray, step: int, banks: int, row_miss: int,
                        outstanding: int) -> tuple[int, int]:
    """(row misses, delay) of :func:`_row_misses` for bursts to ``pages`` issued ``step`` ticks apart (burst k at ``k
    * step``), with no history. Up to ``WALKED_GROUPS`` same-page groups, group by group in issue order: a group's
    first burst misses unless its bank's open page is its own, and waits for the later of the burst ``outstanding``
    before it and the last burst of its bank's previous group."""
    n = pages.size
    starts = np.flatnonzero(np.concatenate(([True], pages[1:] != pages[:-1])))
    if starts.size > WALKED_GROUPS:
        misses, delay, _ = _row_misses(pages, np.arange(n, dtype=np.int64) * step, 0, banks, row_miss, outstanding)
        return misses, delay
    first = starts.tolist()
    opened: dict[int, tuple[int, int]] = {}   # bank -> (open page, last burst of its latest group)
    misses, hot = 0, []                       # the misses whose activation outlasts the schedule: (j, seen, short)
    for j, page, end in zip(first, pages[starts].tolist(), first[1:] + [n]):
        bank = page % banks
        prev = opened.get(bank)
        if prev is None or prev[0] != page:
            misses += 1
            seen = j - outstanding if prev is None else max(j - outstanding, prev[1])
            if seen >= 0 and row_miss > (j - seen) * step:
                hot.append((j, seen, row_miss - (j - seen) * step))
        opened[bank] = (page, end - 1)
    return misses, _knock_on(*zip(*hot))[0] if hot else 0


class _Bus:
    """Stream cost of a DRAM view's bursts (:func:`dram_window`): costs (sum of issue intervals, row misses, their
    delay, bursts), times in ticks (:class:`isa.speeds.DramTiming`). The state: for the rowbuffer model the history
    that decides later misses, as int64 bytes: the last burst to each bank before the last ``outstanding`` bursts
    (aligned offsets), those bursts (offsets) and their intervals; then the last burst's interval and bus ticks.
    Moving the stream by a whole page only renames the banks (by a burst, for the bandwidth model): that is the
    modulus."""

    zero, initial = (0, 0, 0, 0), (b"", b"", b"", 0, 0)

    def __init__(self, burst: int, access: int, access_ticks: int, latency: int, outstanding: int, page: int,
                 banks: int, row_miss: int):
        self.burst, self.access, self.access_ticks = burst, access, access_ticks
        self.latency, self.outstanding = latency, outstanding
        self.page, self.banks, self.row_miss = page, banks, row_miss
        self.modulus = page or burst

    def leaf(self, leaf: stream.Leaf, r: int, state, history: bool = True):
        """Costs and state after the runs of ``leaf``; without ``history`` the state only has its last two fields
        (the leaf is the whole stream)."""
        addr, nbytes = _bursts(leaf.offsets + r, leaf.arg, self.burst)
        d = bus_ticks(nbytes, self.access, self.access_ticks)
        interval = burst_interval(d, self.latency, self.outstanding)
        tail = (int(interval[-1]), int(d[-1]))
        if not self.page:
            return (int(interval.sum()), 0, 0, addr.size), (b"", b"", b"") + tail
        if state[1]:
            older, window, steps = (np.frombuffer(x, np.int64) for x in state[:3])
            rel = np.concatenate((older, window, addr - r))
            steps = np.concatenate((np.zeros(older.size, np.int64), steps, interval))
            past = older.size + window.size
            pages = (rel + r) // self.page
        else:
            rel, steps, past, pages = None, interval, 0, addr // self.page
        issue = np.concatenate(([0], np.cumsum(steps[:-1])))
        misses, delay, delayed = _row_misses(pages, issue, past, self.banks, self.row_miss, self.outstanding)
        costs = (int(issue[-1] - issue[past]) + tail[0], misses, delay, addr.size)
        if not history:
            return costs, (b"", b"", b"") + tail
        if delayed:                                    # the history keeps the bursts' actual issue intervals
            steps = steps.copy()
            for j, wait in delayed:
                steps[j - 1] += wait
        if rel is None:
            rel = addr - r
        keep = rel.size - min(self.outstanding, len(state[1]) // 8 + addr.size)   # where the new window starts
        _, at = np.unique((pages % self.banks)[::-1], return_index=True)
        lasts = rel.size - 1 - at                                          # each bank's last burst
        return costs, (np.sort(rel[lasts[lasts < keep]]).tobytes(), rel[keep:].tobytes(),
                              steps[keep:].tobytes()) + tail

    def full_bursts(self, leaf: stream.Leaf, r: int) -> DramWindow | None:
        """The window (in ticks) of a whole view in ``leaf`` (at ``r``) whose runs all start and end on burst
        boundaries, or None for another leaf: every burst is full, holds the bus ``d = burst / access_bytes *
        access_ticks`` and issues ``I = burst_interval(d)`` after the previous one, so burst k issues at ``k * I``
        and the window is ``(bursts - 1) * I + d`` (plus the row delays): :meth:`leaf` without its per-burst sizes,
        intervals and sums (most views the searches price are such runs: weight chunks, whole input rows)."""
        b, run = self.burst, leaf.arg
        starts = leaf.offsets + r
        if run % b or self.page % b or (starts % b).any():
            return None
        d = bus_ticks(b, self.access, self.access_ticks)
        step = int(burst_interval(d, self.latency, self.outstanding))
        n = starts.size * (run // b)
        window = (n - 1) * step + d
        if not self.page:
            return DramWindow(window, n)
        pages = (starts[:, None] + np.arange(0, run, b)).ravel() // self.page
        misses, delay = _uniform_row_misses(pages, step, self.banks, self.row_miss, self.outstanding)
        return DramWindow(window + self.row_miss + delay, n, n - misses, misses)

    def shift(self, state, delta: int):
        if not delta or not state[1]:
            return state
        return tuple((np.frombuffer(x, np.int64) + delta).tobytes() for x in state[:2]) + state[2:]

    def unit(self, run: int):
        """The node of one run of ``run`` bytes: a leaf, or, for a run of many bursts, a node that cuts it at burst
        boundaries once its alignment is known (so that no leaf holds more than a chunk of bursts)."""
        most = run // self.burst + 2
        if most <= stream.CHUNK // 4:
            return stream.Leaf(np.zeros(1, np.int64), run, most)
        block = max(1, self.modulus // self.burst)
        block = max(block, stream.CHUNK // 4 // block * block) * self.burst   # bytes: whole pages of bursts

        def cut(r: int):
            head = -r % self.burst
            if head >= run:
                return stream.Leaf(np.zeros(1, np.int64), run, 2)
            blocks, rest = divmod(run - head, block)
            parts = [(0, stream.Leaf(np.zeros(1, np.int64), head, 2))] if head else []
            if blocks:
                parts.append((head, stream.Rep(stream.Leaf(np.zeros(1, np.int64), block, block // self.burst + 2),
                                               blocks, block)))
            if rest:
                parts.append((head + blocks * block, stream.Leaf(np.zeros(1, np.int64), rest,
                                                                 rest // self.burst + 2)))
            return stream.Seq(tuple(parts))
        return stream.Lazy(cut)


def burst_interval(data_ticks, latency: int, outstanding: int):
    """Ticks between the issue of successive DRAM bursts that each hold the bus ``data_ticks``: ``max(d, ceil((latency
    + d) / outstanding))`` (``latency`` in ticks), the bus or the requests in flight (Little's law), whichever is
    slower. Takes integers or numpy arrays of ``data_ticks``."""
    return np.maximum(data_ticks, -(-(latency + data_ticks) // outstanding))


def dma_stream_bandwidth(arch: Arch) -> float:
    """Bytes/cycle a long stream of full ``dma.burst_bytes`` bursts sustains on one DMA channel: ``burst_bytes /
    burst_interval(d)``, d the ticks one burst holds the bus. At most the bus's ``dram.gb_per_s / clock.ghz``; lower
    when ``dma.outstanding`` bursts cannot cover the round trip ``latency + d`` (the DMA's memory roof)."""
    t, b = arch.dram_timing, arch.dma.burst_bytes
    return b * t.ticks / float(burst_interval(t.data_ticks(b), t.latency_ticks, arch.dma.outstanding))


class DramWindow(NamedTuple):
    """How one DRAM view moves over the bus: cycles the bus is held, bursts, and their row-buffer outcome."""

    cycles: int
    bursts: int
    row_hits: int = 0
    row_misses: int = 0


def dram_window(view: View, shape: tuple[int, ...], arch: Arch) -> DramWindow:
    """Cycles the DRAM bus is held, bursts, row hits and row misses to move a DRAM view.

    Times are counted in ticks, ``1/T`` of a core cycle (:class:`isa.speeds.DramTiming`), and the window is rounded up
    to whole cycles at the end. The view splits into contiguous runs; each run into bursts aligned to
    ``dma.burst_bytes``. A burst of b bytes rounds up to whole ``dram.access_bytes`` accesses and holds the bus ``d =
    ceil(b / access_bytes) * access_ticks`` ticks; bursts issue ``I = max(d, ceil((latency + d) / dma.outstanding))``
    apart (bandwidth or in-flight limit; latency ``ceil(dram.latency_ns * clock.ghz)`` cycles, in ticks). The window
    runs from the first burst's issue to the last burst's data: the sum of intervals less the last interval plus its
    data ticks.

    ``dram.model = "rowbuffer"``: byte offset o in its region (regions start page-aligned and share no page) is in
    page ``o // dram.page_bytes`` of bank ``page % dram.banks``. Every bank's row is closed when the instruction
    starts; a burst whose bank's open row is not its page is a miss and opens that row (``L``, the row miss:
    ``ceil(dram.row_miss_ns * clock.ghz)`` cycles). Bank-level parallelism: the controller sees burst j once burst
    ``j - dma.outstanding`` has issued (at the start if j < outstanding) and activates its row then, but not before
    the previous burst to the same bank has issued. The first burst waits ``L``; a miss seen at the start activates
    alongside it and adds nothing; any other miss issues no sooner than ``L`` after burst s, the later of those two
    bursts: ``a[j] = max(a[j-1] + I, a[s] + L)``, a the actual issue ticks (without earlier delays a delay of ``max(0,
    L - (t[j] - t[s]))``, t the issue ticks without row delays, ``I * min(outstanding, bursts since the bank's previous
    burst)`` when all bursts are full; a delay postpones every later burst, :func:`_knock_on`). The window grows by
    the total delay.
    """
    w = _window_ticks(view, shape, arch)
    return w._replace(cycles=arch.dram_timing.cycles(w.cycles))


def _window_ticks(view: View, shape: tuple[int, ...], arch: Arch) -> DramWindow:
    """:func:`dram_window` with its window in ticks (not rounded)."""
    d, t, b = arch.dram, arch.dram_timing, arch.dma.burst_bytes
    dims = tuple(zip(shape, view.strides))
    bus = (t.access_bytes, t.access_ticks, t.latency_ticks, arch.dma.outstanding)
    try:
        if d.model == "rowbuffer":
            # translating every page by the same amount only renames the banks: the offset within a page is enough
            return _dram(view.base % d.page_bytes, dims, view.dtype.size, b, *bus, d.page_bytes, d.banks,
                         t.row_miss_ticks)
        return _dram(view.base % b, dims, view.dtype.size, b, *bus, 0, 0, 0)
    except stream.TooIrregular as e:
        raise IsaError(_irregular(view, shape, (), e)) from None


@lru_cache(maxsize=8192)
def _dram(offset: int, dims: tuple[tuple[int, int], ...], es: int, burst: int, access: int, access_ticks: int,
          latency: int, outstanding: int, page: int, banks: int, row_miss: int) -> DramWindow:
    """:func:`dram_window` on plain values, times in ticks (page = 0: bandwidth model), cached: programs repeat a few
    patterns."""
    bus = _Bus(burst, access, access_ticks, latency, outstanding, page, banks, row_miss)
    outer, run = _runs(dims, es)
    tree = stream.build(stream.canonical(outer), bus.unit(run), bus.modulus)
    if isinstance(tree, stream.Leaf):                 # the whole view in one leaf: no history to keep
        whole = bus.full_bursts(tree, offset % bus.modulus)
        if whole is not None:
            return whole
        (intervals, misses, delay, bursts), state = bus.leaf(tree, offset % bus.modulus, bus.initial, False)
    else:
        (intervals, misses, delay, bursts), state = stream.evaluate(tree, bus, offset)
    window = intervals - state[-2] + state[-1]         # the last burst's data, not its interval, ends the window
    if not page:
        return DramWindow(window, bursts)
    return DramWindow(window + row_miss + delay, bursts, bursts - misses, misses)   # row_miss: the first burst's


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


def dram_floor(view: View, shape: tuple[int, ...], arch: Arch) -> DramWindow:
    """A lower bound of :func:`dram_window`'s cycles that does not read the view's base (no bursts or row outcomes
    counted): every burst holds the bus at least its bytes over the bus's bytes per cycle (``dram.gb_per_s /
    clock.ghz``) and issues no sooner than the previous one's data (an interval is at least its data ticks), so the
    window is at least ``view bytes * access_ticks / (access_bytes * T)`` cycles (rounded down here); under
    ``rowbuffer`` the first burst's activation adds the row miss."""
    d, t = arch.dram, arch.dram_timing
    nbytes = math.prod(shape) * view.dtype.size
    return DramWindow(nbytes * t.access_ticks // (t.access_bytes * t.ticks)
                      + (t.row_miss if d.model == "rowbuffer" else 0), 0)


def _dma_sides(instr: DmaCopy | DmaFill) -> list[tuple[View, tuple[int, ...], bool]]:
    """(view, shape, whether it is read) of each side a DMA moves: the destination, and a copy's source unless it
    reads only padding."""
    sides = [(instr.dst, instr.shape, False)]
    if type(instr) is DmaCopy and all(src_shape := instr.src_shape):
        sides.append((instr.src, src_shape, True))
    return sides


def dma_floor(instr: DmaCopy | DmaFill, arch: Arch) -> Cost:
    """A lower bound of :func:`dma_cost` that reads no view base (for :func:`instr_floor`): with DRAM involved,
    ``setup + sum of dram_floor windows + latency`` per DRAM side (the on-chip streaming overlaps the window, so
    leaving it out only lowers the cost), its bus window that sum; an on-chip copy costs what dma_cost says."""
    dram = [dram_floor(view, shape, arch).cycles for view, shape, _ in _dma_sides(instr) if view.space is Space.DRAM]
    if not dram:
        return dma_cost(instr, arch)
    setup, window = arch.dma.setup_latency, sum(dram)
    return Cost(setup + window + len(dram) * arch.dram_timing.latency, setup=setup, dram_window=window)


def dma_cost(instr: DmaCopy | DmaFill, arch: Arch) -> Cost:
    """DMA: ``setup + max(DRAM window, on-chip cycles) + latency`` when DRAM is involved, else ``setup + on-chip``.

    A copy between two DRAM views holds the bus for both windows (added up in ticks, then rounded up to whole cycles
    once) and pays the latency twice. The final latency cycles are ``dram_latency`` (the unit waits for data), not
    busy.
    """
    sides, timing = _dma_sides(instr), arch.dram_timing
    window = onchip = ideal = dram_r = dram_w = spm = acc = latency = hits = misses = spm_w = acc_w = 0
    for view, shape, read in sides:
        if view.space is Space.DRAM:
            w = _window_ticks(view, shape, arch)
            window, hits, misses = window + w.cycles, hits + w.row_hits, misses + w.row_misses
            latency += timing.latency
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
    setup, window = arch.dma.setup_latency, timing.cycles(window)
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
    """Matrix unit: :func:`mxu_cycles`; operands stream through dedicated array ports (no bank conflicts). SPM bytes:
    ``points * (m * k * A's element size + k * n * B's)`` (a weight-only f32 x i8 instruction reads one byte per
    weight)."""
    pts = math.prod(mm.shape)
    spm = pts * (mm.m * mm.k * mm.a.dtype.size + mm.k * mm.n * mm.b.dtype.size)
    written = pts * mm.m * mm.n * 4
    acc = written * (1 if mm.zero else 2)
    return Cost(cycles=mxu_cycles(mm, arch), spm_bytes=spm, acc_bytes=acc, macs=mm.macs, acc_write=written)


def host_cost(call: HostCall, arch: Arch) -> Cost:
    """Host unit: ``launch + ceil((rd + wr) / bytes per cycle) + ceil(ops / ops per cycle)`` at the host's own speed
    in NPU cycles (:class:`isa.speeds.HostTiming`); its DRAM bytes are counted but do not hold the NPU's DRAM bus."""
    return Cost(cycles=arch.host_timing.call_cycles(call.rd + call.wr, call.ops), dram_read=call.rd,
                dram_write=call.wr)


# ---------------------------------------------------------------------------------------------------- gather
@lru_cache(maxsize=256)
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

    A row of ``b`` bytes at region offset ``t + i*rs`` is cut into bursts aligned to ``dma.burst_bytes``, each holding
    the bus ``d = ceil(bytes / dram.access_bytes) * access_ticks`` ticks (:class:`isa.speeds.DramTiming`) and issuing
    ``I = max(d, ceil((latency + d) / dma.outstanding))`` after the previous one (:func:`burst_interval`). Every row
    is charged as the table row whose cut gives the longest window (when ``rs % burst_bytes == 0`` all rows are cut
    alike): ``window = max over row offsets of (P * sum(I of the row) - I(last) + d(last))`` ticks, rounded up to
    whole cycles. A row's cut depends only on its offset modulo the burst: a head to the next burst boundary, full
    bursts, a tail; all row offsets are priced at once in closed form (no array grows with the row's bytes).
    """
    burst, b, t = arch.dma.burst_bytes, g.row_bytes, arch.dram_timing
    o = _row_offsets(g.table.base, g.table.strides[0], g.rows, burst)
    head = (-o) % burst                                  # bytes up to the next burst boundary (0: aligned)
    single = head >= b                                   # the whole row inside one burst
    head = np.where(single, b, head)
    full, tail = (b - head) // burst, (b - head) % burst
    pieces = (head > 0).astype(np.int64) + full + (tail > 0)

    def interval(nbytes):
        d = t.data_ticks(nbytes)
        return burst_interval(d, t.latency_ticks, arch.dma.outstanding), d

    i_head, d_head = interval(head)
    i_full, d_full = interval(np.int64(burst))
    i_tail, d_tail = interval(tail)
    total = np.where(head > 0, i_head, 0) + full * i_full + np.where(tail > 0, i_tail, 0)
    i_last = np.where(tail > 0, i_tail, np.where(full > 0, i_full, i_head))
    d_last = np.where(tail > 0, d_tail, np.where(full > 0, d_full, d_head))
    window = [g.points * int(x) - int(i) + int(d) for x, i, d in zip(total, i_last, d_last)]   # (Python ints)
    k = max(range(len(window)), key=lambda j: (window[j], int(pieces[j])))   # the longest window, then most bursts
    return GatherBursts(t.cycles(window[k]), int(pieces[k]))


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
    - ``dma.ld.gather`` from DRAM: ``W = max(P * dma.gather_issue, bus window) + row miss`` (the bus window of
      :func:`gather_bursts`; the row miss, ``ceil(dram.row_miss_ns * clock.ghz)`` cycles, only under ``dram.model =
      "rowbuffer"``: one activation, the others hidden behind bursts to other banks, every burst counted a row miss),
      ``cycles = setup + max(W, dst SRAM cycles) + latency`` (``ceil(dram.latency_ns * clock.ghz)``); busy,
      ``dram_latency`` and ``bank_conflict`` split as :func:`dma_cost` does. DRAM bytes read: ``P * b``.
    """
    p, b, dma = g.points, g.row_bytes, g.queue.unit.role.is_dma
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
        window = max(p * arch.dma.gather_issue, bus.window) + (arch.dram_timing.row_miss if rowbuffer else 0)
        body, setup, latency = max(window, dst[0]), arch.dma.setup_latency, arch.dram_timing.latency
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


def instr_floor(instr: Instr, arch: Arch) -> Cost:
    """:func:`instr_cost`, but :func:`dma_floor` for a DMA: at most its cycles and bus window, and the same for any
    DRAM base (a compiler's lower bound of a candidate before pricing it exactly)."""
    if type(instr) in (DmaCopy, DmaFill):
        return dma_floor(instr, arch)
    return instr_cost(instr, arch)


def _moduli(arch: Arch) -> dict[Space, int]:
    """Per space, the modulus of a view's base that its cost depends on: an SRAM's bank width (moving a view by a
    word moves every word to the next bank, :func:`bank_cycles`); for DRAM the row-buffer page (the offset within a
    page is all :func:`dram_window` reads), else the burst."""
    d = arch.dram
    return {Space.SPM: arch.spm.bank_width, Space.ACC: arch.acc.bank_width,
            Space.DRAM: d.page_bytes if d.model == "rowbuffer" else arch.dma.burst_bytes}


def matmul_cost_key(shape: tuple[int, ...], m: int, k: int, n: int, acc_strides: tuple[int, ...],
                    a_strides: tuple[int, ...], b_strides: tuple[int, ...], es: int, zero: bool,
                    b_es: int | None = None) -> tuple:
    """The :func:`instr_costs` memo key of an ``mxu.mm`` from its fields (``es``: A's element bytes; ``b_es``:
    B's, when they differ): what :func:`mxu_cost` reads. A compiler pricing many candidates looks costs up by it
    without building the instruction."""
    return (MatMul, shape, m, k, n, acc_strides, a_strides, b_strides, es, zero, es if b_es is None else b_es)


def copy_cost_key(shape: tuple[int, ...], pad: tuple, dst: tuple, src: tuple) -> tuple:
    """The :func:`instr_costs` memo key of a ``DmaCopy`` from its fields; ``dst`` and ``src`` as (space, base modulo
    that space's cost modulus (an SRAM's bank width; the DRAM page, or burst), element bytes, strides): what
    :func:`dma_cost` reads."""
    return (DmaCopy, shape, pad) + dst + src


def _cost_key(instr: Instr, mod: dict[Space, int]):
    """What :func:`instr_cost` of ``instr`` depends on, as a hashable key (view bases reduced by :func:`_moduli`)."""
    t = type(instr)
    if t is MatMul:
        return matmul_cost_key(instr.shape, instr.m, instr.k, instr.n, instr.acc.strides, instr.a.strides,
                               instr.b.strides, instr.a.dtype.size, instr.zero, instr.b.dtype.size)
    if t is DmaCopy:
        d, s = instr.dst, instr.src
        return copy_cost_key(instr.shape, instr.pad, (d.space, d.base % mod[d.space], d.dtype.size, d.strides),
                             (s.space, s.base % mod[s.space], s.dtype.size, s.strides))
    if t is DmaFill:
        d = instr.dst
        return t, instr.shape, d.space, d.base % mod[d.space], d.dtype.size, d.strides
    if t is HostCall:
        return t, instr.rd, instr.wr, instr.ops
    if t in _VECTOR:   # operation class, shape and operands
        return (t, vpu_class(instr), instr.shape) + tuple((v.space, v.base % mod[v.space], v.dtype.size, v.strides)
                                                          for _, v, _ in instr.views())
    return None   # (a gather: priced each time)


_VECTOR = frozenset((VecBinary, VecUnary, VecConvert, VecRequant))


def instr_costs(instrs, arch: Arch, memo: dict | None = None, floor: bool = False) -> list[Cost]:
    """``[instr_cost(i, arch) for i in instrs]``, computed once per distinct key: instructions that differ only in
    what the cost does not read (a view's base beyond its bank period or DRAM page, semaphores, a matrix
    instruction's row strides) share one evaluation. Programs repeat a few instruction shapes thousands of times.
    ``memo``: a dict to share those evaluations across calls with the same ``arch`` (a compiler's search).
    ``floor``: :func:`instr_floor` instead, keyed without DRAM bases (its memo apart from instr_cost's)."""
    mod, out, cost = _moduli(arch), [], instr_floor if floor else instr_cost
    if floor:
        mod[Space.DRAM] = 1
    memo = {} if memo is None else memo
    for instr in instrs:
        key = _cost_key(instr, mod)
        if key is None:
            out.append(cost(instr, arch))
            continue
        c = memo.get(key)
        if c is None:
            c = memo[key] = cost(instr, arch)
        out.append(c)
    return out


class EstimateParts(NamedTuple):
    """What :func:`program_estimate` reads of a run of instructions (cycles), so that runs priced once can be added
    again without their instructions (:meth:`ProgramEstimate.add_parts`). Runs combine in program order like the
    instructions they stand for (an associative sum; ``EstimateParts()`` is its zero).

    ``busy``: (:func:`isa.units.unit_key`, busy cycles) of each unit it keeps busy; ``bus``: its DRAM bus
    windows; ``compute``, ``matrix``: whether it holds a compute (matrix or vector) or a matrix instruction; ``lead``:
    the load-DMA cycles before its first compute instruction (all of them if it has none); ``after_matrix``: the
    store-DMA and vector cycles after its last matrix instruction (all of them if it has none); ``after_compute``: the
    store-DMA cycles after its last compute instruction (all of them if it has none); ``hidden``: the cycles of its
    leading instructions that the estimate's ``hidden`` predicate holds for, ``all_hidden`` whether it holds for all
    of them."""

    busy: tuple[tuple[int, int], ...] = ()
    bus: int = 0
    compute: bool = False
    lead: int = 0
    matrix: bool = False
    after_matrix: int = 0
    after_compute: int = 0
    hidden: int = 0
    all_hidden: bool = True


    def busy_of(self, role: Role) -> int:
        """The busy cycles of the units with ``role``."""
        return sum(cycles for key, cycles in self.busy if key_queue(key).unit.role is role)


_ROLE = {q: UNIT_OF[q].role for q in UNIT_QUEUES} | {Queue.CTRL: None}


class ProgramEstimate:
    """:func:`program_estimate` as a running sum: the instructions of a program added in program order, in groups,
    each group any number of times in a row (``repeat``), or as the :class:`EstimateParts` of a group priced before;
    :attr:`cycles` is then what program_estimate gives for the program they make up.

    It keeps every unit's busy cycles and the DRAM bus windows, and what the head and tail need: the load-DMA
    cycles before the first compute (matrix or vector) instruction, and the store-DMA and vector cycles after the
    last matrix instruction (the store-DMA cycles after the last compute instruction when there is none). The units
    are told apart by their :class:`isa.units.Role`.

    ``memo``: an :func:`instr_costs` memo to share with other estimates on the same ``arch``; ``floor``: price every
    instruction by :func:`instr_floor` (a lower bound); ``hidden``: a predicate on instructions whose leading run (the
    instructions before the first it does not hold for) :attr:`hidden` counts, e.g. a compiler's loads of constants
    that cross-layer prefetch overlaps with the previous program (it should hold only for load DMAs)."""

    __slots__ = ("arch", "memo", "floor", "hide", "busy", "bus", "compute", "lead", "matrix", "after_matrix",
                 "after_compute", "hidden", "all_hidden")

    def __init__(self, arch: Arch, memo: dict | None = None, floor: bool = False,
                 hidden: Callable[[Instr], bool] | None = None) -> None:
        self.arch, self.memo, self.floor, self.hide = arch, {} if memo is None else memo, floor, hidden
        self.busy: dict[int, int] = {}   # unit key -> busy cycles
        self.bus = self.lead = self.after_matrix = self.after_compute = self.hidden = 0
        self.compute = self.matrix = False
        self.all_hidden = True

    @property
    def cycles(self) -> int:
        """Predicted cycles of the instructions added so far: the busiest unit or the DRAM bus, whichever is longer,
        plus the head and the tail (none without a compute instruction)."""
        top = max(max(self.busy.values(), default=0), self.bus)
        if not self.compute:
            return top
        return top + self.lead + (self.after_matrix if self.matrix else self.after_compute)

    @property
    def least(self) -> int:
        """A lower bound of ``cycles - hidden`` whatever is added later (cycles), given a ``hidden`` predicate that
        holds only for load DMAs (so its run is part of the head): the busiest unit or the bus and, once the head
        and the hidden run are complete (a compute instruction and one not hidden were added), the head less the
        hidden run."""
        top = max(max(self.busy.values(), default=0), self.bus)
        return top + self.lead - self.hidden if self.compute and not self.all_hidden else top

    def add(self, instrs: Sequence[Instr], repeat: int = 1) -> None:
        """Add ``instrs`` (in program order), ``repeat`` times in a row."""
        self.add_parts(self.price(instrs), repeat)

    def price(self, instrs: Sequence[Instr]) -> EstimateParts:
        """The :class:`EstimateParts` of ``instrs`` in program order (priced with this estimate's arch, memo, floor
        and hidden predicate; nothing is added)."""
        busy: dict[int, int] = {}
        bus = lead = after_matrix = after_compute = hidden = 0
        compute = matrix = False
        hide, open_ = self.hide, True
        for instr, c in zip(instrs, instr_costs(instrs, self.arch, self.memo, self.floor)):
            cycles = c.cycles
            if open_:
                if hide is not None and hide(instr):
                    hidden += cycles
                else:
                    open_ = False
            bus += c.dram_window
            role = _ROLE[instr.queue]
            if role is None:
                continue
            unit = instr.unit_key
            busy[unit] = busy.get(unit, 0) + cycles
            if role is Role.DMA_LOAD:
                if not compute:
                    lead += cycles
            elif role is Role.MATRIX:
                compute = matrix = True
                after_matrix = after_compute = 0
            elif role is Role.VECTOR:
                compute = True
                after_matrix += cycles
                after_compute = 0
            elif role is Role.DMA_STORE:
                after_matrix += cycles
                after_compute += cycles
        return EstimateParts(tuple(busy.items()), bus, compute, lead, matrix,
                             after_matrix, after_compute, hidden, open_)

    def add_parts(self, parts: EstimateParts, repeat: int = 1) -> None:
        """Add a group priced before (:meth:`price`, :meth:`parts`), ``repeat`` times in a row: exactly what adding
        its instructions ``repeat`` times gives."""
        if repeat < 1:
            return
        units, bus, compute, lead, matrix, after_matrix, after_compute, hidden, all_hidden = parts
        busy = self.busy
        for unit, cycles in units:
            busy[unit] = busy.get(unit, 0) + cycles * repeat
        self.bus += bus * repeat
        if self.all_hidden:   # (a group not wholly hidden ends the hidden run in its first copy)
            self.hidden += hidden * repeat if all_hidden else hidden
            self.all_hidden = all_hidden
        if not self.compute:   # (a group with compute ends the head in its first copy)
            self.lead += lead if compute else lead * repeat
            self.compute = compute
        if matrix:             # (the tail after a group's last matrix instruction is that of its last copy)
            self.matrix, self.after_matrix = True, after_matrix
        else:
            self.after_matrix += after_matrix * repeat
        if compute:
            self.after_compute = after_compute
        else:
            self.after_compute += after_compute * repeat

    def parts(self) -> EstimateParts:
        """What was added so far, as one group."""
        return EstimateParts(tuple(self.busy.items()), self.bus, self.compute,
                             self.lead, self.matrix, self.after_matrix, self.after_compute, self.hidden,
                             self.all_hidden)


def program_estimate(program, arch: Arch) -> int:
    """Predicted cycles of a software-pipelined program (compilers rank tilings with it): the busiest unit queue or
    the DRAM bus (every DMA's window), whichever is longer, plus what nothing overlaps: the loads before the first
    compute instruction (matrix or vector) and the compute and stores after the last matrix instruction (or, with
    none, the stores after the last vector instruction). Cycles. The busy cycles are counted per unit (queue and
    ordinal). (:class:`ProgramEstimate` fed the program.)"""
    est = ProgramEstimate(arch)
    est.add(program.instrs)
    return est.cycles


def clear_caches() -> None:
    """Forget the memoised SRAM and DRAM costs (benchmarks use it to measure cold runs)."""
    _bank_cycles.cache_clear()
    _dram.cache_clear()
    _row_offsets.cache_clear()
