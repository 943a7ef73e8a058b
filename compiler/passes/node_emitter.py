"""Writes the nodes a composite op is decomposed into (:mod:`compiler.passes.composites`): each new node and tensor
named ``<node name>/<suffix>`` (made unique in the graph), every intermediate tensor with its static shape and type,
constants as tensors with data. The nodes are in the IR's canonical attribute forms, which the importer's
canonicalisers keep, and in ops whose form is the same in every opset the importer takes (13 and later), so that a
node that ends up on the host is written back valid at the model's opset."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from compiler.ir import Graph, Node, Tensor


class NodeEmitter:
    """Collects the nodes and tensors that replace ``node`` in ``graph``; :attr:`nodes` in order, :attr:`tensors`
    (the new ones) by name."""

    def __init__(self, graph: Graph, node: Node):
        self.graph, self.node = graph, node
        self.nodes: list[Node] = []
        self.tensors: dict[str, Tensor] = {}
        self.taken = set(graph.tensors) | {n.name for n in graph.nodes}

    def name(self, suffix: str) -> str:
        """``<node>/<suffix>``, suffixed with ``_1``, ``_2``... until no tensor or node has it; reserved."""
        base = f"{self.node.name}/{suffix}"
        out, k = base, 0
        while out in self.taken:
            k += 1
            out = f"{base}_{k}"
        self.taken.add(out)
        return out

    def shape(self, t: str) -> tuple[int, ...]:
        """The shape of ``t`` (a tensor of the graph or a new one)."""
        return (self.tensors[t] if t in self.tensors else self.graph.tensor(t)).shape

    def dtype(self, t: str) -> np.dtype:
        return (self.tensors[t] if t in self.tensors else self.graph.tensor(t)).dtype

    def is_const(self, t: str) -> bool:
        return (self.tensors[t] if t in self.tensors else self.graph.tensor(t)).is_const

    def data(self, t: str) -> np.ndarray:
        return (self.tensors[t] if t in self.tensors else self.graph.tensor(t)).data

    def const(self, suffix: str, value, dtype=None) -> str:
        """A new constant holding ``value``: its name."""
        t = Tensor.const(self.name(suffix), value, dtype)
        self.tensors[t.name] = t
        return t.name

    def op(self, op: str, inputs: Sequence[str], shape: Sequence[int], dtype=np.float32, out: str | None = None,
           suffix: str | None = None, **attrs) -> str:
        """A node ``op`` of ``inputs`` whose output of ``shape`` and ``dtype`` is ``out`` (an output of the composite
        node) or a new tensor named by ``suffix`` (default: the op's name, lower case); the output's name."""
        name = self.name(suffix or op.lower())
        if out is None:
            out = name
            self.tensors[out] = Tensor(out, tuple(shape), np.dtype(dtype))
        self.nodes.append(Node(name, op, tuple(inputs), (out,), attrs))
        return out

    # -- the ops the decompositions use ----------------------------------------------------------------------------

    def reshape(self, x: str, shape: Sequence[int], out: str | None = None) -> str:
        """``x`` as ``shape`` (a free alias of a row-major tensor); ``x`` itself when it has that shape already."""
        shape = tuple(int(d) for d in shape)
        if self.shape(x) == shape and out is None:
            return x
        return self.op("Reshape", (x, self.const("shape", np.asarray(shape, np.int64))), shape, self.dtype(x), out,
                       allowzero=0)

    def transpose(self, x: str, perm: Sequence[int], out: str | None = None) -> str:
        """``x`` with its axes permuted by ``perm`` (a free Reshape when it moves only axes of size 1)."""
        shape = tuple(self.shape(x)[p] for p in perm)
        moved = [p for p in perm if self.shape(x)[p] != 1]
        if moved == sorted(moved):
            return self.reshape(x, shape, out)
        return self.op("Transpose", (x,), shape, self.dtype(x), out, perm=tuple(perm))

    def binary(self, op: str, a: str, b: str, out: str | None = None, suffix: str | None = None) -> str:
        """``a op b`` with numpy broadcasting (Add, Sub, Mul, Div)."""
        shape = np.broadcast_shapes(self.shape(a), self.shape(b))
        return self.op(op, (a, b), shape, self.dtype(a), out, suffix)

    def matmul(self, a: str, b: str, out: str | None = None, suffix: str | None = None) -> str:
        """``a @ b`` of two tensors with equal batch dims (or a 2-D constant ``b``)."""
        sa, sb = self.shape(a), self.shape(b)
        return self.op("MatMul", (a, b), (*sa[:-1], sb[-1]), self.dtype(a), out, suffix)

    def concat(self, xs: Sequence[str], axis: int, out: str | None = None) -> str:
        """``xs`` joined along ``axis``."""
        shape = list(self.shape(xs[0]))
        shape[axis] = sum(self.shape(x)[axis] for x in xs)
        return self.op("Concat", tuple(xs), shape, self.dtype(xs[0]), out, axis=axis)

    def slice(self, x: str, axis: int, start: int, end: int, out: str | None = None) -> str:
        """``x[start:end]`` along ``axis`` (a free alias when the range is contiguous)."""
        shape = list(self.shape(x))
        if (start, end) == (0, shape[axis]) and out is None:
            return x
        shape[axis] = end - start
        ins = (x, *(self.const(k, np.asarray([v], np.int64)) for k, v in
                    (("starts", start), ("ends", end), ("axes", axis), ("steps", 1))))
        return self.op("Slice", ins, shape, self.dtype(x), out)

    def gather(self, table: str, indices: str, axis: int = 0, out: str | None = None) -> str:
        """``table`` indexed along ``axis`` by ``indices``."""
        st = self.shape(table)
        shape = (*st[:axis], *self.shape(indices), *st[axis + 1:])
        return self.op("Gather", (table, indices), shape, self.dtype(table), out, axis=axis)

    def unary(self, op: str, x: str, out: str | None = None, **attrs) -> str:
        return self.op(op, (x,), self.shape(x), self.dtype(x), out, **attrs)
