"""``KVAppend`` (made by :mod:`compiler.passes.kv_cache` from a Concat of a past KV input and the step's new keys or
values into a present output): the KV cache bound in place.

The past input has no buffer of its own: :func:`bind_past` gives it a :class:`CacheBinding` into the present
output's buffer, so the caller's past values are written where the present holds them, and the lowering copies only
the new tokens into their slot of the sequence axis (the DMA, one box). A decode step's DRAM traffic for the cache is
then the attention's read of it plus the new tokens' write, not a copy of the whole cache."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from compiler.ir import Graph, Node
from compiler.kernels.staged_copy import Box, Operand, staged_copy
from compiler.kernels.vector.strides import row_major
from compiler.ops import host
from compiler.ops.context import Binding, LoweringContext
from compiler.ops.spec import OpSpec
from isa import Region

OP = "KVAppend"
"""The in-place KV append's op name (made by :mod:`compiler.passes.kv_cache`)."""


@dataclass(frozen=True)
class CacheBinding(Binding):
    """A past KV input held inside its present output's buffer (row-major ``capacity``, the present's shape): its
    values fill the first ``shape[axis]`` positions of ``axis``; the rest of the buffer is the step's new tokens."""

    capacity: tuple[int, ...] = ()
    axis: int = 0

    @property
    def nbytes(self) -> int:
        return math.prod(self.capacity) * self.dtype.size

    def to_memory(self, x: np.ndarray) -> np.ndarray:
        """The present buffer with ``x`` in its past positions (the new positions zero until the step writes them)."""
        buf = np.zeros(self.capacity, x.dtype)
        buf[(slice(None),) * self.axis + (slice(0, x.shape[self.axis]),)] = x
        return buf

    def from_memory(self, raw: np.ndarray) -> np.ndarray:
        full = raw[self.offset: self.offset + self.nbytes].view(self.dtype.storage).reshape(self.capacity)
        return full[(slice(None),) * self.axis + (slice(0, self.shape[self.axis]),)]


def appended_by(graph: Graph, name: str) -> Node | None:
    """The KVAppend that appends to graph input ``name`` in place, or None."""
    users = graph.consumers(name)
    return users[0] if len(users) == 1 and users[0].op == OP and users[0].inputs[0] == name else None


def bind_past(low: LoweringContext, name: str) -> CacheBinding:
    """Allocate the present buffer of past input ``name`` (appended to by a KVAppend) and bind the past inside it."""
    n = appended_by(low.graph, name)
    t, present = low.graph.tensor(name), low.graph.tensor(n.outputs[0])
    buf = low.alloc(present.shape, "rm", host.storage_dtype(t))
    return CacheBinding(buf.offset, t.shape, buf.dtype, "rm", present.shape, n.attrs["axis"])


def lower_kv_append(low: LoweringContext, n: Node) -> None:
    """The new tokens copied into their slot of the present buffer (the past is already there)."""
    past = low.bind[n.inputs[0]]
    axis, start = past.axis, past.shape[past.axis]
    y = Binding(past.offset, past.capacity, past.dtype, "rm")
    x = low.want(n.inputs[1], "rm")
    ystr = row_major(y.shape)
    regions = (Region("X", 0, x.nbytes), Region("Y", 1, y.nbytes))
    if math.prod(x.shape):
        box = Box(x.shape, Operand("Y", start * ystr[axis], ystr), Operand("X", 0, row_major(x.shape)))
        low.emit(n, staged_copy([box], y.dtype, regions, low.target),
                 {"X": ("ACT", x.offset), "Y": ("ACT", y.offset)})
    low.bind[n.outputs[0]] = y


OPS = (
    OpSpec(OP, lower_kv_append, dtypes=None, empty_inputs=True,
           npu="a Concat of a past KV graph input (read by nothing else) and the step's new tokens into a present "
               "graph output: the past is held in the present's buffer, the DMA writes only the new tokens"),
)
