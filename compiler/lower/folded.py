"""Ops the compiler takes but does not lower: constant folding (:mod:`compiler.passes.fold_constants`) evaluates
them when their inputs are constants (the shape arithmetic exporters emit). What is left of them runs on the host."""

from __future__ import annotations

from ..canonical import CanonContext
from ..errors import UnsupportedOpError
from ..ir import Node
from .spec import OpSpec

FOLDED = "only when constant folding removes it (all its inputs constant)"


def _fold_only(node: Node, ctx: CanonContext) -> Node:
    inputs = [i for i in node.present_inputs if not ctx.tensors[i].is_const]
    why = f"input {inputs[0]!r} is not constant" if inputs else "it could not be evaluated"
    raise UnsupportedOpError(node.name, node.op, f"supported only when it folds to a constant, and {why}")


def _cast(node: Node, ctx: CanonContext) -> Node:
    """A Cast to the type it already has is an Identity; any other folds or runs on the host."""
    if ctx.tensors[node.inputs[0]].dtype == ctx.tensors[node.outputs[0]].dtype:
        return Node(node.name, "Identity", node.inputs[:1], node.outputs)
    return _fold_only(node, ctx)


OPS = (
    *(OpSpec(op, None, _fold_only, npu=FOLDED)
      for op in ("Shape", "Size", "Constant", "ConstantOfShape", "Range", "Gather", "Expand", "Equal", "Where")),
    OpSpec("Cast", None, _cast, npu="free when it casts to the same type; else " + FOLDED),
)
