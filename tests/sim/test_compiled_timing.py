"""The compiled timing evaluation (npusim/sim/compiled_timing.py) equals the SimPy Engine: every field of SimResult, and
the same exception (type and message) where the Engine raises one."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from isa import DeadlockError, DType, NpuSimError, SimulationError
from isa.arch import Arch, load_arch
from isa.asm import parse_program
from npusim import simulate
from npusim.app.golden import golden_names, load
from npusim.sim.simulator import SimResult
from tests.isa.strategies import ADD, HEAD, LOAD, STORE, synced_programs

_SKIP = {"wall_seconds"}


def outcome(program, arch: Arch, engine: str, **kw):
    """The timing-only run's every SimResult field (arrays as lists), or the exception it raised (type, message)."""
    try:
        r = simulate(program, arch, timing_only=True, engine=engine, **kw)
    except NpuSimError as e:
        return type(e), str(e)
    out = {}
    for f in dataclasses.fields(SimResult):
        if f.name not in _SKIP:
            v = getattr(r, f.name)
            out[f.name] = (v.dtype.str, v.tolist()) if isinstance(v, np.ndarray) else v
    return out


def same(program, arch: Arch, **kw):
    """Assert both engines give the same outcome; return it."""
    a, b = outcome(program, arch, "compiled", **kw), outcome(program, arch, "simpy", **kw)
    if isinstance(a, dict) and isinstance(b, dict):
        for k in b:
            assert a[k] == b[k], f"{k} differs"
    assert a == b
    return b


def _golden(name: str):
    g = load(name)
    return parse_program(g.program), load_arch(g.report["preset"])


@pytest.mark.parametrize("name", golden_names())
def test_goldens(name):
    program, arch = _golden(name)
    assert same(program, arch)["cycles"] == load(name).report["cycles"]


CONTENDED = {   # overrides -> what must happen in at least one of the programs
    "spm.ports=1": "sram_port", "acc.ports=1": "sram_port", "dma.channels=1": "dma_channel",
    "queues.depth=1": "queue_full", "queues.depth=2": "queue_full"}


@pytest.mark.parametrize("override", [*CONTENDED, "spm.ports=1,acc.ports=1,dma.channels=1,queues.depth=1"])
def test_contention(override):
    overrides = override.split(",")
    seen = set()
    for name in ("gemm512-edge16", "conv_transpose-edge16", "bert_layer-mid32", "resnet18-mid32"):
        program, arch = _golden(name)
        r = same(program, arch.with_overrides(overrides))
        seen |= {c for _, _, _, c in r["resource_stalls"]} | {c for _, _, c, _ in r["dispatcher_gaps"]}
        seen |= {c for u in r["units"] for c, v in u.stall.items() if v}
    assert {CONTENDED[o] for o in overrides} <= seen


def test_ideal_memory():
    for name in ("gemm512-edge16", "bert_layer-mid32"):
        program, arch = _golden(name)
        assert same(program, arch, ideal_memory=True)["mode"] == "concurrent, ideal memory"


def test_small_spm():
    from compiler.kernels.common.target import Target
    from compiler.kernels.gemm import tiled_gemm

    arch = load_arch("edge16", ["spm.size=8192", "queues.depth=2"])
    r = same(tiled_gemm(96, 80, 112, DType.I8, Target.of(arch)), arch)
    assert any(u.stall["semaphore"] for u in r["units"])


# hand-written programs -----------------------------------------------------------------------------------------



def test_ping_pong():
    body = "".join(f"{LOAD} wait(empty) signal(full)\n{ADD} wait(full) signal(done)\n{STORE} wait(done) "
                   f"signal(empty)\n" for _ in range(20))
    program = parse_program(HEAD + ".sem full 0\n.sem done 0\n.sem empty 1\n" + body + "barrier\n" + body + "halt\n")
    r = same(program, Arch())
    assert r["units"][0].stall["semaphore"] and any(c == "barrier" for _, _, c, _ in r["dispatcher_gaps"])


def test_deadlock():
    text = HEAD + ".sem a 0\n.sem b 0\n" + f"{LOAD}\nmxu.sync wait(b) signal(a)\nvpu.sync wait(a) signal(b)\nhalt\n"
    kind, message = same(parse_program(text), Arch())
    assert kind is DeadlockError and message.startswith("deadlock at cycle ")


def test_max_cycles():
    program = parse_program(HEAD + f"{LOAD}\n{ADD}\n{STORE}\nhalt\n")
    cycles = same(program, Arch())["cycles"]
    assert same(program, Arch(), max_cycles=cycles)["cycles"] == cycles
    kind, message = same(program, Arch(), max_cycles=cycles - 1)
    assert kind is SimulationError and message.startswith(f"the cycle cap of {cycles - 1} was reached")


def test_semaphore_overflow():
    # the producer's three signals land before the slow consumer's first wait: 300 > 255 at run time, never in
    # program order (which verify bounds)
    slow = "vpu.act.exp shape[64,64] dst=spm:0x4000<f32>{256,4} src=spm:0x2000<f16>{128,2}"
    text = HEAD + ".sem s 0\n" + f"{slow}\n" + "dma.ld.sync signal(s*100)\nvpu.sync wait(s*100)\n" * 3 + "halt\n"
    kind, message = same(parse_program(text), Arch())
    assert kind is SimulationError and re.search(r"semaphore s reaches 300 > 255", message)


@pytest.mark.parametrize("body", ["", "halt\n", "barrier\nhalt\n", f"{LOAD}\nbarrier\nbarrier\n{STORE}\n",
                                  f"{LOAD}\n{LOAD}\n{LOAD}\nhalt\n"])
def test_degenerate_programs(body):
    r = same(parse_program(HEAD + body), Arch().with_overrides(["queues.depth=1"]))
    assert r["cycles"] == max([0, *r["end"][1]])


def test_progress_once_at_the_end():
    program, arch = _golden("gemm512-mid32")
    calls = []
    r = simulate(program, arch, timing_only=True, progress=lambda *a: calls.append(a))
    n = int(np.count_nonzero(r.end >= 0))
    assert calls == [(n, n, r.cycles)]


def test_engine_choice():
    program, arch = _golden("conv3x3-mid32")
    with pytest.raises(SimulationError, match="engine must be one of auto, simpy, compiled, not 'numba'"):
        simulate(program, arch, timing_only=True, engine="numba")


# values: the kernels applied in the compiled run's retire order ------------------------------------------------
def values(program, arch, engine, inputs=None, **kw):
    """A values run's outcome: every field (as ``outcome``) and each DRAM region's bytes, or its exception."""
    try:
        r = simulate(program, arch, inputs, engine=engine, **kw)
    except NpuSimError as e:
        return type(e), str(e)
    out = {f.name: getattr(r, f.name) for f in dataclasses.fields(SimResult) if f.name not in _SKIP | {"outputs"}}
    out.update({k: v.tolist() for k in ("dispatch", "issue", "start", "end") for v in [out[k]]})
    return out | {"outputs": {k: v.tobytes() for k, v in r.outputs.items()}}


def same_values(program, arch, inputs=None, **kw):
    a, b = values(program, arch, "compiled", inputs, **kw), values(program, arch, "simpy", inputs, **kw)
    assert a == b
    return b


def _host_post(dram):   # (MIX's host.call: reads X, writes Y, so its place in the retire order shows)
    dram["Y"][:64] = dram["X"][:64] + dram["Y"][64:128]


def test_values_seed_programs():
    from tests.fuzz.fixtures import gemm_inputs, seed_programs

    rng = np.random.default_rng(0)
    for text in seed_programs():
        program = parse_program(text)
        inputs = {r.name: rng.integers(0, 256, r.size, dtype=np.uint8) for r in program.regions}
        r = same_values(program, Arch(), inputs, host_functions={"post": _host_post})
        assert isinstance(r, dict) or r[0] is DeadlockError
    r = same_values(parse_program(open("examples/gemm_int8.s").read()), Arch(), gemm_inputs())
    assert np.array_equal(np.frombuffer(r["outputs"]["C"], np.int32)[:np.load("examples/gemm_int8.expected.npy").size],
                          np.load("examples/gemm_int8.expected.npy").ravel())


def test_values_kernel_error_is_the_engines():
    """A host function's refusal is raised at the same instruction with the same message."""
    program = parse_program(HEAD + ".sem s 0\n" + f"{LOAD}\nhost.call fn=f rd=64 wr=64 ops=1 signal(s)\n"
                            f"{ADD} wait(s)\nhalt\n")

    def shrink(dram):
        dram["X"] = dram["X"][:8]

    kind, message = same_values(program, Arch(), host_functions={"f": shrink})
    assert kind is SimulationError and message.startswith("pc 1 `host.call fn=f")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(synced_programs(), st.integers(0, 2**32 - 1))
def test_values_random_synced_programs(case, seed):
    text, arch, max_cycles = case
    program = parse_program(text)
    rng = np.random.default_rng(seed)
    inputs = {r.name: rng.integers(0, 256, r.size, dtype=np.uint8) for r in program.regions}
    same_values(program, arch, inputs, max_cycles=max_cycles, host_functions={"post": _host_post})


def test_values_progress():
    program, arch = _golden("gemm512-mid32")
    calls = []
    r = simulate(program, arch, progress=lambda *a: calls.append(a))
    n = int(np.count_nonzero(r.end >= 0))
    assert calls[-1] == (n, n, r.cycles) and len(calls) >= 10
    assert [k for k, _, _ in calls] == sorted(k for k, _, _ in calls)


# random synchronised programs ----------------------------------------------------------------------------------
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(synced_programs())
def test_random_synced_programs(case):
    text, arch, max_cycles = case
    try:
        program = parse_program(text)
    except NpuSimError:
        return
    same(program, arch, max_cycles=max_cycles)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_fuzz_asm_cases(data):
    from tests.fuzz.cases import asm_cases

    case = data.draw(asm_cases())
    try:
        program = parse_program(case.data.decode("utf-8"))
    except (NpuSimError, UnicodeDecodeError):
        return
    same(program, Arch())


def test_auto_leaves_numba_unloaded_for_a_small_timing_only_run():
    """engine="auto" does not import numba (0.65 CPU s) for a timing-only program under AUTO_COMPILED instructions
    in a process that has not loaded it; with values (the kernels need it) or engine="compiled" it does."""
    import subprocess
    import sys

    code = ("import sys; from tests.sim.test_compiled_timing import _golden; from npusim import simulate; "
            "simulate(*_golden('conv3x3-mid32'), timing_only=True, engine='{}'); print('numba' in sys.modules)")
    seen = [subprocess.run([sys.executable, "-c", code.format(e)], capture_output=True, text=True, check=True)
            .stdout.split() for e in ("auto", "compiled")]
    assert seen == [["False"], ["True"]]
