"""Chrome/Perfetto traces: the format, exact per-unit accounting against the report, counters, flows, progress."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from isa import DmaCopy, Queue
from isa.arch import load_arch
from isa.cost import instr_cost
from isa.files import read_program
from npusim import simulate
from npusim.app.driver import run_model
from npusim.app.zoo import resnet18
from npusim.report.trace import CHANNEL_TID, chrome_trace, semaphore_flows, spm_live_intervals, write_trace
from npusim.sim.stats import STALL_CAUSES

ROOT = Path(__file__).resolve().parents[2]
GEMM = ROOT / "examples" / "gemm_int8.s"
NUMBER = (int, float)


@pytest.fixture(scope="module")
def resnet():
    compiled, result, _, _ = run_model(resnet18(), load_arch("mid32"), timing_only=True)
    return compiled, result, chrome_trace(result, compiled.layers)


@pytest.fixture(scope="module")
def gemm():
    result = simulate(read_program(GEMM), load_arch("edge16"), timing_only=True)
    return result, chrome_trace(result)


def cycles(result, us: float) -> int:
    """A trace time (microseconds) back in cycles."""
    return round(us * result.arch.clock.ghz * 1e3)


def spans(result, trace, cat=None) -> dict[int, list[tuple[int, int, dict]]]:
    """X events per thread as (start cycle, duration cycles, event), in file order."""
    out = defaultdict(list)
    for e in trace["traceEvents"]:
        if e["ph"] == "X" and (cat is None or e["cat"] == cat):
            out[e["tid"]].append((cycles(result, e["ts"]), cycles(result, e["dur"]), e))
    return out


def check_format(trace: dict) -> None:
    """The Trace Event Format's JSON object form, field by field per phase."""
    assert isinstance(trace["traceEvents"], list) and trace["traceEvents"]
    flows = defaultdict(dict)
    for e in trace["traceEvents"]:
        assert e["ph"] in ("X", "C", "M", "s", "f"), e
        assert isinstance(e["pid"], int) and isinstance(e["name"], str), e
        if e["ph"] == "X":
            assert isinstance(e["tid"], int) and isinstance(e["cat"], str) and isinstance(e["args"], dict)
            assert isinstance(e["ts"], NUMBER) and e["ts"] >= 0 and isinstance(e["dur"], NUMBER) and e["dur"] >= 0
        elif e["ph"] == "C":
            assert isinstance(e["ts"], NUMBER) and e["args"]
            assert all(isinstance(v, NUMBER) for v in e["args"].values()), e
        elif e["ph"] == "M":
            assert e["name"] in ("process_name", "thread_name", "thread_sort_index") and isinstance(e["args"], dict)
        else:
            assert isinstance(e["tid"], int) and isinstance(e["ts"], NUMBER) and isinstance(e["id"], int)
            assert e["id"] not in flows[e["ph"]], "flow ids are unique per end"
            flows[e["ph"]][e["id"]] = e
            if e["ph"] == "f":
                assert e["bp"] == "e"
    assert flows["s"].keys() == flows["f"].keys(), "every flow start has its end"
    for i, s in flows["s"].items():
        assert s["ts"] <= flows["f"][i]["ts"] + 1e-6 * 2
    json.dumps(trace)


def check_accounting(result, trace) -> None:
    """Per unit track: spans never overlap, instruction spans sum to busy, stall spans per cause to the stalls."""
    per_tid = spans(result, trace)
    for k, unit in enumerate(result.units):
        track = per_tid.get(k + 1, [])
        starts = [s for s, _, _ in track]
        assert starts == sorted(starts), "timestamps are monotone per track"
        for (s0, d0, _), (s1, _, _) in zip(track, track[1:]):
            assert s0 + d0 <= s1, f"{unit.name}: spans overlap at cycle {s1}"
        assert all(0 <= s and s + d <= result.cycles for s, d, _ in track)
        instr = [d for _, d, e in track if e["cat"] == "instr"]
        assert len(instr) == unit.instructions
        assert sum(instr) == unit.busy
        for cause in STALL_CAUSES:
            got = sum(d for _, d, e in track if e["cat"] == "stall" and e["args"]["cause"] == cause)
            assert got == unit.stall[cause], f"{unit.name} {cause}"
        assert sum(d for _, d, _ in track) == result.cycles - unit.idle


def counter(trace, name) -> tuple[list[float], list[float]]:
    ev = [e for e in trace["traceEvents"] if e["ph"] == "C" and e["name"] == name]
    return [e["ts"] for e in ev], [next(iter(e["args"].values())) for e in ev]


def check_counters(result, trace) -> None:
    prog = result.program
    for s in prog.sems:
        ts, values = counter(trace, f"sem {s.name}")
        assert ts == sorted(ts) and ts[0] == 0 and values[0] >= 0
        assert min(values) >= 0
        final = s.init + sum(o.count for i in prog.instrs for o in i.signals if o.name == s.name) \
            - sum(o.count for i in prog.instrs for o in i.waits if o.name == s.name)
        assert values[-1] == final
    # DRAM bandwidth: the step function's integral is every DRAM byte moved
    ts, gbs = counter(trace, "DRAM bandwidth")
    assert ts == sorted(ts) and gbs[-1] == 0
    moved = sum(v * (b - a) * 1e3 for a, b, v in zip(ts, ts[1:], gbs))   # GB/s x us = kB
    assert moved == pytest.approx(result.dram_bytes_read + result.dram_bytes_written, rel=1e-3)
    # SPM occupancy: never negative, never above the SPM, back to zero at the end
    ts, level = counter(trace, "SPM occupancy")
    assert ts == sorted(ts) and min(level) >= 0 and max(level) <= result.arch.spm.size and level[-1] == 0


def check_flows(result, trace) -> None:
    """Each arrow goes from an instruction signalling a semaphore to one that waited on it (and blocked), and the
    signal retired exactly when the wait was granted."""
    pairs = semaphore_flows(result)
    assert pairs
    instrs = result.program.instrs
    for src, dst, sem in pairs:
        assert sem in [o.name for o in instrs[src].signals] and sem in [o.name for o in instrs[dst].waits]
        assert result.end[src] == result.issue[dst] > result.popped[dst]
    assert sum(e["ph"] == "s" for e in trace["traceEvents"]) == len(pairs)


def test_resnet18_trace_is_valid_chrome_json(resnet):
    check_format(resnet[2])


def test_resnet18_spans_add_up_to_the_report(resnet):
    _, result, trace = resnet
    check_accounting(result, trace)


def test_resnet18_counters(resnet):
    _, result, trace = resnet
    check_counters(result, trace)


def test_resnet18_flows(resnet):
    _, result, trace = resnet
    check_flows(result, trace)


def test_resnet18_spans_carry_layer_names_and_metadata(resnet):
    compiled, result, trace = resnet
    layer_of = {pc: lr.name for lr in compiled.layers for pc in range(lr.start, lr.end)}
    instr = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["cat"] == "instr"]
    assert all(e["args"]["layer"] == layer_of.get(e["args"]["pc"]) for e in instr)
    assert any(e["args"]["macs"] > 0 for e in instr)
    assert trace["otherData"]["arch"] == result.arch.to_dict()
    assert trace["otherData"]["us_per_cycle"] == pytest.approx(1 / (result.arch.clock.ghz * 1e3))
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert {u.name for u in result.units} | {f"dma channel {c}" for c in range(result.arch.dma.channels)} == names


def test_dma_channel_tracks_never_overlap(resnet):
    _, result, trace = resnet
    dma = [pc for pc, i in enumerate(result.program.instrs) if i.queue in (Queue.DMA_LD, Queue.DMA_ST)]
    per_tid = spans(result, trace, "dma")
    assert sum(len(v) for v in per_tid.values()) == len(dma)
    assert set(per_tid) <= {CHANNEL_TID + c for c in range(result.arch.dma.channels)}
    for track in per_tid.values():
        for (s0, d0, _), (s1, _, _) in zip(track, track[1:]):
            assert s0 + d0 <= s1


def test_gemm_spans_follow_the_cost_model(gemm):
    """Each instruction's spans, derived by hand from the result arrays and isa.cost."""
    result, trace = gemm
    check_format(trace)
    check_accounting(result, trace)
    check_counters(result, trace)
    check_flows(result, trace)
    arch, instrs = result.arch, result.program.instrs
    by_pc = defaultdict(dict)
    for track in spans(result, trace).values():
        for s, d, e in track:
            if e["tid"] < CHANNEL_TID:
                by_pc[e["args"]["pc"]][e["args"].get("cause", "instr")] = (s, d)
    for pc, ins in enumerate(instrs):
        if ins.queue is Queue.CTRL:
            continue
        c = instr_cost(ins, arch)
        start, end = int(result.start[pc]), int(result.end[pc])
        busy = c.cycles - c.conflict - c.dram_latency
        wait = end - start - c.cycles
        assert by_pc[pc]["instr"] == (start + wait, busy)
        if result.issue[pc] > result.popped[pc]:
            assert by_pc[pc]["semaphore"] == (result.popped[pc], result.issue[pc] - result.popped[pc])
        if isinstance(ins, DmaCopy) and "dram" in (ins.src.space.text, ins.dst.space.text):
            assert by_pc[pc]["dram_latency"] == (end - arch.dram_timing.latency, arch.dram_timing.latency)
        if wait:
            assert by_pc[pc]["dram_bandwidth"] == (start, wait)


def test_spm_buffers_are_live_while_read():
    """A load's buffer lives from the load's start to the retire of the last instruction reading it."""
    result = simulate(read_program(GEMM), load_arch("edge16"), timing_only=True)
    f, to, nbytes = spm_live_intervals(result)
    loads = [pc for pc, i in enumerate(result.program.instrs) if i.queue is Queue.DMA_LD and i.dst.space.text == "spm"]
    assert len(f) == len(loads)
    assert sorted(f.tolist()) == sorted(result.start[loads].tolist())
    assert (to >= f).all() and int(nbytes.sum()) == sum(
        int(np.prod(result.program.instrs[pc].shape)) * result.program.instrs[pc].dst.dtype.size for pc in loads)
    assert to.max() <= result.cycles


def test_progress_is_monotone_and_ends_at_the_total():
    program, arch = read_program(GEMM), load_arch("edge16")
    calls = []
    result = simulate(program, arch, timing_only=True, progress=lambda *a: calls.append(a))
    total = sum(i.queue is not Queue.CTRL for i in program.instrs)
    assert calls and calls[-1] == (total, total, result.cycles)
    assert all(t == total for _, t, _ in calls)
    for (r0, _, c0), (r1, _, c1) in zip(calls, calls[1:]):
        assert r0 <= r1 and c0 <= c1
    assert len(calls) <= 300
    plain = simulate(program, arch, timing_only=True)
    for a in ("dispatch", "issue", "start", "end"):
        assert (getattr(plain, a) == getattr(result, a)).all()


def test_write_trace_and_cli(tmp_path, gemm):
    result, trace = gemm
    info = write_trace(result, tmp_path / "a.json")
    assert json.loads((tmp_path / "a.json").read_text()) == trace
    assert info.events == len(trace["traceEvents"]) and info.bytes == (tmp_path / "a.json").stat().st_size
    out = tmp_path / "t.json"
    run = subprocess.run([sys.executable, "-m", "npusim", "simulate", str(GEMM), "--arch", "edge16", "--trace",
                          str(out), "--quiet"], cwd=ROOT, capture_output=True, text=True, check=True)
    assert "trace:" in run.stdout and run.stderr == ""
    check_format(json.loads(out.read_text()))


def test_cli_progress_bar_counts_instructions(capsys):
    from npusim.app.cli import ProgressBar

    bar = ProgressBar("simulating")
    bar(5, 20, 1000)
    bar(20, 20, 4321)
    assert (bar.bar.n, bar.bar.total) == (20, 20) and bar.bar.postfix == "4,321 cycles"
    bar.close()
    assert "simulating:" in capsys.readouterr().err


@pytest.mark.parametrize("mode", ["serial", "ideal_memory"])
def test_serial_and_ideal_memory_traces_add_up(mode):
    result = simulate(read_program(GEMM), load_arch("edge16"), timing_only=True, **{mode: True})
    trace = chrome_trace(result)
    check_format(trace)
    check_accounting(result, trace)
