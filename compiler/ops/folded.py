"""Ops the compiler takes but does not lower: constant folding (:mod:`compiler.passes.fold_constants`) evaluates
them when their inputs are constants (the shape arithmetic exporters emit). What is left of them runs on the host."""

from __future__ import annotations

import numpy as np

from compiler.errors import UnsupportedOpError
from compiler.frontend.canonical import CanonContext
from compiler.ir import Node
from compiler.ops.spec import OpSpec

FOLDED = "only when constant folding removes it (all its inputs constant)"


def _fold_only(node: Node, ctx: CanonContext) -> Node:
    inputs = [i for i in node.present_inputs if not ctx.tensors[i].is_const]
    why = f"input {inputs[0]!r} is not constant" if inputs else "it could not be evaluated"
    raise UnsupportedOpError(node.name, node.op, f"supported only when it folds to a constant, and {why}")


def _dropout(node: Node, ctx: CanonContext) -> Node:
    """Dropout at inference is its input: an Identity (refused when training_mode may be on or the mask is used)."""
    training = ctx.const(node, 2, "training_mode")
    if training is not None and bool(np.asarray(training).ravel()[0]):
        raise UnsupportedOpError(node.name, node.op, "training_mode=1 is not supported; export for inference")
    return Node(node.name, "Identity", node.inputs[:1], ctx.drop_extra_outputs(node, "the mask output"))


OPS = (
    *(OpSpec(op, None, _fold_only, npu=FOLDED)
      for op in ("Shape", "Size", "Constant", "ConstantOfShape", "Range")),
    OpSpec("Dropout", None, _dropout, npu="becomes an Identity at inference (when the mask output is unused)"),
)
