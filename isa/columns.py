"""A program's per-instruction facts as numpy columns, read from the instructions once, for vectorised checks
(:func:`isa.verify.verify`) and array-based evaluations (the simulator's compiled timing run)."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain, repeat
from operator import attrgetter

import numpy as np

from isa.instructions import Halt
from isa.program import Program

_QUEUE, _UNIT, _NAME, _COUNT = attrgetter("queue"), attrgetter("unit"), attrgetter("name"), attrgetter("count")



@dataclass(frozen=True)
class SemOps:
    """One kind of semaphore operation (waits or signals) of every instruction, in CSR form: pc's operations are
    ``sem[ptr[pc]:ptr[pc + 1]]`` (index into ``program.sems``, -1 for an undeclared name) with counts ``count``."""

    ptr: np.ndarray
    sem: np.ndarray
    count: np.ndarray

    @property
    def pc(self) -> np.ndarray:
        """Per operation, the pc of its instruction."""
        return np.repeat(np.arange(self.ptr.size - 1), np.diff(self.ptr))


@dataclass(frozen=True)
class Columns:
    """Per pc: ``queue`` (the :class:`isa.Queue` value), ``key`` (its unit's :func:`isa.units.unit_key`: queue and
    ordinal; :data:`isa.units.CTRL_KEY` for control), ``halt`` (is a Halt), and the ``waits`` and ``signals``."""

    queue: np.ndarray
    key: np.ndarray
    halt: np.ndarray
    waits: SemOps
    signals: SemOps


def _sem_ops(program: Program, ops: str) -> SemOps:
    get, instrs = attrgetter(ops), program.instrs
    ptr = np.zeros(len(instrs) + 1, np.int64)
    ptr[1:] = np.fromiter(map(len, map(get, instrs)), np.int64, len(instrs))
    np.cumsum(ptr, out=ptr)
    flat = list(chain.from_iterable(map(get, instrs)))
    sem = np.fromiter(map(program.sem_index.get, map(_NAME, flat), repeat(-1)), np.int64, len(flat))
    return SemOps(ptr, sem, np.fromiter(map(_COUNT, flat), np.int64, len(flat)))


def unit_keys(instrs) -> np.ndarray:
    """Per instruction, its unit's :func:`isa.units.unit_key` (queue and ordinal; ``CTRL_KEY`` for control)."""
    n = len(instrs)
    return np.fromiter(map(_QUEUE, instrs), np.int64, n) | np.fromiter(map(_UNIT, instrs), np.int64, n) << 4


def columns(program: Program) -> Columns:
    """The columns of ``program``."""
    instrs, n = program.instrs, len(program.instrs)
    key = unit_keys(instrs)
    return Columns(key & 15, key,
                   np.fromiter(map(Halt.__instancecheck__, instrs), np.bool_, n),
                   _sem_ops(program, "waits"), _sem_ops(program, "signals"))
