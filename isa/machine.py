"""The units of a machine: each kind of the unit table (:data:`isa.units.UNITS`) as many times as an Arch's ``units``
section says (``units.matrix = 2``: two matrix units per core), in table order, the order of statistics, report rows
and trace tracks. ``Unit.index`` is a unit's position there, the number the timing engines keep per instruction;
:meth:`Machine.indices` maps instructions' unit keys (:func:`isa.units.unit_key`) to it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from isa.arch import Arch
from isa.units import UNITS, Pool, Queue, Role, UnitSpec, key_text, unit_key


@dataclass(frozen=True)
class Unit:
    """One unit of a machine: a kind of the table (``spec``), its ``ordinal`` among the units of its kind, its
    ``index`` among the machine's units (the number the timing engines keep per instruction) and its ``name`` in
    statistics and reports (the kind's name, with the ordinal when it is not 0: ``matrix``, ``matrix1``)."""

    spec: UnitSpec
    index: int
    name: str
    ordinal: int = 0

    @property
    def queue(self) -> Queue:
        return self.spec.queue

    @property
    def role(self) -> Role:
        return self.spec.role

    @property
    def key(self) -> int:
        """Its :func:`unit_key`: what a program's instructions name it by."""
        return unit_key(self.spec.queue, self.ordinal)

    @property
    def label(self) -> str:
        """Its queue as reports and assembly name it (``mxu``, ``mxu[1]``)."""
        return key_text(self.key)


@dataclass(frozen=True, eq=False)
class Machine:
    """The units of the machine an Arch describes: each kind of the table (in table order) as many times as the
    Arch's ``units`` section says (a kind that is not per core once), ordinals ascending. ``index_of_key``: per unit
    key (0-255), the index of that unit, -1 for control and for a unit the machine does not have."""

    units: tuple[Unit, ...]
    index_of_key: np.ndarray

    def index(self, key: int) -> int:
        """The index of the unit with key ``key`` (-1 for control or a unit the machine lacks)."""
        return int(self.index_of_key[key])

    def indices(self, keys: np.ndarray) -> np.ndarray:
        """:meth:`index` of every key of an integer array."""
        return self.index_of_key[keys]

    def count(self, spec: UnitSpec) -> int:
        """How many units of kind ``spec`` it has."""
        return sum(u.spec is spec for u in self.units)


def units_per_kind(arch: Arch) -> dict[UnitSpec, int]:
    """How many units of each kind the machine of ``arch`` has (``arch.units``; 1 of a kind that is not per core)."""
    return {spec: getattr(arch.units, spec.name) if spec.per_core else 1 for spec in UNITS}


@functools.lru_cache(maxsize=64)
def machine(arch: Arch) -> Machine:
    """The :class:`Machine` of ``arch`` (cached: an Arch is frozen)."""
    units: list[Unit] = []
    for spec, count in units_per_kind(arch).items():
        for ordinal in range(count):
            units.append(Unit(spec, len(units), spec.name if not ordinal else f"{spec.name}{ordinal}", ordinal))
    index = np.full(256, -1, np.int64)
    for u in units:
        index[u.key] = u.index
    index.setflags(write=False)
    return Machine(tuple(units), index)


def machine_units(arch: Arch) -> tuple[Unit, ...]:
    """The units of the machine ``arch`` describes (:func:`machine`), in the order of statistics, reports and traces."""
    return machine(arch).units


def pool_ports(pool: Pool, arch: Arch) -> int:
    """Ports in a pool of ``arch``: ``dma.channels``, ``spm.ports`` or ``acc.ports``."""
    return {Pool.DMA_CHANNEL: arch.dma.channels, Pool.SPM_PORT: arch.spm.ports, Pool.ACC_PORT: arch.acc.ports}[pool]
