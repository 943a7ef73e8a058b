"""Fuse a QDQ ConvTranspose (ONNX has no QLinearConvTranspose): ``DequantizeLinear(x_q) -> ConvTranspose(.,
DequantizeLinear(w_q)[, DequantizeLinear(b_q)]) -> QuantizeLinear`` becomes one ConvTranspose on ``x_q``, ``w_q`` and
``b_q`` with ``attrs["quant"]`` (``x_scale, x_zp, w_scale, y_scale, y_zp``) that :mod:`compiler.ops.conv_transpose`
lowers as an i8 x i8 -> i32 product with the bias and the requantization in its accumulator epilogue.

Fused only when the input is int8 (as QLinearConv on the NPU), the weights constant int8 with zero points 0 (per
tensor, or per output channel: axis 1 of ONNX's ``(C, K/g, kH, kW)``), the input and output quantization per tensor
with constant scale and zero point, the bias (if any) a constant int32 dequantized with zero point 0 and scale
``x_scale * w_scale``, and the float output read only by the QuantizeLinear; anything else is left as it is (and runs
on the host). The int32 accumulation is exact; onnxruntime evaluates the QDQ graph in float32 and rounds once at the
QuantizeLinear, so a value within float rounding of a half-step can land one step away (the requantization is
QLinearConv's)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from compiler.ir import Graph, Node
from compiler.passes.fold_constants import remove_dead


def _dq(graph: Graph, tensor: str, const: bool) -> tuple[Node, np.ndarray, np.ndarray] | None:
    """(node, scale, zero point) of the DequantizeLinear producing ``tensor`` from a (non-)constant integer tensor,
    with constant scale and zero point; None otherwise."""
    n = graph.producer(tensor)
    if n is None or n.op != "DequantizeLinear" or graph.is_const(n.inputs[0]) != const \
            or not all(graph.is_const(t) for t in n.present_inputs[1:]):
        return None
    scale = np.asarray(graph.tensor(n.inputs[1]).data, np.float32)
    zp = np.asarray(graph.tensor(n.inputs[2]).data) if len(n.inputs) > 2 and n.inputs[2] else np.zeros(1, np.int64)
    return n, scale, zp


def fuse_qdq_conv_transpose(graph: Graph) -> Graph:
    nodes, drop = {n.name: n for n in graph.nodes}, set()
    for ct in graph.nodes:
        if ct.op != "ConvTranspose" or "quant" in ct.attrs or len(graph.tensor(ct.inputs[0]).shape) not in (3, 4):
            continue
        x, w = _dq(graph, ct.inputs[0], False), _dq(graph, ct.inputs[1], True)
        b = _dq(graph, ct.inputs[2], True) if len(ct.inputs) > 2 and ct.inputs[2] else None
        users = graph.consumers(ct.outputs[0])
        if x is None or w is None or (len(ct.inputs) > 2 and ct.inputs[2] and b is None) or len(users) != 1 \
                or users[0].op != "QuantizeLinear" or ct.outputs[0] in graph.outputs:
            continue
        q = users[0]
        if not all(graph.is_const(t) for t in q.present_inputs[1:]) or len(q.present_inputs) < 3:
            continue
        xq, wq = graph.tensor(x[0].inputs[0]), graph.tensor(w[0].inputs[0])
        y_scale = np.asarray(graph.tensor(q.inputs[1]).data, np.float32)
        y_zp = np.asarray(graph.tensor(q.inputs[2]).data)
        kg = wq.shape[1]
        if x[1].size != 1 or x[2].size != 1 or y_scale.size != 1 or y_zp.size != 1 \
                or {xq.dtype, wq.dtype} != {np.dtype(np.int8)} or w[2].any() \
                or (w[1].size != 1 and (w[1].size != kg or w[0].attrs.get("axis", 1) != 1)):
            continue
        if b is not None and (graph.tensor(b[0].inputs[0]).dtype != np.int32 or b[2].any()
                              or not np.allclose(b[1], x[1].ravel()[0] * w[1], rtol=1e-6, atol=0)):
            continue
        quant = {"x_scale": float(x[1].ravel()[0]), "x_zp": int(x[2].ravel()[0]),
                 "w_scale": tuple(float(s) for s in w[1].ravel()), "y_scale": float(y_scale.ravel()[0]),
                 "y_zp": int(y_zp.ravel()[0])}
        inputs = (x[0].inputs[0], w[0].inputs[0]) + ((b[0].inputs[0],) if b else ())
        nodes[q.name] = replace(ct, name=q.name, inputs=inputs, outputs=q.outputs,
                                attrs={**ct.attrs, "quant": quant})
        drop.add(ct.name)
    if not drop:
        return graph
    return remove_dead(replace(graph, nodes=tuple(nodes[n.name] for n in graph.nodes if n.name not in drop)))
