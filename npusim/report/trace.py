"""Chrome trace event JSON of one simulation, for Perfetto (ui.perfetto.dev) and chrome://tracing.

One process ``npu``; one track per unit (spans: each instruction's busy cycles, and stall spans named by cause that
fill the rest of the time the unit was not idle), one track per DMA channel (each DMA instruction from start to
retire on the channel it held), counter tracks (DRAM bandwidth, SPM occupancy, every semaphore's count) and flow
arrows from each semaphore signal to the wait it released. ``docs/trace.md`` defines every track. Timestamps are
cycles converted to microseconds with the Arch clock: ``ts = cycles / (clock.ghz * 1e3)``.

The JSON text is built from numpy columns with one ``%`` template per kind of event (no dict per event): writing a
trace takes less time than the simulation it shows.
"""

from __future__ import annotations

import bisect
import gc
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from isa import DmaCopy, SimulationError, Space
from isa.asm import format_instr
from isa.cost import Cost
from isa.units import UNITS, Pool, Role, key_text, queues_with

CHANNEL_QUEUES = frozenset(u.queue for u in UNITS if Pool.DMA_CHANNEL in u.pools)   # queues whose units hold a channel
LOAD_QUEUES = queues_with(Role.DMA_LOAD)
PID = 1
_NEEDS_ESCAPE = re.compile(r'["\\\x00-\x1f\x7f-\uffff]')   # JSON string characters that are not copied as they are
CHANNEL_TID = 100        # DMA channel k is thread channel_tid(result) + k; unit k (result.units) is thread k + 1


def channel_tid(result) -> int:
    """The thread of DMA channel 0: after the units' threads (1 to len(units)), from 100 on."""
    return max(CHANNEL_TID, len(result.units) + 1)
SPAN = '{"ph":"X","pid":1,"tid":%d,"ts":%.6f,"dur":%.6f,'
INSTR = SPAN + ('"name":"%s","cat":"instr","args":{"pc":%d,"asm":%s,"layer":%s,"dram_bytes":%d,"sram_bytes":%d,'
                '"macs":%d}}')
STALL = SPAN + '"name":"stall: CAUSE","cat":"stall","args":{"cause":"CAUSE","pc":%d}}'
CHANNEL = SPAN + '"name":"%s","cat":"dma","args":{"pc":%d}}'
COUNTER = '{"ph":"C","pid":1,"ts":%.6f,"name":"%s","args":{"%s":%s}}'
FLOW = ('{"ph":"s","pid":1,"tid":%d,"ts":%.6f,"id":%d,"name":"semaphore","cat":"sync"},\n'
        '{"ph":"f","bp":"e","pid":1,"tid":%d,"ts":%.6f,"id":%d,"name":"semaphore","cat":"sync"}')


@dataclass(frozen=True)
class TraceInfo:
    """What :func:`write_trace` wrote: events and bytes."""

    events: int
    bytes: int


def chrome_trace(result, layers: Sequence | None = None) -> dict[str, Any]:
    """The trace of ``result`` (a SimResult) as a Chrome trace JSON object ``{"traceEvents": [...], ...}``.

    ``layers`` (``compiler.link.linker.LayerRange`` list) names each instruction's layer in its span's args.
    """
    return json.loads("".join(_pieces(result, layers)[0]))


def write_trace(result, path: str | Path, layers: Sequence | None = None) -> TraceInfo:
    """Write the trace of ``result`` to ``path`` (Chrome trace JSON)."""
    pieces, events = _pieces(result, layers)
    size = 0
    with open(path, "wb") as f:
        for piece in pieces:
            data = piece.encode()
            size += len(data)
            f.write(data)
    return TraceInfo(events, size)


def _pieces(result, layers) -> tuple[list[str], int]:
    """The JSON text in pieces (concatenated, they are the trace) and the number of events."""
    gc_was_enabled = gc.isenabled()
    gc.disable()  # millions of short-lived strings and tuples, no cycles: collecting them only costs time
    try:
        return _build(result, layers)
    finally:
        if gc_was_enabled:
            gc.enable()


def _build(result, layers) -> tuple[list[str], int]:
    if not result.costs:
        raise SimulationError("this result has no per-instruction trace data (run it with npusim.simulate)")
    us = 1.0 / (result.arch.clock.ghz * 1e3)   # microseconds per cycle
    t = _Timeline(result)
    parts = [_metadata(result)]
    parts += _unit_spans(t, layers, us)
    parts += _channel_spans(t, us)
    parts += _dram_counter(t, us)
    parts += _spm_counter(t, us)
    parts += _semaphore_counters(t, us)
    parts += _flows(t, us)
    parts = [p for p in parts if p[1]]
    other = {"arch": result.arch.to_dict(), "us_per_cycle": us, "clock_ghz": result.arch.clock.ghz,
             "cycles": result.cycles, "mode": result.mode, "units": [u.name for u in result.units],
             "generator": "npusim.report.trace"}
    pieces = ['{"displayTimeUnit":"ns","otherData":' + json.dumps(other) + ',"traceEvents":[\n']
    for k, (text, _) in enumerate(parts):
        pieces += [",\n", text] if k else [text]
    pieces.append("\n]}\n")
    return pieces, sum(n for _, n in parts)


# ------------------------------------------------------------------------------------------------ columns
class _Timeline:
    """Per-pc columns of a result as numpy arrays (cycles), and each pc's track."""

    def __init__(self, result):
        self.result = result
        instrs = result.program.instrs
        self.n = n = len(instrs)
        self.unit = result.unit_index
        width = len(Cost._fields)
        c = np.fromiter(chain.from_iterable(result.costs), np.int64, n * width).reshape(n, width).T  # Cost fields
        self.cycles, self.conflict, self.setup, self.window = c[0], c[1], c[2], c[3]
        self.dram_bytes, self.sram_bytes, self.macs, self.latency = c[4] + c[5], c[6] + c[7], c[8], c[9]
        self.popped, self.issue, self.start, self.end = result.popped, result.issue, result.start, result.end
        self.channel = dma_channels(result)
        self.wait = np.where(self.unit >= 0, self.end - self.start - self.cycles, 0)   # DRAM bus wait
        self.busy = self.cycles - self.conflict - self.latency
        self.busy_from = self.start + self.wait
        self.ops = semaphore_ops(result)


class _Spans:
    """X events of several kinds, formatted as they come, written in time order per thread."""

    def __init__(self, us: float):
        self.us, self.tids, self.starts, self.events = us, [], [], []

    def add(self, template: str, tid, ts, dur, *cols) -> None:
        """One event per row: ``template % (thread, ts, dur, *row of cols)``; ts and dur in cycles become us."""
        tid, ts, dur = np.asarray(tid), np.asarray(ts), np.asarray(dur)
        self.tids.append(tid)
        self.starts.append(ts)
        self.events += map(template.__mod__, zip(tid.tolist(), (ts * self.us).tolist(), (dur * self.us).tolist(),
                                                 *cols))

    def text(self) -> list[tuple[str, int]]:
        if not self.events:
            return []
        order = np.lexsort((np.concatenate(self.starts), np.concatenate(self.tids))).tolist()
        events = self.events
        return [(",\n".join([events[i] for i in order]), len(order))]


# ------------------------------------------------------------------------------------------------ events
def _metadata(result) -> tuple[str, int]:
    ev = [{"ph": "M", "pid": PID, "name": "process_name", "args": {"name": f"npu ({result.arch.name})"}}]
    for k, u in enumerate(result.units):
        ev.append({"ph": "M", "pid": PID, "tid": k + 1, "name": "thread_name", "args": {"name": u.name}})
        ev.append({"ph": "M", "pid": PID, "tid": k + 1, "name": "thread_sort_index", "args": {"sort_index": k}})
    for c in range(result.arch.dma.channels):
        tid = channel_tid(result) + c
        ev.append({"ph": "M", "pid": PID, "tid": tid, "name": "thread_name", "args": {"name": f"dma channel {c}"}})
        ev.append({"ph": "M", "pid": PID, "tid": tid, "name": "thread_sort_index", "args": {"sort_index": tid}})
    return ",\n".join(json.dumps(e, separators=(",", ":")) for e in ev), len(ev)


def _unit_spans(t: _Timeline, layers, us: float) -> list[tuple[str, int]]:
    """Per unit track: starvation stalls, semaphore, resource, DRAM-bus, busy, bank-conflict and latency spans.

    Within one instruction's execution ``[start, end)`` the order drawn is: DRAM bus wait, busy (setup and body),
    bank-conflict cycles, DRAM latency; only the totals are exact, not where conflict cycles fall inside the body.
    """
    result, spans = t.result, _Spans(us)
    pcs = np.flatnonzero(t.unit >= 0)
    tid = t.unit[pcs] + 1

    # instruction spans, with args
    instrs = result.program.instrs
    layer_of = np.full(t.n, -1, np.int64)
    names = ["null"]
    for k, lr in enumerate(layers or ()):
        layer_of[lr.start:lr.end] = k
        names.append(json.dumps(lr.name))
    layer = layer_of[pcs] + 1
    text = [format_instr(instrs[pc]) for pc in pcs.tolist()]
    quoted = map(json.dumps, text) if _NEEDS_ESCAPE.search("".join(text)) else ['"' + x + '"' for x in text]
    spans.add(INSTR, tid, t.busy_from[pcs], t.busy[pcs], [s.split(" ", 1)[0] for s in text], pcs.tolist(), quoted,
              [names[k] for k in layer.tolist()], t.dram_bytes[pcs].tolist(), t.sram_bytes[pcs].tolist(),
              t.macs[pcs].tolist())

    def stall(tids, ts, dur, cause, at):
        keep = dur > 0
        spans.add(STALL.replace("CAUSE", cause), tids[keep], ts[keep], dur[keep], at[keep].tolist())

    stall(tid, t.popped[pcs], t.issue[pcs] - t.popped[pcs], "semaphore", pcs)
    if result.resource_stalls:
        rs = result.resource_stalls
        rpc = np.array([r[0] for r in rs], np.int64)
        r0, r1 = np.array([r[1] for r in rs], np.int64), np.array([r[2] for r in rs], np.int64)
        for cause in sorted({r[3] for r in rs}):
            m = np.array([r[3] == cause for r in rs])
            stall(t.unit[rpc[m]] + 1, r0[m], r1[m] - r0[m], cause, rpc[m])
    stall(tid, t.start[pcs], t.wait[pcs], "dram_bandwidth", pcs)
    stall(tid, t.busy_from[pcs] + t.busy[pcs], t.conflict[pcs], "bank_conflict", pcs)
    stall(tid, t.end[pcs] - t.latency[pcs], t.latency[pcs], "dram_latency", pcs)
    _starvation_stalls(t, pcs, stall)
    return spans.text()


def _starvation_stalls(t: _Timeline, pcs: np.ndarray, stall) -> None:
    """A unit waiting on an empty queue ``[previous retire, pop)`` is stalled while the dispatcher was blocked (full
    queue, barrier) short of the unit's last instruction, and idle otherwise (as the engine accounts it)."""
    gaps = t.result.dispatcher_gaps
    if not gaps:
        return
    g0 = np.array([g[0] for g in gaps], np.int64)
    g1 = np.array([g[1] for g in gaps], np.int64)
    gpc = np.array([g[3] for g in gaps], np.int64)
    cause = np.array([g[2] for g in gaps])
    for u in np.unique(t.unit[pcs]).tolist():
        mine = pcs[t.unit[pcs] == u]
        a = np.concatenate(([0], t.end[mine][:-1]))      # the unit finds its queue empty at its previous retire
        b = t.popped[mine]
        keep = b > a
        a, b = a[keep], b[keep]
        sel = gpc <= mine[-1]
        s0, s1, sc, spc = g0[sel], g1[sel], cause[sel], gpc[sel]
        lo = np.searchsorted(s1, a, "right")               # gaps are disjoint and in time order
        hi = np.searchsorted(s0, b, "left")
        cnt = np.maximum(hi - lo, 0)
        if not cnt.any():
            continue
        which = np.repeat(lo, cnt) + (np.arange(cnt.sum()) - np.repeat(np.cumsum(cnt) - cnt, cnt))
        fa, fb = np.repeat(a, cnt), np.repeat(b, cnt)
        x0, x1 = np.maximum(s0[which], fa), np.minimum(s1[which], fb)
        tids = np.full(x0.size, u + 1)
        for c in np.unique(sc[which]).tolist():
            m = sc[which] == c
            stall(tids[m], x0[m], x1[m] - x0[m], c, spc[which][m])


def _channel_spans(t: _Timeline, us: float) -> list[tuple[str, int]]:
    """Each DMA instruction on the channel it held, from start to retire."""
    pcs = np.flatnonzero(t.channel >= 0)
    if not pcs.size:
        return []
    spans = _Spans(us)
    queue = [key_text(t.result.program.instrs[pc].unit_key) for pc in pcs.tolist()]
    spans.add(CHANNEL, channel_tid(t.result) + t.channel[pcs], t.start[pcs], t.end[pcs] - t.start[pcs], queue,
              pcs.tolist())
    return spans.text()


def dma_channels(result) -> np.ndarray:
    """Per pc: the DMA channel the instruction held from start to retire (-1 if it is not a DMA instruction).

    Replays the engine's rule (the lowest-numbered free channel) in start order, then pc: a valid assignment, since
    the engine never had more DMA instructions in flight than ``dma.channels``.
    """
    instrs, channels, queue = result.program.instrs, result.arch.dma.channels, result.queue
    pcs = np.flatnonzero(np.isin(queue, list(CHANNEL_QUEUES)))
    out = [-1] * len(instrs)
    free = [0] * channels
    start, end = result.start.tolist(), result.end.tolist()
    for pc in pcs[np.lexsort((pcs, result.start[pcs]))].tolist():
        s = start[pc]
        i = next((i for i in range(channels) if free[i] <= s), -1)
        if i < 0:
            raise SimulationError(f"pc {pc}: more than {channels} DMA instructions in flight at cycle {s}")
        free[i] = end[pc]
        out[pc] = i
    return np.array(out, np.int64)


def _counter(name: str, series: str, ts: np.ndarray, values: np.ndarray, us: float,
             fmt: str = "%d") -> tuple[str, int]:
    """One counter track; of several values at one cycle the last is kept."""
    if not ts.size:
        return "", 0
    last = np.append(ts[1:] != ts[:-1], True)
    ts, values = ts[last], values[last]
    k = ts.size
    template = COUNTER.replace('%s}}', fmt + '}}')
    return ",\n".join(map(template.__mod__, zip((ts * us).tolist(), [name] * k, [series] * k, values.tolist()))), k


def _dram_counter(t: _Timeline, us: float) -> list[tuple[str, int]]:
    """DRAM bandwidth in GB/s: each DMA's bytes spread evenly over its DRAM bus window, which starts ``setup`` cycles
    after its start plus its bus wait (windows never overlap: the bus grants them back to back)."""
    pcs = np.flatnonzero(t.window > 0)
    if not pcs.size:
        return []
    w0 = t.start[pcs] + t.setup[pcs] + t.wait[pcs]
    w1 = w0 + t.window[pcs]
    gbs = t.dram_bytes[pcs] / t.window[pcs] * t.result.arch.clock.ghz
    ts = np.concatenate((w1, w0))
    val = np.concatenate((np.zeros(pcs.size), gbs))
    order = np.argsort(ts, kind="stable")                  # a window ending where the next starts: the start wins
    return [_counter("DRAM bandwidth", "GB/s", ts[order], val[order], us, "%.4f")]


def spm_live_intervals(result) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(from, to, bytes) of every SPM buffer a dma.ld wrote: live from the load's start until the retire of the
    last instruction that read any of its bytes before an instruction wrote over them (or its own retire if none).

    Accesses are taken in time order (reads at their start before writes at the same cycle); a write over any byte
    of a live buffer ends the whole buffer.
    """
    instrs, start, end = result.program.instrs, result.start.tolist(), result.end.tolist()
    spm, ld = Space.SPM, LOAD_QUEUES
    ev = []   # (start, 0 read / 1 write, pc, lo, hi)
    for pc, ins in enumerate(instrs):
        for role, view, extra in ins.views():
            if view.space is spm:
                shape = ins.src_shape if role == "src" and type(ins) is DmaCopy else ins.shape
                ev.append((start[pc], role == "dst", pc, *view.span(shape, extra)))
    ev.sort()
    los: list[int] = []   # live buffers: disjoint, sorted by lo; parallel lists
    his: list[int] = []
    born: list[int] = []
    read: list[int] = []
    size: list[int] = []
    out_from, out_to, out_bytes = [], [], []
    for s, write, pc, lo, hi in ev:
        i = bisect.bisect_right(los, lo) - 1
        if not write and i >= 0 and his[i] >= hi:            # the common case: one buffer holds the whole read
            if read[i] < end[pc]:
                read[i] = end[pc]
            continue
        i = max(i, 0)
        j = i
        while j < len(los) and los[j] < hi:
            j += 1
        hit = [k for k in range(i, j) if his[k] > lo]
        if not write:
            for k in hit:
                read[k] = max(read[k], end[pc])
            continue
        for k in reversed(hit):
            out_from.append(born.pop(k))
            out_to.append(read.pop(k))
            out_bytes.append(size.pop(k))
            los.pop(k)
            his.pop(k)
        ins = instrs[pc]
        if ins.queue in ld:
            k = bisect.bisect_left(los, lo)
            los.insert(k, lo)
            his.insert(k, hi)
            born.insert(k, s)
            read.insert(k, end[pc])
            size.insert(k, math.prod(ins.shape) * ins.dst.dtype.size)
    return (np.array(out_from + born, np.int64), np.array(out_to + read, np.int64),
            np.array(out_bytes + size, np.int64))


def _spm_counter(t: _Timeline, us: float) -> list[tuple[str, int]]:
    f, to, nbytes = spm_live_intervals(t.result)
    if not f.size:
        return []
    ts = np.concatenate(([0], f, to))
    delta = np.concatenate(([0], nbytes, -nbytes))
    order = np.argsort(ts, kind="stable")
    ts, level = ts[order], np.cumsum(delta[order])
    return [_counter("SPM occupancy", "bytes", ts, level, us)]


def semaphore_ops(result) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per semaphore: (signals, waits), each rows of (cycle, pc, count) sorted: signals at retire, waits at issue."""
    prog, end, issue = result.program, result.end.tolist(), result.issue.tolist()
    sig: dict[str, list[tuple[int, int, int]]] = {s.name: [] for s in prog.sems}
    wai: dict[str, list[tuple[int, int, int]]] = {s.name: [] for s in prog.sems}
    for pc, ins in enumerate(prog.instrs):
        if ins.signals:
            for op in ins.signals:
                sig[op.name].append((end[pc], pc, op.count))
        if ins.waits:
            for op in ins.waits:
                wai[op.name].append((issue[pc], pc, op.count))
    rows = lambda x: np.array(sorted(x), np.int64).reshape(-1, 3)  # noqa: E731
    return {s.name: (rows(sig[s.name]), rows(wai[s.name])) for s in prog.sems}


def semaphore_series(result, ops=None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per semaphore: (cycles, count after every change there), from cycle 0 (the initial count)."""
    out, ops = {}, ops or semaphore_ops(result)
    for s in result.program.sems:
        sg, wt = ops[s.name]
        x = np.concatenate(([0], sg[:, 0], wt[:, 0]))
        d = np.concatenate(([s.init], sg[:, 2], -wt[:, 2]))
        order = np.argsort(x, kind="stable")
        x, level = x[order], np.cumsum(d[order])
        last = np.append(x[1:] != x[:-1], True)
        out[s.name] = (x[last], level[last])
    return out


def _semaphore_counters(t: _Timeline, us: float) -> list[tuple[str, int]]:
    return [_counter(f"sem {name}", "count", x, v, us) for name, (x, v) in semaphore_series(t.result, t.ops).items()]


def semaphore_flows(result, ops=None) -> list[tuple[int, int, str]]:
    """(signalling pc, waiting pc, semaphore) pairs: which signal released each wait that blocked on it.

    Per semaphore, tokens are first in, first out: signals in retire order (then pc) append ``count`` tokens, waits
    in issue order (then pc) take ``count`` tokens; the signal that supplied the last token a wait took released it
    if the waiting instruction blocked (issue > pop) and that signal retired at its issue cycle (else the wait was
    already satisfied, or another semaphore held the instruction back).
    """
    out, popped, ops = [], result.popped, ops or semaphore_ops(result)
    for s in result.program.sems:
        sg, wt = ops[s.name]
        if not len(sg) or not len(wt):
            continue
        supplied = s.init + np.cumsum(sg[:, 2])
        last = np.cumsum(wt[:, 2])
        k = np.searchsorted(supplied, last, "left")
        ok = (last > s.init) & (k < len(sg))
        ok[ok] &= (sg[k[ok], 0] == wt[ok, 0]) & (wt[ok, 0] > popped[wt[ok, 1]])
        out += [(a, b, s.name) for a, b in zip(sg[k[ok], 1].tolist(), wt[ok, 1].tolist())]
    return out


def _flows(t: _Timeline, us: float) -> list[tuple[str, int]]:
    """Flow arrows bound to the middle of the signalling and the released instruction's busy spans."""
    pairs = semaphore_flows(t.result, t.ops)
    if not pairs:
        return []
    a = np.array([p[0] for p in pairs], np.int64)
    b = np.array([p[1] for p in pairs], np.int64)
    mid = t.busy_from + t.busy / 2
    ids = np.arange(1, a.size + 1)
    rows = zip((t.unit[a] + 1).tolist(), (mid[a] * us).tolist(), ids.tolist(),
               (t.unit[b] + 1).tolist(), (mid[b] * us).tolist(), ids.tolist())
    return [(",\n".join(map(FLOW.__mod__, rows)), 2 * a.size)]
