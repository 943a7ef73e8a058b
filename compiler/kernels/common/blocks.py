"""Cutting an extent into the blocks the array takes: runs of equal blocks (shared by the GEMM and the convolutions)."""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=4096)
def equal_blocks(total: int, block: int) -> tuple[tuple[int, int, int], ...]:
    """``total`` elements in blocks of ``block``, as (first block index, blocks, elements per block) runs of equal
    blocks: the full blocks, then the rest (one run each, when there are any)."""
    full, rest = divmod(total, block)
    return ((0, full, block),) * bool(full) + ((full, 1, rest),) * bool(rest)
