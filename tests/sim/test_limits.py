"""Runs are estimated before they start (instructions, element operations, memory, cycles) and refused above the
limits with the numbers; limits=None lifts them. Timing-only runs are limited by instructions and cycles only."""

import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from isa import DType, LimitError
from isa.arch import load_arch
from isa.asm import parse_program
from npusim import simulate
from npusim.app.driver import run_conv, run_gemm
from npusim.sim.limits import (
    INSTRUCTION_SECONDS,
    RATES,
    Limits,
    Work,
    instr_elements,
    machine_memory,
    minutes,
    program_work,
    rate_kind,
)
from tests.fuzz.fixtures import EXAMPLES

EDGE = load_arch("edge16")
GEMM = parse_program((EXAMPLES / "gemm_int8.s").read_text())
# one DMA broadcasting a byte over 65535 x 65535 elements: in bounds, 4.3 G element operations with values
BROADCAST = parse_program(".config rows=16 cols=16 spm=262144 acc=65536\n.region X r0 64\n"
                          "dma.ld shape[65535,65535] dst=spm:0x0<i8>{0,0} src=dram:X+0x0<i8>{0,0}\n")
HUGE_REGIONS = parse_program(".config rows=16 cols=16 spm=262144 acc=65536\n" + "".join(
    f".region R{i} r{i} 4294967295\n" for i in range(3)) + "halt\n")


def test_a_run_with_values_holds_its_regions_once():
    """The memory estimate counts each region once; the run copied every region again for its outputs (the fuzzer:
    1.77 GB of regions failed with MemoryError in a 4 GiB address space)."""
    import tracemalloc

    program = parse_program(".config rows=16 cols=16 spm=262144 acc=65536\n.region X r0 67108864\nhalt\n")
    simulate(GEMM, EDGE, {})   # the simulator's modules and kernels loaded first: only the run's own memory is traced
    tracemalloc.start()
    try:
        result = simulate(program, EDGE, {"X": np.arange(16, dtype=np.uint8)})
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.outputs["X"].size == 67108864 and list(result.outputs["X"][:16]) == list(range(16))
    assert peak < 67108864 * 1.25, peak


def test_memory_the_machine_cannot_allocate_is_a_limit_error(tmp_path):
    """In a process whose address space is 256 MiB short of a 1 GiB region, the run is refused as a LimitError, not
    a MemoryError (the fuzzer's workers run under such a limit)."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import resource
        import numpy as np
        from isa.arch import load_arch
        from isa.asm import parse_program
        from npusim import simulate
        p = parse_program(".config rows=16 cols=16 spm=262144 acc=65536\\n.region X r0 1073741824\\nhalt\\n")
        with open("/proc/self/statm") as f:
            used = int(f.read().split()[0]) * resource.getpagesize()
        resource.setrlimit(resource.RLIMIT_AS, (used + (768 << 20), resource.RLIM_INFINITY))
        try:
            simulate(p, load_arch("edge16"), {"X": np.zeros(4, np.uint8)})
        except Exception as e:
            print(type(e).__name__, e)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                         env={**__import__("os").environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert out.stdout.strip() == ("LimitError this machine could not allocate the run's device memory, 1,074,069,504 "
                                  "B (SPM, ACC and the DRAM regions); run timing-only, or with smaller regions"), out


def test_too_many_instructions():
    with pytest.raises(LimitError) as e:
        simulate(GEMM, EDGE, timing_only=True, limits=Limits(instructions=100))
    assert str(e.value) == ("simulating 109 instructions would need 109 instructions (limit 100); lift the limits "
                            "with --no-limits (Python: limits=None)")


def test_too_much_work_with_values_but_not_timing_only():
    """The fuzzer's hangs on zero-stride DMAs of 65535**2 elements: refused at once with values; timing only they
    run, the cost model being periodic."""
    t0 = time.perf_counter()
    with pytest.raises(LimitError, match=r"^simulating 1 instruction would need about 14 s of simulation with values "
                                         r"\(limit 10 s: 4,294,836,225 element operations at the value "
                                         r"kernels' measured rates\); lift the limits with --no-limits \(Python: "
                                         r"limits=None\), or run timing-only$"):
        simulate(BROADCAST, EDGE, limits=Limits(seconds=10))
    result = simulate(BROADCAST, EDGE, timing_only=True)
    assert result.cycles > 65535**2 // EDGE.spm.bank_width // EDGE.spm.banks
    assert time.perf_counter() - t0 < 5


def test_too_much_memory_with_values():
    with pytest.raises(LimitError) as e:
        simulate(HUGE_REGIONS, EDGE, limits=Limits(memory=4 << 30))
    assert str(e.value) == ("simulating 1 instruction would need 12,885,229,565 bytes of memory (limit "
                            "4,294,967,296); lift the limits with --no-limits (Python: limits=None), or run "
                            "timing-only")
    assert simulate(HUGE_REGIONS, EDGE, timing_only=True, limits=Limits(memory=4 << 30)).cycles == 0


def test_the_default_memory_limit_is_what_the_machine_holds():
    """Refused only what this machine (or the process's address-space limit) cannot hold: a byte more than it."""
    limits = Limits()
    assert limits.memory == machine_memory() > 0
    held = Work(1, 0, 0.0, machine_memory())
    limits.check("a run", held, timing_only=False)
    with pytest.raises(LimitError) as e:
        limits.check("a run", replace(held, memory=held.memory + 1), timing_only=False)
    assert str(e.value) == (f"a run would need {held.memory + 1:,} bytes of memory (limit {held.memory:,}: what this "
                            f"machine holds); lift the limits with --no-limits (Python: limits=None), or run "
                            f"timing-only")


def test_cycles_that_would_overflow_are_refused_whatever_the_limits():
    program = parse_program(".config rows=16 cols=16 spm=262144 acc=65536\n"
                            "host.call fn=f rd=9223372036854775807 wr=0 ops=9223372036854775807\nhalt\n")
    with pytest.raises(LimitError, match=r"^the program could run for up to \d{1,3}(,\d{3})+ cycles, more than the "
                                         r"simulator counts \(2\*\*62\); split its largest instructions$"):
        simulate(program, EDGE.with_overrides(["host.gops=0.4"]), timing_only=True, limits=None)


def test_layers_are_estimated_before_anything_is_built():
    """npusim gemm 1000000 1000000 1000000 took 7.7 s to die of MemoryError; now refused in milliseconds."""
    t0 = time.perf_counter()
    with pytest.raises(LimitError) as e:
        run_gemm(10**6, 10**6, 10**6, DType.I8, EDGE, limits=Limits(memory=4 << 30))
    assert str(e.value) == (
        "GEMM 1000000x1000000x1000000 would need 122,070,313 instructions (limit 2,000,000); about 83,340 h of "
        "simulation with values (limit 10 min: 3,000,006,000,000,000,000 element operations at the value "
        "kernels' measured rates); 34,000,000,327,680 bytes of memory (limit 4,294,967,296); lift the limits with "
        "--no-limits (Python: limits=None)")
    from compiler.kernels.conv2d import ConvShape

    with pytest.raises(LimitError, match=r"^conv 1x64x4096x4096 \* 64x64x3x3 would need 262,016 instructions \("):
        run_conv(ConvShape(1, 64, 4096, 4096, 64, 3, 3), DType.I8, EDGE, limits=Limits(instructions=10_000))
    assert time.perf_counter() - t0 < 1


def test_a_matmul_of_tiny_tiles_counts_its_accumulator_updates():
    """A fuzzed binary: mxu.mm over 3 x 3 x 65535 points of 6 x 8 x 16 took 13 s with values for 453 M MACs (the
    kernel pays per accumulator element); the estimate counts 32 operations per update besides the MACs."""
    program = parse_program(
        ".config rows=16 cols=16 spm=262144 acc=65536\n"
        "mxu.mm.z shape[3,3,65535] m=6 k=8 n=16 acc=acc:0x0<i32>{0,0,0} acc.row=64 a=spm:0x0<i8>{64,8,0} a.row=8 "
        "b=spm:0x200<i8>{768,256,0}\n")
    macs, updates = 3 * 3 * 65535 * 6 * 8 * 16, 3 * 3 * 65535 * 6 * 16
    with pytest.raises(LimitError, match=rf"would need about 0.2 s of simulation with values \(limit 0.1 s: "
                                         rf"{macs + 32 * updates:,} element operations"):
        simulate(program, EDGE, limits=Limits(seconds=0.1))
    assert simulate(program, EDGE, timing_only=True, limits=Limits(seconds=0.1)).cycles > 0


def test_a_run_just_over_the_time_limit_is_refused_with_its_expected_time_and_just_under_runs():
    """The time limit compares the estimate (element operations of each kernel kind at its measured rate, plus a
    per-instruction cost) with the limit: a hair above is refused naming the expected time, a hair below runs."""
    work = program_work(GEMM, EDGE)
    kinds = Counter(rate_kind(i) for i in GEMM.instrs)
    assert work.elements == sum(instr_elements(i) for i in GEMM.instrs) > 0 and kinds["matmul"] and kinds["dma"]
    per_kind = {k: sum(instr_elements(i) for i in GEMM.instrs if rate_kind(i) == k) for k in RATES}
    assert work.seconds == pytest.approx(len(GEMM.instrs) * INSTRUCTION_SECONDS +
                                         sum(n / RATES[k] for k, n in per_kind.items()))
    with pytest.raises(LimitError) as e:
        simulate(GEMM, EDGE, limits=Limits(seconds=work.seconds * 0.999))
    assert str(e.value).startswith(f"simulating 109 instructions would need about {minutes(work.seconds)} of "
                                   f"simulation with values (limit {minutes(work.seconds * 0.999)}: "
                                   f"{work.elements:,} element operations at the value kernels' measured rates); ")
    assert simulate(GEMM, EDGE, limits=Limits(seconds=work.seconds * 1.001)).cycles > 0


@pytest.mark.parametrize("seconds,text", [(0.25, "0.2 s"), (45, "45 s"), (89.4, "89 s"), (600, "10 min"),
                                          (190, "3.2 min"), (9000, "2.5 h"), (3600 * 1234, "1,234 h")])
def test_durations_read_as_a_person_says_them(seconds, text):
    assert minutes(seconds) == text
