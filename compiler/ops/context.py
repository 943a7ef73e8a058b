"""The state one compile shares between lowerings: :class:`LoweringContext` (the memory plan and the segments lowered
so far) and :class:`Binding` (where an activation lives).

Memory plan: constants (packed weights, biases, maps) in DRAM region ``W``; every activation in region ``ACT`` at its
own offset, 64-byte aligned. A 4-D (or 3-D: 1-D convolutions and pooling) activation is kept channels-last (``nhwc``:
NHWC, or NLC) when convolutions or pooling touch it, otherwise row-major in its logical shape (``rm``); a lowering
asks for the layout it needs (:meth:`want`) and a transpose segment is inserted when the tensor is in the other one.
Reshape-like ops are free aliases of row-major tensors.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from compiler.ir import Graph, Node
from compiler.kernels import transpose
from compiler.kernels.common.target import Target
from compiler.link.linker import Segment
from compiler.ops.options import OpOptions
from isa import DType, Program

ALIGN = 64
"""Bytes: every activation and constant starts at a multiple of this in its region."""


def channels_last(rank: int) -> tuple[int, ...]:
    """The permutation from a logical ``(N, C, *spatial)`` tensor to its channels-last memory order."""
    return (0, *range(2, rank), 1)


def channels_first(rank: int) -> tuple[int, ...]:
    """The inverse of :func:`channels_last`: memory order back to the logical ``(N, C, *spatial)``."""
    return (0, rank - 1, *range(1, rank - 1))


@dataclass(frozen=True)
class Binding:
    """Where a tensor lives: byte ``offset`` in region ACT, logical ``shape``, ``layout`` nhwc (channels-last, of a
    3-D or 4-D tensor) or rm."""

    offset: int
    shape: tuple[int, ...]
    dtype: DType
    layout: str

    @property
    def phys(self) -> tuple[int, ...]:
        """The shape in memory order."""
        return tuple(self.shape[i] for i in channels_last(len(self.shape))) if self.layout == "nhwc" else self.shape

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.size

    def to_memory(self, x: np.ndarray) -> np.ndarray:
        """A logical array in this binding's memory order."""
        return np.ascontiguousarray(x.transpose(channels_last(x.ndim)) if self.layout == "nhwc" else x)

    def from_memory(self, raw: np.ndarray) -> np.ndarray:
        """This tensor's logical value from the ACT region's bytes."""
        arr = raw[self.offset: self.offset + self.nbytes].view(self.dtype.storage).reshape(self.phys)
        return arr.transpose(channels_first(arr.ndim)) if self.layout == "nhwc" else arr


def aligned(nbytes: int) -> int:
    """``nbytes`` rounded up to :data:`ALIGN`."""
    return -(-nbytes // ALIGN) * ALIGN


class LoweringContext:
    """The memory plan of one compile and the segments lowered so far; what every lowering reads and extends.

    ``target``: what the lowering may use of the NPU (the SPM less any activation arena, or half of that under
    prefetch); ``prefetched``: the segment's leading constant loads will overlap the previous layer, so a tiling
    search may discount them; ``options``: the compile's op options, each lowering reads its own
    (``low.options[OPTION]``, :mod:`compiler.ops.options`).
    """

    def __init__(self, graph: Graph, target: Target, options: OpOptions | None = None):
        self.graph, self.target = graph, target
        self.options = options if options is not None else OpOptions()
        self.prefetched = False
        self.segments: list[Segment] = []
        self.weights: list[np.ndarray] = []   # constant images and their alignment gaps, in region W order
        self.wbytes = 0                        # bytes of region W so far
        self.act = 0                           # bytes of region ACT so far
        self.allocs: list[tuple[int, int]] = []   # (ACT offset, bytes) of every activation allocated
        self.bind: dict[str, Binding] = {}
        self.host: list = []                   # compiler.ops.host.HostOp of every node run on the host CPU
        self.packed: dict[tuple, np.ndarray] = {}   # weight images by (tensor, how packed): a layer lowered again
                                                     # (for half the SPM) packs its weights once

    # -- the memory plan -------------------------------------------------------------------------------------------

    def alloc(self, shape: tuple[int, ...], layout: str, dtype: DType = DType.F32) -> Binding:
        """A new activation of ``shape`` in region ACT."""
        b = Binding(self.act, tuple(shape), dtype, layout)
        self.allocs.append((b.offset, b.nbytes))
        self.act += aligned(b.nbytes)
        return b

    def const(self, data: np.ndarray) -> int:
        """Append a constant image to region W; its byte offset there."""
        raw = np.ascontiguousarray(data).view(np.uint8).ravel()
        off = self.wbytes
        self.weights.append(raw)
        if aligned(raw.size) > raw.size:   # (the alignment gap as its own piece: no copy of the constant)
            self.weights.append(np.zeros(aligned(raw.size) - raw.size, np.uint8))
        self.wbytes += aligned(raw.size)
        return off

    def data(self, name: str) -> np.ndarray:
        """The value of constant tensor ``name``."""
        return self.graph.tensor(name).data

    def want(self, name: str, layout: str) -> Binding:
        """``name`` in ``layout``, inserting a transpose segment if it is in the other one."""
        b = self.bind[name]
        if b.layout == layout or len(b.shape) not in (3, 4):
            return b if b.layout == layout else self._convert(name, b, "rm")
        return self._convert(name, b, layout)

    def _convert(self, name: str, b: Binding, layout: str) -> Binding:
        out = self.alloc(b.shape, layout, b.dtype)
        rank = len(b.shape)
        perm = channels_last(rank) if layout == "nhwc" else channels_first(rank)
        prog = transpose.permute(b.phys, perm, b.dtype, self.target)
        self.segments.append(Segment(f"{name}.to_{layout}", "Transpose", prog,
                                     {"X": ("ACT", b.offset), "Y": ("ACT", out.offset)}))
        self.bind[name] = out
        return out

    # -- segments --------------------------------------------------------------------------------------------------

    def emit(self, node: Node, program: Program, bind: dict[str, tuple[str, int]], macs: int = 0,
             suffix: str = "") -> None:
        """Append ``program`` as segment ``<node name><suffix>``; ``bind`` maps its regions to (ACT | W, offset)."""
        self.segments.append(Segment(node.name + suffix, node.op, program, bind, macs))

    def snapshot(self) -> tuple:
        """The lowering state (segments, layouts, memory plan), to go back to after a failed or discarded try."""
        return list(self.segments), dict(self.bind), self.act, self.wbytes, list(self.weights), list(self.allocs)

    def restore(self, saved: tuple) -> None:
        self.segments = list(saved[0])
        self.bind, self.act, self.wbytes = dict(saved[1]), saved[2], saved[3]
        self.weights, self.allocs = list(saved[4]), list(saved[5])
