"""Element-wise ops on the vector unit: Add, Sub, Mul, Div with numpy broadcasting (an activation fused by
:func:`compiler.passes.fuse.fuse_activation` rides in the same pass) and the activations."""

from __future__ import annotations

import dataclasses

import numpy as np

from isa import Act, BinOp, DType

from .. import vector
from ..canonical import CanonContext, const_inputs
from ..ir import Graph, Node
from .context import LoweringContext
from .spec import OpSpec

F32 = DType.F32
UNARY = {"Relu": Act.RELU, "Sigmoid": Act.SIGMOID, "Tanh": Act.TANH, "Erf": Act.ERF, "Gelu": Act.GELU,
         "Identity": Act.MOV, "Clip": Act.CLAMP}
BINARY = {"Add": BinOp.ADD, "Sub": BinOp.SUB, "Mul": BinOp.MUL, "Div": BinOp.DIV}


def lower_binary(low: LoweringContext, n: Node) -> None:
    """``A op B`` (one of them may be a constant, stored in W): channels-last when an input is, else row-major."""
    g = low.graph
    acts = [t for t in n.inputs[:2] if not g.is_const(t)]
    layout = "nhwc" if any(low.bind[t].layout == "nhwc" and len(low.bind[t].shape) == 4 for t in acts) else "rm"
    out_shape = g.tensor(n.outputs[0]).shape
    locs, shapes = [], []
    for t in n.inputs[:2]:
        if g.is_const(t):
            data = low.data(t).astype(np.float32)
            if layout == "nhwc":
                data = data.reshape((1,) * (4 - data.ndim) + data.shape).transpose(0, 2, 3, 1)
            locs.append(("W", low.const(np.ascontiguousarray(data))))
            shapes.append(data.shape)
        else:
            b = low.want(t, layout)
            locs.append(("ACT", b.offset))
            shapes.append(b.phys if layout == "nhwc" else b.shape)
    y = low.alloc(out_shape, layout if len(out_shape) == 4 else "rm")
    act = n.attrs.get("activation")
    fused = None if act is None else (Act.RELU, 0.0, 0.0) if act[0] == "relu" else (Act.CLAMP, act[1], act[2])
    prog = vector.binary(BINARY[n.op], shapes[0], shapes[1], F32, low.target, fused)
    low.emit(n, prog, {"A": locs[0], "B": locs[1], "Y": ("ACT", y.offset)})
    low.bind[n.outputs[0]] = y


def lower_unary(low: LoweringContext, n: Node) -> None:
    """One activation over the tensor in its layout (Clip: clamp to its constant bounds)."""
    x = low.bind[n.inputs[0]]
    lo = hi = 0.0
    if n.op == "Clip":
        ins = n.inputs + ("", "")
        lo = float(low.data(ins[1])) if ins[1] else float(n.attrs.get("min", -3.4e38))
        hi = float(low.data(ins[2])) if ins[2] else float(n.attrs.get("max", 3.4e38))
        lo = min(lo, hi)   # ONNX: with min > max every output is max
    y = low.alloc(x.shape, x.layout)
    low.emit(n, vector.unary(UNARY[n.op], x.phys, F32, low.target, lo, hi),
             {"X": ("ACT", x.offset), "Y": ("ACT", y.offset)})
    low.bind[n.outputs[0]] = y


def _gelu(node: Node, ctx: CanonContext) -> Node:
    return dataclasses.replace(node, attrs={"approximate": node.attrs.get("approximate", "none")})


def _gelu_check(node: Node, graph: Graph) -> str | None:
    if node.attrs.get("approximate", "none") != "none":
        return "only approximate='none' (the erf form) is supported"
    return None


OPS = (
    *(OpSpec(op, lower_binary, npu="vector unit, numpy broadcasting (one operand may be a constant); a following "
             "Relu/Clip is fused into the same pass") for op in BINARY),
    *(OpSpec(op, lower_unary, npu=f"vector unit ({fn.name.lower()})")
      for op, fn in UNARY.items() if op not in ("Gelu", "Clip")),
    OpSpec("Gelu", lower_unary, _gelu, _gelu_check, npu="vector unit (gelu), approximate='none'"),
    OpSpec("Clip", lower_unary, const_inputs("min", "max"),
           npu="vector unit (clamp), constant bounds"),
)
