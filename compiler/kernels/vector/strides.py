"""Element strides of row-major tensors in DRAM: dense, under numpy broadcasting, and merged where every operand
walks contiguously (what the vector streams, transposes and copies address tensors by)."""

from __future__ import annotations

from isa.view import MAX_EXTENT


def row_major(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Element strides of a dense row-major ``shape``."""
    strides, acc = [], 1
    for e in reversed(shape):
        strides.append(acc)
        acc *= e
    return tuple(reversed(strides))


def broadcast_strides(shape: tuple[int, ...], out: tuple[int, ...]) -> tuple[int, ...]:
    """Element strides of a row-major ``shape`` read as ``out`` under numpy broadcasting (0 where broadcast)."""
    shape = (1,) * (len(out) - len(shape)) + tuple(shape)
    return tuple(0 if e == 1 and o != 1 else s for e, o, s in zip(shape, out, row_major(shape)))


def collapse(out: tuple[int, ...], *strides: tuple[int, ...]) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """Merge adjacent dimensions that every operand walks contiguously (fewer, longer dimensions)."""
    dims = [[e, *(s[i] for s in strides)] for i, e in enumerate(out) if e != 1] or [[1, *(0 for _ in strides)]]
    merged = [dims[0]]
    for d in dims[1:]:
        prev = merged[-1]
        if prev[0] * d[0] <= MAX_EXTENT and all(prev[k + 1] == d[k + 1] * d[0] for k in range(len(strides))):
            merged[-1] = [prev[0] * d[0], *d[1:]]
        else:
            merged.append(d)
    return tuple(d[0] for d in merged), [tuple(d[k + 1] for d in merged) for k in range(len(strides))]
