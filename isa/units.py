"""The units of the NPU, in one table: what every part of npusim knows of a unit kind.

A program's instructions go to *queues* (the ISA's ``queue`` field, :class:`Queue`); each queue feeds one unit, which
runs its instructions one at a time in order. :data:`UNITS` holds one :class:`UnitSpec` per unit kind: its queue and
assembly prefix, the name reports give it, its :class:`Role` (which decides how its time is accounted: the program
estimate's head and tail, the layer time split, ideal-memory runs), the port pools its instructions hold, the
abbreviation linked programs use in semaphore names and the hardware part its energy and area belong to. The verifier,
the cost model, both timing engines, statistics, plots, trace tracks, energy and the linker read this table; none of
them names a queue number or matches a unit by its name.

A machine's units are :func:`machine_units` of its Arch: each kind of the table once, in table order (the order of
statistics, report rows and trace tracks). ``Unit.index`` is a unit's position there, the number the timing engines
keep per instruction.

Adding a unit kind: a :class:`Queue` value, a row of :data:`UNITS`, its instructions' cost in :mod:`isa.cost` and their
semantics in :mod:`npusim.functional` (docs/isa.md, "Adding a unit").
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from isa.arch import Arch


class Queue(enum.IntEnum):
    """An in-order instruction queue (byte 1 of an encoded instruction); each feeds one unit. CTRL instructions stay in
    the dispatcher."""

    DMA_LD = 0
    DMA_ST = 1
    MXU = 2
    VPU = 3
    HOST = 4
    CTRL = 15

    @property
    def text(self) -> str:
        """The assembly prefix (``dma.ld``, ``mxu``, ...; ``ctrl`` for the dispatcher's own instructions)."""
        return _TEXT[self]

    @property
    def unit(self) -> UnitSpec:
        """The kind of unit this queue feeds (KeyError for CTRL, which feeds none)."""
        return UNIT_OF[self]


class Role(enum.Enum):
    """What a unit does for the program, which decides how its busy time is accounted."""

    DMA_LOAD = "dma-load"
    DMA_STORE = "dma-store"
    MATRIX = "matrix"
    VECTOR = "vector"
    HOST = "host"

    @property
    def is_dma(self) -> bool:
        """Moves data (DMA): free under ideal memory, holds a DMA channel."""
        return self in (Role.DMA_LOAD, Role.DMA_STORE)

    @property
    def is_compute(self) -> bool:
        """Computes on the NPU (matrix or vector)."""
        return self in (Role.MATRIX, Role.VECTOR)

    @property
    def time_part(self) -> str:
        """The part of a layer's time split its busy cycles claim: ``compute``, ``memory_stall`` or ``host``."""
        return "compute" if self.is_compute else "memory_stall" if self.is_dma else "host"


class Pool(enum.Enum):
    """A pool of identical ports: an instruction that needs one holds it from its start to its retire, and waits
    (stall cause :attr:`cause`) while all are held. Sized by the Arch (:meth:`size`)."""

    DMA_CHANNEL = "dma_channel"
    SPM_PORT = "spm_port"
    ACC_PORT = "acc_port"

    @property
    def cause(self) -> str:
        """The stall cause a wait for this pool counts as."""
        return "dma_channel" if self is Pool.DMA_CHANNEL else "sram_port"

    def size(self, arch: Arch) -> int:
        """Ports in the pool: ``dma.channels``, ``spm.ports`` or ``acc.ports``."""
        return {Pool.DMA_CHANNEL: arch.dma.channels, Pool.SPM_PORT: arch.spm.ports,
                Pool.ACC_PORT: arch.acc.ports}[self]


@dataclass(frozen=True)
class UnitSpec:
    """One kind of unit.

    ``queue``: the queue that feeds it (its assembly prefix is ``queue.text``); ``name``: its name in statistics and
    reports; ``role``: what it does; ``pools``: the port pools every one of its instructions holds while it runs (an
    instruction also holds an SPM or ACC port when it touches that memory, whatever its unit); ``short``: its
    abbreviation in the semaphore names the linker makes; ``part``: the hardware part of :mod:`isa.energy` whose area
    and leakage it is (None: priced per action only).
    """

    queue: Queue
    name: str
    role: Role
    pools: tuple[Pool, ...] = ()
    short: str = ""
    part: str | None = None

    @property
    def mnemonic(self) -> str:
        return self.queue.text


UNITS: tuple[UnitSpec, ...] = (
    UnitSpec(Queue.DMA_LD, "dma_load", Role.DMA_LOAD, (Pool.DMA_CHANNEL,), "ld"),
    UnitSpec(Queue.DMA_ST, "dma_store", Role.DMA_STORE, (Pool.DMA_CHANNEL,), "st"),
    UnitSpec(Queue.MXU, "matrix", Role.MATRIX, (), "mxu", "matrix"),
    UnitSpec(Queue.VPU, "vector", Role.VECTOR, (), "vpu", "vector"),
    UnitSpec(Queue.HOST, "host", Role.HOST, (), "host"),
)
"""Every unit kind, in the order of statistics, report rows and trace tracks."""

UNIT_OF: Mapping[Queue, UnitSpec] = MappingProxyType({u.queue: u for u in UNITS})
"""The unit kind each queue feeds."""
UNIT_QUEUES: tuple[Queue, ...] = tuple(u.queue for u in UNITS)
"""The queues that feed units, in table order (every queue but CTRL)."""
UNIT_INDEX: Mapping[Queue, int] = MappingProxyType({u.queue: k for k, u in enumerate(UNITS)} | {Queue.CTRL: -1})
"""The position in :data:`UNITS` (and in :func:`machine_units`) of the unit each queue feeds; -1 for CTRL."""
_TEXT = {Queue.DMA_LD: "dma.ld", Queue.DMA_ST: "dma.st", Queue.MXU: "mxu", Queue.VPU: "vpu", Queue.HOST: "host",
         Queue.CTRL: "ctrl"}


def _unit_of_queue() -> np.ndarray:
    out = np.full(max(Queue) + 1, -1, np.int64)
    for q, u in UNIT_INDEX.items():
        out[q] = u
    return out


_UNIT_OF_QUEUE = _unit_of_queue()


def unit_indices(queues: np.ndarray) -> np.ndarray:
    """:data:`UNIT_INDEX` of each queue value in ``queues`` (an integer array): per instruction, its unit's index (-1
    for control)."""
    return _UNIT_OF_QUEUE[queues]


def queues_with(*roles: Role) -> frozenset[Queue]:
    """The queues whose units have one of ``roles``."""
    return frozenset(u.queue for u in UNITS if u.role in roles)


DMA_QUEUES = queues_with(Role.DMA_LOAD, Role.DMA_STORE)
"""Queues of data-moving units (they hold a DMA channel and are free under ideal memory)."""


@dataclass(frozen=True)
class Unit:
    """One unit of a machine: a kind of the table (``spec``), its ``index`` among the machine's units (the number the
    timing engines keep per instruction) and its ``name`` in statistics and reports."""

    spec: UnitSpec
    index: int
    name: str

    @property
    def queue(self) -> Queue:
        return self.spec.queue

    @property
    def role(self) -> Role:
        return self.spec.role


_MACHINE = tuple(Unit(spec, k, spec.name) for k, spec in enumerate(UNITS))


def machine_units(arch: Arch | None = None) -> tuple[Unit, ...]:
    """The units of the machine ``arch`` describes, in table order: one of each kind today (the units of any Arch)."""
    return _MACHINE


def unit_of_name(name: str) -> UnitSpec:
    """The unit kind whose report name is ``name`` (KeyError naming the known ones if none is)."""
    for u in UNITS:
        if u.name == name:
            return u
    raise KeyError(f"no unit named {name!r}; units: {', '.join(u.name for u in UNITS)}")
