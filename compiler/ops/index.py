"""GatherND and ScatterND (reduction none) with run-time indices, by the row gather
(:mod:`compiler.kernels.index`): the index tuples become table rows on the vector unit (constant indices: at compile
time), then the DMA gathers the rows (Gather with run-time indices too: :func:`lower_gather_runtime`); ScatterND
gathers each output row from its last update or keeps the data's,
through the inverse map. int64 indices are int32 on the NPU; one out of range stops the run with an error."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from compiler.errors import CompileError, UnsupportedOpError
from compiler.frontend.canonical import CanonContext
from compiler.frontend.dtypes import npu_constant
from compiler.ir import Graph, Node
from compiler.kernels.index import (
    Addressing,
    flat_rows,
    gather_rows,
    scatter_constants,
    scatter_inverse,
    scatter_select,
    scatter_tile,
)
from compiler.ops.context import LoweringContext
from compiler.ops.spec import NUMBERS, OpSpec
from isa import DType


@dataclasses.dataclass(frozen=True)
class Indexing:
    """What an ND index tensor addresses in its data: ``points`` tuples of ``r`` components, ``addr`` the table
    they address (rows of ``row`` elements)."""

    points: int
    row: int
    addr: Addressing


def gathernd_indexing(data: tuple[int, ...], indices: tuple[int, ...], batch_dims: int) -> Indexing:
    """GatherND's: the batch dimensions make one table each, the ``r`` indexed dimensions its rows."""
    r = indices[-1]
    dims = data[batch_dims:batch_dims + r]
    batches, per = math.prod(data[:batch_dims]), math.prod(indices[batch_dims:-1])
    rows = math.prod(dims)
    return Indexing(math.prod(indices[:-1]), math.prod(data[batch_dims + r:]),
                    Addressing(dims, batches * rows, (per, rows) if batch_dims else None))


def _rows_of(ix: Indexing, idx: np.ndarray) -> np.ndarray:
    """The table row of each constant index tuple (as the NPU computes them); UnsupportedOpError naming the first
    tuple out of range."""
    a = ix.addr
    idx = idx.reshape(ix.points, a.r).astype(np.int64)
    dims = np.array(a.dims, np.int64)
    adj = np.where(idx < 0, idx + dims, idx)
    bad = ((adj < 0) | (adj >= dims)).any(1)
    if bad.any():
        raise UnsupportedOpError("", "", f"index {idx[bad][0].tolist()} is out of range for dimensions "
                                 f"{list(a.dims)}")
    flat = (adj * np.array(a.strides, np.int64)).sum(1)
    if a.batch is not None:
        flat += np.arange(ix.points) // a.batch[0] * a.batch[1]
    return flat.astype(np.int32)


def _index_rows(low: LoweringContext, n: Node, ix: Indexing, name: str) -> tuple[str, int]:
    """Where the table rows of index tensor ``name`` are: computed at compile time into the weights (a constant),
    else by a segment ``<node>.rows`` into a new activation."""
    if low.graph.is_const(name):
        try:
            return "W", low.const(_rows_of(ix, np.asarray(low.data(name))))
        except UnsupportedOpError as e:
            raise UnsupportedOpError(n.name, n.op, e.reason) from None
    idx = low.want(name, "rm")
    f = low.alloc((ix.points,), "rm", DType.I32)
    low.emit(n, flat_rows(ix.points, ix.addr, low.target),
             {"I": ("ACT", idx.offset), "K": ("W", low.const(ix.addr.constants(ix.points))), "F": ("ACT", f.offset)},
             suffix=".rows")
    return "ACT", f.offset


def _data(low: LoweringContext, name: str) -> tuple[tuple[str, int], DType]:
    """Where tensor ``name`` is, row-major (a constant in the weights, in its NPU storage), and its NPU type."""
    if low.graph.is_const(name):
        v = npu_constant(name, low.data(name))
        return ("W", low.const(v)), DType.from_numpy(v.dtype)
    b = low.want(name, "rm")
    return ("ACT", b.offset), b.dtype


def lower_gathernd(low: LoweringContext, n: Node) -> None:
    """GatherND: the index tuples' rows (:func:`_index_rows`), then one gather of the data's rows."""
    g = low.graph
    ix = gathernd_indexing(g.tensor(n.inputs[0]).shape, g.tensor(n.inputs[1]).shape, n.attrs["batch_dims"])
    rows = _index_rows(low, n, ix, n.inputs[1])
    table, dtype = _data(low, n.inputs[0])
    y = low.alloc(g.tensor(n.outputs[0]).shape, "rm", dtype)
    low.emit(n, gather_rows(ix.points, ix.row, ix.addr.rows, dtype, low.target),
             {"F": rows, "T": table, "Y": ("ACT", y.offset)})
    low.bind[n.outputs[0]] = y


def lower_gather_runtime(low: LoweringContext, n: Node) -> None:
    """Gather with run-time indices (an embedding lookup, say): the indices are rows of the axis (one component
    each, :func:`_index_rows`), gathered by the DMA from each block of the leading dimensions in turn."""
    g = low.graph
    shape, axis = g.tensor(n.inputs[0]).shape, n.attrs["axis"]
    points = math.prod(g.tensor(n.inputs[1]).shape)
    ix = Indexing(points, math.prod(shape[axis + 1:]), Addressing((shape[axis],), shape[axis]))
    rows = _index_rows(low, n, ix, n.inputs[1])
    table, dtype = _data(low, n.inputs[0])
    y = low.alloc(g.tensor(n.outputs[0]).shape, "rm", dtype)
    low.emit(n, gather_rows(points, ix.row, shape[axis], dtype, low.target, blocks=math.prod(shape[:axis])),
             {"F": rows, "T": table, "Y": ("ACT", y.offset)})
    low.bind[n.outputs[0]] = y


def _inverse(ix: Indexing, rows: np.ndarray) -> np.ndarray:
    """ScatterND's inverse map of constant rows: the last update of each row, else -1."""
    inv = np.full(ix.addr.rows, -1, np.int32)
    inv[rows] = np.arange(len(rows), dtype=np.int32)   # (numpy assigns in order: the last duplicate stays)
    return inv


def lower_scatternd(low: LoweringContext, n: Node) -> None:
    """ScatterND, reduction none: the inverse map (a constant for constant indices, else a segment
    ``<node>.inverse``), then each output row selected from its gathered update or the data."""
    g = low.graph
    shape, ishape = g.tensor(n.inputs[0]).shape, g.tensor(n.inputs[1]).shape
    r = ishape[-1]
    ix = Indexing(math.prod(ishape[:-1]), math.prod(shape[r:]), Addressing(tuple(shape[:r]), math.prod(shape[:r])))
    if g.is_const(n.inputs[1]):
        try:
            inv = ("W", low.const(_inverse(ix, _rows_of(ix, np.asarray(low.data(n.inputs[1]))))))
        except UnsupportedOpError as e:
            raise UnsupportedOpError(n.name, n.op, e.reason) from None
    else:
        idx = low.want(n.inputs[1], "rm")
        v = low.alloc((ix.addr.rows,), "rm", DType.I32)
        try:
            prog = scatter_inverse(ix.points, ix.addr, low.target)
            consts = scatter_constants(ix.points, ix.addr, scatter_tile(ix.points, ix.addr, low.target))
        except CompileError as e:
            raise UnsupportedOpError(n.name, n.op, str(e)) from None
        low.emit(n, prog, {"I": ("ACT", idx.offset), "K": ("W", low.const(consts)), "V": ("ACT", v.offset)},
                 suffix=".inverse")
        inv = ("ACT", v.offset)
    data, dtype = _data(low, n.inputs[0])
    upd, _ = _data(low, n.inputs[2])
    y = low.alloc(shape, "rm", dtype)
    low.emit(n, scatter_select(ix.addr.rows, ix.row, ix.points, dtype, low.target),
             {"D": data, "V": inv, "U": upd, "Y": ("ACT", y.offset)})
    low.bind[n.outputs[0]] = y


def _gathernd(node: Node, ctx: CanonContext) -> Node:
    return dataclasses.replace(node, attrs={"batch_dims": int(node.attrs.get("batch_dims", 0))})


def _scatternd(node: Node, ctx: CanonContext) -> Node:
    reduction = node.attrs.get("reduction", "none")
    reduction = reduction.decode() if isinstance(reduction, bytes) else reduction
    if reduction != "none":
        raise UnsupportedOpError(node.name, node.op, f"reduction {reduction!r}: only 'none' runs on the NPU")
    return dataclasses.replace(node, attrs={"reduction": "none"})


def _check(node: Node, graph: Graph) -> str | None:
    """Indices of an integer type (the data may be a constant, the indices too, not both: that folds)."""
    if graph.tensor(node.inputs[1]).dtype not in (np.int64, np.int32):
        return f"indices must be int64 or int32, not {graph.tensor(node.inputs[1]).dtype}"
    return None


OPS = (
    OpSpec("GatherND", lower_gathernd, _gathernd, _check, dtypes=NUMBERS, const_operands=True,
           npu="index tuples to rows on the vector unit (constant indices: at compile time), rows gathered by the "
               "DMA (dma.ld.gather); any batch_dims, negative indices; one out of range stops the run"),
    OpSpec("ScatterND", lower_scatternd, _scatternd, _check, dtypes=NUMBERS, const_operands=True,
           npu="reduction none: the inverse map (each row's last update; rows x updates comparisons on the vector "
               "unit, at most 2**26; constant indices: at compile time), then each row gathered from its update or "
               "kept, selected bit for bit"),
)
