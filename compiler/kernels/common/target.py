"""What a program generator needs to know of the NPU: :class:`Target`, derived from an :class:`~isa.arch.Arch`.

Every generator (:func:`compiler.kernels.gemm.tiled_gemm`, :func:`compiler.kernels.conv2d.conv2d`, the vector streams,
...) takes one ``Target`` instead of loose numbers: the array's shape and dataflow, the SRAM it may use and the Arch its
candidate tilings are priced on (:mod:`isa.cost`). A lowering that gets only part of the scratchpad (half of it under
cross-layer prefetch, what the activation arena leaves) hands down :meth:`Target.with_spm`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace

from isa import ProgramConfig
from isa.arch import Arch

BLOCK_SHAPES = 3
"""Block shapes of one area :meth:`Target.array_blocks` offers (the most nearly square ones)."""


@dataclass(frozen=True)
class Target:
    """The NPU as the program generators see it (sizes in bytes). Build it with :meth:`of`."""

    arch: Arch
    """The whole description, for pricing with :mod:`isa.cost` (its ``spm.size`` is the whole scratchpad)."""
    rows: int
    """Processing-element rows of the array (the k extent of a weight tile under ws)."""
    cols: int
    """Processing-element columns (the n extent)."""
    dataflow: str
    """``ws``, ``os`` or ``is``."""
    max_rows: int
    """Largest m one ``mxu.mm`` streams (rows)."""
    spm: int
    """Scratchpad bytes the program may use."""
    acc: int
    """Accumulator bytes."""
    bank_width: int
    """Bytes one SPM bank delivers per cycle."""
    lanes: int
    """Vector-unit elements per cycle."""

    @classmethod
    def of(cls, arch: Arch) -> Target:
        """The target of a whole ``arch`` (all of its SPM)."""
        m = arch.matrix
        return cls(arch, m.rows, m.cols, m.dataflow, m.max_rows, arch.spm.size, arch.acc.size, arch.spm.bank_width,
                   arch.vector.lanes)

    def with_spm(self, size: int) -> Target:
        """The same NPU with ``size`` bytes of scratchpad (what a layer gets of a shared SPM)."""
        return replace(self, spm=size)

    def with_array(self, rows: int, cols: int) -> Target:
        """The same NPU driven as a ``rows x cols`` block of its array (a partially filled array): a generator then
        blocks reductions, output channels and weight tiles by it (smaller weight tiles, smaller accumulator tiles),
        and :mod:`isa.cost` still prices the whole array (its fill, drain and preload)."""
        return replace(self, rows=rows, cols=cols)

    def array_blocks(self) -> Iterator[tuple[Target, ...]]:
        """The blocks of the array a search may fall back to (:func:`compiler.kernels.common.search.on_array_blocks`),
        by area: level L holds the blocks ``ceil(rows / 2**i) x ceil(cols / 2**(L - i))`` not seen at a lower
        level, the ``BLOCK_SHAPES`` most nearly square first; the levels end with the 1 x 1 block."""
        seen = {(self.rows, self.cols)}
        level = 0
        while (1, 1) not in seen:
            level += 1
            shapes = dict.fromkeys((-(-self.rows // (1 << i)), -(-self.cols // (1 << (level - i))))
                                   for i in range(level + 1))
            new = sorted((s for s in shapes if s not in seen), key=lambda s: abs(s[0].bit_length()
                                                                                   - s[1].bit_length()))
            seen.update(shapes)
            if new:
                yield tuple(self.with_array(r, c) for r, c in new[:BLOCK_SHAPES])

    @property
    def config(self) -> ProgramConfig:
        """The ``.config`` line of a program for this target (array shape and SRAM sizes)."""
        return ProgramConfig(rows=self.rows, cols=self.cols, spm=self.spm, acc=self.acc)

    @property
    def bank_row(self) -> int:
        """Bytes of one row across all SPM banks (banks x bank width)."""
        return self.arch.spm.banks * self.bank_width
