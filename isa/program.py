"""A program: its header (config, DRAM regions, semaphores) and its program-order instruction stream."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property

from isa.dtypes import Space
from isa.errors import IsaError
from isa.instructions import Instr
from isa.view import NAME_CHARS

MAX_REGIONS = 16
MAX_SEMS = 256
SEM_MAX = 255


def _check_name(name: str, what: str) -> None:
    if not name or len(name) > 31 or any(c not in NAME_CHARS for c in name) or name[0].isdigit():
        raise IsaError(f"{what} name must be 1-31 letters, digits or '_' not starting with a digit, not {name!r}")


@dataclass(frozen=True, slots=True)
class ProgramConfig:
    """What the program was built for: array rows x cols, SPM and ACC bytes. The simulator checks it fits the Arch."""

    rows: int
    cols: int
    spm: int
    acc: int

    def __post_init__(self) -> None:
        for name in ("rows", "cols", "spm", "acc"):
            v = getattr(self, name)
            if not isinstance(v, int) or not 1 <= v < 2**32:
                raise IsaError(f".config {name} must be a positive 32-bit integer, not {v!r}")


@dataclass(frozen=True, slots=True)
class Region:
    """A DRAM region: ``.region NAME rINDEX BYTES``; its base address is bound at launch."""

    name: str
    index: int
    size: int

    def __post_init__(self) -> None:
        _check_name(self.name, "region")
        if not 0 <= self.index < MAX_REGIONS:
            raise IsaError(f"region index must be in [0, {MAX_REGIONS}), not {self.index}")
        if not 1 <= self.size < 2**32:
            raise IsaError(f"region {self.name} size must be in [1, 2**32) bytes, not {self.size}")


@dataclass(frozen=True, slots=True)
class SemDecl:
    """A counting semaphore: ``.sem NAME INIT``."""

    name: str
    init: int = 0

    def __post_init__(self) -> None:
        _check_name(self.name, "semaphore")
        if not 0 <= self.init <= SEM_MAX:
            raise IsaError(f"semaphore {self.name} initial count must be in [0, {SEM_MAX}], not {self.init}")


@dataclass(frozen=True)
class Program:
    """A whole program. ``instrs`` is the one program-order stream the dispatcher splits into the unit queues."""

    config: ProgramConfig
    regions: tuple[Region, ...]
    sems: tuple[SemDecl, ...]
    instrs: tuple[Instr, ...]

    def __post_init__(self) -> None:
        if len(self.regions) > MAX_REGIONS or len(self.sems) > MAX_SEMS:
            raise IsaError(f"a program has at most {MAX_REGIONS} regions and {MAX_SEMS} semaphores")
        for what, items, key in (("region", self.regions, "name"), ("region index", self.regions, "index"),
                                 ("semaphore", self.sems, "name")):
            keys = [getattr(x, key) for x in items]
            dup = {k for k in keys if keys.count(k) > 1}
            if dup:
                raise IsaError(f"{what} {sorted(dup)[0]!r} is declared twice")

    @cached_property
    def region_map(self) -> dict[str, Region]:
        return {r.name: r for r in self.regions}

    @cached_property
    def sem_index(self) -> dict[str, int]:
        return {s.name: i for i, s in enumerate(self.sems)}

    @cached_property
    def sha256(self) -> str:
        """sha256 (hex) of the program's canonical assembly (:func:`isa.asm.format_program`): equal for programs of
        the same instructions. Computed once per Program (8-10 us per instruction on the zoo ResNets), however many
        runs report it."""
        from isa.asm import format_program  # (isa.asm builds on this module)

        return hashlib.sha256(format_program(self).encode()).hexdigest()

    def spm_top(self) -> int:
        """One past the highest SPM byte any operand of the program touches (bytes; 0 if none)."""
        return max((view.span(getattr(i, "src_shape", i.shape) if role == "src" else i.shape, extra)[1]
                    for i in self.instrs for role, view, extra in i.views() if view.space is Space.SPM), default=0)

    def __len__(self) -> int:
        return len(self.instrs)
