"""ONNX to the compiler's IR: :func:`import_onnx`.

Steps: check the opset (any the installed onnx defines; a model below :data:`WORKING_OPSET` is converted up to it with
``onnx.version_converter``); fix the symbolic dims the caller names (``dims``); check the model with
``onnx.checker``; run ``onnx.shape_inference.infer_shapes(strict_mode=True, data_prop=True)``
(where a shape stays unknown, fold the constant nodes into initializers and infer again); take initializers and
``Constant`` nodes as constant tensors, require a static shape for every tensor, convert attributes to plain Python
(schema defaults filled in), fold constant subgraphs (:func:`compiler.passes.fold_constants`), then put each
recognised op in the canonical form of :mod:`compiler.ir` (checking its attributes; a node it cannot take is marked
for the host CPU), and check dtypes. Unless ``allow_unknown``, marked nodes are an UnsupportedOpError listing them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.external_data_helper import load_external_data_for_model, uses_external_data

from compiler.errors import (
    FALLBACK_HINT,
    CompileError,
    ConstantFoldError,
    DynamicShapeError,
    UnsupportedDTypeError,
    UnsupportedOpError,
    UnsupportedOpsetError,
)
from compiler.frontend.canonical import CanonContext
from compiler.frontend.contrib_types import CONTRIB, ORT_DEFAULT_DOMAIN, contrib_output_types, is_ort_op
from compiler.frontend.control_flow import RuntimeIfError, inline_constant_ifs, refuse_runtime_ifs
from compiler.frontend.dtypes import NPU_STORAGE, graph_dtype_names
from compiler.ir import Graph, Node, Tensor, node_prefix, short_dtype
from compiler.ops import REGISTRY, contract_violation
from compiler.passes.composites import decompose_composites
from compiler.passes.fold_constants import FOLDERS, fold_constants, fold_node, remove_dead
from compiler.passes.fold_reference import NEVER
from compiler.passes.weight_quant import fuse_weight_quant

OPSETS = (1, onnx.defs.onnx_opset_version())
"""The default-domain opsets accepted, inclusive: every one the installed onnx defines."""

WORKING_OPSET = 13
"""Models at an older default-domain opset are converted up to this one (``onnx.version_converter``); newer ones are
taken as they are (the canonical forms of :mod:`compiler.ops` cover opsets 13 to :data:`OPSETS`)."""

DATA_DEPENDENT = frozenset({"NonZero", "NonMaxSuppression", "Unique", "Compress", "TopK", "Loop", "If", "Scan",
                            "StringSplit", "RegexFullMatch"})
"""Ops whose output sizes can depend on the values of their inputs (no fixed dims make them static)."""

UNKNOWN_OP = "operator is not supported by the compiler"

PREFOLD_ROUNDS = 8
"""At most this many rounds of folding constants and inferring shapes again before requiring static shapes."""

def import_onnx(model: onnx.ModelProto | str | Path, allow_unknown: bool = False,
                dims: Mapping[str, int] | None = None, serialized: bytes | None = None) -> Graph:
    """The IR of an ONNX model (a ``ModelProto`` or a path to a ``.onnx`` file). ``serialized``: the model's bytes,
    if the caller has them (``onnx.checker`` reads them instead of a second serialization of the model).

    ``dims`` fixes symbolic dimensions of the graph inputs by name (``{"batch": 1, "seq": 128}``): a compiled program
    has static shapes. Raises :class:`UnsupportedOpsetError`, :class:`DynamicShapeError`,
    :class:`UnsupportedOpError` and :class:`UnsupportedDTypeError`. With ``allow_unknown``, an op the compiler does
    not support (or supports but not with these attributes) is kept with ``Node.unsupported`` set to the reason, for
    a later pass to send to the host CPU; its output shapes must still be inferable. A model with a name or string
    that is not UTF-8 (protobuf decodes them when read) is a CompileError too.
    """
    try:
        return _import(model, allow_unknown, dims, serialized)
    except UnicodeDecodeError as e:   # (a checker message quoting the name, or the name itself, is the text)
        text = (bytes(e.object).decode("utf-8", "replace").strip().splitlines() or [""])[0][:200]
        raise CompileError(f"the model is not valid ONNX: a name or string in it is not UTF-8 text: {text!r}") \
            from None


def _import(model: onnx.ModelProto | str | Path, allow_unknown: bool, dims: Mapping[str, int] | None,
            serialized: bytes | None) -> Graph:
    """:func:`import_onnx`'s steps."""
    m, external = _load(model)
    data = None if external else serialized   # data: m serialized, while m is unchanged (and holds all its weights)
    opset = model_opset(m)
    if not m.graph.output:
        raise CompileError("the model's graph has no outputs: there is nothing to compute (onnxruntime refuses it "
                           "too); declare the tensors it should produce in graph.output")
    if opset < WORKING_OPSET:
        _check(m if m.ir_version >= 4 else _with_ir(m, 4))   # valid at its own opset, before converting
        m, opset, data = _convert(m, opset, WORKING_OPSET), WORKING_OPSET, None
    if dims:
        m, data = fix_dims(m, dims), None
    _check(m, data)
    m = inline_constant_ifs(m)
    unknown = _unknown_ops(m)
    try:
        m = _infer(m)
        for _ in range(PREFOLD_ROUNDS):
            folded = _prefold(m, opset)
            if folded is None:
                break
            m = _infer(inline_constant_ifs(folded))
        refuse_runtime_ifs(m)
        graph = fold_constants(_checked_contracts(fuse_weight_quant(_raw_graph(m, opset))))
        decomposed = decompose_composites(graph)
        graph = remove_dead(_canonical(graph if decomposed is graph else fold_constants(decomposed)))
    except (ConstantFoldError, RuntimeIfError):
        raise
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


def _convert(m: onnx.ModelProto, opset: int, target: int) -> onnx.ModelProto:
    """``m`` converted from ``opset`` to ``target`` by ``onnx.version_converter``; a CompileError naming the first
    node that does not convert (each node is tried alone) and why, when the whole model does not."""
    from onnx import version_converter

    inputs = {i.name for i in m.graph.input}
    if m.ir_version < 4 and any(i.name not in inputs for i in m.graph.initializer):
        m = _copy(m)   # IR 4 let initializers be constants rather than defaulted inputs; the converter's
        m.ir_version = 4       # IR reader needs that to see them at all
    try:
        out = version_converter.convert_version(m, target)
    except Exception as e:   # the converter raises RuntimeError / its own C++ errors, one type per adapter
        raise CompileError(f"cannot convert the model from opset {opset} to {target} with onnx.version_converter: "
                           f"{_culprit(m, opset, target) or _first_line(e)}") from None
    # IR versions before 4 require initializers to be graph inputs; the converted opset needs a newer IR anyway
    out.ir_version = max(out.ir_version, helper.find_min_ir_version_for([helper.make_opsetid("", target)]))
    _legacy_resize(m, out, opset)
    return out


def _legacy_resize(m: onnx.ModelProto, out: onnx.ModelProto, opset: int) -> None:
    """Give the Resize nodes ``version_converter`` made of Upsample (opsets 7-9) and Resize-10 their old coordinate
    rule: the converter leaves ``coordinate_transformation_mode`` out, which opset 11+ reads as half_pixel, while
    those ops sample asymmetrically (``x = xr / scale``) and onnxruntime's nearest takes ``floor`` (``ceil`` for a
    Resize-10 whose constant scales all shrink). Matched by output name; ``out`` is changed in place."""
    if opset >= 11:
        return
    legacy = {on.output[0]: on for on in m.graph.node if on.domain in ("", "ai.onnx") and on.output
              and on.op_type in ("Upsample", "Resize")}
    consts = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    for on in out.graph.node:
        old = legacy.get(on.output[0]) if on.op_type == "Resize" and on.output else None
        if old is None or any(a.name == "coordinate_transformation_mode" for a in on.attribute):
            continue
        on.attribute.append(helper.make_attribute("coordinate_transformation_mode", "asymmetric"))
        scales = consts.get(old.input[1]) if old.op_type == "Resize" and len(old.input) > 1 else None
        shrink = scales is not None and all(s < 1 for s in np.asarray(scales).ravel() if s != 1)
        if any(a.name == "mode" and a.s == b"nearest" for a in on.attribute):
            on.attribute.append(helper.make_attribute("nearest_mode", "ceil" if shrink else "floor"))


def _culprit(m: onnx.ModelProto, opset: int, target: int) -> str | None:
    """'node NAME (Op): reason' of the first node whose one-node model does not convert, or None."""
    from onnx import version_converter

    for k, on in enumerate(m.graph.node):
        g = helper.make_graph([on], "one", [helper.make_tensor_value_info(i, onnx.TensorProto.UNDEFINED, None)
                                            for i in on.input if i],
                              [helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None) for o in on.output
                               if o])
        one = helper.make_model(g, opset_imports=list(m.opset_import), ir_version=m.ir_version)
        try:
            version_converter.convert_version(one, target)
        except Exception as e:
            name = on.name or f"{node_prefix(on.op_type)}_{k}"
            return f"node {name!r} ({on.op_type}): {_first_line(e)}"
    return None


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def fix_dims(m: onnx.ModelProto, dims: Mapping[str, int]) -> onnx.ModelProto:
    """``m`` with the symbolic dimensions named in ``dims`` set to those sizes wherever they appear in the graph's
    inputs, outputs and value infos; CompileError for a name no graph input uses or a negative size (0 is an empty
    axis: a decoder's past of a prefill)."""
    used = {d.dim_param for vi in m.graph.input for d in vi.type.tensor_type.shape.dim if d.dim_param}
    for name, size in dims.items():
        if name not in used:
            known = ", ".join(sorted(used)) or "none"
            raise CompileError(f"--dim {name}={size}: no input dimension is named {name!r}; symbolic input "
                               f"dimensions: {known}")
        if not isinstance(size, int) or size < 0:
            raise CompileError(f"--dim {name} must be an integer >= 0, not {size!r}")
    out = onnx.ModelProto()
    out.CopyFrom(m)
    for vi in (*out.graph.input, *out.graph.output, *out.graph.value_info):
        for d in vi.type.tensor_type.shape.dim:
            if d.dim_param in dims:
                d.dim_value = dims[d.dim_param]   # (setting the value clears the param: a oneof)
    return out


def _check(m: onnx.ModelProto, data: bytes | None = None) -> None:
    """CompileError with ``onnx.checker``'s reason for a model ONNX itself calls invalid (graph structure, node
    order, attributes and arities against the schemas). Graph inputs and outputs declared without a shape, which
    the checker insists on but onnxruntime and shape inference accept, are not held against the model. ``data``:
    ``m`` serialized, if the caller has it. onnxruntime's ops in the default domain (:data:`ORT_DEFAULT_DOMAIN`), which
    ONNX has no schema for, are checked as the contrib ops they are."""
    io = [vi for vi in (*m.graph.input, *m.graph.output) if vi.type.HasField("tensor_type")]
    ort = [on for on in m.graph.node if on.domain in ("", "ai.onnx") and on.op_type in ORT_DEFAULT_DOMAIN]
    if ort:
        m, data = _copy(m), None
        for on in m.graph.node:
            if on.domain in ("", "ai.onnx") and on.op_type in ORT_DEFAULT_DOMAIN:
                on.domain = CONTRIB
        if not any(o.domain == CONTRIB for o in m.opset_import):
            m.opset_import.append(helper.make_opsetid(CONTRIB, 1))
    if any(not vi.type.tensor_type.HasField("shape") for vi in io):
        m, data = (m if ort else _copy(m)), None
        for vi in (*m.graph.input, *m.graph.output):
            if vi.type.HasField("tensor_type") and not vi.type.tensor_type.HasField("shape"):
                vi.type.tensor_type.shape.SetInParent()
    try:
        onnx.checker.check_model(m if data is None else data)
    except onnx.checker.ValidationError as e:
        # an op version ONNX has since deprecated (GroupNormalization-18) is still valid at the model's opset and
        # onnxruntime runs it: shape inference and the lowerings check such a model further
        if "is deprecated in domain_version" not in str(e):
            raise CompileError(f"the model is not valid ONNX: {_first_line(e)}") from None
    for vi in (*m.graph.input, *m.graph.output, *m.graph.value_info):   # the checker allows it, onnxruntime not
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type == onnx.TensorProto.UNDEFINED:
            raise CompileError(f"the model is not valid ONNX: {vi.name!r} is declared with element type 0 "
                               f"(UNDEFINED); declare its type (e.g. onnx.TensorProto.FLOAT)")
    seen: set[str] = set()
    for on in m.graph.node:   # the checker allows it, onnxruntime refuses it
        if on.name and on.name in seen:
            raise CompileError(f"the model is not valid ONNX: two nodes are named {on.name!r}")
        seen.add(on.name)


def _with_ir(m: onnx.ModelProto, ir: int) -> onnx.ModelProto:
    """A copy of ``m`` at IR version ``ir`` (IR 4 let initializers be constants rather than defaulted inputs)."""
    out = _copy(m)
    out.ir_version = ir
    return out


def _copy(m: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``m`` to change (the caller's model stays as it is)."""
    out = onnx.ModelProto()
    out.CopyFrom(m)
    return out


def _unknown_ops(m: onnx.ModelProto) -> list[tuple[str, str]]:
    """(node name, op) of the nodes whose op can neither run nor fold (before shapes are looked at)."""
    bad = []
    for k, on in enumerate(m.graph.node):
        default = on.domain in ("", "ai.onnx")
        if not default or on.op_type not in REGISTRY.keys() | FOLDERS.keys():
            bad.append((on.name or f"{node_prefix(on.op_type)}_{k}", on.op_type if default else
                        f"{on.domain}::{on.op_type}"))
    return bad


SAME_SHAPE = frozenset({"GroupNormalization"})
"""Ops whose output has their first input's type and shape but which ONNX's shape inference leaves without one."""


WEIGHT_TYPES = frozenset({onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16,
                          onnx.TensorProto.DOUBLE, onnx.TensorProto.INT8, onnx.TensorProto.UINT8})
"""Element types of initializers whose values no shape depends on once they have more than :data:`WEIGHT_MIN`
elements (weights, biases, quantized weights; never the integer tensors that shapes, axes and indices come in)."""
WEIGHT_MIN = 64


def _infer(m: onnx.ModelProto) -> onnx.ModelProto:
    """``m`` with ONNX's strict shape inference applied. The weights go to it as dims and types without their data
    (their values decide no shape): serializing and parsing them took 0.18 of ResNet-50's 0.5 s import, the
    inference itself 3 ms; they are put back into the result as they were. The model's value infos that are not
    static (an exporter's guesses, ``(1, unk__2, 128)``, or those of tensors folded since) are left out: inference
    would keep their symbolic dims where it can compute the sizes."""
    weights = [t for t in m.graph.initializer if t.data_type in WEIGHT_TYPES and math.prod(t.dims) > WEIGHT_MIN]
    static = [vi for vi in m.graph.value_info if _static_shape(vi.type) is not None]
    light = m
    if weights or len(static) < len(m.graph.value_info):
        light = _copy(m)
        del light.graph.value_info[:]
        light.graph.value_info.extend(static)
    if weights:
        del light.graph.initializer[:]
        heavy = {t.name for t in weights}
        for t in m.graph.initializer:
            if t.name in heavy:
                stub = light.graph.initializer.add()
                stub.name, stub.data_type = t.name, t.data_type
                stub.dims.extend(t.dims)
            else:
                light.graph.initializer.append(t)
    try:
        out = onnx.shape_inference.infer_shapes(light, check_type=True, strict_mode=True, data_prop=True)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as e:
        raise CompileError(f"ONNX shape inference failed: {str(e).strip()}") from None
    if weights:
        del out.graph.initializer[:]
        out.graph.initializer.extend(m.graph.initializer)
    filled = _same_shape(out)
    return out if filled is None else _infer(filled)


def _same_shape(m: onnx.ModelProto) -> onnx.ModelProto | None:
    """``m`` with the output types of :data:`SAME_SHAPE` nodes that have none (from their input's) and of contrib
    ops (:mod:`compiler.frontend.contrib_types`), or None."""
    g = m.graph
    types = {vi.name: vi.type for vi in (*g.input, *g.value_info, *g.output)}

    def known(name: str) -> bool:
        return name in types and types[name].tensor_type.HasField("shape")

    todo = {n.output[0]: types[n.input[0]] for n in g.node if n.op_type in SAME_SHAPE and n.domain in ("", "ai.onnx")
            and known(n.input[0]) and not known(n.output[0])}
    ort = [n for n in g.node if is_ort_op(n)]
    consts = _small_constants(m) if ort else {}
    todo.update({name: tp for n in ort for name, tp in contrib_output_types(n, types, consts).items()
                 if not known(name) and _static_shape(tp) is not None})   # (static: else dropped)
    if not todo:
        return None
    filled = onnx.ModelProto()
    filled.CopyFrom(m)
    for o in filled.graph.output:
        if o.name in todo:
            o.type.CopyFrom(todo.pop(o.name))
    filled.graph.value_info.extend(helper.make_value_info(name, tp) for name, tp in todo.items())
    return filled


SMALL = 16
"""Constants of at most this many elements are given to the output-type rules of onnxruntime's ops by value (a
GroupQueryAttention's total_sequence_length decides its present key's length)."""


def _small_constants(m: onnx.ModelProto) -> dict[str, np.ndarray]:
    """The values of the main graph's small initializers and Constant nodes, by name."""
    found = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer if math.prod(i.dims) <= SMALL}
    for on in m.graph.node:
        if on.op_type == "Constant" and on.domain in ("", "ai.onnx") and on.attribute and \
                on.attribute[0].HasField("t") and math.prod(on.attribute[0].t.dims) <= SMALL:
            found[on.output[0]] = numpy_helper.to_array(on.attribute[0].t)
    return found


def _static_shape(tp: onnx.TypeProto | None) -> tuple[int, ...] | None:
    if tp is None or not tp.HasField("tensor_type") or not tp.tensor_type.HasField("shape"):
        return None
    dims = tp.tensor_type.shape.dim
    return tuple(d.dim_value for d in dims) if all(d.HasField("dim_value") for d in dims) else None


def _prefold(m: onnx.ModelProto, opset: int) -> onnx.ModelProto | None:
    """If some node output has no static shape yet, ``m`` with its foldable nodes turned into initializers and the
    static types found on the way recorded as value infos (so that shape inference can run again with them), or None
    if nothing changed.

    One pass in graph order: a node whose inputs are all constants (or a ``Shape``/``Size`` of a tensor of static
    shape) folds; any other node whose outputs have no static type yet gets them from its op's own shape inference
    (``onnx.shape_inference.infer_node_outputs``) given its inputs' types and constant values, so the next ``Shape``
    downstream folds in the same pass. ONNX's whole-model data propagation does not reach every shape computation
    (a Reshape target built from ``Shape`` in opset 13, a window size computed from a padded map), so this is what
    makes such tensors static.
    """
    g = m.graph
    types = {vi.name: vi.type for vi in (*g.input, *g.value_info, *g.output)}
    if all(_static_shape(types.get(o)) is not None for n in g.node for o in n.output if o):
        return None
    tensors = _Constants({name: Tensor(name, shape, helper.tensor_dtype_to_np_dtype(tp.tensor_type.elem_type))
                          for name, tp in types.items()
                          if (shape := _static_shape(tp)) is not None and tp.tensor_type.elem_type}, g.initializer)
    nodes, inits, found = [], [], {}
    for k, on in enumerate(g.node):
        default = on.domain in ("", "ai.onnx")
        if default and on.op_type == "Constant":
            tensors[on.output[0]] = _constant(on, on.name or f"constant_{k}")
        values = _fold_proto(on, k, tensors, opset) if default and on.op_type not in NEVER | {"Constant"} else None
        if values is None:
            nodes.append(on)
            found.update(_node_types(on, types, tensors, m.opset_import))
            continue
        for out, value in zip(on.output, values):
            if out:
                tp = types.get(out)
                dtype = helper.tensor_dtype_to_np_dtype(tp.tensor_type.elem_type) if tp is not None and \
                    tp.HasField("tensor_type") and tp.tensor_type.elem_type else np.asarray(value).dtype
                tensors[out] = Tensor.const(out, np.asarray(value).astype(dtype))
                inits.append(numpy_helper.from_array(np.asarray(tensors[out].data), out))
    if not inits and not found:
        return None
    folded = onnx.ModelProto()
    folded.CopyFrom(m)
    del folded.graph.node[:]
    folded.graph.node.extend(nodes)
    folded.graph.initializer.extend(inits)
    kept = [vi for vi in folded.graph.value_info if vi.name not in found]
    del folded.graph.value_info[:]
    folded.graph.value_info.extend(kept + [helper.make_value_info(name, tp) for name, tp in found.items()])
    return folded


def _fold_proto(on: onnx.NodeProto, k: int, tensors: _Constants, opset: int) -> list | None:
    """The output values of ONNX node ``on`` (the ``k``-th) if it folds (:func:`fold_node`), else None."""
    name = on.name or f"{node_prefix(on.op_type)}_{k}"
    if on.op_type not in ("Shape", "Size") and not all(tensors.is_const(i) for i in on.input if i):
        return None
    node = Node(name, on.op_type, tuple(on.input), tuple(on.output), _attrs(on, name, opset), source=on)
    return fold_node(node, tensors, opset=opset)


DATA_MAX = 1 << 16
"""Constant inputs of at most this many elements go to a node's shape inference with their values (shape, axes and
index tensors; weights never decide a shape)."""


def _node_types(on: onnx.NodeProto, types: dict[str, onnx.TypeProto], tensors: _Constants,
                opsets) -> dict[str, onnx.TypeProto]:
    """Static output types of a node that does not fold, from its op's shape inference on its inputs' types (and
    small constant values); recorded in ``types`` and ``tensors`` (shape only) for the nodes after it. Empty when
    its outputs are static already, an input's type is unknown, or the op has no inference."""
    if all(_static_shape(types.get(o)) is not None for o in on.output if o):
        return {}
    ins, data = {}, {}
    for i in (i for i in on.input if i):
        if tensors.is_const(i):
            proto = tensors.proto(i)
            ins[i] = helper.make_tensor_type_proto(proto.data_type, list(proto.dims))
            if math.prod(proto.dims) <= DATA_MAX:
                data[i] = proto
        elif i in types:
            ins[i] = types[i]
        else:
            return {}
    versions = {("" if o.domain == "ai.onnx" else o.domain): o.version for o in opsets}
    try:
        schema = onnx.defs.get_schema(on.op_type, versions.get(on.domain, 1), on.domain)
        out = onnx.shape_inference.infer_node_outputs(schema, on, ins, data, opset_imports=list(opsets))
    except Exception:   # no schema or no inference for the op (a function, a foreign domain), or it fails here
        return {}
    found = {}
    for name, tp in out.items():
        shape = _static_shape(tp)
        if shape is not None and tp.tensor_type.elem_type:
            types[name] = found[name] = tp
            tensors[name] = Tensor(name, shape, helper.tensor_dtype_to_np_dtype(tp.tensor_type.elem_type))
    return found


class _Constants(dict):
    """Tensors by name for folding before the IR exists: those of static type, constants folded so far, and the
    model's initializers, each converted to an array only when a node that folds reads it (a weight that feeds a
    run-time node never is)."""

    def __init__(self, typed: dict[str, Tensor], initializers) -> None:
        self.protos = {i.name: i for i in initializers}
        super().__init__({k: t for k, t in typed.items() if k not in self.protos})

    def __missing__(self, name: str) -> Tensor:
        if name not in self.protos:
            raise KeyError(name)
        t = self[name] = Tensor.const(name, numpy_helper.to_array(self.protos.pop(name)))
        return t

    def __contains__(self, name: object) -> bool:
        return dict.__contains__(self, name) or name in self.protos

    def is_const(self, name: str) -> bool:
        """Whether ``name`` is a constant (an initializer, a Constant's or a folded node's value)."""
        return name in self.protos or dict.__contains__(self, name) and self[name].is_const

    def proto(self, name: str) -> onnx.TensorProto:
        """Constant ``name`` as a TensorProto (an initializer as it is, without converting it)."""
        if name in self.protos:
            return self.protos[name]
        return numpy_helper.from_array(np.asarray(self[name].data), name)


def _load(model: onnx.ModelProto | str | Path) -> tuple[onnx.ModelProto, bool]:
    """The model, and whether its file keeps weights in external data files (loaded here, from beside it)."""
    if isinstance(model, onnx.ModelProto):
        return model, False
    try:
        m = onnx.load(str(model), load_external_data=False)
        external = any(uses_external_data(t) for t in external_tensors(m))
        if external:
            load_external_data_for_model(m, str(Path(model).parent))
        return m, external
    except OSError:
        raise
    except Exception as e:
        raise CompileError(f"cannot read ONNX model {str(model)!r}: {_first_line(e)}") from None


def external_tensors(m: onnx.ModelProto) -> list[onnx.TensorProto]:
    """The main graph's tensors that may live in external data files: initializers and Constant nodes' values."""
    return [*m.graph.initializer, *(a.t for n in m.graph.node if n.op_type == "Constant" for a in n.attribute
                                    if a.HasField("t"))]


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
        nodes.append(Node(name, on.op_type, tuple(on.input), tuple(on.output), _attrs(on, name, opset), on.domain,
                          source=on))
    inputs = tuple(i.name for i in g.input if i.name not in tensors)
    types = {vi.name: vi.type for vi in (*g.input, *g.value_info, *g.output)}
    producers = {o: n for n in nodes for o in n.outputs}
    params = {d.dim_param for i in g.input for d in i.type.tensor_type.shape.dim if d.dim_param}
    for name in (*inputs, *(o.name for o in g.output), *(t for n in nodes for t in (*n.inputs, *n.outputs))):
        if name and name not in tensors:
            tensors[name] = _typed(name, types.get(name), producers.get(name), params)
    opsets = {("" if o.domain == "ai.onnx" else o.domain): o.version for o in m.opset_import}
    return Graph(g.name or "graph", inputs, tuple(o.name for o in g.output), tuple(nodes), tensors, opsets)


def _frozen(a: np.ndarray) -> np.ndarray:
    """``a`` made read-only, so that :class:`Tensor` keeps it without a copy (it is ours alone)."""
    a.flags.writeable = False
    return a


def _typed(name: str, tp: onnx.TypeProto | None, producer: Node | None, params: set[str] = frozenset()) -> Tensor:
    """The tensor ``name`` from its inferred type; DynamicShapeError unless its shape is fully static (``params``:
    the symbolic dims of the graph inputs, which the caller can fix)."""
    node, op = (producer.name, producer.qualified_op) if producer else (None, None)
    what = "" if producer else "(a graph input) "
    if tp is None or not tp.HasField("tensor_type"):
        if tp is not None and tp.WhichOneof("value"):
            raise UnsupportedDTypeError(name, tp.WhichOneof("value"), graph_dtype_names(), node, op)
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
        if producer is not None and producer.op in DATA_DEPENDENT:
            raise DynamicShapeError(name, f"has {kind} in shape {text}: its size depends on the values of the data "
                                    f"({producer.op}), which a program with static shapes cannot have", node, op,
                                    fix="")
        fix = f"; fix it with --dim {d.dim_param}=SIZE (Python: dims={{{d.dim_param!r}: SIZE}})" \
            if d.dim_param in params else ""
        raise DynamicShapeError(name, f"{what}has {kind} in shape {text}", node, op, fix=fix)
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

def _checked_contracts(graph: Graph) -> Graph:
    """``graph``, after checking every node against its op's operand contract (:mod:`compiler.frontend.contracts`:
    what onnxruntime requires of operand shapes beyond ONNX's shape inference); CompileError naming the first node
    that breaks it."""
    for node in graph.nodes:
        reason = contract_violation(node, graph)
        if reason:
            raise CompileError(f"node {node.name!r} ({node.op}): {reason}; the model is not valid ONNX "
                               f"(onnxruntime refuses it too)")
    return graph


def _canonical_node(node: Node, ctx: CanonContext) -> Node:
    if node.domain not in ("", "ai.onnx"):
        raise UnsupportedOpError(node.name, node.qualified_op, UNKNOWN_OP)
    spec = REGISTRY.get(node.op)
    if spec is None:
        raise UnsupportedOpError(node.name, node.op, UNKNOWN_OP)
    return spec.canonical(node, ctx)


def _canonical(graph: Graph) -> Graph:
    """Nodes in the compiler's canonical forms; a node it cannot take keeps ``unsupported`` = the reason."""
    ctx = CanonContext(graph)
    nodes = []
    for node in graph.nodes:
        if node.unsupported:   # marked by a pass before, with its own reason
            nodes.append(node)
            continue
        try:
            nodes.append(_canonical_node(node, ctx))
        except UnsupportedOpError as e:
            nodes.append(replace(node, unsupported=e.reason))
    return replace(graph, nodes=tuple(nodes), tensors=ctx.tensors)


def _check_dtypes(graph: Graph) -> None:
    """UnsupportedDTypeError for a tensor of an element type the compiler does not take (strings, complex, float8:
    every tensor, even a host node's, lives in DRAM in its NPU storage, :mod:`compiler.frontend.dtypes`)."""
    for node in graph.nodes:
        for name in (*node.present_inputs, *(o for o in node.outputs if o)):
            t = graph.tensors[name]
            if t.dtype not in NPU_STORAGE:
                raise UnsupportedDTypeError(name, short_dtype(t.dtype), graph_dtype_names(), node.name, node.op)
    for name in (*graph.inputs, *graph.outputs):
        if graph.tensors[name].dtype not in NPU_STORAGE:
            raise UnsupportedDTypeError(name, short_dtype(graph.tensors[name].dtype), graph_dtype_names())
