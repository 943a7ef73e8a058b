"""Fold BatchNormalization into the convolution before it: ``w' = w * s``, ``b' = (b - mean) * s + beta`` with
``s = gamma / sqrt(var + eps)`` per output channel. Only when the conv's output feeds nothing but that BN and every
BN parameter is constant."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from compiler.ir import Graph, Tensor


def fold_batchnorm(graph: Graph) -> Graph:
    tensors, drop = dict(graph.tensors), set()
    nodes = list(graph.nodes)
    for bn in graph.nodes:
        if bn.op != "BatchNormalization" or len(bn.present_inputs) != 5:
            continue
        conv = graph.producer(bn.inputs[0])
        if conv is None or conv.op != "Conv" or len(graph.consumers(bn.inputs[0])) != 1 \
                or bn.inputs[0] in graph.outputs or not all(graph.is_const(t) for t in bn.inputs[1:]) \
                or not graph.is_const(conv.inputs[1]) or (len(conv.present_inputs) > 2 and
                                                          not graph.is_const(conv.inputs[2])):
            continue
        gamma, beta, mean, var = (tensors[t].data.astype(np.float64) for t in bn.inputs[1:5])
        s = gamma / np.sqrt(var + bn.attrs.get("epsilon", 1e-5))
        w = tensors[conv.inputs[1]].data
        b = tensors[conv.inputs[2]].data.astype(np.float64) if len(conv.present_inputs) > 2 \
            else np.zeros(w.shape[0])
        wname, bname = f"{conv.name}.w_bn", f"{conv.name}.b_bn"
        tensors[wname] = Tensor.const(wname, (w * s.reshape(-1, 1, 1, 1)).astype(w.dtype))
        tensors[bname] = Tensor.const(bname, ((b - mean) * s + beta).astype(w.dtype))
        j = nodes.index(conv)
        nodes[j] = replace(conv, inputs=(conv.inputs[0], wname, bname), outputs=(bn.outputs[0],))
        drop.add(bn.name)
        tensors.pop(bn.inputs[0], None)
    if not drop:
        return graph
    return replace(graph, nodes=tuple(n for n in nodes if n.name not in drop), tensors=tensors)

