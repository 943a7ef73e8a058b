"""Constant folding of any op the compiler has no numpy folder for: onnx's reference evaluator
(``onnx.reference.ReferenceEvaluator``) runs the node alone, its constant inputs as initializers of a one-node model
at the graph's opset; where it fails, onnxruntime runs that model (the evaluator has bugs of its own).

This is what folds the constant subgraphs exporters leave whatever their ops (a swin's shifted-window mask built by
ScatterND, Equal and Where on constants; RAFT's Conv and Split of constant coordinate grids; a GreaterOrEqual of two
Constants), in every dtype.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from compiler.errors import ConstantFoldError
from compiler.ir import FUSED_ATTRS, Node

NEVER = frozenset({"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Bernoulli",
                   "Multinomial", "If", "Loop", "Scan", "SequenceMap"})
"""Ops never folded by the evaluator: random ones (a run draws anew) and control flow (subgraphs)."""

DEFAULT_OPSET = 17
"""The opset a graph built in Python (which records none) is evaluated at."""


def reference_fold(node: Node, values: list[np.ndarray | None], opset: int | None) -> list[np.ndarray] | None:
    """The outputs of ``node`` evaluated by onnx's reference evaluator on constant input ``values`` (None for an
    absent optional input), at default-domain ``opset``; None when the evaluator has no implementation of the op
    (the node is then left to run). A failing evaluation is a one-line ConstantFoldError naming the node."""
    if node.op in NEVER or not node.present_inputs or any(a in node.attrs for a in FUSED_ATTRS):
        return None
    proto = _node_proto(node)
    if proto is None:
        return None
    inits = [numpy_helper.from_array(np.asarray(v), name) for name, v in zip(node.inputs, values) if name]
    outs = [helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None) for o in node.outputs if o]
    graph = helper.make_graph([proto], "fold", [], outs, initializer=list({t.name: t for t in inits}.values()))
    opsets = [helper.make_opsetid("", opset or DEFAULT_OPSET)]
    model = helper.make_model(graph, opset_imports=opsets, ir_version=helper.find_min_ir_version_for(opsets))
    from onnx.reference import ReferenceEvaluator

    try:
        got = ReferenceEvaluator(model).run(None, {})
    except NotImplementedError:   # no implementation of the op (or of this version of it)
        return None
    except Exception as e:   # the evaluator's numpy errors, one type per op; it has bugs of its own (GatherElements
        got = _by_onnxruntime(node, model, _first_line(e))   # with a shorter index axis), so onnxruntime decides
    out = iter(got)
    return [np.asarray(next(out)) if o else None for o in node.outputs]


def _by_onnxruntime(node: Node, model: onnx.ModelProto, refused: str) -> list:
    """The outputs of one-node ``model`` by onnxruntime, where the reference evaluator failed with ``refused``; a
    ConstantFoldError naming the node when onnxruntime fails too (the constants are invalid for the op)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 4
    try:
        typed = onnx.shape_inference.infer_shapes(model)
        return ort.InferenceSession(typed.SerializeToString(), opts, providers=["CPUExecutionProvider"]).run(None, {})
    except Exception as e:   # onnxruntime's and shape inference's own error types
        text = _first_line(e)
        text = text.split(" : ", 3)[-1] if text.startswith("[ONNXRuntimeError]") else text
        raise ConstantFoldError(f"node {node.name!r} ({node.op}): constant folding fails on its constant inputs: "
                                f"{refused} (onnx.reference); {text} (onnxruntime)") from None


def _node_proto(node: Node) -> onnx.NodeProto | None:
    """The ONNX node ``node`` is: the one it was imported from while it still is that node, else one made from its
    attributes (None when an attribute has no ONNX form)."""
    src = node.source
    if src is not None and src.op_type == node.op and tuple(src.input) == node.inputs and \
            tuple(src.output) == node.outputs:
        return src
    try:
        attrs = {k: _onnx_attr(v) for k, v in node.attrs.items()}
        return helper.make_node(node.op, list(node.inputs), list(node.outputs), name=node.name, **attrs)
    except (TypeError, ValueError):
        return None


def _onnx_attr(v: Any) -> Any:
    """An attribute value as ``helper.make_attribute`` takes it (arrays as tensors)."""
    if isinstance(v, np.ndarray):
        return numpy_helper.from_array(v)
    if isinstance(v, tuple):
        return list(v)
    return v


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
