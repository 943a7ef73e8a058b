"""Busy intervals ``[start, end)`` (cycles) of instructions: unions, and busy cycles per time bucket.

Vectorized with numpy (sort + cumulative maximum), never a loop over cycles. Used by the per-layer time split in the
report and by the plots.
"""

from __future__ import annotations

import numpy as np

ROLE_ORDER = ("compute", "memory_stall", "host", "sync_stall")
"""The parts of a layer's time split, in the order they claim cycles (:func:`time_split`); a busy unit's part is its
role's :attr:`isa.units.Role.time_part`."""


def union(starts, ends) -> tuple[np.ndarray, np.ndarray]:
    """The disjoint, sorted intervals covering the same cycles as ``[starts[i], ends[i])``; empty ones dropped."""
    s, e = np.asarray(starts, np.int64), np.asarray(ends, np.int64)
    keep = e > s
    s, e = s[keep], e[keep]
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    if not s.size:
        return s, e
    reach = np.maximum.accumulate(e)
    new = np.ones(s.size, bool)
    new[1:] = s[1:] > reach[:-1]          # an interval starts a new run when it begins after all before it ended
    first = np.flatnonzero(new)
    last = np.append(first[1:], s.size) - 1
    return s[first], reach[last]


def covered(starts, ends) -> int:
    """Cycles covered by at least one of the intervals ``[starts[i], ends[i])``."""
    s, e = union(starts, ends)
    return int((e - s).sum())


def busy_before(s: np.ndarray, e: np.ndarray, t) -> np.ndarray:
    """Cycles of the disjoint sorted intervals ``(s, e)`` that lie before each time in ``t`` (cycles, any float)."""
    t = np.asarray(t, np.float64)
    if not s.size:
        return np.zeros(t.shape)
    done = np.concatenate([[0], np.cumsum(e - s)[:-1]])   # busy cycles of the intervals before interval j
    k = np.searchsorted(s, t, side="right")               # intervals that began at or before t
    j = np.maximum(k - 1, 0)
    return np.where(k > 0, done[j] + np.minimum(t, e[j]) - s[j], 0.0)


def bucket_busy(starts, ends, edges) -> np.ndarray:
    """Busy cycles of the union of ``[starts[i], ends[i])`` inside each bucket ``[edges[j], edges[j+1])``."""
    s, e = union(starts, ends)
    return np.diff(busy_before(s, e, edges))


def time_split(parts, starts, ends, window: tuple[int, int]) -> dict[str, int]:
    """Split the cycles of ``window = [c0, c1)`` by what the instructions (the time part of each one's unit: its
    role's :attr:`isa.units.Role.time_part`, start and end cycles) did.

    compute: a compute unit (matrix, vector) was busy; memory_stall: of the rest, a DMA unit was busy; host: of the
    rest, the host unit was busy; sync_stall: nothing was busy (waiting on semaphores, queues, barriers). The four
    parts add up to ``c1 - c0``.
    """
    c0, c1 = window
    roles = np.array(parts, dtype=object)
    s, e = np.clip(np.asarray(starts, np.int64), c0, c1), np.clip(np.asarray(ends, np.int64), c0, c1)
    out, before, claimed = {}, 0, np.zeros(s.size, bool)
    for role in ROLE_ORDER[:-1]:
        claimed |= roles == role
        now = covered(s[claimed], e[claimed])
        out[role], before = now - before, now
    out[ROLE_ORDER[-1]] = (c1 - c0) - before
    return out
