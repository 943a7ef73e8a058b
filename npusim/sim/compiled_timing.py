"""A second, compiled evaluation of the timing model of :mod:`npusim.sim.engine`: the same Engine, run by numba over
instruction arrays instead of by SimPy over Python objects, tested equal to it field by field
(tests/sim/test_compiled_timing.py).

It replays the Engine's processes (the dispatcher, one per unit) as state machines over a small event list ordered by
the declared arbitration rule (docs/timing.md): cycle, then priority (process start-ups first), then scheduling order.
It takes the Engine's moments for everything that schedules an event (the dispatcher run at a unit's next yield, a
resumed dispatcher, woken waiters), since they decide which of two same-cycle requests for a port, the DRAM bus or a
semaphore comes first; where nothing else is due before a retire it moves its clock there directly, which the rule
orders the same way as the Engine's timeout. So dispatch/issue/start/end per pc, the per-unit stall cycles,
``resource_stalls`` and the dispatcher gaps come out bit for bit as the Engine's.

The model's state is a tuple of arrays (``m``): scalars ``S``, per-unit state ``U``, per-pc program columns ``P`` and
times ``T``, the event list, semaphores and port pools; each step of a unit's loop is one small function over it.

What it cannot decide alone it reports as a status instead of an answer (a deadlock, the ``max_cycles`` cap, a
semaphore overflow, more events or port waits than its arrays hold): the caller then runs the SimPy Engine, whose
answer or exception is the one the user gets.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numba import njit

from isa import Program
from isa.arch import Arch
from isa.columns import Columns, columns
from isa.cost import Cost
from isa.machine import machine, machine_units, pool_ports
from isa.program import SEM_MAX
from isa.units import Pool
from npusim.sim.stats import STALL_CAUSES, UnitStats

OK, DEADLOCK, CYCLE_CAP, SEM_OVERFLOW, FULL = range(5)
DYNAMIC_CAUSES = tuple(c for c in STALL_CAUSES if c not in ("dram_latency", "bank_conflict"))   # (the static ones)
_SEM, _QFULL, _BARRIER, _DRAM = map(DYNAMIC_CAUSES.index, ("semaphore", "queue_full", "barrier", "dram_bandwidth"))

# the scalar state S, one int64 array
(_NOW, _EID, _HN, _DPC, _DDONE, _OUT, _SPACEQ, _DRAIN, _WAKING, _GAPOPEN, _NGAPS, _NWAIT, _BUS, _FULL, _NRS, _NRET,
 _STATUS) = range(17)
# per-unit state U[u, ...]: where its process waits, its pc, wait starts, its queue [head, tail) in unit_pcs[off + ...]
(_U_STATE, _U_PC, _U_T0, _U_T1, _U_WFROM, _U_WCAUSE, _U_END, _U_HEAD, _U_TAIL, _U_WORK, _U_BLOCKED, _U_LAST,
 _U_OFF) = range(13)
# per-pc columns of the program P[..., pc] and times T[..., pc]
_C_UNIT, _C_HALT, _C_CYCLES, _C_SETUP, _C_WINDOW, _C_HELD = range(6)
_T_DISPATCH, _T_ISSUE, _T_START, _T_END = range(4)
# the model m, one tuple of arrays: what every step reads and writes
(_M_S, _M_HT, _M_HK, _M_P, _M_U, _M_T, _M_PCS, _M_STALL, _M_GAPS, _M_RS, _M_RETIRED, _M_WAIT, _M_SIG, _M_COUNT,
 _M_WAITERS, _M_WAKE, _M_FREE, _M_EARLIEST, _M_PORTS, _M_CAUSE) = range(20)
# events: (cycle, priority << 60 | id << 20 | kind << 16 | unit): at most 2**16 units, 2**40 events per run
_URGENT, _NORMAL = 0, 1
_K_BOOT, _K_UNIT, _K_WAKE, _K_NOOP, _K_STOP = range(5)
# where a unit process waits (its generator's yield points)
_S_START, _S_WORK, _S_SEM, _S_RES, _S_RETIRE, _S_DONE = range(6)
# phases of a unit's loop body; _P_YIELD: it waits for an event (or has ended)
_P_TOP, _P_POP, _P_ISSUE, _P_RES, _P_START, _P_RETIRE, _P_YIELD = range(7)


@njit("void(int64[::1], int64[::1], int64[::1], int64, int64, int64, int64)", cache=True)
def _push(S, ht, hk, t, prio, kind, u):
    """Schedule an event at cycle ``t`` (ids in scheduling order: the declared rule's FIFO among equals)."""
    k = S[_HN]
    ht[k] = t
    hk[k] = (prio << 60) | (S[_EID] << 20) | (kind << 16) | u
    S[_EID] += 1
    S[_HN] = k + 1


@njit(cache=True)
def _pop(S, ht, hk):
    """Remove the first event by (cycle, priority, id); set the clock to its cycle; return (kind, unit)."""
    b = 0
    for k in range(1, S[_HN]):
        if ht[k] < ht[b] or (ht[k] == ht[b] and hk[k] < hk[b]):
            b = k
    now, key = ht[b], hk[b]
    last = S[_HN] - 1
    ht[b], hk[b] = ht[last], hk[last]
    S[_HN] = last
    S[_NOW] = now
    return (key >> 16) & 15, key & 0xFFFF


@njit(cache=True)
def _min_time(S, ht):
    best = ht[0]
    for k in range(1, S[_HN]):
        if ht[k] < best:
            best = ht[k]
    return best


@njit(cache=True)
def _take(count, ops, pc):
    """All-or-nothing acquire of pc's semaphore waits ``ops`` = (ptr, index, count) (SemaphoreFile.try_acquire)."""
    ptr, idx, cnt = ops
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
def _dispatch(m, depth):
    """Engine._dispatch."""
    S, ht, hk, P, U, T, gaps = m[_M_S], m[_M_HT], m[_M_HK], m[_M_P], m[_M_U], m[_M_T], m[_M_GAPS]
    now, pc, n = S[_NOW], S[_DPC], P.shape[1]
    if S[_GAPOPEN]:
        gaps[S[_NGAPS] - 1, 1] = now
        S[_GAPOPEN] = 0
    S[_SPACEQ] = -1
    while pc < n:
        q = P[_C_UNIT, pc]
        if q < 0:
            if S[_OUT]:
                if not P[_C_HALT, pc]:
                    _open_gap(S, gaps, now, _BARRIER, pc)
                S[_DPC] = pc
                S[_DRAIN] = 1
                return
            if P[_C_HALT, pc]:
                break
            pc += 1
            continue
        if U[q, _U_TAIL] - U[q, _U_HEAD] >= depth:
            _open_gap(S, gaps, now, _QFULL, pc)
            S[_DPC] = pc
            S[_SPACEQ] = q
            return
        U[q, _U_TAIL] += 1
        T[_T_DISPATCH, pc] = now
        S[_OUT] += 1
        if U[q, _U_WORK]:
            _push(S, ht, hk, now, _NORMAL, _K_UNIT, q)
            U[q, _U_WORK] = 0
        pc += 1
    S[_DPC] = n
    S[_DDONE] = 1
    for q in range(U.shape[0]):
        if U[q, _U_WORK]:
            _push(S, ht, hk, now, _NORMAL, _K_UNIT, q)
            U[q, _U_WORK] = 0


@njit(cache=True)
def _dispatch_pending(m, pending, depth):
    """Run the dispatcher if a unit's pop left it pending (the Engine runs it at that unit's next yield)."""
    if pending:
        _dispatch(m, depth)
    return False


@njit(cache=True)
def _resume(m, u, now):
    """Unit ``u``'s process resumes at its yield point: account the wait that ends there; the phase it goes on with."""
    S, U, stall, gaps = m[_M_S], m[_M_U], m[_M_STALL], m[_M_GAPS]
    st = U[u, _U_STATE]
    if st == _S_START:
        return _P_TOP
    if st == _S_WORK:   # Engine._account_starvation
        for g in range(S[_NGAPS] - 1, -1, -1):
            g1 = gaps[g, 1]
            if g1 < 0:
                g1 = now
            if g1 <= U[u, _U_T0]:
                break
            if gaps[g, 3] <= U[u, _U_LAST]:
                stall[u, gaps[g, 2]] += min(g1, now) - max(gaps[g, 0], U[u, _U_T0])
        if U[u, _U_HEAD] == U[u, _U_TAIL]:
            _push(S, m[_M_HT], m[_M_HK], now, _NORMAL, _K_NOOP, 0)
            U[u, _U_STATE] = _S_DONE
            return _P_YIELD
        return _P_POP
    if st == _S_SEM:
        U[u, _U_BLOCKED] = -1
        stall[u, _SEM] += now - U[u, _U_T1]
        return _P_ISSUE
    if st == _S_RES:
        stall[u, U[u, _U_WCAUSE]] += now - U[u, _U_WFROM]
        rs, k = m[_M_RS], S[_NRS]
        if k == rs.shape[0]:   # (more port waits than the record holds: the SimPy Engine decides)
            S[_FULL] = 1
            return _P_YIELD
        rs[k, 0], rs[k, 1], rs[k, 2], rs[k, 3] = U[u, _U_PC], U[u, _U_WFROM], now, U[u, _U_WCAUSE]
        S[_NRS] = k + 1
        return _P_RES
    return _P_RETIRE


@njit(cache=True)
def _top(m, u, now):
    """Take the next instruction of the queue, or wait for work (or end, when the dispatcher is done)."""
    S, U = m[_M_S], m[_M_U]
    if U[u, _U_HEAD] < U[u, _U_TAIL]:
        return _P_POP
    if S[_DDONE]:
        _push(S, m[_M_HT], m[_M_HK], now, _NORMAL, _K_NOOP, 0)
        U[u, _U_STATE] = _S_DONE
    else:
        U[u, _U_T0] = now
        U[u, _U_WORK] = 1
        U[u, _U_STATE] = _S_WORK
    return _P_YIELD


@njit(cache=True)
def _pop_instr(m, u, now, depth):
    """Pop pc from the queue (resuming the dispatcher waiting for room: now, or at this unit's next yield) and
    acquire its semaphores or block on them. Returns (phase, dispatcher pending)."""
    S, ht, hk, P, U = m[_M_S], m[_M_HT], m[_M_HK], m[_M_P], m[_M_U]
    pc = m[_M_PCS][U[u, _U_OFF] + U[u, _U_HEAD]]
    U[u, _U_HEAD] += 1
    U[u, _U_PC] = pc
    pending = False
    if S[_SPACEQ] == u:
        if P[_C_CYCLES, pc] and (S[_HN] == 0 or _min_time(S, ht) > now):
            pending = True
        else:
            S[_SPACEQ] = -1
            _push(S, ht, hk, now, _NORMAL, _K_WAKE, 0)
            S[_WAKING] = 1
    wait = m[_M_WAIT]
    if wait[0][pc] < wait[0][pc + 1] and not _take(m[_M_COUNT], wait, pc):
        U[u, _U_T1] = now
        m[_M_WAITERS][S[_NWAIT]] = u
        S[_NWAIT] += 1
        U[u, _U_BLOCKED] = pc
        _dispatch_pending(m, pending, depth)
        U[u, _U_STATE] = _S_SEM
        return _P_YIELD, False
    return _P_ISSUE, pending


@njit(cache=True)
def _wait_ports(m, u, now, pending, depth):
    """Wait for every port pool pc holds to have a free port (``max(held, key=next_free)`` names the cause: the
    first pool, in Pool order, that frees last). Returns (phase, dispatcher pending)."""
    U, held, earliest = m[_M_U], m[_M_P][_C_HELD, m[_M_U][u, _U_PC]], m[_M_EARLIEST]
    ready, cause_pool = -1, 0
    for p in range(earliest.shape[0]):
        if held >> p & 1 and earliest[p] > ready:
            ready, cause_pool = earliest[p], p
    if ready <= now:
        return _P_START, pending
    _dispatch_pending(m, pending, depth)
    _push(m[_M_S], m[_M_HT], m[_M_HK], ready, _NORMAL, _K_UNIT, u)
    U[u, _U_WFROM] = now
    U[u, _U_WCAUSE] = m[_M_CAUSE][cause_pool]
    U[u, _U_STATE] = _S_RES
    return _P_YIELD, False


@njit(cache=True)
def _hold_ports(m, held, end):
    """PortPool.hold of every pool in ``held`` until ``end``: the first port free at the earliest cycle."""
    free_at, earliest, ports = m[_M_FREE], m[_M_EARLIEST], m[_M_PORTS]
    for p in range(ports.shape[0]):
        if held >> p & 1:
            for j in range(ports[p]):
                if free_at[p, j] == earliest[p]:
                    free_at[p, j] = end
                    break
            e = free_at[p, 0]
            for j in range(1, ports[p]):
                e = min(e, free_at[p, j])
            earliest[p] = e


@njit(cache=True)
def _start(m, u, now, pending, depth):
    """Start pc: its DRAM bus window (first come, first served), its ports held until its end; then wait for its
    retire, or go straight on when nothing else is due before it (the declared rule gives the same order)."""
    S, P, U = m[_M_S], m[_M_P], m[_M_U]
    pc = U[u, _U_PC]
    end = now + P[_C_CYCLES, pc]
    if P[_C_WINDOW, pc]:
        begin = max(now + P[_C_SETUP, pc], S[_BUS])   # DramBus.reserve
        S[_BUS] = begin + P[_C_WINDOW, pc]
        wait = begin - now - P[_C_SETUP, pc]
        if wait:
            m[_M_STALL][u, _DRAM] += wait
            end += wait
    _hold_ports(m, P[_C_HELD, pc], end)
    m[_M_T][_T_START, pc] = now
    _dispatch_pending(m, pending, depth)
    U[u, _U_END] = end
    if end > now:
        if S[_HN] and _min_time(S, m[_M_HT]) <= end:
            _push(S, m[_M_HT], m[_M_HK], end, _NORMAL, _K_UNIT, u)
            U[u, _U_STATE] = _S_RETIRE
            return _P_YIELD
        S[_NOW] = end
    return _P_RETIRE


@njit(cache=True)
def _retire(m, u, now, sem_max):
    """Retire pc: record it, apply its signals and wake, in the order they blocked, the waiters that can now take
    all they need; resume a draining dispatcher when nothing is outstanding."""
    S, U, count = m[_M_S], m[_M_U], m[_M_COUNT]
    pc = U[u, _U_PC]
    m[_M_RETIRED][S[_NRET]] = pc
    S[_NRET] += 1
    m[_M_T][_T_END, pc] = U[u, _U_END]
    ptr, idx, cnt = m[_M_SIG]
    if ptr[pc] < ptr[pc + 1]:
        for j in range(ptr[pc], ptr[pc + 1]):
            count[idx[j]] += cnt[j]
            if count[idx[j]] > sem_max:
                S[_STATUS] = SEM_OVERFLOW
        if S[_STATUS] != OK:
            return _P_YIELD
        if S[_NWAIT]:
            waiters, wake, kept, woken = m[_M_WAITERS], m[_M_WAKE], 0, 0
            for k in range(S[_NWAIT]):
                w = waiters[k]
                if _take(count, m[_M_WAIT], U[w, _U_BLOCKED]):
                    wake[woken] = w
                    woken += 1
                else:
                    waiters[kept] = w
                    kept += 1
            S[_NWAIT] = kept
            for k in range(woken):
                _push(S, m[_M_HT], m[_M_HK], now, _NORMAL, _K_UNIT, wake[k])
    S[_OUT] -= 1
    if not S[_OUT] and S[_DRAIN]:
        S[_DRAIN] = 0
        _push(S, m[_M_HT], m[_M_HK], now, _NORMAL, _K_WAKE, 0)
        S[_WAKING] = 1
    return _P_TOP


@njit(cache=True)
def _advance(m, u, phase, depth, sem_max):
    """Run unit ``u``'s loop body from ``phase`` until its process yields (or the run fails: S[_STATUS])."""
    S, T = m[_M_S], m[_M_T]
    pending = False
    while phase != _P_YIELD:
        now = S[_NOW]
        if phase == _P_TOP:
            phase = _top(m, u, now)
        elif phase == _P_POP:
            phase, pending = _pop_instr(m, u, now, depth)
        elif phase == _P_ISSUE:
            pc = m[_M_U][u, _U_PC]
            T[_T_ISSUE, pc] = now
            phase = _P_RES if m[_M_P][_C_HELD, pc] else _P_START
        elif phase == _P_RES:
            phase, pending = _wait_ports(m, u, now, pending, depth)
        elif phase == _P_START:
            phase = _start(m, u, now, pending, depth)
            pending = False
        else:
            phase = _retire(m, u, now, sem_max)


@njit(cache=True)
def _unit_queues(unit, n_units):
    """Each unit's pcs in program order, concatenated (unit u's from off[u]); off and each unit's last pc."""
    n = unit.shape[0]
    off = np.zeros(n_units + 1, np.int64)
    last = np.full(n_units, -1, np.int64)
    for pc in range(n):
        if unit[pc] >= 0:
            off[unit[pc] + 1] += 1
            last[unit[pc]] = pc
    for u in range(n_units):
        off[u + 1] += off[u]
    pcs = np.empty(off[n_units], np.int64)
    fill = off[:n_units].copy()
    for pc in range(n):
        if unit[pc] >= 0:
            pcs[fill[unit[pc]]] = pc
            fill[unit[pc]] += 1
    return pcs, off, last


@njit(cache=True)
def _model(P, wait, sig, sem_init, ports, pool_cause, n_units):
    """The model's arrays, at cycle 0 (the tuple m)."""
    n = P.shape[1]
    S = np.zeros(17, np.int64)
    S[_SPACEQ] = -1
    heap = 8 * n_units + 32   # (a few events per unit at most; more is checked: FULL)
    U = np.zeros((n_units, 13), np.int64)
    pcs, off, last = _unit_queues(P[_C_UNIT], n_units)
    U[:, _U_OFF], U[:, _U_LAST], U[:, _U_BLOCKED] = off[:n_units], last, -1
    free_at = np.zeros((ports.shape[0], max(1, ports.max())), np.int64)
    return (S, np.zeros(heap, np.int64), np.zeros(heap, np.int64), P, U, np.full((4, n), -1, np.int64), pcs,
            np.zeros((n_units, len(DYNAMIC_CAUSES)), np.int64), np.empty((n + 1, 4), np.int64),
            np.empty((2 * n + 64, 4), np.int64), np.empty(n, np.int64), wait, sig, sem_init.copy(),
            np.empty(n_units, np.int64), np.empty(n_units, np.int64), free_at, np.zeros(ports.shape[0], np.int64),
            ports, pool_cause)


@njit(cache=True)
def _run(P, wait, sig, sem_init, depth, ports, pool_cause, max_cycles, n_units, sem_max):
    """The Engine's run over arrays. ``P``: per-pc columns (unit index, is halt, cycles, setup, DRAM window, held: bit
    p set if it holds a port of pool p, ``isa.units.Pool`` in declaration order); ``wait``/``sig``: the semaphore
    operations (ptr, index, count) in CSR form; ``ports``: ports per pool; ``pool_cause``: per pool, the index of its
    stall cause. Returns (status, times (dispatch, issue, start, end), stall per unit and DYNAMIC_CAUSES, resource
    stalls (pc, from, to, cause), dispatcher gaps (from, to, cause, pc), retire order)."""
    m = _model(P, wait, sig, sem_init, ports, pool_cause, n_units)
    S, ht, hk = m[_M_S], m[_M_HT], m[_M_HK]
    _push(S, ht, hk, 0, _URGENT, _K_BOOT, 0)
    for u in range(n_units):
        _push(S, ht, hk, 0, _URGENT, _K_UNIT, u)
    if max_cycles >= 0:
        _push(S, ht, hk, max_cycles + 1, _URGENT, _K_STOP, 0)
    stopped = False
    while S[_HN]:
        kind, u = _pop(S, ht, hk)
        if kind == _K_STOP:
            stopped = True
            break
        if kind == _K_BOOT:
            _dispatch(m, depth)
            _push(S, ht, hk, S[_NOW], _NORMAL, _K_NOOP, 0)
        elif kind == _K_WAKE:
            S[_WAKING] = 0
            _dispatch(m, depth)
        elif kind == _K_UNIT:   # a unit process resumes where it yielded
            _advance(m, u, _resume(m, u, S[_NOW]), depth, sem_max)
        if S[_STATUS] != OK:
            break
        if S[_FULL] or S[_HN] > ht.shape[0] - 8:   # (checked rather than trusted)
            S[_STATUS] = FULL
            break
    if S[_STATUS] == OK and (not S[_DDONE] or S[_OUT]):
        S[_STATUS] = CYCLE_CAP if stopped else DEADLOCK
    return (S[_STATUS], m[_M_T], m[_M_STALL], m[_M_RS][:S[_NRS]], m[_M_GAPS][:S[_NGAPS]],
            m[_M_RETIRED][:S[_NRET]])


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
    qid = machine(arch).indices(cols.key)
    col = _cost_table(costs)
    bit = {p: 1 << k for k, p in enumerate(Pool)}
    always = np.array([sum(bit[p] for p in u.spec.pools) for u in units], np.int64)   # per unit
    held = (always[qid] | (col[:, _F["spm_bytes"]] > 0) * bit[Pool.SPM_PORT]
            | (col[:, _F["acc_bytes"]] > 0) * bit[Pool.ACC_PORT])
    held = np.where(qid < 0, 0, held).astype(np.int64)   # (control never reaches a unit)
    init = np.array([s.init for s in program.sems], np.int64)
    ports = np.array([pool_ports(p, arch) for p in Pool], np.int64)
    pool_cause = np.array([DYNAMIC_CAUSES.index(p.cause) for p in Pool], np.int64)
    w, s = cols.waits, cols.signals
    P = np.stack([qid, cols.halt.astype(np.int64), col[:, _F["cycles"]], col[:, _F["setup"]],
                  col[:, _F["dram_window"]], held])
    status, times, stall, rs, gaps, retired = _run(
        P, (w.ptr, w.sem, w.count), (s.ptr, s.sem, s.count), init, arch.queues.depth, ports, pool_cause,
        -1 if max_cycles is None else int(max_cycles), len(units), SEM_MAX)
    if status != OK:
        return CompiledRun(status)
    dispatch, issue, start, end = times
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
