"""The units of the NPU, in one table: what every part of npusim knows of a unit kind.

A program's instructions go to *queues* (the ISA's ``queue`` field, :class:`Queue`); each queue feeds one unit, which
runs its instructions one at a time in order. :data:`UNITS` holds one :class:`UnitSpec` per unit kind: its queue and
assembly prefix, the name reports give it, its :class:`Role` (which decides how its time is accounted: the program
estimate's head and tail, the layer time split, ideal-memory runs), the port pools its instructions hold, the
abbreviation linked programs use in semaphore names and the hardware part its energy and area belong to. The verifier,
the cost model, both timing engines, statistics, plots, trace tracks, energy and the linker read this table; none of
them names a queue number or matches a unit by its name.

An instruction names its unit by its queue and its ``unit`` field (the ordinal among the units of that kind, 0 by
default); the pair, encoded as one integer, is its :func:`unit_key`. How many units of each kind a machine has is the
Arch's ``units`` section, and the machine's units are :mod:`isa.machine`.

Adding a unit kind: a :class:`Queue` value, a row of :data:`UNITS`, its instructions' cost in :mod:`isa.cost` and their
semantics in :mod:`npusim.functional` (docs/isa.md, "Adding a unit kind").
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType


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
    (stall cause :attr:`cause`) while all are held. Sized by the Arch (:func:`isa.machine.pool_ports`)."""

    DMA_CHANNEL = "dma_channel"
    SPM_PORT = "spm_port"
    ACC_PORT = "acc_port"

    @property
    def cause(self) -> str:
        """The stall cause a wait for this pool counts as."""
        return "dma_channel" if self is Pool.DMA_CHANNEL else "sram_port"



@dataclass(frozen=True)
class UnitSpec:
    """One kind of unit.

    ``queue``: the queue that feeds it; ``mnemonic``: that queue's assembly prefix (``queue.text``); ``name``: its
    name in statistics and reports; ``role``: what it does; ``pools``: the port pools every one of its instructions
    holds while it runs (an instruction also holds an SPM or ACC port when it touches that memory, whatever its unit);
    ``short``: its abbreviation in the semaphore names the linker makes; ``part``: the hardware part of
    :mod:`isa.energy` whose area and leakage it is (None: priced per action only); ``per_core``: a core has
    ``units.<name>`` of them (the Arch's ``units`` section), else the machine has one (the host).
    """

    queue: Queue
    mnemonic: str
    name: str
    role: Role
    pools: tuple[Pool, ...] = ()
    short: str = ""
    part: str | None = None
    per_core: bool = True


UNITS: tuple[UnitSpec, ...] = (
    UnitSpec(Queue.DMA_LD, "dma.ld", "dma_load", Role.DMA_LOAD, (Pool.DMA_CHANNEL,), "ld"),
    UnitSpec(Queue.DMA_ST, "dma.st", "dma_store", Role.DMA_STORE, (Pool.DMA_CHANNEL,), "st"),
    UnitSpec(Queue.MXU, "mxu", "matrix", Role.MATRIX, (), "mxu", "matrix"),
    UnitSpec(Queue.VPU, "vpu", "vector", Role.VECTOR, (), "vpu", "vector"),
    UnitSpec(Queue.HOST, "host", "host", Role.HOST, (), "host", per_core=False),
)
"""Every unit kind, in the order of statistics, report rows and trace tracks."""

UNIT_OF: Mapping[Queue, UnitSpec] = MappingProxyType({u.queue: u for u in UNITS})
"""The unit kind each queue feeds."""
UNIT_QUEUES: tuple[Queue, ...] = tuple(u.queue for u in UNITS)
"""The queues that feed units, in table order (every queue but CTRL)."""
MAX_PER_KIND = 16
"""Units of one kind a core may have: an instruction names its unit by a 4-bit ordinal (its ``unit`` field, the high
half of the encoded queue byte)."""
_TEXT = {u.queue: u.mnemonic for u in UNITS} | {Queue.CTRL: "ctrl"}
CTRL_KEY = int(Queue.CTRL)
"""The unit key of control instructions (the dispatcher's own; no unit runs them)."""


def unit_key(queue: Queue, ordinal: int = 0) -> int:
    """The unit of a program that runs ``queue``'s ``ordinal``-th unit as one integer: the encoded queue byte
    (``queue | ordinal << 4``). Programs, the verifier and the race sanitizer tell units apart by it."""
    return int(queue) | ordinal << 4


def key_text(key: int) -> str:
    """How a unit key reads: its queue's assembly prefix, with the ordinal when it is not 0 (``mxu``, ``mxu[1]``)."""
    q, ordinal = Queue(key & 15), key >> 4
    return q.text if not ordinal else f"{q.text}[{ordinal}]"


def key_queue(key: int) -> Queue:
    """The queue of a unit key."""
    return Queue(key & 15)


def key_short(key: int) -> str:
    """A unit key's abbreviation in names the linker makes: its kind's ``short``, with the ordinal when it is not 0."""
    ordinal = key >> 4
    return UNIT_OF[Queue(key & 15)].short + (str(ordinal) if ordinal else "")


def queues_with(*roles: Role) -> frozenset[Queue]:
    """The queues whose units have one of ``roles``."""
    return frozenset(u.queue for u in UNITS if u.role in roles)


DMA_QUEUES = queues_with(Role.DMA_LOAD, Role.DMA_STORE)
"""Queues of data-moving units (they hold a DMA channel and are free under ideal memory)."""


def unit_of_name(name: str) -> UnitSpec:
    """The unit kind whose report name is ``name`` (KeyError naming the known ones if none is)."""
    for u in UNITS:
        if u.name == name:
            return u
    raise KeyError(f"no unit named {name!r}; units: {', '.join(u.name for u in UNITS)}")
