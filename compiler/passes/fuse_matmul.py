"""Fuse what follows a MatMul into its GEMM's epilogue (:class:`compiler.kernels.common.epilogue.Epilogue`), so none of
it costs a pass through DRAM: in this order, each optional,

1. ``Div(y, c)``, a constant scalar divisor (the attention's scale; a true division, ``attrs["divisor"] = c``),
2. ``Add(y, bias)``, a constant with one value per output column (``attrs["bias"] = True``, input 2),
3. ``Add(y, r)``, an activation of y's shape (a residual; not after a divisor; ``attrs["residual"] = True``,
   input 3), loaded into the accumulators before the products,
4. an activation: Relu, Clip with constant bounds, Gelu (either form), Swish with alpha 1 (SiLU), or the one
   :func:`compiler.passes.fuse.fuse_activation` already put into the Add (``attrs["activation"]``).

Each step's input must be read by that step alone and not be a graph output, else the chain stops before it (the
fused MatMul then produces that tensor). The fused node keeps the MatMul's name, takes the last step's output, and
must still be one the NPU lowers (the registry's check).
"""

from __future__ import annotations

import numpy as np

from compiler.ir import FUSED_ATTRS, Graph, Node
from compiler.passes.patterns import Rewrite, activation_of, other, scalar, sole_user


def fuse_matmul(graph: Graph) -> Graph:
    rw = Rewrite(graph)
    for mm in graph.nodes:
        if mm.op != "MatMul" or mm.domain not in ("", "ai.onnx") or any(a in mm.attrs for a in FUSED_ATTRS):
            continue
        y = mm.outputs[0]
        out = graph.tensor(y)
        pattern, attrs, bias, residual = [mm], {}, "", ""
        div = sole_user(graph, y, "Div")
        if div is not None and div.inputs[0] == y and out.dtype.kind == "f" and scalar(graph, div.inputs[1]) \
                and graph.tensor(div.inputs[1]).dtype == out.dtype and _unchanged(graph, div, out.shape):
            attrs["divisor"], y = scalar(graph, div.inputs[1]), div.outputs[0]
            pattern.append(div)
        add = sole_user(graph, y, "Add") if "activation" not in pattern[-1].attrs else None
        if add is not None and _is_bias(graph, other(add, y), out.shape) and _unchanged(graph, add, out.shape):
            attrs["bias"], bias, y = True, other(add, y), add.outputs[0]
            pattern.append(add)
        add = sole_user(graph, y, "Add") if "activation" not in pattern[-1].attrs and "divisor" not in attrs \
            else None
        r = other(add, y) if add is not None else None
        if r is not None and r != y and not graph.is_const(r) and _unchanged(graph, add, out.shape) \
                and graph.tensor(r).shape == out.shape and graph.tensor(r).dtype == out.dtype:
            attrs["residual"], residual, y = True, r, add.outputs[0]
            pattern.append(add)
        act = pattern[-1].attrs.get("activation") if len(pattern) > 1 else None
        if act is None:
            users = graph.consumers(y)
            act = activation_of(users[0], graph) if len(users) == 1 and y not in graph.outputs else None
            if act is not None:
                pattern.append(users[0])
                y = users[0].outputs[0]
        if act is not None:
            attrs["activation"] = act
        if len(pattern) == 1:
            continue
        ins = mm.inputs[:2] + (bias, residual)
        ins = ins[:4 if residual else 3 if bias else 2]
        rw.add(pattern, Node(mm.name, "MatMul", ins, pattern[-1].outputs, attrs))
    return rw.graph()


def _is_bias(graph: Graph, c: str | None, shape: tuple[int, ...]) -> bool:
    """Whether ``c`` is a float constant with one value per column of ``shape`` (broadcast over the other dims)."""
    if not c or not graph.is_const(c) or not shape:
        return False
    t = graph.tensor(c)
    return (t.dtype.kind == "f" and t.size == shape[-1] and (t.rank == 0 or t.shape[-1] == shape[-1])
            and t.rank <= len(shape))


def _unchanged(graph: Graph, node: Node, shape: tuple[int, ...]) -> bool:
    """Whether ``node``'s output keeps ``shape`` (no operand broadcast it to more)."""
    return graph.tensor(node.outputs[0]).shape == shape and np.dtype(graph.tensor(node.outputs[0]).dtype).kind == "f"
