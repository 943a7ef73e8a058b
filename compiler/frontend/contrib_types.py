"""Output types of onnxruntime's contrib ops (domain ``com.microsoft``), which ONNX's shape inference leaves without
one: onnx has no schema for them, so a contrib node's output that is not a graph output would have no type or shape.

Each rule follows the op's definition in onnxruntime (docs/ContribOperators.md)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import onnx
from onnx import helper

CONTRIB = "com.microsoft"


def _matmul_nbits(node: onnx.NodeProto, types: Mapping[str, onnx.TypeProto]) -> onnx.TypeProto | None:
    """MatMulNBits: ``Y`` has A's element type and shape with the last dim replaced by the attribute ``N``."""
    a = types.get(node.input[0]) if node.input else None
    n = next((x.i for x in node.attribute if x.name == "N"), None)
    if a is None or n is None or not a.tensor_type.HasField("shape") or not a.tensor_type.shape.dim:
        return None
    dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in a.tensor_type.shape.dim]
    return helper.make_tensor_type_proto(a.tensor_type.elem_type, dims[:-1] + [n])


RULES: dict[str, Callable[[onnx.NodeProto, Mapping[str, onnx.TypeProto]], onnx.TypeProto | None]] = {
    "MatMulNBits": _matmul_nbits,
}
"""Contrib op -> its first output's type from the node and the types known so far (None: not known yet)."""


def contrib_output_type(node: onnx.NodeProto, types: Mapping[str, onnx.TypeProto]) -> onnx.TypeProto | None:
    """The type of ``node``'s first output if it is a contrib op with a rule here and its inputs' types are known."""
    rule = RULES.get(node.op_type) if node.domain == CONTRIB and node.output else None
    return rule(node, types) if rule else None
