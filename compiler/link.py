"""Linking: single-op programs (segments) become one program over shared DRAM regions.

Each lowering (``compiler.gemm``, ``compiler.conv``, ``compiler.vector``) produces a self-contained program with its
own small DRAM regions (X, Wt, Y, ...). :func:`link` concatenates them in order and

- relocates every DRAM view into the global regions (``Segment.bind``: local region -> (global region, byte offset)),
- renames semaphores by the pair of queues they connect (a segment's ``in_full`` feeding the matrix unit and another's
  feeding the vector unit become two semaphores, keeping one producer and one consumer queue each; rings are balanced
  within a segment, so later segments reuse them),
- orders segments: the first load of a segment waits for the last store of the one before (semaphore ``seg_dep``,
  dma.st -> dma.ld), so a layer reads its input only after the previous layer wrote it,
- records each segment's program-counter range, which reports use to attribute cycles to layers.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from isa import DmaCopy, DmaFill, Halt, Instr, Program, ProgramConfig, Queue, Region, SemDecl, SemOp, Space
from isa.verify import verify

from .errors import CompileError

SHORT = {Queue.DMA_LD: "ld", Queue.DMA_ST: "st", Queue.MXU: "mxu", Queue.VPU: "vpu"}


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


def _relocate(instr: Instr, bind: dict[str, tuple[str, int]]) -> Instr:
    if not isinstance(instr, DmaCopy | DmaFill):
        return instr
    changes = {}
    for role in ("dst", "src"):
        v = getattr(instr, role, None)
        if v is not None and v.space is Space.DRAM:
            region, off = bind[v.region]
            changes[role] = replace(v, region=region, base=v.base + off)
    return replace(instr, **changes)


def link(segments: list[Segment], config: ProgramConfig, regions: dict[str, int]) -> tuple[Program, list[LayerRange]]:
    """One program running ``segments`` in order; ``regions`` maps global region names to their sizes (bytes)."""
    instrs: list[Instr] = []
    sems: dict[str, int] = {}
    layers = []
    for k, seg in enumerate(segments):
        report = verify(seg.program)
        init = {s.name: s.init for s in seg.program.sems}
        rename = {}
        for name in init:
            new = f"{name}_{SHORT[report.producer[name]]}_{SHORT[report.consumer[name]]}" \
                if name in report.producer and name in report.consumer else name
            rename[name] = new
            if sems.setdefault(new, init[name]) != init[name]:
                raise CompileError(f"semaphore {new} has initial counts {sems[new]} and {init[name]}")
        body = [i for i in seg.program.instrs if not isinstance(i, Halt)]
        body = [replace(_relocate(i, seg.bind), waits=tuple(SemOp(rename[o.name], o.count) for o in i.waits),
                        signals=tuple(SemOp(rename[o.name], o.count) for o in i.signals)) for i in body]
        if k:
            first = next(j for j, i in enumerate(body) if i.queue is Queue.DMA_LD)
            body[first] = replace(body[first], waits=body[first].waits + (SemOp("seg_dep"),))
        if k < len(segments) - 1:
            last = max(j for j, i in enumerate(body) if i.queue is Queue.DMA_ST)
            body[last] = replace(body[last], signals=body[last].signals + (SemOp("seg_dep"),))
            sems["seg_dep"] = 0
        layers.append(LayerRange(seg.name, seg.op, len(instrs), len(instrs) + len(body), seg.macs))
        instrs += body
    instrs.append(Halt())
    program = Program(config, tuple(Region(n, i, s) for i, (n, s) in enumerate(regions.items())),
                      tuple(SemDecl(n, c) for n, c in sems.items()), tuple(instrs))
    return program, layers
