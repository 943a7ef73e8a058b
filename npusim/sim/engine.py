"""The discrete-event model: a dispatcher feeding one in-order queue per unit (:func:`isa.machine.machine_units`), one
SimPy process per unit, on SimPy's public API only.

Events happen per instruction, never per cycle: a unit that finds its queue, semaphores and ports ready costs one
timeout event per instruction, from its start to its retire. The dispatcher is not a process: the unit that makes room
in a full queue resumes it, through an event or directly when that event would be the next one due. What happens first
within a cycle follows the declared arbitration rule of docs/timing.md (cycle, then start-ups before everything else,
then scheduling order), which :mod:`npusim.sim.compiled_timing` replays. Static costs come from :mod:`isa.cost`; this
module adds what depends on other units: semaphore waits, full queues, barriers, port pools (DMA channels, SRAM ports)
and the shared DRAM bus, whose grant policies live in :mod:`npusim.sim.resources` and :mod:`npusim.sim.semaphores`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from itertools import accumulate
from numbers import Integral
from operator import attrgetter

import numpy as np
import simpy

from isa import DeadlockError, Halt, Program, SimulationError
from isa.arch import Arch
from isa.columns import unit_keys
from isa.cost import Cost, instr_costs
from isa.machine import machine, machine_units, pool_ports
from isa.units import Pool
from isa.verify import where
from npusim.sim.resources import DramBus, PortPool
from npusim.sim.semaphores import SemaphoreFile
from npusim.sim.stats import UnitStats

CTRL = -1


class Engine:
    """One simulation of one program on one Arch. ``execute`` (or None for timing only) applies values at retire.

    ``progress(retired, total, cycle)``, when given, is called about every ``total / 200`` retired instructions and
    once at the end (``retired == total``); ``cycle`` is the current simulated cycle.
    """

    def __init__(self, program: Program, arch: Arch, execute: Callable | None, costs: list[Cost] | None = None,
                 progress: Callable[[int, int, int], None] | None = None):
        self.program, self.arch, self.execute = program, arch, execute
        self.env = simpy.Environment()
        instrs = program.instrs
        n = len(instrs)
        self.costs = costs = costs if costs is not None else instr_costs(instrs, arch)
        self.units = units = machine_units(arch)
        self.qid = qid = machine(arch).indices(unit_keys(instrs)).tolist()   # per pc, its unit's index (-1: control)
        idx = program.sem_index

        def sem_ops(ops) -> tuple[tuple[int, int], ...]:
            if len(ops) == 1:   # (most: a list comprehension costs a frame)
                return ((idx[ops[0].name], ops[0].count),)
            return tuple([(idx[o.name], o.count) for o in ops])

        self.sems = SemaphoreFile([s.name for s in program.sems], [s.init for s in program.sems])
        port = {p: PortPool(p.cause, pool_ports(p, arch)) for p in Pool}
        pools = {(u.index, s, a): tuple(port[p] for p in held_pools(u.spec.pools, s, a))
                 for u in units for s in (False, True) for a in (False, True)}
        pools |= {(CTRL, s, a): () for s in (False, True) for a in (False, True)}   # (control never reaches a unit)
        # per pc, what a unit reads to run it: (semaphore needs, port pools held, cycles, setup, DRAM window, gives)
        self.steps = [(sem_ops(i.waits) if i.waits else (), pools[q, c.spm_bytes > 0, c.acc_bytes > 0], c.cycles,
                       c.setup, c.dram_window, sem_ops(i.signals) if i.signals else ())
                      for q, c, i in zip(qid, costs, instrs)]
        self.bus = DramBus()
        self.queues = [deque() for _ in units]
        self.stats = [UnitStats(u.name) for u in units]
        self.dispatch, self.issue, self.start, self.end = ([-1] * n for _ in range(4))
        self.resource_stalls: list[tuple[int, int, int, str]] = []  # (pc, from, to, cause) between issue and start
        self.work: list[simpy.Event | None] = [None] * len(units)
        self.blocked = [-1] * len(units)          # pc a unit's head waits on semaphores with, or -1
        self.space_queue = -1                     # the dispatcher waits for room in this full queue, or -1
        self.draining = False                     # the dispatcher waits for every dispatched instruction to retire
        self.waking = False                       # an event to resume the dispatcher is scheduled
        self.gap_open = False                     # the last of ``gaps`` is the dispatcher's current block
        self.dispatch_pc = 0
        self.dispatch_done = False
        self.outstanding = 0
        self.gaps: list[list] = []               # dispatcher blocked intervals [start, end|None, cause, pc]
        backwards = qid[::-1]
        self.last_pc = [n - 1 - backwards.index(u) if u in qid else -1 for u in range(len(units))]
        self.progress = progress
        self.dispatcher_state = (self.env, arch.queues.depth, instrs, qid, self.queues, self.dispatch, self.work,
                                 self.gaps)

    # ------------------------------------------------------------------------------------------------ processes
    def _dispatch(self) -> None:
        """Dispatch in program order from ``dispatch_pc`` until a queue is full, a barrier waits for the units to
        drain, or the program ends. Not a process: whoever makes room (a unit's pop or last retire) resumes it, through
        an event (``_wake``) or, when that event would be the next thing to happen at this cycle, directly."""
        env, depth, instrs, qid, queues, dispatch, work, gaps = self.dispatcher_state
        now = env.now
        pc, n = self.dispatch_pc, len(qid)
        if self.gap_open:  # resumed: close the gap it opened when it blocked
            gaps[-1][1] = now
            self.gap_open = False
        self.space_queue = -1
        while pc < n:
            q = qid[pc]
            if q == CTRL:
                if self.outstanding:
                    if not isinstance(instrs[pc], Halt):  # draining at the end is not a stall
                        gaps.append([now, None, "barrier", pc])
                        self.gap_open = True
                    self.dispatch_pc, self.draining = pc, True
                    return
                if isinstance(instrs[pc], Halt):
                    break
                pc += 1
                continue
            queue = queues[q]
            if len(queue) >= depth:
                gaps.append([now, None, "queue_full", pc])
                self.gap_open = True
                self.dispatch_pc, self.space_queue = pc, q
                return
            queue.append(pc)
            dispatch[pc] = now
            self.outstanding += 1
            w = work[q]
            if w is not None:   # the unit waits for work: resume it (once)
                w.succeed()
                work[q] = None
            pc += 1
        self.dispatch_pc = n
        self.dispatch_done = True
        for q, w in enumerate(work):
            if w is not None:
                w.succeed()
                work[q] = None

    def _wake_later(self) -> None:
        """Resume the dispatcher through an event at this cycle, after what is already scheduled."""
        ev = self.env.event()
        ev.callbacks.append(self._wake)
        ev.succeed()
        self.waking = True

    def _wake(self, _event) -> None:
        self.waking = False
        self._dispatch()

    def _boot(self):
        """The dispatcher's first run, as a process started before the units' (so it fills their queues first)."""
        self._dispatch()
        return
        yield

    def _unit(self, u: int):
        env, queue, st, sems, bus = self.env, self.queues[u], self.stats[u], self.sems, self.bus
        stall, steps, instrs = st.stall, self.steps, self.program.instrs
        issue, start, end_at, execute = self.issue, self.start, self.end, self.execute
        resource_stalls, timeout, popleft = self.resource_stalls, env.timeout, queue.popleft
        take, give_all = sems.try_acquire, sems.signal
        earliest = attrgetter("earliest")
        peek = env.peek    # the cycle of the next scheduled event (inf if none): is anything else due this cycle?
        pending = False    # the dispatcher is to run at this unit's next yield
        # (busy, conflict, latency cycles and row outcomes are static: run() adds them up per unit at the end)
        while True:
            if not queue:
                if self.dispatch_done:
                    return
                t0 = env.now
                self.work[u] = env.event()   # (the dispatcher triggers it and clears the slot)
                yield self.work[u]
                self._account_starvation(u, t0, env.now)
                if not queue:
                    return
            pc = popleft()
            need, held, cycles, setup, window, give = steps[pc]
            if self.space_queue == u:
                # the dispatcher may go on: if nothing else is scheduled at this cycle and this unit yields before
                # it looks at a queue again (cycles > 0), the dispatcher's event would be the next one, so run it
                # at that yield instead (same order, one event less)
                if cycles and peek() > env.now:
                    pending = True
                else:
                    self.space_queue = -1
                    self._wake_later()
            if need and not take(need):  # not all available: wait for them
                t1 = env.now
                ev = env.event()
                sems.block(u, need, ev.succeed)
                self.blocked[u] = pc
                if pending:
                    pending = False
                    self._dispatch()
                yield ev
                self.blocked[u] = -1
                stall["semaphore"] += env.now - t1
            now = env.now
            issue[pc] = now
            if held:
                ready = max(map(earliest, held))
                while ready > now:
                    cause = max(held, key=PortPool.next_free).name
                    if pending:
                        pending = False
                        self._dispatch()
                    yield timeout(ready - now)
                    stall[cause] += env.now - now
                    resource_stalls.append((pc, now, env.now, cause))
                    now = env.now
                    ready = max(map(earliest, held))
            end = now + cycles
            if window:
                wait = bus.reserve(now + setup, window) - now - setup
                if wait:
                    stall["dram_bandwidth"] += wait
                    end += wait
            for p in held:
                p.hold(end)
            start[pc] = now
            if pending:
                pending = False
                self._dispatch()
            if end > now:
                yield timeout(end - now)
            if execute is not None:
                execute(pc, instrs[pc])
            end_at[pc] = end
            if give:
                try:
                    give_all(give)
                except SimulationError as e:
                    raise SimulationError(f"{where(pc, instrs[pc])} at cycle {end}: {e}") from None
            self.outstanding -= 1
            if not self.outstanding and self.draining:
                self.draining = False
                self._wake_later()

    def _account_starvation(self, u: int, t0: int, t1: int) -> None:
        """Split an empty-queue wait [t0, t1): while the dispatcher was blocked short of this unit's next
        instruction the unit is stalled (queue_full or barrier); otherwise it is idle."""
        st, last = self.stats[u], self.last_pc[u]
        for g0, g1, cause, pc in reversed(self.gaps):
            g1 = t1 if g1 is None else g1
            if g1 <= t0:
                break
            if pc <= last:
                st.stall[cause] += min(g1, t1) - max(g0, t0)

    # ------------------------------------------------------------------------------------------------ running
    def run(self, max_cycles: int | None = None) -> int:
        """Run to completion; return total cycles. Raises DeadlockError if instructions are pending but neither the
        dispatcher nor any unit can ever move again, SimulationError if the run needs more than ``max_cycles``."""
        check_max_cycles(max_cycles)
        env = self.env
        env.process(self._boot())
        procs = [env.process(self._unit(u)) for u in range(len(self.units))]
        if self.progress is not None:
            env.process(self._reporter(procs))
        env.run(until=None if max_cycles is None else int(max_cycles) + 1)  # what happens at max_cycles still runs
        if not self.dispatch_done or self.outstanding:
            if self._stuck(procs):
                raise DeadlockError(self._deadlock_message())
            raise SimulationError(f"the cycle cap of {max_cycles} was reached with {self.outstanding} instructions "
                                  f"in flight (the dispatcher is at pc {self.dispatch_pc} of {len(self.qid)}); "
                                  f"raise max_cycles (--max-cycles) or drop it")
        self.dispatch, self.issue, self.start, self.end = (
            np.array(a, np.int64) for a in (self.dispatch, self.issue, self.start, self.end))
        total = int(self.end.max(initial=0))
        per_unit: list[list[Cost]] = [[] for _ in self.units]
        for q, cost in zip(self.qid, self.costs):
            if q != CTRL:
                per_unit[q].append(cost)
        for st, unit_costs in zip(self.stats, per_unit):
            st.add_statics(unit_costs)
        for st in self.stats:
            st.idle = total - st.busy - sum(st.stall.values())
        return total

    def _last_event(self) -> int:
        """Cycle of the last thing that happened: every process resumes at a dispatch, issue, start or retire."""
        return max(max(a, default=0) for a in (self.dispatch, self.issue, self.start, self.end))

    def _reporter(self, procs: list[simpy.Process]):
        """Call ``progress`` every slice of simulated time, sized to retire about total / 200 instructions, so the
        per-instruction path pays nothing for it. Stops when the model is done or stuck (whatever else, like the
        cycle cap, is still scheduled); slices grow while nothing retires, so a long wait costs few events."""
        env, n = self.env, len(self.qid)
        before = [0, *accumulate(q != CTRL for q in self.qid)]  # unit instructions before each pc
        total = before[n]
        step, span, retired = max(1, total // 200), 1024, 0
        while True:
            yield env.timeout(span)
            pc = self.dispatch_pc
            dispatched = before[pc] + (pc < n and self.dispatch[pc] >= 0)
            done = dispatched - self.outstanding - retired
            retired += done
            span = min(span * 4, max(1024, span * step // done)) if done else span * 4
            if retired == total or self._stuck(procs):
                self.progress(retired, total, self._last_event())
                return
            if done:
                self.progress(retired, total, env.now)

    def _stuck(self, procs: list[simpy.Process]) -> bool:
        """Neither the dispatcher nor a unit can resume: the dispatcher is done or blocked (room in a full queue, a
        drain) with no event to resume it scheduled, and each unit process ``_stuck_units``. Only a running process
        triggers events, so this state lasts forever."""
        return not self.waking and _stuck_units(procs)

    def _deadlock_message(self) -> str:
        instrs, parts, waits_for = self.program.instrs, [], {}
        producer = {}
        for instr in instrs:
            for op in instr.signals:
                producer.setdefault(op.name, instr.queue.text)
        for u, unit in enumerate(self.units):
            q = unit.queue
            pc = self.blocked[u]
            if pc < 0:
                continue
            lack = self.sems.lacking(self.steps[pc][0])
            what = ", ".join(f"{name} (have {have}, need {need})" for name, have, need in lack)
            parts.append(f"{q.text} blocked at {where(pc, instrs[pc])} waiting on {what}")
            waits_for[q.text] = [producer.get(name, "nobody") for name, _, _ in lack]
        pc = self.dispatch_pc
        if self.space_queue >= 0:
            parts.append(f"dispatcher blocked at pc {pc}: queue {self.units[self.space_queue].queue.text} full "
                         f"({len(self.queues[self.space_queue])}/{self.arch.queues.depth})")
        elif self.draining:
            parts.append(f"dispatcher blocked at pc {pc} (`{instrs[pc]}`) until {self.outstanding} instructions "
                         f"retire")
        cycle = _find_cycle(waits_for)
        if cycle:
            parts.append("wait-for cycle: " + " -> ".join(cycle))
        return f"deadlock at cycle {self._last_event()}: " + "; ".join(parts)


def held_pools(pools: tuple[Pool, ...], spm: bool, acc: bool) -> tuple[Pool, ...]:
    """The port pools an instruction holds while it runs, in :class:`isa.units.Pool` order (the order its waits are
    tried in, which the compiled evaluation mirrors): its unit's ``pools``, an SPM port if it touches the SPM and an
    ACC port if it touches the ACC."""
    need = set(pools) | ({Pool.SPM_PORT} if spm else set()) | ({Pool.ACC_PORT} if acc else set())
    return tuple(p for p in Pool if p in need)


def check_max_cycles(max_cycles) -> None:
    """Raise SimulationError unless ``max_cycles`` is None or an integer >= 0 (cycles)."""
    if max_cycles is not None and (type(max_cycles) is bool or not isinstance(max_cycles, Integral) or max_cycles < 0):
        raise SimulationError(f"max_cycles must be an integer >= 0 or None, not {max_cycles!r}")


def _stuck_units(procs: list[simpy.Process]) -> bool:
    """No unit process can resume: each has ended or waits on an event nobody has triggered (a semaphore, an empty
    queue)."""
    return all(not p.is_alive or not p.target.triggered for p in procs)


def _find_cycle(graph: dict[str, list[str]]) -> list[str]:
    for start in graph:
        path, node = [start], start
        while graph.get(node):
            node = graph[node][0]
            if node in path:
                return path[path.index(node):] + [node]
            path.append(node)
    return []


