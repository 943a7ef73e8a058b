"""onnxruntime's ``com.microsoft.SkipSimplifiedLayerNormalization`` as the nodes the NPU runs:
``s = input + skip (+ bias)`` (Add nodes, in onnxruntime's order), ``output = SimplifiedLayerNormalization(s, gamma,
epsilon)`` (one RMS normalisation pass, :mod:`compiler.ops.rows`). The optional outputs: ``input_skip_bias_sum`` is
``s`` itself, ``mean`` is zeros (onnxruntime writes 0 for the simplified form), ``inv_std_var`` is ``1 / sqrt(mean(s^2)
+ epsilon)`` over the last axis (Mul, ReduceMean, Add, Sqrt, Reciprocal)."""

from __future__ import annotations

import numpy as np

from compiler.ir import Graph, Node
from compiler.passes.node_emitter import NodeEmitter

INPUT, SKIP, GAMMA, BIAS = range(4)
OUTPUT, MEAN, INV_STD_VAR, SUM = range(4)


def skip_simplified_layernorm(graph: Graph, n: Node) -> NodeEmitter | str:
    """The nodes computing SkipSimplifiedLayerNormalization node ``n``, or why the host runs it."""
    e = NodeEmitter(graph, n)
    x, skip, gamma = n.inputs[INPUT], n.inputs[SKIP], n.inputs[GAMMA]
    bias = n.inputs[BIAS] if len(n.inputs) > BIAS else ""
    if graph.tensor(x).dtype != np.float32:
        return f"input is {graph.tensor(x).dtype}: only float32 runs on the NPU"
    if graph.tensor(skip).shape != graph.tensor(x).shape:
        return f"a skip of shape {graph.tensor(skip).shape} for an input of {graph.tensor(x).shape} is not taken"
    outs = tuple(n.outputs) + ("",) * (4 - len(n.outputs))
    s = e.binary("Add", x, skip, out=None if bias or not outs[SUM] else outs[SUM], suffix="skip")
    if bias:
        s = e.binary("Add", s, bias, out=outs[SUM] or None, suffix="bias")
    eps = float(n.attrs.get("epsilon", 1e-5))
    shape = graph.tensor(x).shape
    if outs[OUTPUT]:
        e.op("SimplifiedLayerNormalization", (s, gamma), shape, out=outs[OUTPUT],
             axis=len(shape) - 1, epsilon=eps, stash_type=1)
    stat = (*shape[:-1], 1)
    if outs[MEAN]:
        e.op("Identity", (e.const("zero", np.zeros(stat, np.float32)),), stat, out=outs[MEAN])
    if outs[INV_STD_VAR]:
        ms = e.op("ReduceMean", (e.binary("Mul", s, s, suffix="square"),), stat, axes=(len(shape) - 1,),
                  keepdims=1)
        rms = e.unary("Sqrt", e.binary("Add", ms, e.const("epsilon", np.float32(eps)), suffix="eps"))
        e.unary("Reciprocal", rms, out=outs[INV_STD_VAR])
    return e
