"""Fuse RMS normalization as exporters write it (PyTorch's ``nn.RMSNorm`` and Hugging Face's ``LlamaRMSNorm``, ``x *
torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight``, below opset 23) into one ``RMSNormalization`` node:

    ms = ReduceMean(Pow(x, 2) | Mul(x, x), axes)          r = Sqrt(Add(ms, eps))
    y = Mul(x, Reciprocal(r)) | Div(x, r) | Mul(x, Div(1, r))            [y = Mul(y, weight)]

(the Add and the Muls with their operands in either order). ``axes`` must be trailing axes (keepdims 1); the new
node normalises from the first of them with ``epsilon`` = the constant ``eps``. ``weight`` must be a constant that
varies only along those axes (stored in the normalized shape); without it the scale is ones. Six passes over the data
become one (:func:`compiler.kernels.vector.rowwise.rmsnorm`).
"""

from __future__ import annotations

import numpy as np

from compiler.ir import Graph, Node, Tensor
from compiler.passes.patterns import Rewrite, fresh, is_value, other, per_feature, scalar, sole_user
from compiler.passes.reduce_axes import reduce_axes


def fuse_rmsnorm(graph: Graph) -> Graph:
    rw = Rewrite(graph)
    for mean in graph.nodes:
        found = _match(graph, mean)
        if found is None:
            continue
        pattern, x, y, axis, eps, weight = found
        shape, dtype = graph.tensor(x).shape[axis:], graph.tensor(x).dtype
        consts, scale = [], weight
        if weight is None or graph.tensor(weight).shape != shape:
            data = np.ones(shape, dtype)
            if weight is not None:   # its leading dims (before the axis) are ones
                w = graph.tensor(weight).data
                data = np.broadcast_to(w.reshape(w.shape[max(0, w.ndim - len(shape)):]), shape)
            consts.append(Tensor.const(fresh(graph, f"{y.name}.scale"), np.ascontiguousarray(data, dtype)))
            scale = consts[0].name
        rw.add(pattern, Node(y.name, "RMSNormalization", (x, scale), y.outputs,
                             {"axis": axis, "epsilon": float(str(np.float32(eps))), "stash_type": 1}), consts)
    return rw.graph()


def _square_of(graph: Graph, node: Node | None) -> str | None:
    """``x`` when ``node`` is ``Pow(x, 2)`` or ``Mul(x, x)``, else None."""
    if node is None or node.domain not in ("", "ai.onnx"):
        return None
    if node.op == "Pow" and scalar(graph, node.inputs[1]) == 2.0:
        return node.inputs[0]
    return node.inputs[0] if node.op == "Mul" and node.inputs[0] == node.inputs[1] else None


def _normalized(graph: Graph, x: str, sqrt: Node) -> tuple[list[Node], Node] | None:
    """The nodes dividing ``x`` by ``sqrt``'s result, and the last of them: ``Div(x, r)``, ``Mul(x, Reciprocal(r))``
    or ``Mul(x, Div(1, r))``."""
    r = sqrt.outputs[0]
    div = sole_user(graph, r, ("Div", "Reciprocal"))
    if div is None:
        return None
    if div.op == "Div" and div.inputs == (x, r):
        return [div], div
    if div.op == "Div" and (div.inputs[1] != r or not is_value(graph, div.inputs[0], 1.0)):
        return None
    mul = sole_user(graph, div.outputs[0], "Mul")
    return ([div, mul], mul) if mul is not None and other(mul, div.outputs[0]) == x else None


def _match(graph: Graph, mean: Node):
    """(pattern nodes, x, last node, axis, epsilon, weight or None) of the pattern whose ReduceMean is ``mean``, or
    None."""
    if mean.op != "ReduceMean" or mean.domain not in ("", "ai.onnx") or not mean.attrs.get("keepdims", 1):
        return None
    sq = graph.producer(mean.inputs[0])
    x = _square_of(graph, sq)
    if x is None or sole_user(graph, sq.outputs[0], "ReduceMean") is not mean:
        return None
    t = graph.tensor(x)
    axes = reduce_axes(mean, graph)
    if t.dtype.kind != "f" or not axes or axes != tuple(range(axes[0], t.rank)):
        return None
    add = sole_user(graph, mean.outputs[0], "Add")
    e = other(add, mean.outputs[0]) if add is not None else None
    eps = scalar(graph, e) if e else None
    sqrt = sole_user(graph, add.outputs[0], "Sqrt") if eps is not None else None
    if sqrt is None or graph.tensor(e).dtype.kind != "f":
        return None
    found = _normalized(graph, x, sqrt)
    if found is None:
        return None
    pattern, last = [sq, mean, add, sqrt, *found[0]], found[1]
    weight = None
    mul = sole_user(graph, last.outputs[0], "Mul")
    w = other(mul, last.outputs[0]) if mul is not None else None
    if w is not None and per_feature(graph, w, t.shape, axes[0]):
        pattern.append(mul)
        last, weight = mul, w
    reduced = tuple(1 if i in axes else d for i, d in enumerate(t.shape))
    small = {mean.name, add.name, sqrt.name} | {n.name for n in found[0][:-1]}
    if any(graph.tensor(n.outputs[0]).shape != (reduced if n.name in small else t.shape) for n in pattern):
        return None
    return pattern, x, last, axes[0], eps, weight
