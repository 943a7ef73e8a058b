"""Element-wise ops on the vector unit: Add, Sub, Mul, Div with numpy broadcasting (an activation fused by
:func:`compiler.passes.fuse.fuse_activation` rides in the same pass), the activations (one vector function, or a
few instructions per tile in one pass: :func:`compiler.kernels.vector.streams.pointwise`), Pow with a constant
exponent and the variadic Min, Max, Sum, Mean."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import numpy as np

from compiler.errors import UnsupportedOpError
from compiler.frontend.canonical import CanonContext, const_inputs
from compiler.ir import Graph, Node
from compiler.kernels.vector import recipes, streams
from compiler.ops.context import LoweringContext
from compiler.ops.spec import NUMBERS, OpSpec
from isa import Act, BinOp, DType

F32 = DType.F32
UNARY = {"Relu": Act.RELU, "Sigmoid": Act.SIGMOID, "Tanh": Act.TANH, "Erf": Act.ERF, "Gelu": Act.GELU,
         "Identity": Act.MOV, "Clip": Act.CLAMP, "Exp": Act.EXP, "Log": Act.LOG, "Sqrt": Act.SQRT,
         "Reciprocal": Act.RECIP, "Abs": Act.ABS, "Neg": Act.NEG}
BINARY = {"Add": BinOp.ADD, "Sub": BinOp.SUB, "Mul": BinOp.MUL, "Div": BinOp.DIV}


def operands(low: LoweringContext, names: tuple[str, ...], out_shape: tuple[int, ...],
             stored: Callable[[str], np.ndarray] | None = None):
    """How an element-wise op reads ``names`` (activations or constants) to write ``out_shape``: channels-last when
    the output is 4-D and an input is, and every other input reads the same in that order (a constant is transposed
    offline; a lower-rank activation must keep its bytes, e.g. (C,) or (1, H, W)); else row-major. ``stored``: a
    constant's value as the NPU holds it, by name (default: float32). Returns (layout, [(region, offset)], [shape in
    that layout]) per input."""
    g = low.graph
    acts = [t for t in names if not g.is_const(t)]
    layout = "nhwc" if len(out_shape) == 4 and any(low.bind[t].layout == "nhwc" and len(low.bind[t].shape) == 4
                                                   for t in acts) else "rm"
    if layout == "nhwc" and not all(_same_bytes_nhwc(low.bind[t].shape) for t in acts if len(low.bind[t].shape) < 4):
        layout = "rm"
    locs, shapes = [], []
    for t in names:
        if g.is_const(t):
            data = low.data(t).astype(np.float32) if stored is None else stored(t)
            if layout == "nhwc":
                data = _to_nhwc(data)
            locs.append(("W", low.const(np.ascontiguousarray(data))))
            shapes.append(data.shape)
        elif len(low.bind[t].shape) < 4:
            b = low.want(t, "rm")
            locs.append(("ACT", b.offset))
            shapes.append(_nhwc_shape(b.shape) if layout == "nhwc" else b.shape)
        else:
            b = low.want(t, layout)
            locs.append(("ACT", b.offset))
            shapes.append(b.phys)
    return layout, locs, shapes


def _to_nhwc(data: np.ndarray) -> np.ndarray:
    """A value broadcast against an NCHW tensor, as the same value against the NHWC one."""
    return data.reshape((1,) * (4 - data.ndim) + data.shape).transpose(0, 2, 3, 1)


def _nhwc_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    n, c, h, w = (1,) * (4 - len(shape)) + tuple(shape)
    return n, h, w, c


def _same_bytes_nhwc(shape: tuple[int, ...]) -> bool:
    """Whether a row-major tensor of ``shape`` (rank < 4) has the same bytes when read channels-last."""
    _, h, w, c = _nhwc_shape(shape)
    return c == 1 or h == w == 1


def lower_binary(low: LoweringContext, n: Node) -> None:
    """``A op B`` (one of them may be a constant, stored in W) in the layout :func:`operands` picks."""
    out_shape = low.graph.tensor(n.outputs[0]).shape
    layout, locs, shapes = operands(low, n.inputs[:2], out_shape)
    y = low.alloc(out_shape, layout)
    act = n.attrs.get("activation")
    fused = None if act is None else (Act.RELU, 0.0, 0.0) if act[0] == "relu" else (Act.CLAMP, act[1], act[2])
    prog = streams.binary(BINARY[n.op], shapes[0], shapes[1], F32, low.target, fused)
    low.emit(n, prog, {"A": locs[0], "B": locs[1], "Y": ("ACT", y.offset)})
    low.bind[n.outputs[0]] = y


def lower_unary(low: LoweringContext, n: Node) -> None:
    """One activation over the tensor in its layout (Clip: clamp to its constant bounds)."""
    x = low.bind[n.inputs[0]]
    lo = hi = 0.0
    if n.op == "Clip":
        ins = n.inputs + ("", "")
        lo = low.data(ins[1]).item() if ins[1] else float(n.attrs.get("min", -3.4e38))   # (a 1-element bound)
        hi = low.data(ins[2]).item() if ins[2] else float(n.attrs.get("max", 3.4e38))
        lo = min(lo, hi)   # ONNX: with min > max every output is max
    y = low.alloc(x.shape, x.layout, x.dtype)
    low.emit(n, streams.unary(UNARY[n.op], x.phys, x.dtype, low.target, lo, hi),
             {"X": ("ACT", x.offset), "Y": ("ACT", y.offset)})
    low.bind[n.outputs[0]] = y


def lower_gelu(low: LoweringContext, n: Node) -> None:
    """Gelu: the erf form in one vpu.act.gelu per tile, the tanh form as one stream of eight instructions per tile
    (:func:`compiler.kernels.vector.streams.activation`)."""
    if n.attrs.get("approximate", "none") == "none":
        return lower_unary(low, n)
    lower_activation(low, n, "gelu_tanh")


def lower_swish(low: LoweringContext, n: Node) -> None:
    """Swish ``x * sigmoid(alpha * x)`` (SiLU for alpha 1): one stream, per tile vpu.act.sigmoid and vpu.mul (a
    vpu.mul by alpha first otherwise)."""
    lower_activation(low, n, "silu", float(n.attrs.get("alpha", 1.0)))


def lower_activation(low: LoweringContext, n: Node, act: str, alpha: float = 1.0) -> None:
    """``act`` (:mod:`compiler.kernels.common.epilogue`'s name) over the tensor in its layout, as one stream."""
    x = low.bind[n.inputs[0]]
    y = low.alloc(x.shape, x.layout)
    low.emit(n, streams.activation(act, x.phys, F32, low.target, alpha=alpha),
             {"X": ("ACT", x.offset), "Y": ("ACT", y.offset)})
    low.bind[n.outputs[0]] = y


def _gelu(node: Node, ctx: CanonContext) -> Node:
    return dataclasses.replace(node, attrs={"approximate": node.attrs.get("approximate", "none")})


def _gelu_check(node: Node, graph: Graph) -> str | None:
    if node.attrs.get("approximate", "none") not in ("none", "tanh"):
        return f"approximate must be 'none' or 'tanh', not {node.attrs.get('approximate')!r}"
    return None


def _swish(node: Node, ctx: CanonContext) -> Node:
    return dataclasses.replace(node, attrs={"alpha": float(node.attrs.get("alpha", 1.0))})


OPS = (
    *(OpSpec(op, lower_binary, npu="vector unit, numpy broadcasting (one operand may be a constant); a following "
             "Relu/Clip is fused into the same pass") for op in BINARY),
    *(OpSpec(op, lower_unary, npu=f"vector unit ({fn.name.lower()})")
      for op, fn in UNARY.items() if op not in ("Gelu", "Clip", "Identity")),
    OpSpec("Identity", lower_unary, dtypes=NUMBERS, npu="vector unit (mov), any type the NPU holds"),
    OpSpec("Gelu", lower_gelu, _gelu, _gelu_check, npu="vector unit: approximate='none' one gelu pass, 'tanh' one "
           "stream of 8 instructions per tile"),
    OpSpec("Swish", lower_swish, _swish, npu="vector unit: one stream of sigmoid and multiply per tile (SiLU; also "
           "what Mul(x, Sigmoid(x)) is fused into)"),
    OpSpec("Clip", lower_unary, const_inputs("min", "max"),
           npu="vector unit (clamp), constant bounds"),
)


# -- activations composed of a few vector instructions, Pow, and the variadic ops ----------------------------------

MAX_INPUTS = 15
"""Inputs of one variadic op on the NPU (a program has 16 DRAM regions, one is the output)."""

SELU = (1.67326319217681884765625, 1.05070102214813232421875)   # the schema's default alpha and gamma


def lower_pointwise(low: LoweringContext, n: Node) -> None:
    """The op's recipe (:data:`RECIPES`) over its inputs in one vector stream."""
    names = tuple(t for t in n.inputs if t)
    names = names[:1] if n.op == "Pow" else names
    out_shape = low.graph.tensor(n.outputs[0]).shape
    layout, locs, shapes = operands(low, names, out_shape)
    regions = [f"X{k}" for k in range(len(names))]
    prog = streams.pointwise(RECIPES[n.op](low, n), list(zip(regions, shapes)), _phys(out_shape, layout), low.target)
    y = low.alloc(out_shape, layout)
    low.emit(n, prog, {**dict(zip(regions, locs)), "Y": ("ACT", y.offset)})
    low.bind[n.outputs[0]] = y


def _phys(shape: tuple[int, ...], layout: str) -> tuple[int, ...]:
    return (shape[0], shape[2], shape[3], shape[1]) if layout == "nhwc" else tuple(shape)


def _slopes(low: LoweringContext, n: Node) -> str:
    """PRelu's recipe: by the signs and sizes of a constant slope (any slope otherwise)."""
    if not low.graph.is_const(n.inputs[1]):
        return "any"
    s = low.data(n.inputs[1])
    return "unit" if ((s >= 0) & (s <= 1)).all() else "steep" if (s >= 1).all() else "any"


def _exponent(graph: Graph, n: Node) -> float:
    return float(np.asarray(graph.tensor(n.inputs[1]).data, np.float32).reshape(()))


RECIPES = {
    "LeakyRelu": lambda low, n: recipes.leaky_relu(n.attrs.get("alpha", 0.01)),
    "PRelu": lambda low, n: recipes.prelu(_slopes(low, n)),
    "Elu": lambda low, n: recipes.elu(n.attrs.get("alpha", 1.0)),
    "Selu": lambda low, n: recipes.elu(n.attrs.get("alpha", SELU[0]), n.attrs.get("gamma", SELU[1])),
    "HardSigmoid": lambda low, n: recipes.hard_sigmoid(n.attrs.get("alpha", 0.2), n.attrs.get("beta", 0.5)),
    "HardSwish": lambda low, n: recipes.hard_sigmoid(1 / 6, 0.5, times_x=True),
    "Mish": lambda low, n: recipes.mish(),
    "Swish": lambda low, n: recipes.swish(n.attrs.get("alpha", 1.0)),
    "Softplus": lambda low, n: recipes.softplus(),
    "Pow": lambda low, n: recipes.power(_exponent(low.graph, n)),
    "Sum": lambda low, n: recipes.variadic(BinOp.ADD, len(n.present_inputs)),
    "Mean": lambda low, n: recipes.variadic(BinOp.ADD, len(n.present_inputs), mean=True),
    "Max": lambda low, n: recipes.variadic(BinOp.MAX, len(n.present_inputs)),
    "Min": lambda low, n: recipes.variadic(BinOp.MIN, len(n.present_inputs)),
}
"""The vector recipe of each op lowered by :func:`lower_pointwise`."""


def _pow(node: Node, ctx: CanonContext) -> Node:
    e = ctx.const(node, 1, "the exponent")
    if e.size != 1:
        raise UnsupportedOpError(node.name, node.op, f"only a scalar exponent is lowered, not shape {e.shape}")
    return node


def _pow_check(node: Node, graph: Graph) -> str | None:
    e = _exponent(graph, node)
    if not np.isfinite(e) or abs(int(e)) > recipes.MAX_POW:
        return f"exponent {e}: only exponents whose integer part is at most {recipes.MAX_POW} in magnitude are lowered"
    return None


def _variadic_check(node: Node, graph: Graph) -> str | None:
    if len(node.present_inputs) > MAX_INPUTS:
        return f"{len(node.present_inputs)} inputs; at most {MAX_INPUTS} are lowered"
    if all(graph.is_const(t) for t in node.present_inputs):
        return "every input is constant"
    return None


RECIPE_DOCS = {
    "LeakyRelu": "max(x, alpha x) (min for alpha > 1; relu(x) + relu(alpha x) for alpha < 0)",
    "PRelu": "slope broadcast (per channel or any), constant or not: max/min(x, slope x) by the constant slopes' "
             "range, else relu(x) + slope min(x, 0)",
    "Elu": "relu(x) + alpha (exp(min(x, 0)) - 1), 5 instructions per tile",
    "Selu": "gamma (relu(x) + alpha (exp(min(x, 0)) - 1)), 6 instructions per tile",
    "HardSigmoid": "clamp(alpha x + beta, 0, 1), 2 instructions per tile",
    "HardSwish": "x clamp(x / 6 + 1/2, 0, 1), 3 instructions per tile",
    "Mish": "x tanh(log(1 + exp(x))), 5 instructions per tile",
    "Swish": "x sigmoid(alpha x) (opset 24; SiLU for alpha = 1), 2-3 instructions per tile",
    "Softplus": "relu(x) - log(sigmoid(|x|)) (no overflow), 5 instructions per tile",
    "Sum": "variadic, numpy broadcasting, up to 15 inputs in one pass",
    "Mean": "variadic (sum times 1/n), numpy broadcasting, up to 15 inputs in one pass",
    "Max": "variadic, numpy broadcasting, up to 15 inputs in one pass",
    "Min": "variadic, numpy broadcasting, up to 15 inputs in one pass",
}

OPS = OPS + (
    *(OpSpec(op, lower_pointwise, npu=f"vector unit: {doc}") for op, doc in RECIPE_DOCS.items()
      if op not in ("Sum", "Mean", "Max", "Min")),
    *(OpSpec(op, lower_pointwise, check=_variadic_check, const_operands=True, npu=f"vector unit: {RECIPE_DOCS[op]}")
      for op in ("Sum", "Mean", "Max", "Min")),
    OpSpec("Pow", lower_pointwise, _pow, _pow_check, const_operands=True,
           npu="vector unit, constant scalar exponent e = n + f: x^n by multiplication (|n| <= 32), x^f by sqrt, "
               "rsqrt or exp(f log x) (NaN for a negative base, as onnxruntime)"),
)
