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

The model's state is one int64 array ``M`` with a named row per field: the scalars, the event list, per-unit state and
stall cycles, semaphores, per-pc program columns, times and queues, the records and the port pools. Each step of a
unit's loop is one small function passed ``M`` (and scalars) alone, for speed: numba counts the references to every
array a function is passed (an atomic add and subtract per array and call) and in branching code prunes little of
that: steps passed a tuple of twenty arrays spent about nine tenths of the run counting; passed one, they count at
most once a call.

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

# The model M: one int64 array, a row per field; the column is the unit, pc, pool, semaphore, slot or record the row
# is about. Row _S holds the scalars: the clock, event ids and count, the dispatcher's state, record counts, the status
# and the run's constants.
(_NOW, _EID, _HN, _DPC, _DDONE, _OUT, _SPACEQ, _DRAIN, _WAKING, _GAPOPEN, _NGAPS, _NWAIT, _BUS, _FULL, _NRS, _NRET,
 _STATUS, _DEPTH, _SEM_MAX, _NPC, _NUNITS, _NPOOLS, _N_SCALARS) = range(23)
# the scalars; the event list by slot: cycle and key (priority << 60 | id << 20 | kind << 16 | unit: at most 2**16
# units, 2**40 events per run)
_S, _E_TIME, _E_KEY = range(3)
# per unit: where its process waits, its pc, wait starts, its end, its queue [head, tail) in
# M[_QUEUES, M[_U_OFF, u] + ...], whether it waits for work, the pc it is blocked on, its last pc, then its stall
# cycles per DYNAMIC_CAUSES (row _U_STALL + cause)
(_U_STATE, _U_PC, _U_T0, _U_T1, _U_WFROM, _U_WCAUSE, _U_END, _U_HEAD, _U_TAIL, _U_WORK, _U_BLOCKED, _U_LAST, _U_OFF,
 _U_STALL) = range(3, 17)
_NEXT = _U_STALL + len(DYNAMIC_CAUSES)
# the semaphore waiters in the order they blocked and those a retire wakes (units, by list position); per semaphore
# its count; per wait/signal operation its semaphore and count
_WAITERS, _WAKE, _SEM_COUNT, _O_WAIT_SEM, _O_WAIT_N, _O_SIG_SEM, _O_SIG_N = range(_NEXT, _NEXT + 7)
# per pc: the program's columns (unit index, is halt, cycles, setup, DRAM window, held: bit p set if it holds a port
# of pool p, isa.units.Pool in declaration order), where its waits and signals start (CSR: pc + 1's is where they
# end), its times; each unit's pcs in program order (unit u's from M[_U_OFF, u]); the retire order
(_C_UNIT, _C_HALT, _C_CYCLES, _C_SETUP, _C_WINDOW, _C_HELD, _C_WAITS, _C_SIGNALS, _T_DISPATCH, _T_ISSUE, _T_START,
 _T_END, _QUEUES, _RETIRED) = range(_NEXT + 7, _NEXT + 21)
# records: the dispatcher's gaps (from, to, cause, pc) and the resource stalls (pc, from, to, cause)
_G_FROM, _G_TO, _G_CAUSE, _G_PC, _R_PC, _R_FROM, _R_TO, _R_CAUSE = range(_NEXT + 21, _NEXT + 29)
# per port pool: its ports, its stall cause, when its next port frees; then row _Q_FREE + j: when its port j frees
_Q_PORTS, _Q_CAUSE, _Q_EARLIEST, _Q_FREE = range(_NEXT + 29, _NEXT + 33)
# events
_URGENT, _NORMAL = 0, 1
_K_BOOT, _K_UNIT, _K_WAKE, _K_NOOP, _K_STOP = range(5)
# where a unit process waits (its generator's yield points)
_S_START, _S_WORK, _S_SEM, _S_RES, _S_RETIRE, _S_DONE = range(6)
# phases of a unit's loop body; _P_YIELD: it waits for an event (or has ended)
_P_TOP, _P_POP, _P_ISSUE, _P_RES, _P_START, _P_RETIRE, _P_YIELD = range(7)


@njit("void(int64[:, ::1], int64, int64, int64, int64)", cache=True)
def _push(M, t, prio, kind, u):
    """Schedule an event at cycle ``t`` (ids in scheduling order: the declared rule's FIFO among equals)."""
    k = M[_S, _HN]
    M[_E_TIME, k] = t
    M[_E_KEY, k] = (prio << 60) | (M[_S, _EID] << 20) | (kind << 16) | u
    M[_S, _EID] += 1
    M[_S, _HN] = k + 1


@njit(cache=True)
def _pop(M):
    """Remove the first event by (cycle, priority, id); set the clock to its cycle; return (kind, unit)."""
    b = 0
    for k in range(1, M[_S, _HN]):
        if M[_E_TIME, k] < M[_E_TIME, b] or (M[_E_TIME, k] == M[_E_TIME, b] and M[_E_KEY, k] < M[_E_KEY, b]):
            b = k
    now, key = M[_E_TIME, b], M[_E_KEY, b]
    last = M[_S, _HN] - 1
    M[_E_TIME, b], M[_E_KEY, b] = M[_E_TIME, last], M[_E_KEY, last]
    M[_S, _HN] = last
    M[_S, _NOW] = now
    return (key >> 16) & 15, key & 0xFFFF


@njit(cache=True)
def _min_time(M):
    best = M[_E_TIME, 0]
    for k in range(1, M[_S, _HN]):
        if M[_E_TIME, k] < best:
            best = M[_E_TIME, k]
    return best


@njit(cache=True)
def _take(M, pc):
    """All-or-nothing acquire of pc's semaphore waits (SemaphoreFile.try_acquire)."""
    for j in range(M[_C_WAITS, pc], M[_C_WAITS, pc + 1]):
        if M[_SEM_COUNT, M[_O_WAIT_SEM, j]] < M[_O_WAIT_N, j]:
            return False
    for j in range(M[_C_WAITS, pc], M[_C_WAITS, pc + 1]):
        M[_SEM_COUNT, M[_O_WAIT_SEM, j]] -= M[_O_WAIT_N, j]
    return True


@njit(cache=True)
def _open_gap(M, now, cause, pc):
    g = M[_S, _NGAPS]
    if g == M.shape[1]:   # (cannot happen: a pc opens at most one gap; checked rather than trusted)
        M[_S, _FULL] = 1
        return
    M[_G_FROM, g], M[_G_TO, g], M[_G_CAUSE, g], M[_G_PC, g] = now, -1, cause, pc
    M[_S, _NGAPS] = g + 1
    M[_S, _GAPOPEN] = 1


@njit(cache=True)
def _dispatch(M):
    """Engine._dispatch."""
    now, pc, n = M[_S, _NOW], M[_S, _DPC], M[_S, _NPC]
    if M[_S, _GAPOPEN]:
        M[_G_TO, M[_S, _NGAPS] - 1] = now
        M[_S, _GAPOPEN] = 0
    M[_S, _SPACEQ] = -1
    while pc < n:
        q = M[_C_UNIT, pc]
        if q < 0:
            if M[_S, _OUT]:
                if not M[_C_HALT, pc]:
                    _open_gap(M, now, _BARRIER, pc)
                M[_S, _DPC] = pc
                M[_S, _DRAIN] = 1
                return
            if M[_C_HALT, pc]:
                break
            pc += 1
            continue
        if M[_U_TAIL, q] - M[_U_HEAD, q] >= M[_S, _DEPTH]:
            _open_gap(M, now, _QFULL, pc)
            M[_S, _DPC] = pc
            M[_S, _SPACEQ] = q
            return
        M[_U_TAIL, q] += 1
        M[_T_DISPATCH, pc] = now
        M[_S, _OUT] += 1
        if M[_U_WORK, q]:
            _push(M, now, _NORMAL, _K_UNIT, q)
            M[_U_WORK, q] = 0
        pc += 1
    M[_S, _DPC] = n
    M[_S, _DDONE] = 1
    for q in range(M[_S, _NUNITS]):
        if M[_U_WORK, q]:
            _push(M, now, _NORMAL, _K_UNIT, q)
            M[_U_WORK, q] = 0


@njit(cache=True)
def _dispatch_pending(M, pending):
    """Run the dispatcher if a unit's pop left it pending (the Engine runs it at that unit's next yield)."""
    if pending:
        _dispatch(M)
    return False


@njit(cache=True)
def _account_starvation(M, u, now):
    """Engine._account_starvation: unit ``u`` waited for work from M[_U_T0, u] to ``now``; charge it the dispatcher
    gaps in that window that held back pcs up to its last one."""
    t0 = M[_U_T0, u]
    for g in range(M[_S, _NGAPS] - 1, -1, -1):
        g1 = M[_G_TO, g]
        if g1 < 0:
            g1 = now
        if g1 <= t0:
            break
        if M[_G_PC, g] <= M[_U_LAST, u]:
            M[_U_STALL + M[_G_CAUSE, g], u] += min(g1, now) - max(M[_G_FROM, g], t0)


@njit(cache=True)
def _resume(M, u, now):
    """Unit ``u``'s process resumes at its yield point: account the wait that ends there; the phase it goes on with."""
    st = M[_U_STATE, u]
    if st == _S_START:
        return _P_TOP
    if st == _S_WORK:
        _account_starvation(M, u, now)
        if M[_U_HEAD, u] == M[_U_TAIL, u]:
            _push(M, now, _NORMAL, _K_NOOP, 0)
            M[_U_STATE, u] = _S_DONE
            return _P_YIELD
        return _P_POP
    if st == _S_SEM:
        M[_U_BLOCKED, u] = -1
        M[_U_STALL + _SEM, u] += now - M[_U_T1, u]
        return _P_ISSUE
    if st == _S_RES:
        M[_U_STALL + M[_U_WCAUSE, u], u] += now - M[_U_WFROM, u]
        k = M[_S, _NRS]
        if k == M.shape[1]:   # (more port waits than the record holds: the SimPy Engine decides)
            M[_S, _FULL] = 1
            return _P_YIELD
        M[_R_PC, k], M[_R_FROM, k], M[_R_TO, k], M[_R_CAUSE, k] = M[_U_PC, u], M[_U_WFROM, u], now, M[_U_WCAUSE, u]
        M[_S, _NRS] = k + 1
        return _P_RES
    return _P_RETIRE


@njit(cache=True)
def _top(M, u, now):
    """Take the next instruction of the queue, or wait for work (or end, when the dispatcher is done)."""
    if M[_U_HEAD, u] < M[_U_TAIL, u]:
        return _P_POP
    if M[_S, _DDONE]:
        _push(M, now, _NORMAL, _K_NOOP, 0)
        M[_U_STATE, u] = _S_DONE
    else:
        M[_U_T0, u] = now
        M[_U_WORK, u] = 1
        M[_U_STATE, u] = _S_WORK
    return _P_YIELD


@njit(cache=True)
def _pop_instr(M, u, now):
    """Pop pc from the queue (resuming the dispatcher waiting for room: now, or at this unit's next yield) and
    acquire its semaphores or block on them. Returns (phase, dispatcher pending)."""
    pc = M[_QUEUES, M[_U_OFF, u] + M[_U_HEAD, u]]
    M[_U_HEAD, u] += 1
    M[_U_PC, u] = pc
    pending = False
    if M[_S, _SPACEQ] == u:
        if M[_C_CYCLES, pc] and (M[_S, _HN] == 0 or _min_time(M) > now):
            pending = True
        else:
            M[_S, _SPACEQ] = -1
            _push(M, now, _NORMAL, _K_WAKE, 0)
            M[_S, _WAKING] = 1
    if M[_C_WAITS, pc] < M[_C_WAITS, pc + 1] and not _take(M, pc):
        M[_U_T1, u] = now
        M[_WAITERS, M[_S, _NWAIT]] = u
        M[_S, _NWAIT] += 1
        M[_U_BLOCKED, u] = pc
        _dispatch_pending(M, pending)
        M[_U_STATE, u] = _S_SEM
        return _P_YIELD, False
    return _P_ISSUE, pending


@njit(cache=True)
def _wait_ports(M, u, now, pending):
    """Wait for every port pool pc holds to have a free port (``max(held, key=next_free)`` names the cause: the
    first pool, in Pool order, that frees last). Returns (phase, dispatcher pending)."""
    held = M[_C_HELD, M[_U_PC, u]]
    ready, cause_pool = -1, 0
    for p in range(M[_S, _NPOOLS]):
        if held >> p & 1 and M[_Q_EARLIEST, p] > ready:
            ready, cause_pool = M[_Q_EARLIEST, p], p
    if ready <= now:
        return _P_START, pending
    _dispatch_pending(M, pending)
    _push(M, ready, _NORMAL, _K_UNIT, u)
    M[_U_WFROM, u] = now
    M[_U_WCAUSE, u] = M[_Q_CAUSE, cause_pool]
    M[_U_STATE, u] = _S_RES
    return _P_YIELD, False


@njit(cache=True)
def _hold_ports(M, held, end):
    """PortPool.hold of every pool in ``held`` until ``end``: the first port free at the earliest cycle."""
    for p in range(M[_S, _NPOOLS]):
        if held >> p & 1:
            for j in range(M[_Q_PORTS, p]):
                if M[_Q_FREE + j, p] == M[_Q_EARLIEST, p]:
                    M[_Q_FREE + j, p] = end
                    break
            e = M[_Q_FREE, p]
            for j in range(1, M[_Q_PORTS, p]):
                e = min(e, M[_Q_FREE + j, p])
            M[_Q_EARLIEST, p] = e


@njit(cache=True)
def _start(M, u, now, pending):
    """Start pc: its DRAM bus window (first come, first served), its ports held until its end; then wait for its
    retire, or go straight on when nothing else is due before it (the declared rule gives the same order)."""
    pc = M[_U_PC, u]
    end = now + M[_C_CYCLES, pc]
    if M[_C_WINDOW, pc]:
        begin = max(now + M[_C_SETUP, pc], M[_S, _BUS])   # DramBus.reserve
        M[_S, _BUS] = begin + M[_C_WINDOW, pc]
        wait = begin - now - M[_C_SETUP, pc]
        if wait:
            M[_U_STALL + _DRAM, u] += wait
            end += wait
    _hold_ports(M, M[_C_HELD, pc], end)
    M[_T_START, pc] = now
    _dispatch_pending(M, pending)
    M[_U_END, u] = end
    if end > now:
        if M[_S, _HN] and _min_time(M) <= end:
            _push(M, end, _NORMAL, _K_UNIT, u)
            M[_U_STATE, u] = _S_RETIRE
            return _P_YIELD
        M[_S, _NOW] = end
    return _P_RETIRE


@njit(cache=True)
def _wake_waiters(M, now):
    """Wake, in the order they blocked, the semaphore waiters that can now take all they need."""
    kept, woken = 0, 0
    for k in range(M[_S, _NWAIT]):
        w = M[_WAITERS, k]
        if _take(M, M[_U_BLOCKED, w]):
            M[_WAKE, woken] = w
            woken += 1
        else:
            M[_WAITERS, kept] = w
            kept += 1
    M[_S, _NWAIT] = kept
    for k in range(woken):
        _push(M, now, _NORMAL, _K_UNIT, M[_WAKE, k])


@njit(cache=True)
def _retire(M, u, now):
    """Retire pc: record it, apply its signals and wake the waiters they let through; resume a draining dispatcher
    when nothing is outstanding."""
    pc = M[_U_PC, u]
    M[_RETIRED, M[_S, _NRET]] = pc
    M[_S, _NRET] += 1
    M[_T_END, pc] = M[_U_END, u]
    if M[_C_SIGNALS, pc] < M[_C_SIGNALS, pc + 1]:
        for j in range(M[_C_SIGNALS, pc], M[_C_SIGNALS, pc + 1]):
            s = M[_O_SIG_SEM, j]
            M[_SEM_COUNT, s] += M[_O_SIG_N, j]
            if M[_SEM_COUNT, s] > M[_S, _SEM_MAX]:
                M[_S, _STATUS] = SEM_OVERFLOW
        if M[_S, _STATUS] != OK:
            return _P_YIELD
        if M[_S, _NWAIT]:
            _wake_waiters(M, now)
    M[_S, _OUT] -= 1
    if not M[_S, _OUT] and M[_S, _DRAIN]:
        M[_S, _DRAIN] = 0
        _push(M, now, _NORMAL, _K_WAKE, 0)
        M[_S, _WAKING] = 1
    return _P_TOP


@njit(cache=True)
def _advance(M, u, phase):
    """Run unit ``u``'s loop body from ``phase`` until its process yields (or the run fails: M[_S, _STATUS])."""
    pending = False
    while phase != _P_YIELD:
        now = M[_S, _NOW]
        if phase == _P_TOP:
            phase = _top(M, u, now)
        elif phase == _P_POP:
            phase, pending = _pop_instr(M, u, now)
        elif phase == _P_ISSUE:
            pc = M[_U_PC, u]
            M[_T_ISSUE, pc] = now
            phase = _P_RES if M[_C_HELD, pc] else _P_START
        elif phase == _P_RES:
            phase, pending = _wait_ports(M, u, now, pending)
        elif phase == _P_START:
            phase = _start(M, u, now, pending)
            pending = False
        else:
            phase = _retire(M, u, now)


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
def _event_room(n_units):
    """Events the list may hold at once: a few per unit at most (more is checked, not trusted: FULL)."""
    return 8 * n_units + 24


@njit(cache=True)
def _model(P, wait, sig, sem_init, depth, ports, pool_cause, n_units, sem_max):
    """The model M at cycle 0 (the arguments as _run's). It has as many columns as its longest row needs: the
    resource stall records (two per pc and some; more is checked: FULL), the event list, the semaphore operations;
    a row is written only as far as it is used, so the pages of the rest are never touched."""
    n, n_pools = P.shape[1], ports.shape[0]
    width = max(2 * n + 64, _event_room(n_units) + 8, wait[1].shape[0], sig[1].shape[0], sem_init.shape[0],
                n_pools, _N_SCALARS)
    M = np.empty((_Q_FREE + max(1, ports.max()), width), np.int64)
    M[_S, :_N_SCALARS] = 0
    M[_S, _SPACEQ], M[_S, _DEPTH], M[_S, _SEM_MAX] = -1, depth, sem_max
    M[_S, _NPC], M[_S, _NUNITS], M[_S, _NPOOLS] = n, n_units, n_pools
    M[_U_STATE:_NEXT, :n_units] = 0
    pcs, off, last = _unit_queues(P[0], n_units)   # (P's first row: the unit)
    M[_U_OFF, :n_units], M[_U_LAST, :n_units], M[_U_BLOCKED, :n_units] = off[:n_units], last, -1
    M[_SEM_COUNT, :sem_init.shape[0]] = sem_init
    M[_O_WAIT_SEM, :wait[1].shape[0]], M[_O_WAIT_N, :wait[2].shape[0]] = wait[1], wait[2]
    M[_O_SIG_SEM, :sig[1].shape[0]], M[_O_SIG_N, :sig[2].shape[0]] = sig[1], sig[2]
    M[_C_UNIT:_C_HELD + 1, :n] = P
    M[_C_WAITS, :n + 1], M[_C_SIGNALS, :n + 1] = wait[0], sig[0]
    M[_T_DISPATCH:_T_END + 1, :n] = -1
    M[_QUEUES, :pcs.shape[0]] = pcs
    M[_Q_PORTS, :n_pools], M[_Q_CAUSE, :n_pools], M[_Q_EARLIEST, :n_pools] = ports, pool_cause, 0
    M[_Q_FREE:, :n_pools] = 0
    return M


@njit(cache=True)
def _run(P, wait, sig, sem_init, depth, ports, pool_cause, max_cycles, n_units, sem_max):
    """The Engine's run over arrays. ``P``: per-pc columns (unit index, is halt, cycles, setup, DRAM window, held: bit
    p set if it holds a port of pool p, ``isa.units.Pool`` in declaration order); ``wait``/``sig``: the semaphore
    operations (ptr, index, count) in CSR form; ``ports``: ports per pool; ``pool_cause``: per pool, the index of its
    stall cause. Returns the model M at the end: M[_S, _STATUS], the times (rows _T_DISPATCH.._T_END), the stall per
    unit (rows _U_STALL + DYNAMIC_CAUSES index), resource stalls (rows _R_PC.._R_CAUSE, M[_S, _NRS] of them),
    dispatcher gaps (rows _G_FROM.._G_PC, M[_S, _NGAPS]) and the retire order (row _RETIRED, M[_S, _NRET])."""
    M = _model(P, wait, sig, sem_init, depth, ports, pool_cause, n_units, sem_max)
    _push(M, 0, _URGENT, _K_BOOT, 0)
    for u in range(n_units):
        _push(M, 0, _URGENT, _K_UNIT, u)
    if max_cycles >= 0:
        _push(M, max_cycles + 1, _URGENT, _K_STOP, 0)
    stopped, room = False, _event_room(n_units)
    while M[_S, _HN]:
        kind, u = _pop(M)
        if kind == _K_STOP:
            stopped = True
            break
        if kind == _K_BOOT:
            _dispatch(M)
            _push(M, M[_S, _NOW], _NORMAL, _K_NOOP, 0)
        elif kind == _K_WAKE:
            M[_S, _WAKING] = 0
            _dispatch(M)
        elif kind == _K_UNIT:   # a unit process resumes where it yielded
            _advance(M, u, _resume(M, u, M[_S, _NOW]))
        if M[_S, _STATUS] != OK:
            break
        if M[_S, _FULL] or M[_S, _HN] > room:
            M[_S, _STATUS] = FULL
            break
    if M[_S, _STATUS] == OK and (not M[_S, _DDONE] or M[_S, _OUT]):
        M[_S, _STATUS] = CYCLE_CAP if stopped else DEADLOCK
    return M


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
    M = _run(P, (w.ptr, w.sem, w.count), (s.ptr, s.sem, s.count), init, arch.queues.depth, ports, pool_cause,
             -1 if max_cycles is None else int(max_cycles), len(units), SEM_MAX)
    status, n_rs, n_gaps, n_retired = M[_S, [_STATUS, _NRS, _NGAPS, _NRET]].tolist()
    if status != OK:
        return CompiledRun(status)
    dispatch, issue, start, end = M[_T_DISPATCH:_T_END + 1, :len(qid)].copy()   # (not views of all of M)
    stall = M[_U_STALL:_U_STALL + len(DYNAMIC_CAUSES), :len(units)].T
    rs, gaps = M[_R_PC:_R_CAUSE + 1, :n_rs].T, M[_G_FROM:_G_PC + 1, :n_gaps].T
    retired = M[_RETIRED, :n_retired].copy()
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
