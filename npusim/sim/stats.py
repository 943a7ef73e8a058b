"""What a simulation reports: per-unit busy/idle/stall cycles, per-instruction times, traffic, utilization figures
(each defined once in docs/timing.md, "Utilization figures")."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from isa import Program, Queue
from isa.arch import Arch
from isa.asm import mnemonic
from isa.columns import unit_keys
from isa.cost import Cost, dma_stream_bandwidth
from isa.energy import RunEnergy, area_mm2, run_energy
from isa.machine import machine, machine_units
from isa.units import Pool, Role, key_text

STALL_CAUSES = ("semaphore", "queue_full", "barrier", *dict.fromkeys(p.cause for p in Pool), "dram_bandwidth",
                "dram_latency", "bank_conflict")
"""Why a unit waits, in report order: a semaphore, the dispatcher (a full queue, a barrier), a port pool
(:class:`isa.units.Pool`), the DRAM bus, DRAM latency, SRAM bank conflicts."""


def cost_totals(costs: list[Cost]) -> dict[str, int]:
    """Each :class:`isa.cost.Cost` field (cycles, bytes, MACs) summed over ``costs`` (zeros for none)."""
    return {f: sum(c) for f, c in zip(Cost._fields, zip(*costs))} if costs else dict.fromkeys(Cost._fields, 0)


@dataclass
class UnitStats:
    """Cycles of one unit, split so that busy + idle + sum(stall) == total cycles; its DRAM bursts' row outcomes."""

    name: str
    busy: int = 0
    idle: int = 0
    instructions: int = 0
    stall: dict[str, int] = field(default_factory=lambda: dict.fromkeys(STALL_CAUSES, 0))
    row_hits: int = 0
    row_misses: int = 0

    def add_static(self, cost: Cost) -> None:
        """Account one instruction that ran in isolation (no contention): the static part of what the engine does.

        busy = cycles - conflict - dram_latency; conflict -> bank_conflict; dram_latency -> dram_latency.
        """
        self.add_statics((cost,))

    def add_statics(self, costs: Sequence[Cost]) -> None:
        """``add_static`` of each of ``costs``, summed field by field."""
        if not costs:
            return
        self.add_totals(cost_totals(costs), len(costs))

    def add_totals(self, total: dict[str, int], count: int) -> None:
        """``add_statics`` of ``count`` instructions whose Cost fields sum to ``total`` (field name -> sum)."""
        conflict, latency = total["conflict"], total["dram_latency"]
        self.busy += total["cycles"] - conflict - latency
        self.stall["bank_conflict"] += conflict
        self.stall["dram_latency"] += latency
        self.row_hits += total["row_hits"]
        self.row_misses += total["row_misses"]
        self.instructions += count

    def to_dict(self, total: int) -> dict[str, Any]:
        return {"instructions": self.instructions, "busy_cycles": self.busy, "idle_cycles": self.idle,
                "stall_cycles": dict(self.stall), "busy_fraction": self.busy / total if total else 0.0}


@dataclass
class SimResult:
    """The outcome of one simulation. Times are cycles; traffic is bytes.

    ``dispatch``, ``issue``, ``start``, ``end`` are per-pc arrays: when the instruction entered its queue, when it
    acquired its semaphores, when it acquired its resources and began, and when it retired (-1 for control).
    What traces need to redraw every cycle: ``costs`` (per pc: the static :class:`isa.cost.Cost`),
    ``resource_stalls`` (``(pc, from, to, cause)`` waits for a DMA channel or SRAM port between issue and start) and
    ``dispatcher_gaps`` (``(from, to, cause, pc)``: the dispatcher was blocked before pc by a full queue or a
    barrier); ``popped`` derives when each unit took each instruction from its queue.
    """

    program: Program
    arch: Arch
    mode: str
    cycles: int
    units: list[UnitStats]
    dispatch: np.ndarray
    issue: np.ndarray
    start: np.ndarray
    end: np.ndarray
    dram_bytes_read: int
    dram_bytes_written: int
    spm_bytes: int
    acc_bytes: int
    macs: int
    warnings: list[str]
    wall_seconds: float = 0.0
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    costs: list[Cost] = field(default_factory=list)
    resource_stalls: list[tuple[int, int, int, str]] = field(default_factory=list)
    dispatcher_gaps: list[list] = field(default_factory=list)

    @cached_property
    def queue(self) -> np.ndarray:
        """Per pc: the number of its queue (``isa.Queue``)."""
        return np.fromiter((i.queue for i in self.program.instrs), np.int64, len(self.program.instrs))

    @cached_property
    def unit_index(self) -> np.ndarray:
        """Per pc: the index of its unit in ``units`` (:attr:`isa.machine.Unit.index`; -1 for control)."""
        return machine(self.arch).indices(unit_keys(self.program.instrs))

    @cached_property
    def popped(self) -> np.ndarray:
        """Per pc: the cycle its unit took it from the queue, where its semaphore wait begins (-1 for control).

        A unit pops its next instruction when it has retired the one before and the instruction is in its queue:
        ``max(dispatch, previous retire on the unit)``.
        """
        queue = self.queue
        out = np.full(queue.size, -1, np.int64)
        for q in np.unique(queue[queue != Queue.CTRL]).tolist():
            pcs = np.flatnonzero(queue == q)
            out[pcs] = np.maximum(self.dispatch[pcs], np.concatenate(([0], self.end[pcs][:-1])))
        return out

    @cached_property
    def energy(self) -> RunEnergy:
        """The run's energy by instruction, kind and part, priced by the Arch's technology table (isa.energy)."""
        return run_energy(self.program, self.costs, self.arch, self.cycles)

    def busy_by_mnemonic(self) -> dict[str, int]:
        """Busy cycles of each kind of instruction, by mnemonic (``vpu.gather``, ``vpu.mul.sum``, ``dma.ld``...), in
        order of first use: each instruction's ``cycles - conflict - dram_latency``, as its unit's ``busy`` counts
        them, so a unit's mnemonics add up to its busy cycles."""
        out: dict[str, int] = {}
        for ins, c in zip(self.program.instrs, self.costs):
            if ins.queue is not Queue.CTRL:
                name = mnemonic(ins)
                out[name] = out.get(name, 0) + c.cycles - c.conflict - c.dram_latency
        return out

    @property
    def unit(self) -> dict[str, UnitStats]:
        return {u.name: u for u in self.units}

    @property
    def dram_row_hits(self) -> int:
        """DRAM bursts that found their row open (all units)."""
        return sum(u.row_hits for u in self.units)

    @property
    def dram_row_misses(self) -> int:
        """DRAM bursts that had to open their row (all units)."""
        return sum(u.row_misses for u in self.units)

    def mac_utilization(self, macs: int) -> float:
        """MAC utilization of ``macs`` useful MACs (a model's, a layer's): ``macs / (cycles x peak MACs per
        cycle)``, the fraction of what the matrix units could have done in the run that this work needed."""
        peak = self.cycles * self.arch.peak_macs_per_cycle
        return macs / peak if peak else 0.0

    @property
    def issued_mac_utilization(self) -> float:
        """Issued MAC utilization: the MACs the ``mxu.mm`` instructions issued (zero blocks of pixel-packed
        convolutions included) / (cycles x peak MACs per cycle); ``matrix_busy x array_fill_while_busy``."""
        return self.mac_utilization(self.macs)

    @property
    def matrix_busy_cycles(self) -> int:
        """Busy cycles of the matrix units, summed."""
        return sum(u.busy for u, m in zip(self.units, machine_units(self.arch)) if m.role is Role.MATRIX)

    @property
    def matrix_busy(self) -> float:
        """Matrix busy: the matrix units' busy cycles / (cycles x ``units.matrix``)."""
        total = self.cycles * self.arch.units.matrix
        return self.matrix_busy_cycles / total if total else 0.0

    @property
    def array_fill_while_busy(self) -> float:
        """Array fill while busy: the issued MACs / (rows x cols x the matrix units' busy cycles), how much of the
        array an ``mxu.mm`` uses while it runs (partial tiles, pipeline fill and drain leave the rest idle)."""
        busy = self.matrix_busy_cycles * self.arch.matrix.rows * self.arch.matrix.cols
        return self.macs / busy if busy else 0.0

    @property
    def microseconds(self) -> float:
        return self.cycles / (self.arch.clock.ghz * 1e3)

    def to_dict(self, instructions: bool = True, inferences: int = 1) -> dict[str, Any]:
        """The JSON report (docs/report.md); ``inferences``: how many inferences the run made (its energy per
        inference is the total over this)."""
        energy = self.energy
        out: dict[str, Any] = {
            "cycles": self.cycles,
            "time_us": self.microseconds,
            "mode": self.mode,
            "units": {u.name: u.to_dict(self.cycles) | {"queue": unit.label,   # as in instructions[].unit
                                                        "energy_pj": energy.by_unit(unit.index)}
                      for u, unit in zip(self.units, machine_units(self.arch))},
            "issued_mac_utilization": self.issued_mac_utilization,
            "matrix_busy": self.matrix_busy,
            "array_fill_while_busy": self.array_fill_while_busy,
            "macs": self.macs,
            "dram": {"bytes_read": self.dram_bytes_read, "bytes_written": self.dram_bytes_written,
                     "row_hits": self.dram_row_hits, "row_misses": self.dram_row_misses},
            "sram": {"spm_bytes": self.spm_bytes, "acc_bytes": self.acc_bytes},
            "energy": energy.to_dict(inferences),
            "area": {f"{part}_mm2": v for part, v in area_mm2(self.arch).items()},
            "memory_roof": memory_roof(self.arch),
            "program": {"sha256": self.program.sha256, "instructions": len(self.program.instrs)},
            "warnings": list(self.warnings),
            "arch": self.arch.to_dict(),
            "wall_seconds": self.wall_seconds,
        }
        if instructions:
            out["instructions"] = [
                {"pc": pc, "unit": key_text(ins.unit_key), "text": str(ins), "dispatch": int(self.dispatch[pc]),
                 "issue": int(self.issue[pc]), "start": int(self.start[pc]), "end": int(self.end[pc])}
                for pc, ins in enumerate(self.program.instrs) if ins.queue is not Queue.CTRL]
        return out

    def to_json(self, instructions: bool = True, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(instructions), indent=indent)


def memory_roof(arch: Arch) -> dict[str, Any]:
    """The memory roofs of the roofline, each in bytes per core cycle and GB/s, and which one binds.

    ``dram_bus``: the bus, ``dram.gb_per_s`` (``dram.gb_per_s / clock.ghz`` bytes per cycle). ``dma``: what the
    requests in flight carry (Little's law): ``dma.outstanding`` full bursts per round trip, the latency plus one
    burst's bus time (``round_trip_ns``). The bus grants one DMA's window at a time, so the channels' requests do not
    add up: ``dma.channels`` never raises the roof. ``binds``: ``dma.outstanding`` when the requests in flight carry
    less than the bus, ``dram.gb_per_s`` when they carry more, ``both`` when the two are equal (raising either alone
    gains nothing). ``bytes_per_cycle`` and ``gb_per_s``: the roof, what a long stream of full bursts attains in the
    cost model (:func:`isa.cost.dma_stream_bandwidth`): the lower of the two, less, when the requests in flight bind,
    up to one tick per burst (bursts issue on whole ticks, :mod:`isa.speeds`).
    """
    t, b, out, ghz = arch.dram_timing, arch.dma.burst_bytes, arch.dma.outstanding, arch.clock.ghz
    d = t.data_ticks(b)
    round_trip = t.latency_ticks + d                     # ticks
    in_flight = out * b * t.ticks / round_trip           # bytes/cycle the requests in flight carry
    binds = "dma.outstanding" if out * d < round_trip else "dram.gb_per_s" if out * d > round_trip else "both"
    least = dma_stream_bandwidth(arch)
    return {"bytes_per_cycle": least, "gb_per_s": least * ghz, "binds": binds,
            "dram_bus": {"bytes_per_cycle": float(t.bytes_per_cycle), "gb_per_s": arch.dram.gb_per_s},
            "dma": {"bytes_per_cycle": in_flight, "gb_per_s": in_flight * ghz, "outstanding": out, "burst_bytes": b,
                    "round_trip_ns": round_trip / t.ticks / ghz}}


def memory_roof_text(roof: dict[str, Any]) -> str:
    """One line saying the memory roof, which limit binds by its Arch field, and what to raise (from
    :func:`memory_roof`)."""
    dma, bus = roof["dma"], roof["dram_bus"]
    num = lambda x: f"{x:.3g}" if x < 1000 else f"{x:,.0f}"   # noqa: E731 (3 digits, no exponent)
    flight = (f"{dma['outstanding']} x {dma['burst_bytes']} B in flight per {dma['round_trip_ns']:.4g} ns round "
              f"trip")
    head = f"memory roof {num(roof['gb_per_s'])} GB/s ({num(roof['bytes_per_cycle'])} B/cycle): bound by "
    if roof["binds"] == "dma.outstanding":
        return (f"{head}dma.outstanding ({flight}); the DRAM bus gives {num(bus['gb_per_s'])} GB/s: raise "
                f"dma.outstanding")
    if roof["binds"] == "dram.gb_per_s":
        return f"{head}the DRAM bus (dram.gb_per_s); the DMA's {flight} would carry {num(dma['gb_per_s'])} GB/s"
    return f"{head}both the DRAM bus (dram.gb_per_s) and dma.outstanding ({flight}): raise both"
