"""Fuse layer normalization as exporters write it below opset 17 into one ``LayerNormalization`` node:

    mean = ReduceMean(x, axes)          d = Sub(x, mean)          var = ReduceMean(Pow(d, 2) | Mul(d, d), axes)
    y = Div(d, Sqrt(Add(var, eps)))     [y = Mul(y, gamma)]       [y = Add(y, beta)]

(PyTorch's ``nn.LayerNorm``; the Add, Mul and last Add with their operands in either order). ``axes`` must be the
same trailing axes in both ReduceMeans (keepdims 1); the new node normalises from the first of them with
``epsilon`` = the constant ``eps``. gamma and beta must be constants that vary only along those axes (they are
stored in the normalised shape); without gamma the scale is ones, without beta there is no bias.
"""

from __future__ import annotations

import numpy as np

from compiler.ir import Graph, Node, Tensor
from compiler.passes.patterns import Rewrite, fresh, other, per_feature, scalar, sole_user
from compiler.passes.reduce_axes import reduce_axes


def fuse_layernorm(graph: Graph) -> Graph:
    rw = Rewrite(graph)
    for mean in graph.nodes:
        found = _match(graph, mean)
        if found is None:
            continue
        pattern, x, y, axis, eps, gamma, beta = found
        shape, dtype = graph.tensor(x).shape[axis:], graph.tensor(x).dtype
        consts, ins = [], [x]
        for role, value in (("scale", gamma), ("bias", beta)):
            if value is None and role == "bias":
                break
            if value is not None and graph.tensor(value).shape == shape:
                ins.append(value)
                continue
            data = np.ones(shape, dtype)
            if value is not None:   # its leading dims (before the axis) are ones
                data = graph.tensor(value).data
                data = np.broadcast_to(data.reshape(data.shape[max(0, data.ndim - len(shape)):]), shape)
            consts.append(Tensor.const(fresh(graph, f"{y.name}.{role}", (c.name for c in consts)),
                                       np.ascontiguousarray(data, dtype)))
            ins.append(consts[-1].name)
        rw.add(pattern, Node(y.name, "LayerNormalization", tuple(ins), y.outputs,
                             {"axis": axis, "epsilon": float(str(np.float32(eps))), "stash_type": 1}), consts)
    return rw.graph()


def _match(graph: Graph, mean: Node):
    """(pattern nodes, x, last node, axis, epsilon, gamma or None, beta or None) of the pattern starting at the
    ReduceMean ``mean``, or None."""
    if mean.op != "ReduceMean" or mean.domain not in ("", "ai.onnx"):
        return None
    x = mean.inputs[0]
    t = graph.tensor(x)
    axes = reduce_axes(mean, graph)
    if t.dtype.kind != "f" or not axes or axes != tuple(range(axes[0], t.rank)) or not mean.attrs.get("keepdims", 1):
        return None
    sub = next((u for u in graph.consumers(mean.outputs[0]) if u.op == "Sub" and u.inputs == (x, mean.outputs[0])),
               None)
    if sub is None:
        return None
    d = sub.outputs[0]
    users = graph.consumers(d)
    sq = next((u for u in users if (u.op == "Pow" and u.inputs[0] == d and scalar(graph, u.inputs[1]) == 2.0)
               or (u.op == "Mul" and u.inputs == (d, d))), None)
    div = next((u for u in users if u.op == "Div" and u.inputs[0] == d), None)
    if sq is None or div is None:
        return None
    var = sole_user(graph, sq.outputs[0], "ReduceMean")
    if var is None or reduce_axes(var, graph) != axes or not var.attrs.get("keepdims", 1):
        return None
    add = sole_user(graph, var.outputs[0], "Add")
    eps = scalar(graph, other(add, var.outputs[0]) or "") if add is not None else None
    if eps is None or graph.tensor(other(add, var.outputs[0])).dtype.kind != "f":
        return None
    sqrt = sole_user(graph, add.outputs[0], "Sqrt")
    if sqrt is None or div.inputs[1] != sqrt.outputs[0]:
        return None
    pattern, last, params = [mean, sub, sq, var, add, sqrt, div], div, []
    for op in ("Mul", "Add"):   # gamma, then beta, each optional
        nxt = sole_user(graph, last.outputs[0], op)
        p = other(nxt, last.outputs[0]) if nxt is not None else None
        if p is not None and per_feature(graph, p, t.shape, axes[0]):
            pattern.append(nxt)
            last = nxt
        else:
            p = None
        params.append(p)
    gamma, beta = params
    reduced = tuple(1 if i in axes else d for i, d in enumerate(t.shape))
    if any(graph.tensor(n.outputs[0]).shape != (reduced if n in (mean, var, add, sqrt) else t.shape)
           for n in pattern):
        return None
    return pattern, x, last, axes[0], eps, gamma, beta

