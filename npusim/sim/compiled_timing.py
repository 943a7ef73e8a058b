"""A second, compiled evaluation of the timing model of :mod:`npusim.sim.engine`: the same Engine, run by numba over
instruction arrays instead of by SimPy over Python objects, tested equal to it field by field
(tests/sim/test_compiled_timing.py).

It replays the Engine's processes (the dispatcher, one per unit) as state machines over a small event list ordered
as SimPy orders its heap: (cycle, priority, event id), process start-up URGENT, ``succeed()`` and timeouts NORMAL,
ids in scheduling order; and it takes the Engine's own shortcuts (a retire timeout skipped when nothing else is due,
the dispatcher run at a unit's next yield, ``_wake_later``) at the same moments, since they decide which of two
same-cycle requests for a port, the DRAM bus or a semaphore comes first. So dispatch/issue/start/end per pc, the
per-unit stall cycles, ``resource_stalls`` and the dispatcher gaps come out bit for bit as the Engine's.

What it cannot decide alone it reports as a status instead of an answer (a deadlock, the ``max_cycles`` cap, a
semaphore overflow): the caller then runs the SimPy Engine, whose exception is the one the user gets.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numba import njit

from isa import Program
from isa.arch import Arch
from isa.columns import Columns, columns
from isa.cost import Cost
from isa.program import SEM_MAX
from isa.units import Pool, machine_units
from npusim.sim.stats import STALL_CAUSES, UnitStats

OK, DEADLOCK, CYCLE_CAP, SEM_OVERFLOW, FULL = range(5)
DYNAMIC_CAUSES = tuple(c for c in STALL_CAUSES if c not in ("dram_latency", "bank_conflict"))   # (the static ones)
_SEM, _QFULL, _BARRIER, _DRAM = map(DYNAMIC_CAUSES.index, ("semaphore", "queue_full", "barrier", "dram_bandwidth"))

# the scalar state, one int64 array
_NOW, _EID, _HN, _DPC, _DDONE, _OUT, _SPACEQ, _DRAIN, _WAKING, _GAPOPEN, _NGAPS, _NWAIT, _BUS, _FULL = range(14)
# events: (cycle, priority << 60 | id << 20 | kind << 16 | unit): at most 2**16 units, 2**40 events per run
_URGENT, _NORMAL = 0, 1
_K_BOOT, _K_UNIT, _K_WAKE, _K_NOOP, _K_STOP = range(5)
# where a unit process waits (its generator's yield points)
_S_START, _S_WORK, _S_SEM, _S_RES, _S_RETIRE, _S_DONE = range(6)
# phases of a unit's loop body
_P_TOP, _P_POP, _P_ISSUE, _P_RES, _P_START, _P_RETIRE = range(6)
_HEAP = 64


@njit("void(int64[::1], int64[::1], int64[::1], int64, int64, int64, int64)", cache=True)
def _push(S, ht, hk, t, prio, kind, u):
    """Schedule an event at cycle ``t``: SimPy's ``env.schedule`` (ids in scheduling order)."""
    k = S[_HN]
    ht[k] = t
    hk[k] = (prio << 60) | (S[_EID] << 20) | (kind << 16) | u
    S[_EID] += 1
    S[_HN] = k + 1


@njit(cache=True)
def _min_time(S, ht):
    best = ht[0]
    for k in range(1, S[_HN]):
        if ht[k] < best:
            best = ht[k]
    return best


@njit(cache=True)
def _take(count, ptr, idx, cnt, pc):
    """All-or-nothing acquire of pc's semaphore waits (SemaphoreFile.try_acquire)."""
    for j in range(ptr[pc], ptr[pc + 1]):
        if count[idx[j]] < cnt[j]:
            return False
    for j in range(ptr[pc], ptr[pc + 1]):
        count[idx[j]] -= cnt[j]
    return True


@njit(cache=True)
def _open_gap(S, gaps, now, cause, pc):
    g = S[_NGAPS]
    if g == gaps.shape[0]:   # (cannot happen: a pc opens at most one gap; checked rather than trusted)
        S[_FULL] = 1
        return
    gaps[g, 0], gaps[g, 1], gaps[g, 2], gaps[g, 3] = now, -1, cause, pc
    S[_NGAPS] = g + 1
    S[_GAPOPEN] = 1


@njit(cache=True)
def _dispatch(S, ht, hk, qid, is_halt, depth, qhead, qtail, dispatch, work, gaps):
    """Engine._dispatch."""
    now, pc, n = S[_NOW], S[_DPC], qid.shape[0]
    if S[_GAPOPEN]:
        gaps[S[_NGAPS] - 1, 1] = now
        S[_GAPOPEN] = 0
    S[_SPACEQ] = -1
    while pc < n:
        q = qid[pc]
        if q < 0:
            if S[_OUT]:
                if not is_halt[pc]:
                    _open_gap(S, gaps, now, _BARRIER, pc)
                S[_DPC] = pc
                S[_DRAIN] = 1
                return
            if is_halt[pc]:
                break
            pc += 1
            continue
        if qtail[q] - qhead[q] >= depth:
            _open_gap(S, gaps, now, _QFULL, pc)
            S[_DPC] = pc
            S[_SPACEQ] = q
            return
        qtail[q] += 1
        dispatch[pc] = now
        S[_OUT] += 1
        if work[q]:
            _push(S, ht, hk, now, _NORMAL, _K_UNIT, q)
            work[q] = 0
        pc += 1
    S[_DPC] = n
    S[_DDONE] = 1
    for q in range(work.shape[0]):
        if work[q]:
            _push(S, ht, hk, now, _NORMAL, _K_UNIT, q)
            work[q] = 0


@njit(cache=True)
def _grow(a):
    b = np.empty((2 * a.shape[0], a.shape[1]), np.int64)
    b[:a.shape[0]] = a
    return b


@njit(cache=True)
def _run(qid, is_halt, cycles, setup, window, held, wait_ptr, wait_idx, wait_cnt, sig_ptr, sig_idx, sig_cnt,
         sem_init, depth, ports, pool_cause, max_cycles, n_units, sem_max):
    """The Engine's run over arrays. ``held``: per pc, bit p set if it holds a port of pool p (``isa.units.Pool`` in
    declaration order); ``ports``: ports per pool; ``pool_cause``: per pool, the index of its stall cause. Returns
    (status, dispatch, issue, start, end, stall per unit and DYNAMIC_CAUSES, resource stalls (pc, from, to, cause),
    dispatcher gaps (from, to, cause, pc), retire order)."""
    n = qid.shape[0]
    S = np.zeros(14, np.int64)
    S[_SPACEQ] = -1
    ht = np.zeros(_HEAP, np.int64)
    hk = np.zeros(_HEAP, np.int64)
    dispatch = np.full(n, -1, np.int64)
    issue = np.full(n, -1, np.int64)
    start = np.full(n, -1, np.int64)
    end_at = np.full(n, -1, np.int64)
    retired = np.empty(n, np.int64)
    n_retired = 0
    stall = np.zeros((n_units, len(DYNAMIC_CAUSES)), np.int64)
    gaps = np.empty((n + 1, 4), np.int64)
    rs = np.empty((64, 4), np.int64)
    n_rs = 0
    count = sem_init.copy()
    waiters = np.empty(n_units, np.int64)
    wake = np.empty(n_units, np.int64)
    # each unit's pcs in program order: its queue is unit_pcs[off[u] + qhead[u] : off[u] + qtail[u]]
    off = np.zeros(n_units + 1, np.int64)
    last = np.full(n_units, -1, np.int64)
    for pc in range(n):
        if qid[pc] >= 0:
            off[qid[pc] + 1] += 1
            last[qid[pc]] = pc
    for u in range(n_units):
        off[u + 1] += off[u]
    unit_pcs = np.empty(off[n_units], np.int64)
    fill = off[:n_units].copy()
    for pc in range(n):
        if qid[pc] >= 0:
            unit_pcs[fill[qid[pc]]] = pc
            fill[qid[pc]] += 1
    qhead = np.zeros(n_units, np.int64)
    qtail = np.zeros(n_units, np.int64)
    work = np.zeros(n_units, np.int64)
    blocked = np.full(n_units, -1, np.int64)
    state = np.zeros(n_units, np.int64)
    upc = np.zeros(n_units, np.int64)
    t0 = np.zeros(n_units, np.int64)
    t1 = np.zeros(n_units, np.int64)
    wfrom = np.zeros(n_units, np.int64)
    wcause = np.zeros(n_units, np.int64)
    uend = np.zeros(n_units, np.int64)
    n_pools = ports.shape[0]
    free_at = np.zeros((n_pools, max(1, ports.max())), np.int64)
    earliest = np.zeros(n_pools, np.int64)

    _push(S, ht, hk, 0, _URGENT, _K_BOOT, 0)
    for u in range(n_units):
        _push(S, ht, hk, 0, _URGENT, _K_UNIT, u)
    if max_cycles >= 0:
        _push(S, ht, hk, max_cycles + 1, _URGENT, _K_STOP, 0)
    status, stopped = OK, False
    while S[_HN]:
        # pop the first event by (cycle, priority, id)
        b = 0
        for k in range(1, S[_HN]):
            if ht[k] < ht[b] or (ht[k] == ht[b] and hk[k] < hk[b]):
                b = k
        now, key = ht[b], hk[b]
        last_k = S[_HN] - 1
        ht[b], hk[b] = ht[last_k], hk[last_k]
        S[_HN] = last_k
        S[_NOW] = now
        kind, u = (key >> 16) & 15, key & 0xFFFF
        if kind == _K_STOP:
            stopped = True
            break
        if kind == _K_NOOP:
            continue
        if kind == _K_BOOT:
            _dispatch(S, ht, hk, qid, is_halt, depth, qhead, qtail, dispatch, work, gaps)
            _push(S, ht, hk, now, _NORMAL, _K_NOOP, 0)
            continue
        if kind == _K_WAKE:
            S[_WAKING] = 0
            _dispatch(S, ht, hk, qid, is_halt, depth, qhead, qtail, dispatch, work, gaps)
            continue
        # a unit process resumes where it yielded
        st = state[u]
        pc = upc[u]
        pending = False
        if st == _S_START:
            phase = _P_TOP
        elif st == _S_WORK:   # Engine._account_starvation
            for g in range(S[_NGAPS] - 1, -1, -1):
                g1 = gaps[g, 1]
                if g1 < 0:
                    g1 = now
                if g1 <= t0[u]:
                    break
                if gaps[g, 3] <= last[u]:
                    stall[u, gaps[g, 2]] += min(g1, now) - max(gaps[g, 0], t0[u])
            if qhead[u] == qtail[u]:
                _push(S, ht, hk, now, _NORMAL, _K_NOOP, 0)
                state[u] = _S_DONE
                continue
            phase = _P_POP
        elif st == _S_SEM:
            blocked[u] = -1
            stall[u, _SEM] += now - t1[u]
            phase = _P_ISSUE
        elif st == _S_RES:
            stall[u, wcause[u]] += now - wfrom[u]
            if n_rs == rs.shape[0]:
                rs = _grow(rs)
            rs[n_rs, 0], rs[n_rs, 1], rs[n_rs, 2], rs[n_rs, 3] = pc, wfrom[u], now, wcause[u]
            n_rs += 1
            phase = _P_RES
        else:  # _S_RETIRE
            phase = _P_RETIRE
        while True:
            now = S[_NOW]
            if phase == _P_TOP:
                if qhead[u] == qtail[u]:
                    if S[_DDONE]:
                        _push(S, ht, hk, now, _NORMAL, _K_NOOP, 0)
                        state[u] = _S_DONE
                        break
                    t0[u] = now
                    work[u] = 1
                    state[u] = _S_WORK
                    break
                phase = _P_POP
            elif phase == _P_POP:
                pc = unit_pcs[off[u] + qhead[u]]
                qhead[u] += 1
                upc[u] = pc
                if S[_SPACEQ] == u:
                    if cycles[pc] and (S[_HN] == 0 or _min_time(S, ht) > now):
                        pending = True
                    else:
                        S[_SPACEQ] = -1
                        _push(S, ht, hk, now, _NORMAL, _K_WAKE, 0)
                        S[_WAKING] = 1
                if wait_ptr[pc] < wait_ptr[pc + 1] and not _take(count, wait_ptr, wait_idx, wait_cnt, pc):
                    t1[u] = now
                    waiters[S[_NWAIT]] = u
                    S[_NWAIT] += 1
                    blocked[u] = pc
                    if pending:
                        pending = False
                        _dispatch(S, ht, hk, qid, is_halt, depth, qhead, qtail, dispatch, work, gaps)
                    state[u] = _S_SEM
                    break
                phase = _P_ISSUE
            elif phase == _P_ISSUE:
                issue[pc] = now
                phase = _P_RES if held[pc] else _P_START
            elif phase == _P_RES:
                ready, cause_pool = -1, 0
                for p in range(n_pools):
                    if held[pc] >> p & 1 and earliest[p] > ready:   # max(held, key=next_free): the first maximum
                        ready, cause_pool = earliest[p], p
                if ready > now:
                    if pending:
                        pending = False
                        _dispatch(S, ht, hk, qid, is_halt, depth, qhead, qtail, dispatch, work, gaps)
                    _push(S, ht, hk, ready, _NORMAL, _K_UNIT, u)
                    wfrom[u] = now
                    wcause[u] = pool_cause[cause_pool]
                    state[u] = _S_RES
                    break
                phase = _P_START
            elif phase == _P_START:
                end = now + cycles[pc]
                if window[pc]:
                    begin = max(now + setup[pc], S[_BUS])   # DramBus.reserve
                    S[_BUS] = begin + window[pc]
                    wait = begin - now - setup[pc]
                    if wait:
                        stall[u, _DRAM] += wait
                        end += wait
                for p in range(n_pools):
                    if held[pc] >> p & 1:   # PortPool.hold: the first port free at the earliest cycle
                        for j in range(ports[p]):
                            if free_at[p, j] == earliest[p]:
                                free_at[p, j] = end
                                break
                        e = free_at[p, 0]
                        for j in range(1, ports[p]):
                            e = min(e, free_at[p, j])
                        earliest[p] = e
                start[pc] = now
                if pending:
                    pending = False
                    _dispatch(S, ht, hk, qid, is_halt, depth, qhead, qtail, dispatch, work, gaps)
                uend[u] = end
                if end > now:
                    if S[_HN] and _min_time(S, ht) <= end:
                        _push(S, ht, hk, end, _NORMAL, _K_UNIT, u)
                        state[u] = _S_RETIRE
                        break
                    S[_NOW] = end
                phase = _P_RETIRE
            else:  # _P_RETIRE
                end = uend[u]
                retired[n_retired] = pc
                n_retired += 1
                end_at[pc] = end
                if sig_ptr[pc] < sig_ptr[pc + 1]:
                    for j in range(sig_ptr[pc], sig_ptr[pc + 1]):
                        count[sig_idx[j]] += sig_cnt[j]
                        if count[sig_idx[j]] > sem_max:
                            status = SEM_OVERFLOW
                    if status != OK:
                        break
                    if S[_NWAIT]:   # wake, in the order they blocked, the waiters that can now take all they need
                        kept, woken = 0, 0
                        for k in range(S[_NWAIT]):
                            w = waiters[k]
                            if _take(count, wait_ptr, wait_idx, wait_cnt, blocked[w]):
                                wake[woken] = w
                                woken += 1
                            else:
                                waiters[kept] = w
                                kept += 1
                        S[_NWAIT] = kept
                        for k in range(woken):
                            _push(S, ht, hk, now, _NORMAL, _K_UNIT, wake[k])
                S[_OUT] -= 1
                if not S[_OUT] and S[_DRAIN]:
                    S[_DRAIN] = 0
                    _push(S, ht, hk, now, _NORMAL, _K_WAKE, 0)
                    S[_WAKING] = 1
                phase = _P_TOP
        if status != OK:
            break
        if S[_FULL] or S[_HN] > _HEAP - 8:   # (the list holds a few events per unit; checked rather than trusted)
            status = FULL
            break
    if status == OK and (not S[_DDONE] or S[_OUT]):
        status = CYCLE_CAP if stopped else DEADLOCK
    return status, dispatch, issue, start, end_at, stall, rs[:n_rs], gaps[:S[_NGAPS]], retired[:n_retired]


@dataclass
class CompiledRun:
    """What the compiled evaluation gives: ``status`` (OK, or why the SimPy Engine must decide) and, when OK, what
    the Engine gives: ``cycles``, per-pc times (cycles, -1 for control), ``units`` (as Engine.stats),
    ``resource_stalls``, ``gaps`` (as Engine.gaps), the retire order (pcs) and ``totals``: each Cost field summed over
    the program (bytes, MACs)."""

    status: int
    cycles: int = 0
    dispatch: np.ndarray | None = None
    issue: np.ndarray | None = None
    start: np.ndarray | None = None
    end: np.ndarray | None = None
    units: list[UnitStats] = field(default_factory=list)
    resource_stalls: list[tuple[int, int, int, str]] = field(default_factory=list)
    gaps: list[list] = field(default_factory=list)
    retired: np.ndarray | None = None
    totals: dict[str, int] = field(default_factory=dict)


_F = {f: k for k, f in enumerate(Cost._fields)}


def _cost_table(costs: list[Cost]) -> np.ndarray:
    """``np.array(costs)`` (n x Cost fields, int64), converting each distinct Cost object once: instr_costs shares
    one object among the instructions of one shape."""
    n = len(costs)
    if not n:
        return np.zeros((0, len(Cost._fields)), np.int64)
    _, first, inverse = np.unique(np.fromiter(map(id, costs), np.uint64, n), return_index=True, return_inverse=True)
    return np.array([costs[k] for k in first.tolist()], np.int64)[inverse.reshape(-1)]


def run_compiled(program: Program, arch: Arch, costs: list[Cost], max_cycles: int | None = None,
                 cols: Columns | None = None) -> CompiledRun:
    """Evaluate the Engine's timing of ``program`` with static ``costs`` (cycles, bytes) on ``arch``; ``max_cycles``
    as Engine.run's (already checked); ``cols``: the program's :func:`isa.columns.columns` if the caller has them."""
    cols = columns(program) if cols is None else cols
    units = machine_units(arch)
    qid = cols.unit
    col = _cost_table(costs)
    bit = {p: 1 << k for k, p in enumerate(Pool)}
    always = np.array([sum(bit[p] for p in u.spec.pools) for u in units], np.int64)   # per unit
    held = (always[qid] | (col[:, _F["spm_bytes"]] > 0) * bit[Pool.SPM_PORT]
            | (col[:, _F["acc_bytes"]] > 0) * bit[Pool.ACC_PORT])
    held = np.where(qid < 0, 0, held).astype(np.int64)   # (control never reaches a unit)
    init = np.array([s.init for s in program.sems], np.int64)
    ports = np.array([p.size(arch) for p in Pool], np.int64)
    pool_cause = np.array([DYNAMIC_CAUSES.index(p.cause) for p in Pool], np.int64)
    w, s = cols.waits, cols.signals
    status, dispatch, issue, start, end, stall, rs, gaps, retired = _run(
        qid, cols.halt, *(np.ascontiguousarray(col[:, _F[f]]) for f in ("cycles", "setup", "dram_window")), held,
        w.ptr, w.sem, w.count, s.ptr, s.sem, s.count, init, arch.queues.depth, ports, pool_cause,
        -1 if max_cycles is None else int(max_cycles), len(units), SEM_MAX)
    if status != OK:
        return CompiledRun(status)
    cycles = int(end.max(initial=0))
    stats = []
    for u, unit in enumerate(units):   # Engine.run's statics, summed per unit by column
        st = UnitStats(unit.name)
        st.stall.update(zip(DYNAMIC_CAUSES, stall[u].tolist()))
        mine = qid == u
        k = int(np.count_nonzero(mine))
        if k:
            s = dict(zip(Cost._fields, col[mine].sum(axis=0).tolist()))
            st.add_totals(s, k)
        st.idle = cycles - st.busy - sum(st.stall.values())
        stats.append(st)
    return CompiledRun(status, cycles, dispatch, issue, start, end, stats,
                       [(pc, a, b, DYNAMIC_CAUSES[c]) for pc, a, b, c in rs.tolist()],
                       [[a, b, DYNAMIC_CAUSES[c], pc] for a, b, c, pc in gaps.tolist()], retired,
                       dict(zip(Cost._fields, col.sum(axis=0).tolist())))
