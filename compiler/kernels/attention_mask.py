"""The constant additive mask of a fused attention (:mod:`compiler.kernels.attention`), cut into the blocks of a tiling.

Each ``tq x tk`` block of scores of each distinct mask (the mask's own leading dims; heads it is broadcast over share
one) is one of three kinds:

- ``DEAD``: every entry is at most :data:`DEAD_BELOW` (``-inf``, ``finfo(float32).min``, ``-1e30``) and every row
  of the block has a live entry (above it) elsewhere. The block's ``exp(s + mask - max)`` terms are then exactly 0 in
  float32 for any scores below about ``1e22`` in magnitude, so the block is skipped: no key or value tile is loaded
  for it and nothing is computed (the tiles above a causal mask's diagonal). A row that is masked everywhere keeps
  all its blocks (onnxruntime's NaN, or the uniform weights of a finite mask, come out as they would);
- ``ZERO``: every entry is 0: the scores are used as they are;
- a partial block: anything else; its entries are added to the scores. Blocks with the same entries are stored once
  (a causal mask's diagonal blocks are one block when ``tq == tk`` and the tiles are aligned).

Counting is by integral images over the mask (once), so classifying the blocks of a tiling costs one lookup per
block; the distinct partial blocks are only found for a tiling that is built or priced (:meth:`MaskInfo.blocks`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

DEAD_BELOW = -1e30
"""A mask entry at or below this is dead (see the module docstring)."""
DEAD, ZERO = -2, -1
"""Block kinds; a partial block's kind is the index of its entries in :attr:`MaskBlocks.table`."""


@dataclass(frozen=True)
class MaskBlocks:
    """A tiling's mask blocks: ``kinds[m, qt, kt]`` (:data:`DEAD`, :data:`ZERO` or the index of a distinct partial
    block), and ``table``, the distinct partial blocks one after the other, each its ``rows x cols`` entries
    row-major (f32), at element ``offsets[i]``, of shape ``shapes[i]``."""

    kinds: np.ndarray
    table: np.ndarray
    offsets: tuple[int, ...]
    shapes: tuple[tuple[int, int], ...]


@dataclass(frozen=True, eq=False)
class MaskInfo:
    """An additive mask ``[M, Lq, Lk]`` (``M`` distinct masks; head ``h`` of the attention uses ``of[h]``)."""

    values: np.ndarray
    of: tuple[int, ...]
    _blocks: dict = field(default_factory=dict, repr=False)

    @classmethod
    def of_mask(cls, mask: np.ndarray, lead: tuple[int, ...], lq: int, lk: int) -> MaskInfo:
        """The mask of scores ``[*lead, lq, lk]`` from a constant broadcastable to them."""
        m = np.asarray(mask, np.float32)
        m = m.reshape((1,) * (len(lead) + 2 - m.ndim) + m.shape)
        mlead = m.shape[:-2]
        values = np.ascontiguousarray(np.broadcast_to(m, mlead + (lq, lk)).reshape(-1, lq, lk))
        idx = np.arange(int(np.prod(mlead, dtype=np.int64))).reshape(mlead)
        of = np.broadcast_to(idx, lead).reshape(-1) if lead else idx.reshape(-1)
        return cls(values, tuple(int(i) for i in of))

    @cached_property
    def _sums(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Integral images of dead and of nonzero entries ``[M, Lq+1, Lk+1]``, and per row whether it has a live
        entry ``[M, Lq]``."""
        v = self.values
        dead, nonzero = v <= DEAD_BELOW, v != 0
        live = ~dead.all(axis=2)

        count = np.int32 if v.shape[1] * v.shape[2] < 2**31 else np.int64   # (a mask's counts, in half the bytes)

        def integral(b: np.ndarray) -> np.ndarray:
            out = np.zeros((b.shape[0], b.shape[1] + 1, b.shape[2] + 1), count)
            np.cumsum(b, axis=1, dtype=count, out=out[:, 1:, 1:])
            np.cumsum(out[:, 1:, 1:], axis=2, out=out[:, 1:, 1:])
            return out
        return integral(dead), integral(nonzero), np.concatenate(
            [np.zeros((v.shape[0], 1), np.int64), live.cumsum(axis=1, dtype=np.int64)], axis=1)

    def kinds(self, tq: int, tk: int) -> np.ndarray:
        """``[M, qtiles, ktiles]`` block kinds with partial blocks all marked 0 (cheap: no table)."""
        dead, nonzero, live = self._sums
        lq, lk = self.values.shape[1:]
        r0 = np.arange(0, lq, tq)
        r1 = np.minimum(r0 + tq, lq)
        c0 = np.arange(0, lk, tk)
        c1 = np.minimum(c0 + tk, lk)

        def count(s: np.ndarray) -> np.ndarray:
            def at(r: np.ndarray, c: np.ndarray) -> np.ndarray:
                return s[:, r[:, None], c[None, :]]
            return at(r1, c1) - at(r0, c1) - at(r1, c0) + at(r0, c0)
        area = (r1 - r0)[:, None] * (c1 - c0)[None, :]
        rows_live = (live[:, r1] - live[:, r0]) == (r1 - r0)[None, :]
        out = np.zeros((self.values.shape[0], r0.size, c0.size), np.int64)
        out[count(nonzero) == 0] = ZERO
        out[(count(dead) == area[None]) & rows_live[:, :, None]] = DEAD
        return out

    def blocks(self, tq: int, tk: int) -> MaskBlocks:
        """The tiling's :class:`MaskBlocks` (memoised per tiling)."""
        got = self._blocks.get((tq, tk))
        if got is not None:
            return got
        kinds = self.kinds(tq, tk)
        seen: dict[bytes, int] = {}
        pieces, offsets, shapes, at = [], [], [], 0
        for m, qt, kt in zip(*np.nonzero(kinds == 0)):
            block = np.ascontiguousarray(self.values[m, qt * tq:(qt + 1) * tq, kt * tk:(kt + 1) * tk])
            key = block.tobytes() + bytes(str(block.shape), "ascii")
            if key not in seen:
                seen[key] = len(pieces)
                pieces.append(block.ravel())
                offsets.append(at)
                shapes.append(block.shape)
                at += block.size
            kinds[m, qt, kt] = seen[key]
        table = np.concatenate(pieces) if pieces else np.zeros(0, np.float32)
        got = MaskBlocks(kinds, table, tuple(offsets), tuple(shapes))
        self._blocks[(tq, tk)] = got
        return got
