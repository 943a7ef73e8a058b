"""Output types of onnxruntime's own ops, which ONNX's shape inference leaves without one: the contrib ops (domain
``com.microsoft``) and the ops onnxruntime registers in the default domain that ONNX does not define
(:data:`ORT_DEFAULT_DOMAIN`). onnx has no schema for them, so an output of such a node that is not a graph output
would have no type or shape.

Each rule follows the op's definition in onnxruntime (docs/ContribOperators.md, and the schemas onnxruntime
registers)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import onnx
from onnx import helper

CONTRIB = "com.microsoft"

ORT_DEFAULT_DOMAIN = frozenset({"SimplifiedLayerNormalization"})
"""Ops onnxruntime registers in the default (ai.onnx) domain although ONNX does not define them (its optimized
models write them there); ``onnx.checker`` knows no schema for them."""

Dims = list[int | str | None]
Rule = Callable[[onnx.NodeProto, Mapping[str, onnx.TypeProto], Mapping[str, np.ndarray]], list[onnx.TypeProto | None]]


def _dims(tp: onnx.TypeProto | None) -> Dims | None:
    if tp is None or not tp.tensor_type.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in tp.tensor_type.shape.dim]


def _input(node: onnx.NodeProto, i: int) -> str:
    return node.input[i] if i < len(node.input) else ""


def _attr(node: onnx.NodeProto, name: str, default: int = 0) -> int:
    return next((int(a.i) for a in node.attribute if a.name == name), default)


def _typed(elem: int, dims: Dims | None) -> onnx.TypeProto | None:
    return None if dims is None else helper.make_tensor_type_proto(elem, dims)


def _matmul_nbits(node, types, consts) -> list[onnx.TypeProto | None]:
    """MatMulNBits: ``Y`` has A's element type and shape with the last dim replaced by the attribute ``N``."""
    a = types.get(node.input[0]) if node.input else None
    dims, n = _dims(a), next((x.i for x in node.attribute if x.name == "N"), None)
    if not dims or n is None:
        return [None]
    return [_typed(a.tensor_type.elem_type, dims[:-1] + [n])]


def _same_as_input(node, types, consts) -> list[onnx.TypeProto | None]:
    """RotaryEmbedding: the output has the input's type."""
    x = types.get(node.input[0]) if node.input else None
    return [_typed(x.tensor_type.elem_type, _dims(x)) if x is not None else None]


def _simplified_layernorm(node, types, consts) -> list[onnx.TypeProto | None]:
    """SimplifiedLayerNormalization: ``Y`` as X, ``inv_std_var`` float with the normalized dims 1."""
    x = types.get(node.input[0]) if node.input else None
    dims = _dims(x)
    if dims is None:
        return [None, None]
    axis = _attr(node, "axis", -1) % max(len(dims), 1)
    stat = dims[:axis] + [1] * (len(dims) - axis)
    return [_typed(x.tensor_type.elem_type, dims), _typed(onnx.TensorProto.FLOAT, stat)]


def _skip_simplified_layernorm(node, types, consts) -> list[onnx.TypeProto | None]:
    """SkipSimplifiedLayerNormalization: ``output`` and ``input_skip_bias_sum`` as input, ``mean`` and ``inv_std_var``
    float with the last dim 1."""
    x = types.get(node.input[0]) if node.input else None
    dims = _dims(x)
    if dims is None:
        return [None] * 4
    elem = x.tensor_type.elem_type
    stat = _typed(onnx.TensorProto.FLOAT, dims[:-1] + [1])
    return [_typed(elem, dims), stat, stat, _typed(elem, dims)]


def _group_query_attention(node, types, consts) -> list[onnx.TypeProto | None]:
    """GroupQueryAttention: ``output`` (B, S, num_heads * head_size); ``present_key``/``present_value`` (B,
    kv_num_heads, max(total_sequence_length, past length), head_size), known when total_sequence_length is a
    constant; ``output_qk`` (B, num_heads, S, that length)."""
    q = types.get(node.input[0]) if node.input else None
    qd = _dims(q)
    heads, kv = _attr(node, "num_heads"), _attr(node, "kv_num_heads")
    if qd is None or len(qd) != 3 or not isinstance(qd[2], int) or not heads or not kv:
        return [None] * 4
    packed = not _input(node, 1)
    head = qd[2] // (heads + 2 * kv) if packed else qd[2] // heads
    elem = q.tensor_type.elem_type
    out = _typed(elem, qd[:2] + [heads * head])
    total = consts.get(_input(node, 6))
    past = _dims(types.get(_input(node, 3))) if _input(node, 3) else None
    if total is None or np.asarray(total).size != 1:
        return [out, None, None, None]
    length = max(int(np.asarray(total).reshape(-1)[0]), past[2] if past and isinstance(past[2], int) else 0)
    present = _typed(elem, [qd[0], kv, length, head])
    return [out, present, present, _typed(elem, [qd[0], heads, qd[1], length])]


RULES: dict[tuple[str, str], Rule] = {
    (CONTRIB, "MatMulNBits"): _matmul_nbits,
    (CONTRIB, "RotaryEmbedding"): _same_as_input,
    (CONTRIB, "SkipSimplifiedLayerNormalization"): _skip_simplified_layernorm,
    (CONTRIB, "GroupQueryAttention"): _group_query_attention,
    ("", "SimplifiedLayerNormalization"): _simplified_layernorm,
}
"""(domain, op) -> its outputs' types from the node, the types known so far and the constants (initializers) by
name (None: not known yet)."""


def is_ort_op(node: onnx.NodeProto) -> bool:
    """Whether ``node`` is an onnxruntime op with an output-type rule here."""
    return ("" if node.domain == "ai.onnx" else node.domain, node.op_type) in RULES


def contrib_output_types(node: onnx.NodeProto, types: Mapping[str, onnx.TypeProto],
                         consts: Mapping[str, np.ndarray] | None = None) -> dict[str, onnx.TypeProto]:
    """The types of ``node``'s outputs (by name) if it is an onnxruntime op with a rule here, as far as its inputs'
    types (and ``consts``: constant values by name) tell them."""
    domain = "" if node.domain == "ai.onnx" else node.domain
    rule = RULES.get((domain, node.op_type))
    if rule is None or not node.output:
        return {}
    found = rule(node, types, consts or {})
    return {name: tp for name, tp in zip(node.output, found) if name and tp is not None}
