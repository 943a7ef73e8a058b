"""Operand contracts: what ONNX requires of an op's operand shapes beyond what its shape inference checks.

onnxruntime refuses a model that breaks one (when it loads it or when the node runs), so the importer refuses it
too, with a CompileError naming the node and the operand, before any lowering reads the operand (an initializer of
the wrong shape used to end as an IndexError or a broadcast ValueError deep in a program generator). Each contract
is ``fn(node, graph) -> reason | None`` on the node as imported (schema defaults filled in) in the graph of static
shapes and constants; :data:`CONTRACTS` attaches them to the registry's :class:`~compiler.ops.spec.OpSpec`
entries (``OpSpec.contract``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from compiler.ir import Graph, Node

Shape = Callable[[str], tuple[int, ...]]


def _on_shapes(fn: Callable[[Node, Shape], str | None]) -> Callable[[Node, Graph], str | None]:
    """A contract on operand shapes alone as a registry contract ``(node, graph) -> reason | None``."""
    return lambda node, graph: fn(node, lambda t: graph.tensor(t).shape)


def _opt(node: Node, k: int) -> str | None:
    """Input ``k`` of ``node`` if it is given."""
    return node.inputs[k] if len(node.inputs) > k and node.inputs[k] else None


def broadcasts_to(small: tuple[int, ...], big: tuple[int, ...]) -> bool:
    """Whether ``small`` broadcasts to ``big`` one way (numpy rules, ``big`` unchanged)."""
    return len(small) <= len(big) and all(s in (1, b) for s, b in zip(small[::-1], big[::-1]))


def _scalar(shape: tuple[int, ...]) -> bool:
    return len(shape) <= 1 and math.prod(shape) == 1


def _conv(node: Node, shape: Shape, x: int = 0, w: int = 1, b: int | None = 2) -> str | None:
    xs, ws = shape(node.inputs[x]), shape(node.inputs[w])
    group = int(node.attrs.get("group", 1))
    if len(xs) < 3 or len(ws) != len(xs):
        return None   # shape inference names a rank mismatch
    if group < 1 or ws[0] % group or ws[1] * group != xs[1]:
        return (f"weights {node.inputs[w]!r} of shape {ws} need {ws[1]} x group {group} = {ws[1] * group} input "
                f"channels and a filter count divisible by the group, but input {node.inputs[x]!r} has {xs[1]} "
                f"channels (shape {xs})")
    if b is not None and (bias := _opt(node, b)) and shape(bias) != (ws[0],):
        return f"bias {bias!r} must have shape ({ws[0]},) (one per filter), not {shape(bias)}"
    return None


def conv(node: Node, shape: Shape) -> str | None:
    return _conv(node, shape)


def qlinear_conv(node: Node, shape: Shape) -> str | None:
    reason = _conv(node, shape, 0, 3, 8)
    if reason:
        return reason
    k = shape(node.inputs[3])[0] if len(shape(node.inputs[3])) else 1
    for i, what in ((1, "x_scale"), (2, "x_zero_point"), (6, "y_scale"), (7, "y_zero_point")):
        if (t := _opt(node, i)) and not _scalar(shape(t)):
            return f"{what} {t!r} must be a scalar, not of shape {shape(t)}"
    for i, what in ((4, "w_scale"), (5, "w_zero_point")):
        if (t := _opt(node, i)) and not (_scalar(shape(t)) or shape(t) == (k,)):
            return f"{what} {t!r} must be a scalar or of shape ({k},) (one per filter), not {shape(t)}"
    return None


def gemm(node: Node, shape: Shape) -> str | None:
    a, b = shape(node.inputs[0]), shape(node.inputs[1])
    if len(a) != 2 or len(b) != 2 or not (c := _opt(node, 2)):
        return None
    m = a[1] if node.attrs.get("transA") else a[0]
    n = b[0] if node.attrs.get("transB") else b[1]
    if not broadcasts_to(shape(c), (m, n)):
        return f"C {c!r} of shape {shape(c)} does not broadcast to the output's ({m}, {n})"
    return None


def _per_channel(*inputs: tuple[int, str]) -> Callable[[Node, Shape], str | None]:
    """Inputs that must be 1-D of the input's channel count (dim 1)."""
    def check(node: Node, shape: Shape) -> str | None:
        xs = shape(node.inputs[0])
        if len(xs) < 2:
            return None
        for k, what in inputs:
            if (t := _opt(node, k)) and shape(t) != (xs[1],):
                return (f"{what} {t!r} must have shape ({xs[1]},) (one per channel of {node.inputs[0]!r}), not "
                        f"{shape(t)}")
        return None
    return check


def group_norm(node: Node, shape: Shape) -> str | None:
    xs, g = shape(node.inputs[0]), int(node.attrs.get("num_groups", 1))
    for k, what in ((1, "scale"), (2, "bias")):
        if (t := _opt(node, k)) and len(xs) >= 2 and shape(t) not in ((g,), (xs[1],)):
            return f"{what} {t!r} must have shape ({g},) (num_groups) or ({xs[1]},) (channels), not {shape(t)}"
    return None


def layer_norm(node: Node, shape: Shape) -> str | None:
    xs = shape(node.inputs[0])
    axis = int(node.attrs.get("axis", -1))
    if not -len(xs) <= axis < len(xs):
        return None
    normalized = xs[axis % len(xs):]
    for k, what in ((1, "scale"), (2, "bias")):
        if (t := _opt(node, k)) and not broadcasts_to(shape(t), normalized):
            return f"{what} {t!r} of shape {shape(t)} does not broadcast to the normalized shape {normalized}"
    return None


def prelu(node: Node, shape: Shape) -> str | None:
    xs, ss = shape(node.inputs[0]), shape(node.inputs[1])
    if not broadcasts_to(ss, xs):
        return f"slope {node.inputs[1]!r} of shape {ss} does not broadcast to the input's {xs}"
    return None


def clip(node: Node, shape: Shape) -> str | None:
    for k, what in ((1, "min"), (2, "max")):
        if (t := _opt(node, k)) and not _scalar(shape(t)):
            return f"{what} {t!r} must be a scalar, not of shape {shape(t)}"
    return None


def quantize(node: Node, shape: Shape) -> str | None:
    """Quantize/DequantizeLinear: a scalar scale (per tensor) or a 1-D one of the axis's size (per axis), the zero
    point of the scale's shape (blocked quantization, opset 21, is left to shape inference)."""
    xs, s = shape(node.inputs[0]), shape(node.inputs[1])
    if node.attrs.get("block_size"):
        return None
    axis = int(node.attrs.get("axis", 1))
    if not _scalar(s):
        if not -len(xs) <= axis < len(xs) or s != (xs[axis % len(xs)],):
            return (f"scale {node.inputs[1]!r} of shape {s} must be a scalar or 1-D of the size of axis {axis} of "
                    f"{node.inputs[0]!r} (shape {xs})")
    if (z := _opt(node, 2)) and shape(z) != s and not (_scalar(shape(z)) and _scalar(s)):
        return f"zero point {z!r} must have the scale's shape {s}, not {shape(z)}"
    return None


def qlinear_matmul(node: Node, shape: Shape) -> str | None:
    b = shape(node.inputs[3])
    for i, what in ((1, "a_scale"), (2, "a_zero_point"), (6, "y_scale"), (7, "y_zero_point")):
        if (t := _opt(node, i)) and not _scalar(shape(t)):
            return f"{what} {t!r} must be a scalar, not of shape {shape(t)}"
    for i, what in ((4, "b_scale"), (5, "b_zero_point")):
        if (t := _opt(node, i)) and not (_scalar(shape(t)) or len(b) >= 1 and shape(t) == (b[-1],)):
            return f"{what} {t!r} must be a scalar or one per column of b, not of shape {shape(t)}"
    return None


def gather(node: Node, graph: Graph) -> str | None:
    """Gather's constant indices within the gathered axis (onnxruntime fails on one out of range)."""
    xs = graph.tensor(node.inputs[0]).shape
    axis = int(node.attrs.get("axis", 0))
    if not graph.is_const(node.inputs[1]) or not -len(xs) <= axis < len(xs):
        return None
    idx = np.asarray(graph.tensor(node.inputs[1]).data)
    if idx.size == 0 or idx.dtype.kind not in "iu":
        return None
    n = xs[axis % len(xs)]
    if idx.min() < -n or idx.max() >= n:
        bad = int(idx.max() if idx.max() >= n else idx.min())
        return f"index {bad} of {node.inputs[1]!r} is out of range for axis {axis} of size {n}"
    return None


def reshape(node: Node, graph: Graph) -> str | None:
    """A constant target shape is 1-D and holds as many elements as the input (ONNX's shape inference checks
    neither)."""
    xs = graph.tensor(node.inputs[0]).shape
    if len(node.inputs) < 2 or not graph.is_const(node.inputs[1]):
        return None
    if len(ts := graph.tensor(node.inputs[1]).shape) != 1:
        return f"the target shape {node.inputs[1]!r} must be 1-D, not of shape {ts}"
    target = [int(d) for d in np.asarray(graph.tensor(node.inputs[1]).data).reshape(-1)]
    keep = not node.attrs.get("allowzero", 0)
    dims = [xs[i] if d == 0 and keep and i < len(xs) else d for i, d in enumerate(target)]
    known = math.prod(d for d in dims if d != -1)
    total = math.prod(xs)
    if dims.count(-1) > 1 or any(d < -1 for d in dims) or \
            (total != known if -1 not in dims else known == 0 and total != 0 or known and total % known):
        return f"shape {tuple(target)} ({node.inputs[1]!r}) does not hold the {total} elements of input shape {xs}"
    return None


CONTRACTS: dict[str, Callable[[Node, Graph], str | None]] = {
    "Conv": _on_shapes(conv), "QLinearConv": _on_shapes(qlinear_conv), "Gemm": _on_shapes(gemm),
    "BatchNormalization": _on_shapes(_per_channel((1, "scale"), (2, "B"), (3, "input_mean"), (4, "input_var"))),
    "InstanceNormalization": _on_shapes(_per_channel((1, "scale"), (2, "B"))),
    "GroupNormalization": _on_shapes(group_norm), "LayerNormalization": _on_shapes(layer_norm),
    "PRelu": _on_shapes(prelu), "Clip": _on_shapes(clip), "QuantizeLinear": _on_shapes(quantize),
    "DequantizeLinear": _on_shapes(quantize), "QLinearMatMul": _on_shapes(qlinear_matmul), "Gather": gather,
    "Reshape": reshape,
}
"""The contracts by op, set as :attr:`OpSpec.contract` in the registry (ops whose operand shapes ONNX's shape
inference checks fully need none)."""
