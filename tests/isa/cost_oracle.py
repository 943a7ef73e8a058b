"""The cost model's SRAM and DRAM stream formulas as they were before periodic evaluation (commit 408c0ec): every
element and every burst materialised in numpy arrays. Kept verbatim (less the caches) as the oracle that
:mod:`isa.cost`'s bounded evaluation is tested equal to (tests/isa/test_cost_streams.py)."""

from __future__ import annotations

import numpy as np

from isa.cost import DramWindow


def _addresses(base: int, dims: tuple[tuple[int, int], ...]) -> np.ndarray:
    """Byte addresses of every element in row-major iteration order."""
    addr = np.array([base], dtype=np.int64)
    for e, s in dims:
        addr = (addr[:, None] + np.arange(e, dtype=np.int64) * s).ravel()
    return addr


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
    """(row misses, ticks they add to the window) of bursts to ``pages`` whose issue times without row delays are
    ``issue``, every bank's row closed at the start; see :func:`dram_window`. Burst by burst (since issue 24: a
    delayed burst delays the later ones, so a later miss waits only for what is left of its activation): burst j
    issues at ``a[j] = max(a[j-1] + I(j-1), a[s] + row_miss)`` for a miss whose activation starts at burst ``s =
    max(j - outstanding, previous burst to its bank)`` (none when both are before the start: it activates with the
    first burst)."""
    steps = np.diff(issue).tolist()
    a, open_row, last, misses = [], {}, {}, 0
    for j, page in enumerate(pages.tolist()):
        t = a[-1] + steps[j - 1] if j else 0
        bank = page % banks
        if open_row.get(bank) != page:
            misses += 1
            open_row[bank] = page
            if j and (bank in last or j >= outstanding):
                t = max(t, a[max(j - outstanding, last.get(bank, -1))] + row_miss)
        last[bank] = j
        a.append(t)
    return misses, row_miss + a[-1] - int(issue[-1])    # the first burst's activation: nothing precedes it


def _dram(offset: int, dims: tuple[tuple[int, int], ...], es: int, burst: int, access: int, access_ticks: int,
          latency: int, outstanding: int, page: int, banks: int, row_miss: int) -> DramWindow:
    """:func:`dram_window` on plain values (page = 0: bandwidth model), times in ticks: a burst holds the bus for its
    whole ``access``-byte accesses, ``access_ticks`` each (since issue 24; the rest as in commit 408c0ec)."""
    addr, nbytes = _bursts(offset, dims, es, burst)
    d = -(-nbytes // access) * access_ticks
    issue = np.concatenate(([0], np.cumsum(np.maximum(d, -(-(latency + d) // outstanding))[:-1])))
    window = int(issue[-1] + d[-1])
    if not page:
        return DramWindow(window, addr.size)
    misses, delay = _row_delay(addr // page, issue, banks, row_miss, outstanding)
    return DramWindow(window + delay, addr.size, addr.size - misses, misses)



def gather_bursts(g, arch) -> tuple[int, int]:
    """:func:`isa.cost.gather_bursts` as main had it (commit 893d488): every distinct row offset modulo the burst cut
    into bursts one after the other (in ticks since issue 24, the longest window rounded up to whole cycles)."""
    from isa.cost import _row_offsets, burst_interval

    burst, t = arch.dma.burst_bytes, arch.dram_timing
    best = (-1, 0)
    for o in _row_offsets(g.table.base, g.table.strides[0], g.rows, burst).tolist():
        _, nbytes = _bursts(o, ((g.row_bytes, 1),), 1, burst)
        ticks = -(-nbytes // t.access_bytes) * t.access_ticks
        interval = burst_interval(ticks, t.latency_ticks, arch.dma.outstanding)
        window = g.points * int(interval.sum()) - int(interval[-1]) + int(ticks[-1])
        best = max(best, (window, int(nbytes.size)))
    return -(-best[0] // t.ticks), best[1]
