"""Window loads with halo padding of any width.

A ``dma.ld`` inserts at most :data:`~isa.instructions.MAX_PAD` fill elements on each side of a dimension. A window
whose padding is wider (a convolution or pooling with pads above 15, or a tile deep in the padding) gets a
``dma.ld.fill`` for each too-wide strip first, then one copy with the rest of the padding; a window that lies wholly
in the padding is one fill. Used by :func:`compiler.kernels.conv2d.conv2d`,
:func:`compiler.kernels.depthwise.depthwise2d` and :func:`compiler.kernels.vector.pooling.pool2d`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from isa import DmaCopy, DmaFill, Pad, Queue, SemOp, View
from isa.instructions import MAX_PAD


def padded_load(shape: tuple[int, ...], dst: View, src: View, pads: Sequence[tuple[int, int]], fill: int | float,
                waits: tuple[SemOp, ...] = (), signals: tuple[SemOp, ...] = (),
                queue: Queue = Queue.DMA_LD) -> list[DmaCopy | DmaFill]:
    """Load the box ``shape`` at ``dst`` where dimension ``d`` reads ``fill`` at its first ``pads[d][0]`` and last
    ``pads[d][1]`` indices and ``src`` (which covers the rest) in between; ``pads`` has one (lo, hi) per leading
    dimension (the others are not padded). One ``DmaCopy`` when no pad exceeds ``MAX_PAD``; ``waits`` go on the
    first instruction, ``signals`` on the last (one queue runs them in order)."""
    pads = [tuple(p) for p in pads] + [(0, 0)] * (len(shape) - len(pads))
    if any(lo + hi >= e for e, (lo, hi) in zip(shape, pads) if lo or hi):   # wholly in the padding
        return [DmaFill(queue=queue, shape=tuple(shape), dst=dst, value=fill, waits=waits, signals=signals)]
    out: list[DmaCopy | DmaFill] = []
    shape = list(shape)
    for d, (lo, hi) in enumerate(pads):
        if lo > MAX_PAD:
            out.append(DmaFill(queue=queue, shape=(*shape[:d], lo, *shape[d + 1:]), dst=dst, value=fill))
            dst = replace(dst, base=dst.base + lo * dst.strides[d])
            shape[d] -= lo
            lo = 0
        if hi > MAX_PAD:
            shape[d] -= hi
            out.append(DmaFill(queue=queue, shape=(*shape[:d], hi, *shape[d + 1:]), value=fill,
                               dst=replace(dst, base=dst.base + shape[d] * dst.strides[d])))
            hi = 0
        pads[d] = (lo, hi)
    out.append(DmaCopy(queue=queue, shape=tuple(shape), pad=tuple(Pad(d, lo, hi) for d, (lo, hi) in enumerate(pads)
                                                                   if lo or hi),
                       fill=fill, dst=dst, src=src))
    out[0] = out[0].resynced(waits, out[0].signals)
    out[-1] = out[-1].resynced(out[-1].waits, signals)
    return out
