"""The three-stage ring pipeline every lowering uses: loads (dma.ld) -> compute (one unit) -> stores (dma.st).

Each stage hands buffers to the next through a pair of semaphores (``*_full`` producer -> consumer, ``*_empty``
back, initial count = ring depth 2), so a step's loads run while the previous step computes and the one before
stores, with no software pipelining in program order. Callers pick ring slot ``step % 2`` for their buffers.

A step may have no stores (a reduction accumulating several input tiles on chip before one output tile is stored):
its compute then takes no output buffer, and output buffers are counted apart (``out_slot``).
"""

from __future__ import annotations

import functools

from isa import Halt, Instr, Program, ProgramConfig, Region, SemDecl, SemOp, Sync
from isa.instructions import MAX_SYNC_SLOTS

SEMS = (SemDecl("in_full", 0), SemDecl("in_empty", 2), SemDecl("out_full", 0), SemDecl("out_empty", 2))


def vector_config(spm: int) -> ProgramConfig:
    """The ``.config`` of a program that does not use the matrix unit: any array, ``spm`` bytes of SPM."""
    return ProgramConfig(rows=1, cols=1, spm=spm, acc=4096)


@functools.cache
def sem_op(name: str, count: int = 1) -> SemOp:
    """``SemOp(name, count)``, one object per pair (programs name the same few semaphores thousands of times)."""
    return SemOp(name, count)


def with_sync(instr: Instr, waits: tuple[str, ...] = (), signals: tuple[str, ...] = ()) -> Instr:
    """``instr`` with extra semaphore waits/signals appended."""
    if not waits and not signals:
        return instr
    return instr.resynced(instr.waits + tuple(map(sem_op, waits)), instr.signals + tuple(map(sem_op, signals)))


def synced(instrs: list, waits: tuple[str, ...], signals: tuple[str, ...]) -> list:
    """``instrs`` waiting before the first and signalling after the last; signals that do not fit the last
    instruction's sync slots go to a ``.sync`` right after it in the same queue (it runs as that one retires)."""
    out = [with_sync(instrs[0], waits=waits)] + instrs[1:]
    fit = MAX_SYNC_SLOTS - len(out[-1].waits) - len(out[-1].signals)
    out[-1] = with_sync(out[-1], signals=signals[:fit])
    return out + ([with_sync(Sync(on=out[-1].queue), signals=signals[fit:])] if signals[fit:] else [])


class RingPipeline:
    """Collects steps of (loads, compute, stores) and wires their semaphores."""

    def __init__(self) -> None:
        self.instrs: list[Instr] = []
        self.steps = 0
        self.out_steps = 0

    @property
    def slot(self) -> int:
        """The ring slot (0 or 1) of the next step."""
        return self.steps % 2

    @property
    def out_slot(self) -> int:
        """The output ring slot (0 or 1) of the next step that stores (the same as ``slot`` while every step
        stores)."""
        return self.out_steps % 2

    def step(self, loads: list[Instr], compute: list[Instr], stores: list[Instr]) -> None:
        loads, compute, stores = list(loads), list(compute), list(stores)
        out = ("out_empty",) if stores else ()
        loads[0] = with_sync(loads[0], waits=("in_empty",))
        loads[-1] = with_sync(loads[-1], signals=("in_full",))
        compute[0] = with_sync(compute[0], waits=("in_full", *out))
        compute[-1] = with_sync(compute[-1], signals=("in_empty", *("out_full",)[:len(out)]))
        if stores:
            stores[0] = with_sync(stores[0], waits=("out_full",))
            stores[-1] = with_sync(stores[-1], signals=("out_empty",))
            self.out_steps += 1
        self.instrs += loads + compute + stores
        self.steps += 1

    def program(self, config: ProgramConfig, regions: tuple[Region, ...]) -> Program:
        return Program(config, regions, SEMS, tuple(self.instrs) + (Halt(),))
