"""Race sanitizer: the pairs of memory accesses a program leaves unordered.

*Happens-before* (hb) is the order every run guarantees, whatever the latencies, queue depths and contention:

1. **Queue order.** A unit executes its queue one instruction at a time: an instruction retires before the next one
   of its queue issues.
2. **Semaphores.** Each semaphore ``s`` has one producer queue and one consumer queue (checked by the verifier), so
   its signals retire in producer program order and its waits are acquired in consumer program order. Let the
   waits on ``s`` have counts ``c_1, c_2, ...`` (program order) and ``W_i = c_1 + ... + c_i``; the signals counts
   ``d_1, d_2, ...`` and ``S_j = d_1 + ... + d_j``; the initial count ``I``. When wait ``i`` is acquired, waits
   ``1..i-1`` have taken ``W_{i-1}`` tokens, so it needs ``I + (signalled so far) - W_{i-1} >= c_i``, i.e. retired
   signals worth ``W_i - I``. Signals land in order, so wait ``i`` issues only after signal ``j`` retires, the
   smallest ``j`` with ``S_j >= W_i - I`` (no edge when ``W_i <= I``). With counts of 1 (a ring of ``I`` slots):
   the ``i``-th acquisition is enabled by the ``(i - I)``-th release. This edge is exact: nothing later is needed.
3. **Barriers.** The dispatcher holds a ``barrier`` until everything before it retired, and dispatches nothing after
   it until then: every instruction before a barrier happens before every instruction after it.

The dispatcher's back pressure (a full queue) also orders instructions, but only for a given ``queues.depth``; it is
not counted, so a race-free program is race-free on every Arch. hb is the transitive closure of 1-3, kept as vector
clocks: ``clock[pc][q]`` counts the instructions of unit queue ``q`` that happen before ``pc`` (``pc`` included), so
``a`` hb ``b`` iff ``clock[b][queue(a)] > index(a)`` (``a``'s position in its queue).

Two accesses **race** when they touch a common byte of one memory (SPM, ACC or one DRAM region), at least one
writes, and neither instruction happens before the other. An instruction's accesses are its operands' footprints
(:meth:`Instr.views`: a strided view, the exact set of bytes). The ISA does not say which DRAM bytes a ``host.call``
touches, so it counts as writing all of DRAM. A program without races computes the same values on every Arch and
in ``--serial``.

The check streams the accesses in a topological order of hb. Per memory, the *live* accesses (those some later
instruction might still race with) are kept in arrays: a new access is compared with all of them at once by byte
interval and hb; only unordered overlapping intervals get the exact strided comparison. An access is dropped as soon
as it happens before the next instruction of every queue, so the live sets stay as small as the pipeline is deep.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain

import numpy as np

from isa.dtypes import Space
from isa.errors import DeadlockError, VerifyError
from isa.instructions import DmaCopy, HostCall, Instr
from isa.program import Program
from isa.units import Queue, key_text, unit_key
from isa.verify import verify, where
from isa.view import View

MAX_RUNS = 1 << 22
"""Candidate runs enumerated at once per footprint when comparing two exactly (bounding memory); beyond it a pair of
unordered accesses with overlapping spans is reported as a *possible* race."""
PRUNE_SLACK = 64
"""A memory's live accesses are pruned when they number more than twice what the last pruning kept plus this."""
WRITE_ROLES = frozenset({"dst", "acc"})
"""Operands an instruction writes (mxu.mm reads and writes ``acc``; a reduction reads and writes ``dst``)."""


# ------------------------------------------------------------------------------------------------ footprints
class _TooManyRuns(Exception):
    pass


@dataclass(frozen=True, slots=True)
class Footprint:
    """The bytes of one operand: runs of ``run`` contiguous bytes starting at ``lo + sum(i_d * stride_d)``,
    ``0 <= i_d < extent_d``, over ``dims`` ((extent, stride) pairs, largest stride first, every stride > ``run``).
    ``[lo, hi)`` is the span (bytes)."""

    lo: int
    hi: int
    run: int
    dims: tuple[tuple[int, int], ...]

    @classmethod
    def of(cls, view: View, shape: Sequence[int], extra: Sequence[tuple[int, int]] = ()) -> Footprint:
        """The footprint of ``view`` over iteration space ``shape`` plus ``extra`` (extent, stride) pairs."""
        base, dims = view.base, []
        for e, s in chain(zip(shape, view.strides), extra):
            if e > 1 and s:
                if s < 0:
                    base, s = base + (e - 1) * s, -s
                dims.append((e, s))
        dims.sort(key=lambda d: d[1])
        run, i = view.dtype.size, 0
        while i < len(dims) and dims[i][1] <= run:   # overlapping or touching copies of a run: one longer run
            run += (dims[i][0] - 1) * dims[i][1]
            i += 1
        merged: list[tuple[int, int]] = []
        for e, s in dims[i:]:
            if merged and s == merged[-1][0] * merged[-1][1]:   # a dense outer dimension continues the inner one
                merged[-1] = (merged[-1][0] * e, merged[-1][1])
            else:
                merged.append((e, s))
        return cls(base, base + sum((e - 1) * s for e, s in merged) + run, run, tuple(reversed(merged)))

    def runs(self, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """Sorted disjoint byte intervals [starts, ends) of the footprint that meet the window [lo, hi)."""
        starts = np.array([self.lo], np.int64)
        inner = self.hi - self.lo
        for e, s in self.dims:
            if starts.size * e > MAX_RUNS:
                raise _TooManyRuns
            inner -= (e - 1) * s
            starts = (starts[:, None] + np.arange(e, dtype=np.int64) * s).ravel()
            starts = starts[(starts < hi) & (starts + inner > lo)]   # runs of this sub-block that meet the window
        starts = np.unique(starts)
        if not starts.size:
            return starts, starts
        ends = np.maximum.accumulate(starts + self.run)
        first = np.ones(starts.size, bool)
        first[1:] = starts[1:] > ends[:-1]
        last = np.append(np.flatnonzero(first)[1:] - 1, starts.size - 1)
        return starts[first], ends[last]


def common_bytes(a: Footprint, b: Footprint) -> tuple[int, int, int | None] | None:
    """None if ``a`` and ``b`` share no byte; else ``(lo, hi, n)``: the lowest contiguous range of common bytes and
    how many there are. For footprints of more than MAX_RUNS runs in the overlap of their spans, ``(lo, hi, None)``
    with the overlap of the spans: they may share bytes."""
    lo, hi = max(a.lo, b.lo), min(a.hi, b.hi)
    if lo >= hi:
        return None
    try:
        sa, ea = a.runs(lo, hi)
        sb, eb = b.runs(lo, hi)
    except _TooManyRuns:
        return lo, hi, None
    first = np.searchsorted(eb, sa, "right")   # the first b run ending after each a run starts
    last = np.searchsorted(sb, ea, "left")     # the b runs starting before it ends
    count = np.maximum(last - first, 0)
    total = int(count.sum())
    if not total:
        return None
    ia = np.repeat(np.arange(sa.size), count)
    ib = first[ia] + np.arange(total) - np.repeat(np.cumsum(count) - count, count)
    plo, phi = np.maximum(sa[ia], sb[ib]), np.minimum(ea[ia], eb[ib])
    return int(plo[0]), int(phi[0]), int((phi - plo).sum())


# ------------------------------------------------------------------------------------------------ happens-before
@dataclass(frozen=True)
class HappensBefore:
    """The happens-before order of a program (see the module doc) as vector clocks.

    keys: the unit keys (:func:`isa.units.unit_key`) the program uses, sorted; queue[pc]: the index of pc's unit in
    keys (-1 for barrier/halt); index[pc]: its position in that unit's queue; clock[pc, q]: instructions of unit q that
    happen before pc, pc included (for barrier/halt: everything before them); order: the unit instructions in a
    topological order of hb (program order where hb allows).
    """

    keys: tuple[int, ...]
    queue: np.ndarray
    index: np.ndarray
    clock: np.ndarray
    order: np.ndarray

    def ordered(self, a: int, b: int) -> bool:
        """True if instruction ``a`` happens before instruction ``b`` (pcs of unit instructions)."""
        return a != b and bool(self.clock[b, self.queue[a]] > self.index[a])


def _semaphore_edges(program: Program) -> list[list[tuple[int, str]]]:
    """For each pc, the (signal pc, semaphore) pairs its waits need (module doc, rule 2)."""
    init = {s.name: s.init for s in program.sems}
    released: dict[str, tuple[list[int], list[int]]] = {}   # name -> (cumulative signal counts, signal pcs)
    units: dict[tuple[str, str], int] = {}
    for pc, ins in enumerate(program.instrs):
        for ops, role in ((ins.waits, "waited on"), (ins.signals, "signalled")):
            for op in ops:
                if op.name not in init:
                    raise VerifyError(f"{where(pc, ins)}: semaphore {op.name!r} is not declared (.sem NAME INIT)")
                other = units.setdefault((op.name, role), ins.unit_key)
                if other != ins.unit_key:
                    raise VerifyError(f"{where(pc, ins)}: semaphore {op.name} is {role} by {key_text(other)} and by "
                                      f"{key_text(ins.unit_key)}; each semaphore has one producer queue and one "
                                      f"consumer queue")
        for op in ins.signals:
            cum, pcs = released.setdefault(op.name, ([], []))
            cum.append((cum[-1] if cum else 0) + op.count)
            pcs.append(pc)
    deps: list[list[tuple[int, str]]] = [[] for _ in program.instrs]
    taken = dict.fromkeys(init, 0)
    for pc, ins in enumerate(program.instrs):
        for op in ins.waits:
            taken[op.name] += op.count
            need = taken[op.name] - init[op.name]
            if need <= 0:
                continue
            cum, pcs = released.get(op.name, ([], []))
            j = bisect_left(cum, need)
            if j == len(cum):
                raise DeadlockError(f"{where(pc, ins)} can never issue: with it the waits on {op.name} take "
                                    f"{taken[op.name]} tokens, but {op.name} starts at {init[op.name]} and the "
                                    f"program signals {cum[-1] if cum else 0}")
            deps[pc].append((pcs[j], op.name))
    return deps


def happens_before(program: Program) -> HappensBefore:
    """Vector clocks of ``program``'s happens-before order. Raises DeadlockError if the order has a cycle (then
    every run deadlocks), VerifyError for undeclared semaphores or ones with two producer or consumer queues."""
    instrs, n = program.instrs, len(program.instrs)
    keys = tuple(sorted({i.unit_key for i in instrs if i.queue is not Queue.CTRL}))
    dense = {k: q for q, k in enumerate(keys)}
    queue = [dense.get(i.unit_key, -1) for i in instrs]
    nq = len(keys)   # (vector clocks have one entry per unit the program uses)
    index, pcs_of = [-1] * n, [[] for _ in range(nq)]
    for pc, q in enumerate(queue):
        if q >= 0:
            index[pc] = len(pcs_of[q])
            pcs_of[q].append(pc)
    deps = _semaphore_edges(program)
    pending = [len(d) for d in deps]
    users: list[list[int]] = [[] for _ in range(n)]
    for pc, d in enumerate(deps):
        for src, _ in d:
            users[src].append(pc)
    clock: list[tuple[int, ...]] = [()] * n
    head = [0] * nq                       # next unprocessed position in each queue
    last = [(0,) * nq] * nq               # clock of the last processed instruction of each queue (or the barrier's)
    order: list[int] = []
    heap: list[int] = []

    def ready(pc: int, end: int) -> None:
        if pc < end and not pending[pc] and head[queue[pc]] == index[pc]:
            heapq.heappush(heap, pc)

    for end in [pc for pc, q in enumerate(queue) if q < 0] + [n]:
        for q in range(nq):
            if head[q] < len(pcs_of[q]):
                ready(pcs_of[q][head[q]], end)
        while heap:
            pc = heapq.heappop(heap)
            q = queue[pc]
            vc = list(last[q])
            for src, _ in deps[pc]:
                vc = [max(x, y) for x, y in zip(vc, clock[src])]
            vc[q] = index[pc] + 1
            clock[pc] = last[q] = tuple(vc)
            order.append(pc)
            head[q] += 1
            if head[q] < len(pcs_of[q]):
                ready(pcs_of[q][head[q]], end)
            for u in users[pc]:
                pending[u] -= 1
                ready(u, end)
        stuck = [pcs_of[q][head[q]] for q in range(nq) if head[q] < len(pcs_of[q]) and pcs_of[q][head[q]] < end]
        if stuck:
            raise DeadlockError(_deadlock_message(program, stuck, deps, clock))
        if end < n:
            joined = tuple(max(c) for c in zip(*last))
            last = [joined] * nq
            clock[end] = joined
    return HappensBefore(keys, np.array(queue, np.int64), np.array(index, np.int64),
                         np.array(clock, np.int64).reshape(n, nq), np.array(order, np.int64))


def _deadlock_message(program: Program, stuck: list[int], deps, clock) -> str:
    parts = []
    for pc in sorted(stuck):
        need = [f"{name} from pc {src}" for src, name in deps[pc] if not clock[src]]
        parts.append(f"{key_text(program.instrs[pc].unit_key)} at {where(pc, program.instrs[pc])} waits for "
                     + ", ".join(need))
    return ("every run deadlocks: no order of the queues lets these issue (each waits for a signal that can only "
            "come after it): " + "; ".join(parts))


# ------------------------------------------------------------------------------------------------ races
@dataclass(frozen=True, slots=True)
class Access:
    """One operand access of one instruction: ``pc``, its queue, the operand ``role`` (``dst``, ``src``, ``a``...,
    ``dram`` for a host call) and whether it writes."""

    pc: int
    queue: Queue
    role: str
    write: bool
    text: str
    unit: int = 0   # which of its queue's units (the instruction's ``unit``)

    def __str__(self) -> str:
        return (f"{key_text(unit_key(self.queue, self.unit))} pc {self.pc} `{self.text}` "
                f"({'writes' if self.write else 'reads'} {self.role})")


@dataclass(frozen=True, slots=True)
class Race:
    """Two accesses to common bytes of ``memory`` (``spm``, ``acc`` or ``dram:REGION``), at least one a write, with
    no happens-before order between their instructions. ``first`` is the earlier in program order. ``[lo, hi)`` is the
    lowest contiguous range of common bytes and ``nbytes`` their number (None: footprints too large to compare
    exactly; ``[lo, hi)`` is then the overlap of their spans)."""

    memory: str
    first: Access
    second: Access
    lo: int
    hi: int
    nbytes: int | None

    def __str__(self) -> str:
        shared = f"{self.nbytes} common bytes" if self.nbytes is not None else "spans overlap, may share bytes"
        return (f"race on {self.memory}[{self.lo:#x}, {self.hi:#x}) ({shared}): {self.first} and {self.second} "
                f"are not ordered")


def accesses(instr: Instr, program: Program) -> list[tuple[str, str, bool, Footprint]]:
    """(memory, role, writes, footprint) of every operand of ``instr``; a host call writes all of DRAM."""
    if isinstance(instr, HostCall):
        return [(f"dram:{r.name}", "dram", True, Footprint(0, r.size, r.size, ())) for r in program.regions]
    out = []
    for role, view, extra in instr.views():
        shape = instr.src_shape if role == "src" and type(instr) is DmaCopy else instr.shape
        memory = f"dram:{view.region}" if view.space is Space.DRAM else view.space.text
        out.append((memory, role, role in WRITE_ROLES, Footprint.of(view, shape, extra)))
    return out


class _Live:
    """The live accesses to one memory, as arrays: byte interval, write flag, queue, position in queue, access id."""

    def __init__(self) -> None:
        self.n, self.kept = 0, 0
        self.cols = np.zeros((6, 64), np.int64)

    def add(self, lo: int, hi: int, write: bool, q: int, k: int, ref: int) -> None:
        if self.n == self.cols.shape[1]:
            self.cols = np.concatenate([self.cols, np.zeros_like(self.cols)], axis=1)
        self.cols[:, self.n] = (lo, hi, write, q, k, ref)
        self.n += 1

    def conflicts(self, lo: int, hi: int, write: bool, vc: np.ndarray) -> np.ndarray:
        """Access ids of live accesses overlapping [lo, hi), not happening before the access (clock ``vc``) and
        conflicting with it (one of the two writes)."""
        c = self.cols[:, :self.n]
        m = (c[0] < hi) & (c[1] > lo) & (c[4] >= vc[c[3]])
        if not write:
            m &= c[2] != 0
        return c[5, m]

    def prune(self, frontier: np.ndarray) -> None:
        """Drop the accesses that happen before every instruction still to come (position < frontier[queue])."""
        c = self.cols[:, :self.n]
        keep = c[4] >= frontier[c[3]]
        self.n = self.kept = int(keep.sum())
        self.cols[:, :self.n] = c[:, keep]


def find_races(program: Program, limit: int | None = None) -> list[Race]:
    """The races of ``program`` (module doc): every pair of instructions with unordered conflicting accesses, once,
    in the order found; at most ``limit`` of them. Verifies the program first (VerifyError); DeadlockError if every
    run of it deadlocks."""
    if limit is not None and (type(limit) is not int or limit < 1):
        raise VerifyError(f"limit must be None or an integer >= 1, not {limit!r}")
    verify(program)
    hb = happens_before(program)
    clock, queue, index, nq = hb.clock, hb.queue, hb.index, len(hb.keys)
    pcs_of = [np.flatnonzero(queue == q) for q in range(nq)]
    done = [0] * nq
    live: dict[str, _Live] = {}
    refs: list[tuple[int, str, bool, Footprint]] = []   # (pc, role, writes, footprint) by access id
    races: dict[tuple[int, int], Race] = {}
    unbounded = np.full(nq, np.iinfo(np.int64).max)
    for pc in hb.order.tolist():
        q, vc = int(queue[pc]), clock[pc]
        for memory, role, write, fp in accesses(program.instrs[pc], program):
            lv = live.get(memory) or live.setdefault(memory, _Live())
            for ref in lv.conflicts(fp.lo, fp.hi, write, vc).tolist():
                opc, orole, owrite, ofp = refs[ref]
                if (opc, pc) in races or (pc, opc) in races:
                    continue
                common = common_bytes(ofp, fp)
                if common is not None:
                    (a, ra, wa), (b, rb, wb) = sorted(((opc, orole, owrite), (pc, role, write)))
                    races[a, b] = Race(memory, _access(program, a, ra, wa), _access(program, b, rb, wb), *common)
                    if limit is not None and len(races) >= limit:
                        return list(races.values())
            lv.add(fp.lo, fp.hi, write, q, int(index[pc]), len(refs))
            refs.append((pc, role, write, fp))
        done[q] += 1
        if any(lv.n > 2 * lv.kept + PRUNE_SLACK for lv in live.values()):
            nxt = [pcs[d] for pcs, d in zip(pcs_of, done) if d < len(pcs)]
            frontier = clock[nxt].min(axis=0) if nxt else unbounded
            for lv in live.values():
                lv.prune(frontier)
    return list(races.values())


def _access(program: Program, pc: int, role: str, write: bool) -> Access:
    instr = program.instrs[pc]
    return Access(pc, instr.queue, role, write, str(instr), instr.unit)
