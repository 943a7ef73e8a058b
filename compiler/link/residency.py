"""Activations kept on chip: some activation tensors live in an SPM arena instead of DRAM region ACT.

A layer writes its output with ``dma.st`` and the next layer reads it with ``dma.ld``. When the tensor lives in the
SPM those copies are SPM -> SPM (or ACC <-> SPM): they cost SRAM bank cycles instead of DRAM bus time and latency,
and the DRAM bus is left to the weights. The lowerings do not change: each segment still names its operands by local
DRAM region, and :func:`place_in_spm` rebinds the ones that point into a resident tensor to ``("SPM", address)``,
which :func:`compiler.link.linker.link` turns into SPM views. The arena is the top of the SPM, which the lowerings were
told does not exist (they were compiled for ``spm.size - arena`` bytes).

Placement: tensors are taken in the order of their first use and each goes at the lowest arena address where it
does not overlap a placed tensor whose live range (first to last segment touching it) overlaps its own; one that
fits nowhere stays in DRAM. Sharing an address between tensors with disjoint live ranges is safe because segments
run in order: a segment's first load waits for the previous segment's last store, which follows its last load, so a
tensor's last reader is done before any later segment stores into the same bytes.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, replace

from compiler.link.linker import Segment


@dataclass(frozen=True)
class Placement:
    """A tensor of ``size`` bytes at DRAM offset ``offset`` (region ACT) moved to SPM byte ``spm`` for segments
    ``first`` to ``last``."""

    offset: int
    size: int
    spm: int
    first: int
    last: int


def place_in_spm(segments: list[Segment], tensors: list[tuple[int, int]], pinned: set[int], base: int, size: int,
                 align: int) -> tuple[list[Segment], list[Placement]]:
    """Move activation tensors into the SPM arena ``[base, base + size)`` (bytes, ``align``-aligned addresses).

    tensors: (ACT offset, bytes) of every activation allocation; pinned: offsets of those that must stay in DRAM
    (graph inputs and outputs, what host calls read or write). Returns the rebound segments and the placements."""
    starts = sorted(tensors)
    keys = [o for o, _ in starts]

    def owner(off: int) -> tuple[int, int] | None:
        i = bisect.bisect_right(keys, off) - 1
        return starts[i] if i >= 0 and off < starts[i][0] + max(starts[i][1], 1) else None

    live: dict[int, list[int]] = {}
    for k, seg in enumerate(segments):
        for region, off in seg.bind.values():
            t = owner(off) if region == "ACT" else None
            if t is not None:
                live.setdefault(t[0], [k, k])[1] = k
    sizes = dict(starts)
    placed: list[Placement] = []

    def span(p: Placement) -> tuple[int, int]:   # arena bytes [lo, hi) a placed tensor holds
        return p.spm - base, p.spm - base + -(-p.size // align) * align

    for off, (first, last) in sorted(live.items(), key=lambda e: (e[1][0], e[0])):
        need = -(-sizes[off] // align) * align
        if off in pinned or need > size or need == 0:
            continue
        res = _residual_of(segments[first], first, off, placed, sizes[off])
        busy = [span(p) for p in placed if p.first <= last and first <= p.last and p is not res]
        if res is not None and not any(lo < span(res)[1] and span(res)[0] < hi for lo, hi in busy):
            at = span(res)[0]   # in place of the residual it replaces (same size, so the same span)
        else:
            at = _first_fit(sorted(busy + ([span(res)] if res is not None else [])), need)
        if at + need <= size:
            placed.append(Placement(off, sizes[off], base + at, first, last))
    where = {p.offset: p for p in placed}

    def rebind(region: str, off: int) -> tuple[str, int]:
        t = owner(off) if region == "ACT" else None
        p = where.get(t[0]) if t is not None else None
        return ("SPM", p.spm + off - p.offset) if p is not None else (region, off)

    out = [replace(s, bind={k: rebind(*v) for k, v in s.bind.items()}) if s.bind else s for s in segments]
    return out, placed


def _first_fit(busy: list[tuple[int, int]], need: int) -> int:
    """The lowest offset at which ``need`` bytes overlap none of the sorted ``busy`` [lo, hi) ranges."""
    at = 0
    for lo, hi in busy:
        if at + need <= lo:
            break
        at = max(at, hi)
    return at


def _residual_of(seg: Segment, k: int, out: int, placed: list[Placement], size: int) -> Placement | None:
    """The placed residual (operand R) that segment ``k`` reads for the last time while it writes ``out`` (operand Y,
    the same size): the output may take exactly its bytes, since each output tile is stored after its residual tile
    was loaded and no other tile reads those pixels. None if there is no such residual."""
    if seg.bind.get("Y") != ("ACT", out) or seg.bind.get("R", ("",))[0] != "ACT":
        return None
    return next((p for p in placed if p.offset == seg.bind["R"][1] and p.size == size and p.last == k), None)
