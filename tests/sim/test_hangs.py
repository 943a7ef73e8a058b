"""Run-time edges: a stuck program is a DeadlockError naming the blocked units, whatever else is scheduled (cycle
cap, progress reporter); a program still running at the cap is a SimulationError (concurrent or serial); a program
that fits the cap runs unchanged; a semaphore overflowing at run time says where."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from isa import (
    Barrier,
    DeadlockError,
    DmaCopy,
    DType,
    Halt,
    HostCall,
    Program,
    ProgramConfig,
    Queue,
    Region,
    SemDecl,
    SemOp,
    SimulationError,
    Space,
    Sync,
    View,
)
from isa.arch import load_arch
from isa.cost import instr_cost
from isa.verify import where
from npusim import simulate

ROOT = Path(__file__).resolve().parents[2]
CFG = ProgramConfig(rows=16, cols=16, spm=262144, acc=65536)
EDGE = load_arch("edge16")
LOAD = DmaCopy(queue=Queue.DMA_LD, shape=(64, 64), dst=View(Space.SPM, 0, DType.I8, (64, 1)),
               src=View(Space.DRAM, 0, DType.I8, (64, 1), "A"))
CROSS = Program(CFG, (), (SemDecl("mxu_done", 0), SemDecl("vpu_done", 0)), (
    Sync(on=Queue.MXU, waits=(SemOp("vpu_done"),), signals=(SemOp("mxu_done"),)),
    Sync(on=Queue.VPU, waits=(SemOp("mxu_done"),), signals=(SemOp("vpu_done"),)), Halt()))
# mxu waits for a token that vpu gives only after a barrier, and the barrier waits for mxu: the load retires, then
# mxu is the one unit left, forever
LONE = Program(CFG, (Region("A", 0, 4096),), (SemDecl("go", 0),), (
    LOAD, Sync(on=Queue.MXU, waits=(SemOp("go"),)), Barrier(), Sync(on=Queue.VPU, signals=(SemOp("go"),)), Halt()))
HOST = Program(CFG, (), (SemDecl("host_done", 0), SemDecl("st_done", 0)), (
    HostCall(fn="post", ops=100, waits=(SemOp("st_done"),), signals=(SemOp("host_done"),)),
    Sync(on=Queue.DMA_ST, waits=(SemOp("host_done"),), signals=(SemOp("st_done"),)), Halt()))
RUNS = [{}, {"max_cycles": 1}, {"max_cycles": 5000}, {"max_cycles": 10**12}]


def progress_log():
    calls = []
    return calls, lambda *a: calls.append(a)


def deadlock(program: Program, with_progress: bool, **kw) -> tuple[str, list]:
    """The DeadlockError message simulating ``program`` raises, and the progress reporter's calls (if it had one)."""
    calls, progress = progress_log()
    with pytest.raises(DeadlockError) as err:
        simulate(program, EDGE, timing_only=True, progress=progress if with_progress else None, **kw)
    return str(err.value), calls


@pytest.mark.parametrize("with_progress", [False, True], ids=["plain", "progress"])
@pytest.mark.parametrize("kw", RUNS, ids=["uncapped", "cap1", "cap5000", "cap1e12"])
def test_cross_wait_is_a_deadlock_under_any_cap_and_progress(kw, with_progress):
    msg, calls = deadlock(CROSS, with_progress, **kw)
    assert msg.startswith("deadlock at cycle 0: mxu blocked at pc 0 `mxu.sync wait(vpu_done) signal(mxu_done)` "
                          "waiting on vpu_done (have 0, need 1); vpu blocked at pc 1 ")
    assert msg.endswith("wait-for cycle: mxu -> vpu -> mxu")
    assert all(retired == 0 and total == 2 for retired, total, _ in calls)


@pytest.mark.parametrize("with_progress", [False, True], ids=["plain", "progress"])
@pytest.mark.parametrize("kw", RUNS[:1] + RUNS[2:], ids=["uncapped", "cap5000", "cap1e12"])
def test_one_unit_stuck_after_the_others_finished(kw, with_progress):
    msg, calls = deadlock(LONE, with_progress, **kw)
    load = instr_cost(LOAD, EDGE).cycles  # the load runs alone from cycle 0: the last thing that happens
    assert msg == (f"deadlock at cycle {load}: mxu blocked at pc 1 `mxu.sync wait(go)` waiting on go "
                   f"(have 0, need 1); dispatcher blocked at pc 2 (`barrier`) until 1 instructions retire")
    if with_progress:
        assert calls[-1] == (1, 3, load)


def test_stuck_after_the_cap_is_the_cap():
    load = instr_cost(LOAD, EDGE).cycles
    with pytest.raises(SimulationError) as err:
        simulate(LONE, EDGE, timing_only=True, max_cycles=load - 1)
    assert type(err.value) is SimulationError
    assert str(err.value).startswith(f"the cycle cap of {load - 1} was reached with 2 instructions in flight")


@pytest.mark.parametrize("with_progress", [False, True], ids=["plain", "progress"])
@pytest.mark.parametrize("kw", RUNS, ids=["uncapped", "cap1", "cap5000", "cap1e12"])
def test_deadlock_involving_the_host_unit(kw, with_progress):
    msg, _ = deadlock(HOST, with_progress, **kw)
    assert msg.startswith("deadlock at cycle 0: dma.st blocked at pc 1 `dma.st.sync wait(host_done) "
                          "signal(st_done)` waiting on host_done (have 0, need 1); host blocked at pc 0 "
                          "`host.call fn=post rd=0 wr=0 ops=100 wait(st_done) signal(host_done)` waiting on st_done "
                          "(have 0, need 1)")
    assert msg.endswith("; wait-for cycle: dma.st -> host -> dma.st")


def gemm_program():
    from compiler.kernels.common.target import Target
    from compiler.kernels.gemm import tiled_gemm

    return tiled_gemm(64, 64, 64, DType.I8, Target.of(EDGE))


@pytest.mark.parametrize("with_progress", [False, True], ids=["plain", "progress"])
def test_the_cap_is_inclusive_and_leaves_cycles_unchanged(with_progress):
    p = gemm_program()
    full = simulate(p, EDGE, timing_only=True)
    _, progress = progress_log()
    capped = simulate(p, EDGE, timing_only=True, max_cycles=full.cycles, progress=progress if with_progress else None)
    assert capped.cycles == full.cycles and (capped.end == full.end).all()
    with pytest.raises(SimulationError) as err:
        simulate(p, EDGE, timing_only=True, max_cycles=full.cycles - 1, progress=progress if with_progress else None)
    assert type(err.value) is SimulationError
    assert re.fullmatch(rf"the cycle cap of {full.cycles - 1} was reached with [1-9]\d* instructions in flight "
                        r"\(the dispatcher is at pc \d+ of \d+\); raise max_cycles \(--max-cycles\) or drop it",
                        str(err.value))


def test_serial_run_stops_at_the_cap():
    p = gemm_program()
    full = simulate(p, EDGE, timing_only=True, serial=True)
    assert simulate(p, EDGE, timing_only=True, serial=True, max_cycles=full.cycles).cycles == full.cycles
    first = instr_cost(p.instrs[0], EDGE).cycles  # serial: pc 0 runs alone from cycle 0
    with pytest.raises(SimulationError) as err:
        simulate(p, EDGE, timing_only=True, serial=True, max_cycles=first - 1)
    assert str(err.value) == (f"the cycle cap of {first - 1} was reached in the serial run at {where(0, p.instrs[0])} "
                              f"(it ends at cycle {first}); raise max_cycles (--max-cycles) or drop it")


def test_semaphore_overflow_at_run_time_says_where():
    # program order never holds more than 100 tokens (the static scan passes, the serial run too), but the zero-cost
    # mxu syncs all retire at cycle 0 before vpu takes any: the third signal (pc 4) reaches 300
    instrs = [Sync(on=Queue.MXU, signals=(SemOp("s", 100),)), Sync(on=Queue.VPU, waits=(SemOp("s", 100),))] * 3
    p = Program(CFG, (), (SemDecl("s", 0),), (*instrs, Halt()))
    assert simulate(p, EDGE, timing_only=True, serial=True).cycles == 0
    with pytest.raises(SimulationError) as err:
        simulate(p, EDGE, timing_only=True)
    assert str(err.value) == ("pc 4 `mxu.sync signal(s*100)` at cycle 0: semaphore s reaches 300 > 255: its producer "
                              "ran ahead of its consumer; bound it with an 'empty' semaphore the consumer signals")


@pytest.mark.parametrize("serial", [False, True], ids=["concurrent", "serial"])
@pytest.mark.parametrize("bad", [-1, 2.5, True, "100"])
def test_bad_max_cycles(bad, serial):
    with pytest.raises(SimulationError) as err:
        simulate(CROSS, EDGE, timing_only=True, serial=serial, max_cycles=bad)
    assert str(err.value) == f"max_cycles must be an integer >= 0 or None, not {bad!r}"


def test_cli_deadlock_under_a_cap_is_one_line():
    proc = subprocess.run([sys.executable, "-m", "npusim", "simulate", "examples/deadlock.s", "--max-cycles", "1000"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and proc.stdout == ""
    (line,) = proc.stderr.splitlines()
    assert line.startswith("npusim: error: deadlock at cycle 0: mxu blocked at pc 0")
    assert line.endswith("wait-for cycle: mxu -> vpu -> mxu")
