"""ONNX to the compiler's IR: :func:`import_onnx`.

Steps: check the opset (13 to 21); run ``onnx.shape_inference.infer_shapes(strict_mode=True, data_prop=True)``
(where a shape stays unknown, fold the constant nodes into initializers and infer again); take initializers and
``Constant`` nodes as constant tensors, require a static shape for every tensor, convert attributes to plain Python
(schema defaults filled in), fold constant subgraphs (:func:`compiler.passes.fold_constants`), then put each
recognised op in the canonical form of :mod:`compiler.ir` (checking its attributes; a node it cannot take is marked
for the host CPU), and check dtypes. Unless ``allow_unknown``, marked nodes are an UnsupportedOpError listing them.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .builder import window_out
from .errors import (
    FALLBACK_HINT,
    CompileError,
    DynamicShapeError,
    UnsupportedDTypeError,
    UnsupportedOpError,
    UnsupportedOpsetError,
)
from .ir import Graph, Node, Tensor, node_prefix, short_dtype
from .passes.fold_constants import FOLDERS, fold_constants, fold_node, remove_dead

OPSETS = (13, 21)
"""The default-domain opsets accepted, inclusive."""

UNKNOWN_OP = "operator is not supported by the compiler"

PREFOLD_ROUNDS = 8
"""At most this many rounds of folding constants and inferring shapes again before requiring static shapes."""

SUPPORTED_OPS = frozenset({
    "Conv", "Gemm", "MatMul", "Add", "Sub", "Mul", "Div", "Relu", "Clip", "Sigmoid", "Tanh", "Gelu", "Erf", "MaxPool",
    "AveragePool", "GlobalAveragePool", "BatchNormalization", "Softmax", "LayerNormalization", "ReduceMean",
    "ReduceSum", "Reshape", "Flatten", "Transpose", "Concat", "Slice", "Pad", "QuantizeLinear", "DequantizeLinear",
    "QLinearConv", "QLinearMatMul", "Identity"})
"""Ops the compiler takes (default ONNX domain)."""

FOLD_ONLY_OPS = frozenset({"Shape", "Gather", "Unsqueeze", "Squeeze", "Cast", "Constant", "Size", "ConstantOfShape",
                           "Range", "Expand", "Equal", "Where", "Neg", "Sqrt", "Pow", "Reciprocal"})
"""Ops accepted only when constant folding removes them (Squeeze/Unsqueeze of activations become Reshape)."""

TENSOR_DTYPES = tuple(np.dtype(d) for d in ("float32", "float16", "int8", "uint8", "int16", "int32")) + (
    np.dtype(helper.tensor_dtype_to_np_dtype(onnx.TensorProto.BFLOAT16)),)
"""Element types of activations (non-constant tensors)."""

CONST_DTYPES = TENSOR_DTYPES + (np.dtype("int64"), np.dtype("bool"))
"""Element types of constants: activations' plus int64 and bool (shapes, indices, masks)."""


def import_onnx(model: onnx.ModelProto | str | Path, allow_unknown: bool = False) -> Graph:
    """The IR of an ONNX model (a ``ModelProto`` or a path to a ``.onnx`` file).

    Raises :class:`UnsupportedOpsetError`, :class:`DynamicShapeError`, :class:`UnsupportedOpError` and
    :class:`UnsupportedDTypeError`. With ``allow_unknown``, an op the compiler does not support (or supports but
    not with these attributes) is kept with ``Node.unsupported`` set to the reason, for a later pass to send to the
    host CPU; its output shapes must still be inferable.
    """
    m = _load(model)
    opset = model_opset(m)
    unknown = _unknown_ops(m)
    try:
        m = _infer(m)
        for _ in range(PREFOLD_ROUNDS):
            folded = _prefold(m, opset)
            if folded is None:
                break
            m = _infer(folded)
        graph = fold_constants(_raw_graph(m, opset))
        graph = remove_dead(_canonical(graph))
    except CompileError:
        if unknown and not allow_unknown:  # e.g. a foreign op without shapes: name the op, not the symptom
            _refuse([(name, op, UNKNOWN_OP) for name, op in unknown])
        raise
    if not allow_unknown:
        _refuse([(n.name, n.qualified_op, n.unsupported) for n in graph.nodes if n.unsupported])
    _check_dtypes(graph)
    graph.topo_check()
    return graph


def _refuse(refused: list[tuple[str, str, str]]) -> None:
    """UnsupportedOpError naming the first (node, op, reason) and listing the other ops, if there are any."""
    if refused:
        (node, op, reason), others = refused[0], sorted({r[1] for r in refused[1:]})
        more = f" (and {len(refused) - 1} more nodes: {', '.join(others)})" if others else ""
        raise UnsupportedOpError(node, op, reason + more + FALLBACK_HINT)


def model_opset(m: onnx.ModelProto) -> int:
    """The model's default-domain opset; :class:`UnsupportedOpsetError` outside :data:`OPSETS`."""
    versions = [o.version for o in m.opset_import if o.domain in ("", "ai.onnx")]
    if not versions:
        raise CompileError("the model imports no default-domain (ai.onnx) opset")
    if not OPSETS[0] <= versions[0] <= OPSETS[1]:
        raise UnsupportedOpsetError(versions[0], *OPSETS)
    return versions[0]


def _unknown_ops(m: onnx.ModelProto) -> list[tuple[str, str]]:
    """(node name, op) of the nodes whose op can neither run nor fold (before shapes are looked at)."""
    bad = []
    for k, on in enumerate(m.graph.node):
        default = on.domain in ("", "ai.onnx")
        if not default or on.op_type not in SUPPORTED_OPS | FOLD_ONLY_OPS | FOLDERS.keys():
            bad.append((on.name or f"{node_prefix(on.op_type)}_{k}", on.op_type if default else
                        f"{on.domain}::{on.op_type}"))
    return bad


def _infer(m: onnx.ModelProto) -> onnx.ModelProto:
    try:
        return onnx.shape_inference.infer_shapes(m, check_type=True, strict_mode=True, data_prop=True)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as e:
        raise CompileError(f"ONNX shape inference failed: {str(e).strip()}") from None


def _static_shape(tp: onnx.TypeProto | None) -> tuple[int, ...] | None:
    if tp is None or not tp.HasField("tensor_type") or not tp.tensor_type.HasField("shape"):
        return None
    dims = tp.tensor_type.shape.dim
    return tuple(d.dim_value for d in dims) if all(d.HasField("dim_value") for d in dims) else None


def _prefold(m: onnx.ModelProto, opset: int) -> onnx.ModelProto | None:
    """If some node output has no static shape yet, ``m`` with its foldable nodes turned into initializers (so that
    shape inference can run again with their values), or None if nothing folds.

    ONNX's data propagation does not reach every shape computation (e.g. a Reshape target built from ``Shape`` in
    opset 13), so folding first is what makes such tensors static.
    """
    g = m.graph
    types = {vi.name: vi.type for vi in (*g.input, *g.value_info, *g.output)}
    if all(_static_shape(types.get(o)) is not None for n in g.node for o in n.output if o):
        return None
    tensors = {name: Tensor(name, shape, helper.tensor_dtype_to_np_dtype(tp.tensor_type.elem_type))
               for name, tp in types.items()
               if (shape := _static_shape(tp)) is not None and tp.tensor_type.elem_type}
    wanted = {i for n in g.node if n.op_type in FOLDERS for i in n.input}
    tensors.update({i.name: Tensor.const(i.name, numpy_helper.to_array(i)) for i in g.initializer if i.name in wanted})
    nodes, inits = [], []
    for k, on in enumerate(g.node):
        default = on.domain in ("", "ai.onnx")
        if default and on.op_type == "Constant":
            tensors[on.output[0]] = _constant(on, on.name or f"constant_{k}")
        if not default or on.op_type not in FOLDERS:
            nodes.append(on)
            continue
        name = on.name or f"{node_prefix(on.op_type)}_{k}"
        values = fold_node(Node(name, on.op_type, tuple(on.input), tuple(on.output), _attrs(on, name, opset)),
                           tensors)
        if values is None:
            nodes.append(on)
            continue
        for out, value in zip(on.output, values):
            tp = types.get(out)
            dtype = helper.tensor_dtype_to_np_dtype(tp.tensor_type.elem_type) if tp is not None and \
                tp.HasField("tensor_type") and tp.tensor_type.elem_type else np.asarray(value).dtype
            tensors[out] = Tensor.const(out, np.asarray(value).astype(dtype))
            inits.append(numpy_helper.from_array(np.asarray(tensors[out].data), out))
    if not inits:
        return None
    folded = onnx.ModelProto()
    folded.CopyFrom(m)
    del folded.graph.node[:]
    folded.graph.node.extend(nodes)
    folded.graph.initializer.extend(inits)
    return folded


def _load(model: onnx.ModelProto | str | Path) -> onnx.ModelProto:
    if isinstance(model, onnx.ModelProto):
        return model
    try:
        return onnx.load(str(model))
    except OSError:
        raise
    except Exception as e:
        raise CompileError(f"cannot read ONNX model {str(model)!r}: {e}") from None


# -- raw import ----------------------------------------------------------------------------------------------------

def _raw_graph(m: onnx.ModelProto, opset: int) -> Graph:
    """The IR as ONNX has it: attributes plain (schema defaults filled in), constants as tensors, shapes static."""
    g = m.graph
    if g.sparse_initializer:
        raise CompileError(f"sparse initializer {g.sparse_initializer[0].values.name!r} is not supported")
    tensors = {i.name: Tensor.const(i.name, _frozen(numpy_helper.to_array(i))) for i in g.initializer}
    nodes: list[Node] = []
    names: set[str] = set()
    for k, on in enumerate(g.node):
        name = on.name or f"{node_prefix(on.op_type)}_{k}"
        while name in names:
            name += "_"
        names.add(name)
        if on.op_type == "Constant" and on.domain in ("", "ai.onnx"):
            tensors[on.output[0]] = _constant(on, name)
            continue
        nodes.append(Node(name, on.op_type, tuple(on.input), tuple(on.output), _attrs(on, name, opset), on.domain))
    inputs = tuple(i.name for i in g.input if i.name not in tensors)
    types = {vi.name: vi.type for vi in (*g.input, *g.value_info, *g.output)}
    producers = {o: n for n in nodes for o in n.outputs}
    for name in (*inputs, *(o.name for o in g.output), *(t for n in nodes for t in (*n.inputs, *n.outputs))):
        if name and name not in tensors:
            tensors[name] = _typed(name, types.get(name), producers.get(name))
    return Graph(g.name or "graph", inputs, tuple(o.name for o in g.output), tuple(nodes), tensors)


def _frozen(a: np.ndarray) -> np.ndarray:
    """``a`` made read-only, so that :class:`Tensor` keeps it without a copy (it is ours alone)."""
    a.flags.writeable = False
    return a


def _typed(name: str, tp: onnx.TypeProto | None, producer: Node | None) -> Tensor:
    """The tensor ``name`` from its inferred type; DynamicShapeError unless its shape is fully static."""
    node, op = (producer.name, producer.qualified_op) if producer else (None, None)
    what = "" if producer else "(a graph input) "
    if tp is None or not tp.HasField("tensor_type"):
        if tp is not None and tp.WhichOneof("value"):
            raise UnsupportedDTypeError(name, tp.WhichOneof("value"), tuple(map(short_dtype, TENSOR_DTYPES)),
                                        node, op)
        raise DynamicShapeError(name, f"{what}has no inferred type or shape", node, op)
    tt = tp.tensor_type
    if not tt.HasField("shape"):
        raise DynamicShapeError(name, f"{what}has an unknown rank", node, op)
    dims = []
    for i, d in enumerate(tt.shape.dim):
        if d.HasField("dim_value"):
            dims.append(d.dim_value)
            continue
        text = "(" + ", ".join(str(e.dim_value) if e.HasField("dim_value") else e.dim_param or "?"
                               for e in tt.shape.dim) + ")"
        kind = f"symbolic dim {i} ({d.dim_param!r})" if d.dim_param else f"unknown dim {i}"
        raise DynamicShapeError(name, f"{what}has {kind} in shape {text}", node, op)
    if tt.elem_type == onnx.TensorProto.UNDEFINED:
        raise DynamicShapeError(name, f"{what}has no inferred element type", node, op)
    return Tensor(name, tuple(dims), np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type)))


def _constant(on: onnx.NodeProto, name: str) -> Tensor:
    """The tensor a Constant node holds."""
    attr = on.attribute[0]
    if attr.name == "sparse_value":
        raise UnsupportedOpError(name, "Constant", "a sparse_value is not supported")
    v = helper.get_attribute_value(attr)
    if isinstance(v, onnx.TensorProto):
        return Tensor.const(on.output[0], numpy_helper.to_array(v))
    dtype = {"value_float": np.float32, "value_floats": np.float32, "value_int": np.int64, "value_ints": np.int64}
    if attr.name not in dtype:
        raise UnsupportedOpError(name, "Constant", f"attribute {attr.name!r} is not supported")
    return Tensor.const(on.output[0], np.asarray(v, dtype[attr.name]))


def _plain(v: Any, node: str, op: str, attr: str) -> Any:
    """An attribute value as plain Python: str for bytes, tuples for lists, ndarray for tensors."""
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, float):  # stored as float32: give back the shortest decimal that rounds to it (1e-05)
        return float(str(np.float32(v)))
    if isinstance(v, onnx.TensorProto):
        return numpy_helper.to_array(v)
    if isinstance(v, (onnx.GraphProto, onnx.SparseTensorProto)) or (
            isinstance(v, list) and v and isinstance(v[0], onnx.GraphProto)):
        raise UnsupportedOpError(node, op, f"attribute {attr!r} holds a subgraph or sparse tensor; control flow "
                                 f"and sparse tensors are not supported")
    if isinstance(v, list):
        return tuple(_plain(x, node, op, attr) for x in v)
    return v


def _attrs(on: onnx.NodeProto, name: str, opset: int) -> dict[str, Any]:
    """A node's attributes as plain Python, with the schema's default filled in for every one left out."""
    op = on.op_type
    attrs = {a.name: _plain(helper.get_attribute_value(a), name, op, a.name) for a in on.attribute}
    try:
        schema = onnx.defs.get_schema(op, opset, on.domain)
    except onnx.defs.SchemaError:
        return attrs
    for key, a in schema.attributes.items():
        if key not in attrs and a.default_value.type != onnx.AttributeProto.UNDEFINED:
            attrs[key] = _plain(helper.get_attribute_value(a.default_value), name, op, key)
    return attrs


# -- canonical form ------------------------------------------------------------------------------------------------

class _Ctx:
    """What the canonicalisers see: the graph's tensors (to which they may add constants) and its uses."""

    def __init__(self, graph: Graph):
        self.graph, self.tensors = graph, dict(graph.tensors)

    def shape(self, name: str) -> tuple[int, ...]:
        return self.tensors[name].shape

    def const(self, node: Node, index: int, what: str) -> np.ndarray | None:
        """The constant value of input ``index`` (None if absent); UnsupportedOpError if it is not constant."""
        if index >= len(node.inputs) or not node.inputs[index]:
            return None
        t = self.tensors[node.inputs[index]]
        if not t.is_const:
            raise UnsupportedOpError(node.name, node.op, f"input {index} ({what}, {t.name!r}) must be a constant "
                                     f"(it does not fold to one)")
        return t.data

    def add_const(self, name: str, value: np.ndarray) -> str:
        while name in self.tensors:
            name += "_"
        self.tensors[name] = Tensor.const(name, value)
        return name

    def drop_extra_outputs(self, node: Node, what: str) -> tuple[str, ...]:
        """``node``'s first output alone; UnsupportedOpError if another output is used."""
        for o in node.outputs[1:]:
            if o and (self.graph.consumers(o) or o in self.graph.outputs):
                raise UnsupportedOpError(node.name, node.op, f"only the first output is supported; {what} "
                                         f"({o!r}) is used")
        return node.outputs[:1]


def _axis(node: Node, axis: int, rank: int, inclusive: bool = False) -> int:
    hi = rank + 1 if inclusive else rank
    if not -hi <= axis < hi:
        raise UnsupportedOpError(node.name, node.op, f"axis {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def _window(node: Node, ctx: _Ctx, kernel: tuple[int, ...] | None) -> dict[str, Any]:
    """kernel_shape, strides, pads, dilations of a conv or pool, with auto_pad resolved (VALID) or refused."""
    a, k = node.attrs, len(ctx.shape(node.inputs[0])) - 2
    auto = a.get("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        raise UnsupportedOpError(node.name, node.op, f"attribute auto_pad={auto!r} is not supported; use explicit "
                                 f"pads")
    if auto not in ("NOTSET", "VALID"):
        raise UnsupportedOpError(node.name, node.op, f"attribute auto_pad={auto!r} is not valid")
    return {"kernel_shape": tuple(a.get("kernel_shape") or kernel), "strides": tuple(a.get("strides") or (1,) * k),
            "pads": (0,) * 2 * k if auto == "VALID" else tuple(a.get("pads") or (0,) * 2 * k),
            "dilations": tuple(a.get("dilations") or (1,) * k)}


def _conv(w_index: int):
    def canon(node: Node, ctx: _Ctx) -> Node:
        attrs = _window(node, ctx, ctx.shape(node.inputs[w_index])[2:])
        return replace(node, attrs={**attrs, "group": int(node.attrs.get("group", 1))})
    return canon


def _pool_attrs(node: Node, ctx: _Ctx) -> dict[str, Any]:
    """A pool's window attributes and ceil_mode; refuses ceil_mode pools whose size ONNX and onnxruntime differ on."""
    attrs = {**_window(node, ctx, None), "ceil_mode": int(node.attrs.get("ceil_mode", 0))}
    sx, sy, k = ctx.shape(node.inputs[0]), ctx.shape(node.outputs[0]), len(attrs["kernel_shape"])
    for i in range(k) if attrs["ceil_mode"] else ():
        ours = window_out(sx[2 + i], attrs["kernel_shape"][i], attrs["strides"][i], attrs["pads"][i],
                          attrs["pads"][k + i], attrs["dilations"][i], True)
        if ours != sy[2 + i]:
            raise UnsupportedOpError(node.name, node.op, f"ceil_mode=1 makes the last window of spatial dim {i} "
                                     f"start in the end padding: ONNX shape inference gives {sy[2 + i]} outputs, "
                                     f"onnxruntime and PyTorch {ours}; use ceil_mode=0 and explicit pads")
    return attrs


def _maxpool(node: Node, ctx: _Ctx) -> Node:
    attrs = {**_pool_attrs(node, ctx), "storage_order": int(node.attrs.get("storage_order", 0))}
    return replace(node, attrs=attrs, outputs=ctx.drop_extra_outputs(node, "the Indices output"))


def _avgpool(node: Node, ctx: _Ctx) -> Node:
    attrs = {**_pool_attrs(node, ctx), "count_include_pad": int(node.attrs.get("count_include_pad", 0))}
    return replace(node, attrs=attrs)


def _batchnorm(node: Node, ctx: _Ctx) -> Node:
    if node.attrs.get("training_mode", 0):
        raise UnsupportedOpError(node.name, node.op, "training_mode=1 is not supported; export for inference")
    return replace(node, attrs={"epsilon": float(node.attrs.get("epsilon", 1e-5)),
                                "momentum": float(node.attrs.get("momentum", 0.9))},
                   outputs=ctx.drop_extra_outputs(node, "a training output"))


def _gemm(node: Node, ctx: _Ctx) -> Node:
    a = node.attrs
    return replace(node, attrs={"alpha": float(a.get("alpha", 1.0)), "beta": float(a.get("beta", 1.0)),
                                "transA": int(a.get("transA", 0)), "transB": int(a.get("transB", 0))})


def _axis_attr(default: int, inclusive: bool = False):
    def canon(node: Node, ctx: _Ctx) -> Node:
        rank = len(ctx.shape(node.inputs[0]))
        return replace(node, attrs={"axis": _axis(node, int(node.attrs.get("axis", default)), rank, inclusive)})
    return canon


def _layernorm(node: Node, ctx: _Ctx) -> Node:
    a, rank = node.attrs, len(ctx.shape(node.inputs[0]))
    return replace(node, attrs={"axis": _axis(node, int(a.get("axis", -1)), rank),
                                "epsilon": float(a.get("epsilon", 1e-5)), "stash_type": int(a.get("stash_type", 1))},
                   outputs=ctx.drop_extra_outputs(node, "the Mean/InvStdDev output"))


def _reduce(node: Node, ctx: _Ctx) -> Node:
    a, rank = node.attrs, len(ctx.shape(node.inputs[0]))
    axes = a.get("axes")
    if axes is None:
        value = ctx.const(node, 1, "axes")
        axes = () if value is None else tuple(value.tolist())
    if not axes:
        if a.get("noop_with_empty_axes", 0):
            return replace(node, op="Identity", inputs=node.inputs[:1], attrs={})
        axes = tuple(range(rank))
    axes = tuple(sorted({_axis(node, int(x), rank) for x in axes}))
    return replace(node, inputs=node.inputs[:1], attrs={"axes": axes, "keepdims": int(a.get("keepdims", 1))})


def _reshape(node: Node, ctx: _Ctx) -> Node:
    ctx.const(node, 1, "shape")
    return replace(node, attrs={"allowzero": int(node.attrs.get("allowzero", 0))})


def _transpose(node: Node, ctx: _Ctx) -> Node:
    rank = len(ctx.shape(node.inputs[0]))
    return replace(node, attrs={"perm": tuple(node.attrs.get("perm") or range(rank - 1, -1, -1))})


def _const_inputs(*what: str):
    """Canonicaliser for ops whose inputs after the first must be constants (attributes kept as they are)."""
    def canon(node: Node, ctx: _Ctx) -> Node:
        for i, w in enumerate(what, 1):
            ctx.const(node, i, w)
        return node
    return canon


def _pad(node: Node, ctx: _Ctx) -> Node:
    pads = ctx.const(node, 1, "pads")
    ctx.const(node, 2, "constant_value")
    axes = ctx.const(node, 3, "axes")
    mode = node.attrs.get("mode", "constant")
    inputs = node.inputs[:3]
    if axes is not None:  # opset 18: pads for the listed axes only
        rank = len(ctx.shape(node.inputs[0]))
        full = np.zeros(2 * rank, np.int64)
        for j, ax in enumerate(_axis(node, int(x), rank) for x in axes.tolist()):
            full[ax], full[rank + ax] = pads[j], pads[len(axes) + j]
        inputs = (inputs[0], ctx.add_const(f"{node.name}_pads", full)) + inputs[2:]
    return replace(node, inputs=tuple(inputs), attrs={"mode": mode})


def _qdq(node: Node, ctx: _Ctx) -> Node:
    if node.attrs.get("block_size", 0):
        raise UnsupportedOpError(node.name, node.op, "blocked quantization (block_size != 0) is not supported")
    rank = max(len(ctx.shape(node.inputs[0])), 1)
    return replace(node, attrs={"axis": int(node.attrs.get("axis", 1)) % rank})


def _no_attrs(node: Node, ctx: _Ctx) -> Node:
    return node


CANONICAL = {
    "Conv": _conv(1), "QLinearConv": _conv(3), "MaxPool": _maxpool, "AveragePool": _avgpool,
    "BatchNormalization": _batchnorm, "Gemm": _gemm, "Softmax": _axis_attr(-1), "Concat": _axis_attr(0),
    "Flatten": _axis_attr(1, inclusive=True), "LayerNormalization": _layernorm, "ReduceMean": _reduce,
    "ReduceSum": _reduce, "Reshape": _reshape, "Transpose": _transpose,
    "Slice": _const_inputs("starts", "ends", "axes", "steps"), "Clip": _const_inputs("min", "max"), "Pad": _pad,
    "QuantizeLinear": _qdq, "DequantizeLinear": _qdq,
    "Gelu": lambda n, c: replace(n, attrs={"approximate": n.attrs.get("approximate", "none")}),
}
"""Per-op canonicalisers ``fn(node, ctx) -> node``; ops not listed have no attributes to normalise."""


def _canonical_node(node: Node, ctx: _Ctx) -> Node:
    if node.domain not in ("", "ai.onnx"):
        raise UnsupportedOpError(node.name, node.qualified_op, UNKNOWN_OP)
    if node.op in ("Squeeze", "Unsqueeze"):  # of an activation: a reshape to the inferred shape
        target = np.asarray(ctx.shape(node.outputs[0]), np.int64)
        return Node(node.name, "Reshape", (node.inputs[0], ctx.add_const(f"{node.name}_shape", target)),
                    node.outputs, {"allowzero": 0})
    if node.op == "Cast" and ctx.tensors[node.inputs[0]].dtype == ctx.tensors[node.outputs[0]].dtype:
        return Node(node.name, "Identity", node.inputs[:1], node.outputs)
    if node.op in FOLD_ONLY_OPS:
        inputs = [i for i in node.present_inputs if not ctx.tensors[i].is_const]
        why = f"input {inputs[0]!r} is not constant" if inputs else "it could not be evaluated"
        raise UnsupportedOpError(node.name, node.op, f"supported only when it folds to a constant, and {why}")
    if node.op not in SUPPORTED_OPS:
        raise UnsupportedOpError(node.name, node.op, UNKNOWN_OP)
    return CANONICAL.get(node.op, _no_attrs)(node, ctx)


def _canonical(graph: Graph) -> Graph:
    """Nodes in the compiler's canonical forms; a node it cannot take keeps ``unsupported`` = the reason."""
    ctx = _Ctx(graph)
    nodes = []
    for node in graph.nodes:
        try:
            nodes.append(_canonical_node(node, ctx))
        except UnsupportedOpError as e:
            nodes.append(replace(node, unsupported=e.reason))
    return replace(graph, nodes=tuple(nodes), tensors=ctx.tensors)


def _check_dtypes(graph: Graph) -> None:
    """UnsupportedDTypeError for a tensor a compiler-run node reads or writes in a dtype it cannot take."""
    for node in graph.nodes:
        if node.unsupported:
            continue
        for name in (*node.present_inputs, *(o for o in node.outputs if o)):
            t = graph.tensors[name]
            allowed = CONST_DTYPES if t.is_const else TENSOR_DTYPES
            if t.dtype not in allowed:
                raise UnsupportedDTypeError(name, short_dtype(t.dtype), tuple(map(short_dtype, allowed)),
                                            node.name, node.op)
