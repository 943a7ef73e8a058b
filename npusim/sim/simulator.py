"""``simulate``: run a program on an Arch, concurrently (the timing model) or serially (the golden reference)."""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable, Mapping

import numpy as np

from isa import (
    DeadlockError,
    DType,
    HostCall,
    LimitError,
    MatMul,
    Program,
    Queue,
    SimulationError,
    VerifyError,
)
from isa.arch import Arch
from isa.columns import columns, unit_keys
from isa.cost import FREE, instr_costs
from isa.machine import machine, machine_units
from isa.units import CTRL_KEY, DMA_QUEUES, key_text
from isa.verify import verify, where
from npusim.functional.memory import DeviceMemory
from npusim.sim.engine import Engine, check_max_cycles
from npusim.sim.inputs import for_program
from npusim.sim.limits import LIMITS, Limits, Work, check_cycles, program_work
from npusim.sim.stats import SimResult, UnitStats, cost_totals

ENGINES = ("auto", "simpy", "compiled")
AUTO_COMPILED = 30_000
"""Instructions from which ``engine="auto"`` runs a timing-only program compiled even when numba is not loaded yet:
importing it (about 0.65 CPU s) pays off near 36k instructions (the SimPy Engine runs about 39k per CPU second, the
compiled run 130k)."""


def check_fits(program: Program, arch: Arch, keys: np.ndarray | None = None) -> None:
    """Raise VerifyError if the program needs more than the Arch has (array, SRAM sizes, dtypes, rows, units);
    ``keys``: its instructions' unit keys (:func:`isa.columns.unit_keys`) if the caller has them."""
    cfg, m = program.config, arch.matrix
    keys = unit_keys(program.instrs) if keys is None else keys
    missing = np.flatnonzero((machine(arch).indices(keys) < 0) & (keys != CTRL_KEY))
    if missing.size:
        pc = int(missing[0])
        spec, have = program.instrs[pc].queue.unit, machine(arch).count(program.instrs[pc].queue.unit)
        raise VerifyError(f"{where(pc, program.instrs[pc])}: it runs on {key_text(int(keys[pc]))}, but arch "
                          f"{arch.name} has units.{spec.name} = {have}; raise units.{spec.name} (--set "
                          f"units.{spec.name}={program.instrs[pc].unit + 1})")
    for need, have, what in ((cfg.rows, m.rows, "matrix.rows"), (cfg.cols, m.cols, "matrix.cols"),
                             (cfg.spm, arch.spm.size, "spm.size"), (cfg.acc, arch.acc.size, "acc.size")):
        if need > have:
            raise VerifyError(f"the program needs {what} >= {need} (.config) but arch {arch.name} has {have}")
    for pc, ins in enumerate(program.instrs):
        if isinstance(ins, MatMul):
            if ins.m > m.max_rows:
                raise VerifyError(f"{where(pc, ins)}: m={ins.m} exceeds matrix.max_rows={m.max_rows}")
            bad = next((d.text for d in (ins.a.dtype, ins.b.dtype) if d.text not in m.dtypes), None)
            if bad is not None:
                raise VerifyError(f"{where(pc, ins)}: arch {arch.name}'s matrix unit takes {', '.join(m.dtypes)}, "
                                  f"not {bad}")


def idle_units(arch: Arch, keys: np.ndarray) -> list[str]:
    """A warning naming the extra units of the machine (``units.<kind>`` above 1) that no instruction runs on: the
    compiler drives the first unit of each kind, so a model's numbers do not change with them."""
    used = set(np.unique(keys).tolist())
    idle = [u for u in machine_units(arch) if u.ordinal and u.key not in used]
    if not idle:
        return []
    kinds = sorted({f"units.{u.spec.name} = {machine(arch).count(u.spec)}" for u in idle})
    return [f"{', '.join(kinds)}, but no instruction runs on {', '.join(f'{u.name} ({u.label})' for u in idle)}: "
            f"the compiler drives the first unit of each kind; an instruction picks another with unit=N"]


def load_inputs(program: Program, arch: Arch, inputs: Mapping[str, np.ndarray] | None) -> DeviceMemory:
    """Fresh device memory with each input's bytes copied to the start of the DRAM region of the same name; a
    LimitError if this machine cannot allocate it."""
    try:
        mem = DeviceMemory.for_program(program, arch.spm.size, arch.acc.size)
    except MemoryError:
        total = arch.spm.size + arch.acc.size + sum(r.size for r in program.regions)
        raise LimitError(f"this machine could not allocate the run's device memory, {total:,} B (SPM, ACC and the "
                         f"DRAM regions); run timing-only, or with smaller regions") from None
    for name, data in for_program(program, inputs).items():
        mem.load(name, data)
    return mem


def simulate(program: Program, arch: Arch, inputs: Mapping[str, np.ndarray] | np.ndarray | None = None, *,
             timing_only: bool = False, serial: bool = False, ideal_memory: bool = False,
             max_cycles: int | None = None, host_functions: Mapping[str, Callable] | None = None,
             progress: Callable[[int, int, int], None] | None = None, limits: Limits | None = LIMITS,
             engine: str = "auto") -> SimResult:
    """Verify and run ``program`` on ``arch``; DRAM regions are initialised from ``inputs`` (region name -> array of
    numbers no larger than the region; one bare array for a program with one region), checked first even when
    timing only.

    serial: run one instruction at a time in program order (the golden functional result; cycles are the sum of
    each instruction's cost in isolation). timing_only: skip the kernels (no values, same cycles). ideal_memory:
    data movement is free (DMA instructions take 0 cycles and no DRAM time; they still move the values), so the
    compute units' cycles are what remains. host_functions: what each ``host.call fn=NAME`` computes (name ->
    callable over the DRAM regions); needed for values, not for timing. max_cycles: a SimulationError if the
    run needs more cycles (exactly max_cycles is fine); a deadlock is a DeadlockError with or without it.
    progress: ``progress(retired, total, cycle)`` is called about every total / 200 retired instructions and at
    the end (concurrent runs only). limits: the instructions, time with values and memory the run may need
    (:class:`npusim.sim.limits.Limits`, estimated before it starts; None: no limits).
    engine: which evaluation of the concurrent timing model runs: "simpy" the SimPy Engine (npusim/sim/engine.py, the
    reference), "compiled" its numba evaluation (npusim/sim/compiled_timing.py, tested equal to it), which then applies
    the kernels in the order the instructions retired (values never change timing); "auto" (default) the compiled one
    with values, once numba is loaded, or from :data:`AUTO_COMPILED` instructions, else the Engine (the same cycles:
    only the time the run takes differs). Whatever
    the compiled run cannot finish alone (a deadlock, the max_cycles cap, a semaphore overflow) is run again by the
    Engine, which raises the exact error. With it, ``progress`` is called once at the end of a timing-only run, and
    as the kernels are applied with values.
    Raises VerifyError, InputError, LimitError, SimulationError or DeadlockError (all NpuSimError) with a message
    saying what and where.
    """
    t0 = time.perf_counter()
    if engine not in ENGINES:
        raise SimulationError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    gc_was_enabled = gc.isenabled()
    gc.disable()  # the run allocates many short-lived acyclic objects; collecting them mid-run only costs time
    try:
        return _simulate(program, arch, inputs, timing_only, serial, ideal_memory, max_cycles, host_functions or {},
                         progress, t0, limits, engine)
    finally:
        if gc_was_enabled:
            gc.enable()


def _simulate(program, arch, inputs, timing_only, serial, ideal_memory, max_cycles, host, progress, t0,
              limits, engine) -> SimResult:
    check_max_cycles(max_cycles)
    inputs = for_program(program, inputs)
    cols = columns(program)
    report = verify(program, cols)
    check_fits(program, arch, cols.key)
    if limits is not None:
        n = len(program.instrs)
        work = Work(n, 0, 0.0, 0) if timing_only else program_work(program, arch)  # timing only: the count alone
        limits.check(f"simulating {n:,} instruction{'s' * (n != 1)}", work, timing_only)
    costs = instr_costs(program.instrs, arch)
    if ideal_memory:
        costs = [FREE if i.queue in DMA_QUEUES else c for i, c in zip(program.instrs, costs)]
    check_cycles(costs)
    mem = None if timing_only else load_inputs(program, arch, inputs)
    execute = None if mem is None else _executor(program, mem, host)
    compiled = not serial and (engine == "compiled" or engine == "auto" and (
        execute is not None or "numba" in sys.modules or len(program.instrs) >= AUTO_COMPILED))
    timed = _run_compiled(program, arch, costs, cols, max_cycles, execute, progress) if compiled else None
    if timed is None:
        timed = _run_serial(program, arch, costs, execute, max_cycles) if serial else \
            _run_engine(program, arch, costs, execute, max_cycles, progress)
    cycles, units, times, totals, extra = timed
    outputs = dict(mem.dram) if mem is not None else {}   # the run's own buffers: no second copy of DRAM
    mode = ("serial" if serial else "concurrent") + (", ideal memory" if ideal_memory else "")
    return SimResult(
        program=program, arch=arch, mode=mode, cycles=cycles, units=units,
        dispatch=times[0], issue=times[1], start=times[2], end=times[3],
        dram_bytes_read=totals["dram_read"], dram_bytes_written=totals["dram_write"],
        spm_bytes=totals["spm_bytes"], acc_bytes=totals["acc_bytes"],
        macs=totals["macs"], warnings=list(report.warnings) + idle_units(arch, cols.key),
        wall_seconds=time.perf_counter() - t0, outputs=outputs, costs=costs, **extra)


def _executor(program: Program, mem: DeviceMemory, host: Mapping[str, Callable]) -> Callable:
    """``execute(pc, instr)``: apply an instruction's values to ``mem`` (its errors name the pc); every host function
    the program calls must be in ``host``."""
    mem.bounds_verified = True   # verify(program) and check_fits: every operand lies inside its memory
    from npusim.functional.execute import execute as apply

    missing = sorted({i.fn for i in program.instrs if isinstance(i, HostCall)} - set(host))
    if missing:
        raise SimulationError(f"the program calls host functions {', '.join(missing)} but no callables were "
                              f"supplied for them (host_functions=...); run timing-only to skip values")

    def execute(pc, ins):
        try:
            apply(ins, mem, host)
        except SimulationError as e:
            raise SimulationError(f"{where(pc, ins)}: {e}") from None
    return execute


def _run_compiled(program, arch, costs, cols, max_cycles, execute, progress):
    """The compiled timing evaluation's (cycles, units, times, totals, extra), the values applied in its retire
    order; None when the SimPy Engine must decide (a deadlock, the cycle cap, an overflow: it raises the error)."""
    from npusim.sim.compiled_timing import OK, run_compiled

    run = run_compiled(program, arch, costs, max_cycles, cols)
    if run.status != OK:
        return None
    if execute is not None:
        _apply_in_retire_order(program, run, execute, progress)
    elif progress is not None:
        total = len(run.retired)
        progress(total, total, run.cycles)
    return (run.cycles, run.units, (run.dispatch, run.issue, run.start, run.end), run.totals,
            {"resource_stalls": run.resource_stalls, "dispatcher_gaps": run.gaps})


def _run_engine(program, arch, costs, execute, max_cycles, progress):
    """The SimPy Engine's (cycles, units, times, totals, extra)."""
    sim = Engine(program, arch, execute, costs, progress)
    cycles = sim.run(max_cycles)
    return (cycles, sim.stats, (sim.dispatch, sim.issue, sim.start, sim.end), cost_totals(costs),
            {"resource_stalls": sim.resource_stalls, "dispatcher_gaps": sim.gaps})


def _apply_in_retire_order(program: Program, run, execute, progress) -> None:
    """``execute`` each instruction in the order the compiled run retired them (the Engine's order of execute
    calls), with ``progress(retired, total, cycle)`` about every total / 200 instructions and at the end."""
    instrs, order = program.instrs, run.retired.tolist()
    total = len(order)
    step = max(1, total // 200)
    for k, pc in enumerate(order, 1):
        execute(pc, instrs[pc])
        if progress is not None and (k % step == 0 or k == total):
            progress(k, total, int(run.end[pc]) if k < total else run.cycles)


def _run_serial(program: Program, arch: Arch, costs, execute, max_cycles: int | None = None):
    """One instruction at a time: each starts when the previous retires; semaphores must allow program order.
    Stops with SimulationError at the first instruction that ends after ``max_cycles``. Returns (cycles, units, times,
    totals, extra) as the concurrent runs do."""
    n = len(program.instrs)
    times = tuple(np.full(n, -1, np.int64) for _ in range(4))
    units = [UnitStats(u.name) for u in machine_units(arch)]
    index = machine(arch).index
    count = {s.name: s.init for s in program.sems}
    t = 0
    for pc, ins in enumerate(program.instrs):
        for op in ins.waits:
            if count[op.name] < op.count:
                raise DeadlockError(f"serial run blocked at {where(pc, ins)}: {op.name} has {count[op.name]}, "
                                    f"needs {op.count}")
            count[op.name] -= op.count
        if ins.queue is Queue.CTRL:
            continue
        c = costs[pc]
        for arr in times:
            arr[pc] = t
        t += c.cycles
        if max_cycles is not None and t > max_cycles:
            raise SimulationError(f"the cycle cap of {max_cycles} was reached in the serial run at {where(pc, ins)} "
                                  f"(it ends at cycle {t}); raise max_cycles (--max-cycles) or drop it")
        times[3][pc] = t
        units[index(ins.unit_key)].add_static(c)
        if execute is not None:
            execute(pc, ins)
        for op in ins.signals:
            count[op.name] += op.count
    for st in units:
        st.idle = t - st.busy - sum(st.stall.values())
    return t, units, times, cost_totals(costs), {}


def region_array(result: SimResult, name: str, dtype: DType, shape: tuple[int, ...]) -> np.ndarray:
    """A DRAM region's first bytes after the run, as an array of ``dtype`` (storage type) and ``shape``."""
    if name not in result.outputs:
        raise SimulationError(f"no DRAM region {name!r} in the result (timing-only runs keep no values)")
    n = int(np.prod(shape)) * dtype.size
    return result.outputs[name][:n].view(dtype.storage).reshape(shape)
