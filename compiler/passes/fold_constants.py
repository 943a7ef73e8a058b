"""Constant folding: evaluate every node whose inputs are all constants (and ``Shape``/``Size`` of any tensor, whose
shape is static), then drop the nodes and tensors nothing uses any more. The ops of :data:`FOLDERS` are evaluated
with numpy here, every other one by onnx's reference evaluator (:mod:`compiler.passes.fold_reference`).

This is what turns the shape arithmetic exporters emit (``Shape -> Gather -> Unsqueeze -> Concat -> Reshape``) into a
constant ``Reshape`` target. ``DequantizeLinear`` is never folded, so int8 weights stay int8 behind their scales;
``QuantizeLinear`` of a float constant is, which stores that weight as int8.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

import numpy as np

from compiler.errors import ConstantFoldError, GraphError
from compiler.ir import Graph, Node, Tensor
from compiler.passes.fold_reference import reference_fold

KEEP = frozenset({"DequantizeLinear"})
"""Ops never folded even when all their inputs are constant."""

Folder = Callable[[Node, list], list]


def fold_constants(graph: Graph, keep: frozenset[str] = KEEP) -> Graph:
    """``graph`` with every foldable node replaced by constant tensors, and dead nodes and tensors removed.

    A node folds when it is in the default domain, its op is not in ``keep``, its inputs are all constants
    (``Shape`` and ``Size`` need only a static input shape), and numpy (:data:`FOLDERS`) or onnx's reference
    evaluator (at the graph's opset) computes it.
    """
    tensors = dict(graph.tensors)
    nodes: list[Node] = []
    opset = graph.opsets.get("")
    for node in graph.nodes:
        values = fold_node(node, tensors, keep, opset)
        if values is None:
            nodes.append(node)
            continue
        for out, value in zip(node.outputs, values):
            if not out:
                continue
            declared = tensors[out]
            value = np.asarray(value).astype(declared.dtype, copy=False)
            if value.shape != declared.shape:
                raise GraphError(f"node {node.name!r} ({node.op}): folding gives shape {value.shape} for {out!r}, "
                                 f"but the graph declares {declared.shape}")
            tensors[out] = Tensor(out, value.shape, declared.dtype, value)
    return remove_dead(replace(graph, nodes=tuple(nodes), tensors=tensors))


def remove_dead(graph: Graph) -> Graph:
    """``graph`` without the nodes none of whose outputs is used, and without the tensors no node or graph
    input/output names."""
    live = set(graph.outputs)
    kept: list[Node] = []
    for node in reversed(graph.nodes):
        if any(o in live for o in node.outputs if o):
            kept.append(node)
            live.update(node.present_inputs)
    kept.reverse()
    used = set(graph.inputs) | set(graph.outputs)
    for node in kept:
        used.update(node.present_inputs)
        used.update(o for o in node.outputs if o)
    return replace(graph, nodes=tuple(kept), tensors={k: t for k, t in graph.tensors.items() if k in used})


def fold_node(node: Node, tensors: Mapping[str, Tensor], keep: frozenset[str] = KEEP,
              opset: int | None = None) -> list | None:
    """The output values of ``node`` if it folds (see :func:`fold_constants`), else None; ``opset``: the graph's
    default-domain opset (for the reference evaluator). A node whose constant inputs its op refuses is a one-line
    ConstantFoldError naming it.

    ``tensors`` maps names to tensors; a name missing from it counts as a non-constant of unknown shape.
    """
    if node.domain not in ("", "ai.onnx") or node.op in keep:
        return None
    if node.attrs.get("block_size", 0):  # blocked quantization (opset 21)
        return None
    if node.op in ("Shape", "Size"):
        if node.inputs[0] not in tensors:
            return None
        shape = tensors[node.inputs[0]].shape
        if node.op == "Size":
            return [np.array(int(np.prod(shape, dtype=np.int64)), np.int64)]
        start, end = node.attrs.get("start", 0), node.attrs.get("end")
        return [np.array(shape[start:end], np.int64)]
    if not all(i in tensors and tensors[i].is_const for i in node.present_inputs):
        return None
    values = [tensors[i].data if i else None for i in node.inputs]
    folder, failed = FOLDERS.get(node.op), None
    if folder is not None:
        try:
            out = folder(node, values)
        except Exception as e:   # numpy's errors (shapes that do not broadcast, bad indices, ...), one type each
            out, failed = None, e   # the reference evaluator may know the case (an empty reduction)
        if out is not None:
            return out
    out = reference_fold(node, values, opset)
    if out is None and failed is not None:
        text = (str(failed).strip().splitlines() or [type(failed).__name__])[0]
        raise ConstantFoldError(f"node {node.name!r} ({node.op}): constant folding fails on its constant inputs: "
                                f"{text}")
    return out


def _raw_axes(node: Node, ins: list) -> list[int] | None:
    """The ``axes`` of a node as given: an attribute in old opsets, the second input in new ones."""
    axes = node.attrs.get("axes")
    if axes is None and len(ins) > 1 and ins[1] is not None:
        axes = ins[1].tolist()
    return None if axes is None else [int(a) for a in axes]


def _axes(node: Node, ins: list, rank: int) -> tuple[int, ...] | None:
    """The ``axes`` of a node, made non-negative for ``rank`` and sorted; None if it has none."""
    axes = _raw_axes(node, ins)
    return None if axes is None else tuple(sorted(a % rank for a in axes))


def _reshape_target(shape: tuple[int, ...], target: list[int], allowzero: int) -> tuple[int, ...]:
    """ONNX Reshape's output shape: 0 copies the input dim (unless ``allowzero``), -1 takes what is left."""
    dims = [shape[i] if d == 0 and not allowzero else d for i, d in enumerate(target)]
    if -1 in dims:
        known = int(np.prod([d for d in dims if d != -1], dtype=np.int64))
        dims[dims.index(-1)] = int(np.prod(shape, dtype=np.int64)) // known if known else 0
    return tuple(int(d) for d in dims)


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division truncating toward zero, as ONNX ``Div`` on integers."""
    q = a // b
    return np.where((a % b != 0) & ((a < 0) ^ (b < 0)), q + 1, q)


def _reduce(fn: Callable) -> Folder:
    def run(node: Node, ins: list) -> list:
        x = ins[0]
        axes = _axes(node, ins, x.ndim)
        if not axes:
            if node.attrs.get("noop_with_empty_axes", 0):
                return [x]
            axes = tuple(range(x.ndim))
        return [fn(x, axis=axes, keepdims=bool(node.attrs.get("keepdims", 1)))]
    return run


def _slice(node: Node, ins: list) -> list:
    x, starts, ends = ins[0], ins[1].tolist(), ins[2].tolist()
    axes = ins[3].tolist() if len(ins) > 3 and ins[3] is not None else list(range(len(starts)))
    steps = ins[4].tolist() if len(ins) > 4 and ins[4] is not None else [1] * len(starts)
    index = [slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        index[a % x.ndim] = slice(s, e, st)
    return [x[tuple(index)]]


def _quantize(node: Node, ins: list) -> list:
    x, scale = ins[0].astype(np.float32), ins[1].astype(np.float32)
    zp = ins[2] if len(ins) > 2 and ins[2] is not None else None
    if zp is None:  # no zero point: uint8, or the opset-21 output_dtype
        zp = np.zeros((), _onnx_dtype(node.attrs.get("output_dtype") or 2))
    if scale.ndim == 1 and x.ndim:
        shape = [1] * x.ndim
        shape[node.attrs.get("axis", 1) % x.ndim] = -1
        scale, zp = scale.reshape(shape), zp.reshape(shape)
    info = np.iinfo(zp.dtype)
    return [np.clip(np.rint(x / scale) + zp.astype(np.int64), info.min, info.max).astype(zp.dtype)]


def _onnx_dtype(to: int | str) -> np.dtype:
    """A numpy dtype from an ONNX ``TensorProto`` element type number or a numpy dtype name."""
    if isinstance(to, int):
        from onnx.helper import tensor_dtype_to_np_dtype
        return np.dtype(tensor_dtype_to_np_dtype(to))
    return np.dtype(to)


def _cast(node: Node, ins: list) -> list:
    return [ins[0].astype(_onnx_dtype(node.attrs["to"]))]


def _flatten(node: Node, ins: list) -> list:
    x, axis = ins[0], node.attrs.get("axis", 1)
    axis = axis + x.ndim if axis < 0 else axis
    return [x.reshape(int(np.prod(x.shape[:axis], dtype=np.int64)), -1)]


def _constant_of_shape(node: Node, ins: list) -> list:
    value = np.asarray(node.attrs.get("value", np.zeros(1, np.float32)))
    return [np.full(tuple(ins[0].tolist()), value.reshape(-1)[0], value.dtype)]


def _unsqueeze(node: Node, ins: list) -> list:
    x, axes = ins[0], _raw_axes(node, ins) or []
    return [np.expand_dims(x, tuple(a % (x.ndim + len(axes)) for a in axes))]


def _squeeze(node: Node, ins: list) -> list:
    x = ins[0]
    axes = _axes(node, ins, x.ndim)
    return [np.squeeze(x, axis=axes) if axes else np.squeeze(x)]


def _affine_grid(node: Node, ins: list) -> list | None:
    """A 2-D AffineGrid of a constant theta, in onnxruntime's float32 order (3-D grids are not folded)."""
    from compiler.kernels.resample import affine_grid_values

    size = [int(v) for v in ins[1].ravel()]
    if len(size) != 4 or ins[0].dtype != np.float32:
        return None
    return [affine_grid_values(ins[0], size[2], size[3], int(node.attrs.get("align_corners", 0)))]


FOLDERS: dict[str, Folder] = {
    "Identity": lambda n, i: [i[0]],
    "Shape": lambda n, i: [],  # handled in _fold: needs only the static shape
    "Size": lambda n, i: [],
    "Cast": _cast,
    "Gather": lambda n, i: [np.take(i[0], i[1], axis=n.attrs.get("axis", 0))],
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Concat": lambda n, i: [np.concatenate([x for x in i if x is not None], axis=n.attrs["axis"])],
    "Reshape": lambda n, i: [i[0].reshape(_reshape_target(i[0].shape, i[1].tolist(), n.attrs.get("allowzero", 0)))],
    "Flatten": _flatten,
    "Transpose": lambda n, i: [np.transpose(i[0], n.attrs.get("perm"))],
    "Slice": _slice,
    "Add": lambda n, i: [i[0] + i[1]],
    "Sub": lambda n, i: [i[0] - i[1]],
    "Mul": lambda n, i: [i[0] * i[1]],
    "Div": lambda n, i: [i[0] / i[1] if i[0].dtype.kind == "f" else _int_div(i[0], i[1])],
    "Neg": lambda n, i: [-i[0]],
    "Abs": lambda n, i: [np.abs(i[0])],
    "Sqrt": lambda n, i: [np.sqrt(i[0])],
    "Reciprocal": lambda n, i: [1 / i[0]],
    "Pow": lambda n, i: [np.power(i[0], i[1])],
    "Floor": lambda n, i: [np.floor(i[0])],
    "Ceil": lambda n, i: [np.ceil(i[0])],
    "Relu": lambda n, i: [np.maximum(i[0], 0)],
    "Min": lambda n, i: [np.minimum.reduce(np.broadcast_arrays(*i))],
    "Max": lambda n, i: [np.maximum.reduce(np.broadcast_arrays(*i))],
    "Equal": lambda n, i: [i[0] == i[1]],
    "Less": lambda n, i: [i[0] < i[1]],
    "Greater": lambda n, i: [i[0] > i[1]],
    "Not": lambda n, i: [np.logical_not(i[0])],
    "Where": lambda n, i: [np.where(i[0], i[1], i[2])],
    "Expand": lambda n, i: [i[0] * np.ones(tuple(i[1].tolist()), i[0].dtype)],
    "ConstantOfShape": _constant_of_shape,
    "Range": lambda n, i: [np.arange(i[0], i[1], i[2])],
    "MatMul": lambda n, i: [np.matmul(i[0], i[1])],
    "AffineGrid": _affine_grid,
    "ReduceSum": _reduce(np.sum),
    "ReduceMean": _reduce(np.mean),
    "ReduceProd": _reduce(np.prod),
    "ReduceMax": _reduce(np.max),
    "ReduceMin": _reduce(np.min),
    "QuantizeLinear": _quantize,
}
"""numpy evaluators by op: ``fn(node, input arrays (None for absent optionals)) -> output arrays``."""
