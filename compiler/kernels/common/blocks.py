"""Cutting an extent into the blocks the array takes: runs of equal blocks (shared by the GEMM and the convolutions),
and a weight tile as the extents of one copy."""

from __future__ import annotations

from functools import lru_cache

from isa.view import MAX_EXTENT


@lru_cache(maxsize=4096)
def equal_blocks(total: int, block: int) -> tuple[tuple[int, int, int], ...]:
    """``total`` elements in blocks of ``block``, as (first block index, blocks, elements per block) runs of equal
    blocks: the full blocks, then the rest (one run each, when there are any)."""
    full, rest = divmod(total, block)
    return ((0, full, block),) * bool(full) + ((full, 1, rest),) * bool(rest)


def tile_extents(rows: int, cols: int, es: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A dense ``rows x cols`` weight tile of ``es``-byte elements as a copy's innermost extents and their strides
    (bytes): one run of ``rows * cols`` elements, or ``rows`` runs of ``cols`` when that exceeds an instruction's
    extent (arrays of 256 x 256 and more)."""
    return ((rows * cols,), (es,)) if rows * cols <= MAX_EXTENT else ((rows, cols), (cols * es, es))
