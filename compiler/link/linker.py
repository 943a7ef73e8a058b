"""Linking: single-op programs (segments) become one program over shared DRAM regions.

Each lowering (``compiler.kernels.gemm``, ``compiler.kernels.conv2d``, ``compiler.kernels.vector.streams``) produces a
self-contained program with its own small DRAM regions (X, Wt, Y, ...). :func:`link` concatenates them in order and

- relocates every DRAM view into the global regions (``Segment.bind``: local region -> (global region, byte offset);
  the pseudo-region ``SPM`` makes it an SPM view at that byte address: an activation kept on chip,
  :mod:`compiler.link.residency`),
- renames semaphores by the pair of queues they connect (a segment's ``in_full`` feeding the matrix unit and another's
  feeding the vector unit become two semaphores, keeping one producer and one consumer queue each; rings are balanced
  within a segment, so later segments reuse them),
- orders segments: a segment's entry (its first dma.ld, or its host.call) waits for the exit of the one before (its
  last dma.st, or its host.call), so a layer reads its input only after the previous layer wrote it (semaphore
  ``seg_dep`` for dma.st -> dma.ld, ``seg_dep_<from>_<to>`` for pairs with the host queue; none between two
  host calls, which the host queue already orders),
- with ``prefetch_spm`` (bytes, half the SPM): segments compiled for at most that much SPM (their config says so)
  are *half* segments; in a run of consecutive half segments every other one has its SPM operands moved up by
  ``prefetch_spm``, so neighbours use disjoint SPM, and a half segment after a half segment puts its entry wait on its
  first load that is not a constant (region W) into SPM: the loads before it overlap the previous layer's tail. They
  cannot touch what the segment two before still uses, because they follow the previous segment's entry in the
  in-order load queue; after a host segment (no loads of its own) the wait stays on the first dma.ld,
- records each segment's program-counter range, which reports use to attribute cycles to layers.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, fields

from compiler.errors import CompileError
from compiler.kernels.common.pipeline import sem_op
from isa import (
    DmaCopy,
    DmaFill,
    Gather,
    Halt,
    Instr,
    Program,
    ProgramConfig,
    Queue,
    Region,
    SemDecl,
    SemOp,
    Space,
    View,
)
from isa.arch import Arch
from isa.cost import instr_cost
from isa.units import Role, key_short, queues_with
from isa.verify import verify

ENTRY, EXIT = queues_with(Role.DMA_LOAD, Role.HOST), queues_with(Role.DMA_STORE, Role.HOST)
"""The queues a segment's first instruction (its entry) and last one (its exit) may be in: segments meet in DRAM."""


@dataclass(frozen=True)
class Segment:
    """One lowered op: its program and where its local DRAM regions live in the linked program."""

    name: str
    op: str
    program: Program
    bind: dict[str, tuple[str, int]] = field(default_factory=dict)
    macs: int = 0


@dataclass(frozen=True)
class LayerRange:
    """The instructions ``[start, end)`` of one segment in the linked program."""

    name: str
    op: str
    start: int
    end: int
    macs: int


_DRAM_ROLES = {DmaCopy: ("dst", "src"), DmaFill: ("dst",), Gather: ("dst", "table")}   # operands that may be DRAM


def _relocate(body: list[Instr], bind: dict[str, tuple[str, int]], names: dict[str, str]) -> list[Instr]:
    """``body`` with its DRAM operands moved into the global regions (``bind``; the pseudo-region ``SPM``: an SPM
    view at that byte address) and its semaphores renamed by ``names``, one copy per instruction. An instruction
    object that appears several times (a lowering shares equal instructions) is copied once, and each distinct run
    of waits or signals renamed once."""
    done: dict[int, Instr] = {}
    renamed: dict[tuple, tuple] = {(): ()}
    out = []
    for instr in body:
        new = done.get(id(instr))
        if new is None:
            views = {}
            for role in _DRAM_ROLES.get(type(instr), ()):
                v = getattr(instr, role)
                if v.space is Space.DRAM:
                    region, off = bind[v.region]
                    views[role] = View(Space.SPM, v.base + off, v.dtype, v.strides) if region == "SPM" else \
                        View(Space.DRAM, v.base + off, v.dtype, v.strides, region)
            waits, signals = instr.waits, instr.signals
            if not views and not waits and not signals:
                new = instr
            else:
                w, s = renamed.get(waits), renamed.get(signals)
                if w is None:
                    w = renamed[waits] = tuple([sem_op(names[o.name], o.count) for o in waits])
                if s is None:
                    s = renamed[signals] = tuple([sem_op(names[o.name], o.count) for o in signals])
                new = instr.resynced(w, s, **views)
            done[id(instr)] = new
        out.append(new)
    return out


def _shift_spm(body: list[Instr], offset: int) -> list[Instr]:
    """``body`` with every SPM operand ``offset`` bytes higher (an instruction object that appears several times is
    copied once)."""
    done: dict[int, Instr] = {}
    out = []
    for instr in body:
        new = done.get(id(instr))
        if new is None:
            changes = {role: View(Space.SPM, v.base + offset, v.dtype, v.strides) for role in _view_roles(type(instr))
                       if (v := getattr(instr, role)) is not None and v.space is Space.SPM}
            new = done[id(instr)] = instr.resynced(instr.waits, instr.signals, **changes) if changes else instr
        out.append(new)
    return out


@functools.cache
def _view_roles(cls: type) -> tuple[str, ...]:
    """The fields of instruction class ``cls`` that hold operands (views)."""
    return tuple(f.name for f in fields(cls) if "View" in str(f.type))


def is_constant_load(instr: Instr, bind: dict[str, tuple[str, int]] | None = None) -> bool:
    """A load of constants (global region W; a segment's local region bound there, given its ``bind``, which may
    leave out the others) into SPM: it does not depend on any earlier layer."""
    if not (isinstance(instr, DmaCopy) and instr.queue.unit.role is Role.DMA_LOAD and instr.src.space is Space.DRAM
            and instr.dst.space is Space.SPM):
        return False
    return (bind.get(instr.src.region, ("",))[0] if bind is not None else instr.src.region) == "W"


def leading_constants(program: Program, arch: Arch, bind: dict[str, tuple[str, int]] | None = None) -> int:
    """Cycles of the loads of constants (:func:`is_constant_load`) that start ``program``, before its first other
    instruction: what cross-layer prefetch hides behind the previous layer."""
    cycles = 0
    for i in program.instrs:
        if not is_constant_load(i, bind):
            break
        cycles += instr_cost(i, arch).cycles
    return cycles


def link(segments: list[Segment], config: ProgramConfig, regions: dict[str, int],
         prefetch_spm: int = 0) -> tuple[Program, list[LayerRange]]:
    """One program running ``segments`` in order; ``regions`` maps global region names to their sizes (bytes).

    prefetch_spm: 0, or half the SPM (bytes): segments compiled for that much may overlap (see the module doc)."""
    instrs: list[Instr] = []
    sems: dict[str, int] = {}
    layers = []
    entries = [next(i.queue for i in s.program.instrs if i.queue in ENTRY) for s in segments]
    halves = [bool(prefetch_spm) and s.program.config.spm <= prefetch_spm for s in segments]
    upper = [False] * len(segments)   # in the upper SPM half: every other one of a run of half-SPM segments
    exits = [next(i.queue for i in reversed(s.program.instrs) if i.queue in EXIT) for s in segments]
    for k, seg in enumerate(segments):
        report = verify(seg.program)
        init = {s.name: s.init for s in seg.program.sems}
        rename = {}
        for name in init:
            new = f"{name}_{key_short(report.producer[name])}_{key_short(report.consumer[name])}" \
                if name in report.producer and name in report.consumer else name
            rename[name] = new
            if sems.setdefault(new, init[name]) != init[name]:
                raise CompileError(f"semaphore {new} has initial counts {sems[new]} and {init[name]}")
        body = [i for i in seg.program.instrs if not isinstance(i, Halt)]
        overlap = k and halves[k] and halves[k - 1]
        if overlap and not upper[k - 1]:   # (before relocation: activations kept in SPM do not move)
            upper[k] = True
            body = _shift_spm(body, prefetch_spm)
        body = _relocate(body, seg.bind, rename)
        if k and exits[k - 1] is not entries[k]:
            first = next(j for j, i in enumerate(body) if i.queue in ENTRY)
            if overlap and entries[k - 1].unit.role is Role.DMA_LOAD:
                first = next((j for j, i in enumerate(body) if i.queue in ENTRY and not is_constant_load(i)), first)
            body[first] = body[first].resynced(body[first].waits + (SemOp(_dep_name(exits[k - 1], entries[k])),),
                                               body[first].signals)
        if k < len(segments) - 1 and exits[k] is not entries[k + 1]:
            last = next(j for j in range(len(body) - 1, -1, -1) if body[j].queue is exits[k])
            dep = _dep_name(exits[k], entries[k + 1])
            body[last] = body[last].resynced(body[last].waits, body[last].signals + (SemOp(dep),))
            sems[dep] = 0
        layers.append(LayerRange(seg.name, seg.op, len(instrs), len(instrs) + len(body), seg.macs))
        instrs += body
    instrs.append(Halt())
    program = Program(config, tuple(Region(n, i, s) for i, (n, s) in enumerate(regions.items())),
                      tuple(SemDecl(n, c) for n, c in sems.items()), tuple(instrs))
    return program, layers


def _dep_name(exit_q: Queue, entry_q: Queue) -> str:
    if (exit_q.unit.role, entry_q.unit.role) == (Role.DMA_STORE, Role.DMA_LOAD):
        return "seg_dep"
    return f"seg_dep_{exit_q.unit.short}_{entry_q.unit.short}"
