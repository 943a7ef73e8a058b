"""Build the compiler's IR from Python, without ONNX, and write any IR graph out as an ONNX model.

::

    b = GraphBuilder("net")
    x = b.input("x", (1, 3, 32, 32), np.float32)
    y = b.relu(b.conv(x, w, bias, strides=(1, 1), pads=(1, 1, 1, 1)))
    b.output(y)
    graph = b.build()
    model = to_onnx(graph)          # opset 17, runs in onnxruntime

Every op method takes tensor names (or numpy arrays / Python numbers, which become constants named after the node),
computes the output shape with ONNX's rules, checks the operands (:class:`ShapeError` otherwise) and returns the
name of the output tensor, which is the node's name: ``name=`` or ``<op>_<n>``. The attributes it stores are the
canonical ones of :mod:`compiler.ir` (defaults filled in, axes non-negative, pads ``(begin..., end...)``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np

from compiler.errors import CompileError, GraphError, ShapeError
from compiler.frontend.canonical import norm_axis, window_out
from compiler.ir import ACTIVATION_OPS, FUSED_ATTRS, Graph, Node, Tensor, node_prefix

Operand = str | np.ndarray | float | int
"""A tensor name, or a value that becomes a constant."""


def _tuple(v: int | Sequence[int] | None, n: int, default: int, what: str, node: str, op: str) -> tuple[int, ...]:
    """``v`` as ``n`` ints: None -> default, an int -> repeated, a sequence of length n as is."""
    if v is None:
        return (default,) * n
    if isinstance(v, (int, np.integer)):
        return (int(v),) * n
    v = tuple(int(x) for x in v)
    if len(v) != n:
        raise ShapeError(node, op, f"{what} must have {n} values, not {len(v)}: {v}")
    return v


def _pads(v: int | Sequence[int] | None, k: int, node: str, op: str) -> tuple[int, ...]:
    """Pads as ONNX's ``(begin_0.., end_0..)``: from None, an int, k symmetric values, or 2k values."""
    if v is None or isinstance(v, (int, np.integer)):
        return _tuple(v, 2 * k, 0, "pads", node, op)
    v = tuple(int(x) for x in v)
    if len(v) == k:
        return v + v
    return _tuple(v, 2 * k, 0, "pads", node, op)


class GraphBuilder:
    """Accumulates inputs, constants and nodes; :meth:`build` returns the :class:`~compiler.ir.Graph`."""

    def __init__(self, name: str):
        self.name = name
        self._inputs: list[str] = []
        self._outputs: list[str] = []
        self._nodes: list[Node] = []
        self._tensors: dict[str, Tensor] = {}
        self._counts: dict[str, int] = {}

    # -- tensors ---------------------------------------------------------------------------------------------------

    def input(self, name: str, shape: Sequence[int], dtype: Any = np.float32) -> str:
        """A graph input of static ``shape`` (elements) and ``dtype``."""
        self._add_tensor(Tensor(name, tuple(shape), np.dtype(dtype)))
        self._inputs.append(name)
        return name

    def const(self, name: str, data: Any, dtype: Any = None) -> str:
        """A constant tensor holding ``data`` (as ``dtype`` if given)."""
        self._add_tensor(Tensor.const(name, data, dtype))
        return name

    def output(self, *names: str) -> None:
        """Mark tensors as graph outputs, in order."""
        for n in names:
            self.tensor(n)
            self._outputs.append(n)

    def tensor(self, name: str) -> Tensor:
        if name not in self._tensors:
            raise GraphError(f"graph {self.name!r} has no tensor {name!r}")
        return self._tensors[name]

    def shape(self, name: str) -> tuple[int, ...]:
        return self.tensor(name).shape

    def dtype(self, name: str) -> np.dtype:
        return self.tensor(name).dtype

    def build(self) -> Graph:
        """The graph built so far (checked with :meth:`Graph.topo_check`)."""
        if not self._outputs:
            raise GraphError(f"graph {self.name!r} has no outputs; call output() first")
        g = Graph(self.name, tuple(self._inputs), tuple(self._outputs), tuple(self._nodes), dict(self._tensors))
        g.topo_check()
        return g

    # -- plumbing --------------------------------------------------------------------------------------------------

    def _add_tensor(self, t: Tensor) -> None:
        if t.name in self._tensors:
            raise GraphError(f"graph {self.name!r} already has a tensor {t.name!r}")
        self._tensors[t.name] = t

    def _node_name(self, op: str, name: str | None) -> str:
        if name is not None:
            if name in self._tensors:
                raise GraphError(f"graph {self.name!r} already has a tensor {name!r}")
            return name
        base = node_prefix(op)
        while True:
            k = self._counts.get(base, 0)
            self._counts[base] = k + 1
            if f"{base}_{k}" not in self._tensors:
                return f"{base}_{k}"

    def _operand(self, v: Operand | None, node: str, role: str, dtype: Any = np.float32) -> str:
        """A tensor name for ``v``: names pass through, values become the constant ``<node>_<role>``."""
        if v is None:
            return ""
        if isinstance(v, str):
            self.tensor(v)
            return v
        return self.const(f"{node}_{role}", np.asarray(v, dtype=np.asarray(v).dtype if dtype is None else dtype))

    def _emit(self, node: str, op: str, inputs: Sequence[str], shape: Sequence[int], dtype: Any,
              attrs: dict[str, Any] | None = None, domain: str = "") -> str:
        self._add_tensor(Tensor(node, tuple(shape), np.dtype(dtype)))
        self._nodes.append(Node(node, op, tuple(inputs), (node,), attrs or {}, domain))
        return node

    def node(self, op: str, inputs: Sequence[Operand | None], shape: Sequence[int], dtype: Any = np.float32,
             name: str | None = None, domain: str = "", **attrs: Any) -> str:
        """Any op, with its output ``shape``/``dtype`` given by the caller (no checks): an escape hatch."""
        n = self._node_name(op, name)
        ins = [self._operand(v, n, f"in{i}", None) for i, v in enumerate(inputs)]
        return self._emit(n, op, ins, shape, dtype, attrs, domain)

    # -- elementwise -----------------------------------------------------------------------------------------------

    def _unary(self, op: str, x: str, name: str | None, attrs: dict | None = None) -> str:
        n = self._node_name(op, name)
        t = self.tensor(x)
        return self._emit(n, op, [x], t.shape, t.dtype, attrs)

    def relu(self, x: str, name: str | None = None) -> str:
        return self._unary("Relu", x, name)

    def sigmoid(self, x: str, name: str | None = None) -> str:
        return self._unary("Sigmoid", x, name)

    def tanh(self, x: str, name: str | None = None) -> str:
        return self._unary("Tanh", x, name)

    def erf(self, x: str, name: str | None = None) -> str:
        return self._unary("Erf", x, name)

    def identity(self, x: str, name: str | None = None) -> str:
        return self._unary("Identity", x, name)

    def gelu(self, x: str, approximate: str = "none", name: str | None = None) -> str:
        """ONNX Gelu (opset 20); :func:`to_onnx` expands it into Erf arithmetic for older opsets."""
        if approximate not in ("none", "tanh"):
            raise ShapeError(name, "Gelu", f"approximate must be 'none' or 'tanh', not {approximate!r}")
        return self._unary("Gelu", x, name, {"approximate": approximate})

    def clip(self, x: str, min: float | None = None, max: float | None = None, name: str | None = None) -> str:
        """Clamp to ``[min, max]`` (either may be None); Clip(0, 6) is ReLU6."""
        n = self._node_name("Clip", name)
        t = self.tensor(x)
        ins = [x, self._operand(min, n, "min", t.dtype), self._operand(max, n, "max", t.dtype)]
        while ins[-1] == "":
            ins.pop()
        return self._emit(n, "Clip", ins, t.shape, t.dtype)

    def _binary(self, op: str, a: Operand, b: Operand, name: str | None) -> str:
        n = self._node_name(op, name)
        like = a if isinstance(a, str) else b
        if not isinstance(like, str):
            raise ShapeError(n, op, "at least one operand must be a tensor name")
        dtype = self.dtype(like)
        ia, ib = self._operand(a, n, "a", dtype), self._operand(b, n, "b", dtype)
        ta, tb = self.tensor(ia), self.tensor(ib)
        if ta.dtype != tb.dtype:
            raise ShapeError(n, op, f"operand dtypes differ: {ta.dtype} and {tb.dtype}")
        try:
            shape = np.broadcast_shapes(ta.shape, tb.shape)
        except ValueError:
            raise ShapeError(n, op, f"shapes {ta.shape} and {tb.shape} do not broadcast") from None
        return self._emit(n, op, [ia, ib], shape, dtype)

    def add(self, a: Operand, b: Operand, name: str | None = None) -> str:
        return self._binary("Add", a, b, name)

    def sub(self, a: Operand, b: Operand, name: str | None = None) -> str:
        return self._binary("Sub", a, b, name)

    def mul(self, a: Operand, b: Operand, name: str | None = None) -> str:
        return self._binary("Mul", a, b, name)

    def div(self, a: Operand, b: Operand, name: str | None = None) -> str:
        return self._binary("Div", a, b, name)

    # -- linear algebra --------------------------------------------------------------------------------------------

    def matmul(self, a: Operand, b: Operand, name: str | None = None) -> str:
        """numpy/ONNX ``matmul``: batch dims broadcast, 1-D operands promoted and their dim dropped."""
        n = self._node_name("MatMul", name)
        ia = self._operand(a, n, "a")
        ib = self._operand(b, n, "b", self.dtype(ia))
        sa, sb = self.shape(ia), self.shape(ib)
        if not sa or not sb:
            raise ShapeError(n, "MatMul", f"operands must have rank >= 1, not shapes {sa} and {sb}")
        a2, b2 = ((1,) + sa if len(sa) == 1 else sa), (sb + (1,) if len(sb) == 1 else sb)
        if a2[-1] != b2[-2]:
            raise ShapeError(n, "MatMul", f"inner dims differ: {sa} @ {sb}")
        try:
            batch = np.broadcast_shapes(a2[:-2], b2[:-2])
        except ValueError:
            raise ShapeError(n, "MatMul", f"batch dims of {sa} and {sb} do not broadcast") from None
        out = batch + (a2[-2],) * (len(sa) > 1) + (b2[-1],) * (len(sb) > 1)
        return self._emit(n, "MatMul", [ia, ib], out, self.dtype(ia))

    def gemm(self, a: Operand, b: Operand, c: Operand | None = None, alpha: float = 1.0, beta: float = 1.0,
             trans_a: bool = False, trans_b: bool = False, name: str | None = None) -> str:
        """``alpha * A' @ B' + beta * C`` on 2-D A and B (transposed if asked), C broadcast to the output."""
        n = self._node_name("Gemm", name)
        ia = self._operand(a, n, "a")
        ib, ic = self._operand(b, n, "b", self.dtype(ia)), self._operand(c, n, "c", self.dtype(ia))
        sa, sb = self.shape(ia), self.shape(ib)
        if len(sa) != 2 or len(sb) != 2:
            raise ShapeError(n, "Gemm", f"A and B must be 2-D, not {sa} and {sb}")
        (m, k), (k2, nn) = sa[::-1] if trans_a else sa, sb[::-1] if trans_b else sb
        if k != k2:
            raise ShapeError(n, "Gemm", f"inner dims differ: A{sa}{'^T' * trans_a} @ B{sb}{'^T' * trans_b}")
        if ic and np.broadcast_shapes(self.shape(ic), (m, nn)) != (m, nn):
            raise ShapeError(n, "Gemm", f"C of shape {self.shape(ic)} does not broadcast to {(m, nn)}")
        attrs = {"alpha": float(alpha), "beta": float(beta), "transA": int(trans_a), "transB": int(trans_b)}
        return self._emit(n, "Gemm", [ia, ib] + ([ic] if ic else []), (m, nn), self.dtype(ia), attrs)

    def conv(self, x: str, w: Operand, b: Operand | None = None, strides: int | Sequence[int] | None = None,
             pads: int | Sequence[int] | None = None, dilations: int | Sequence[int] | None = None,
             group: int = 1, name: str | None = None) -> str:
        """N-d convolution: x ``[N, C, *spatial]``, w ``[K, C/group, *kernel]``, optional bias ``[K]``.

        ``pads`` is ONNX's ``(begin..., end...)``, or one value per spatial dim (symmetric), or one int.
        """
        n = self._node_name("Conv", name)
        sx = self.shape(x)
        iw = self._operand(w, n, "w", self.dtype(x))
        ib = self._operand(b, n, "b", self.dtype(x))
        sw = self.shape(iw)
        k = len(sx) - 2
        if k < 1 or len(sw) != len(sx):
            raise ShapeError(n, "Conv", f"x {sx} and w {sw} must both be [N, C, *spatial] with the same rank")
        if group < 1 or sx[1] != sw[1] * group or sw[0] % group:
            raise ShapeError(n, "Conv", f"x has {sx[1]} channels, w {sw} with group={group} expects "
                             f"{sw[1] * group} (and K divisible by group)")
        if ib and self.shape(ib) != (sw[0],):
            raise ShapeError(n, "Conv", f"bias must have shape {(sw[0],)}, not {self.shape(ib)}")
        attrs = {"kernel_shape": tuple(sw[2:]), "strides": _tuple(strides, k, 1, "strides", n, "Conv"),
                 "pads": _pads(pads, k, n, "Conv"), "dilations": _tuple(dilations, k, 1, "dilations", n, "Conv"),
                 "group": int(group)}
        out = self._spatial(n, "Conv", sx, attrs, False)
        return self._emit(n, "Conv", [x, iw] + ([ib] if ib else []), (sx[0], sw[0]) + out, self.dtype(x), attrs)

    def _spatial(self, n: str, op: str, sx: tuple[int, ...], attrs: dict, ceil: bool) -> tuple[int, ...]:
        k, p = len(sx) - 2, attrs["pads"]
        out = tuple(window_out(sx[2 + i], attrs["kernel_shape"][i], attrs["strides"][i], p[i], p[k + i],
                               attrs["dilations"][i], ceil) for i in range(k))
        if min(out, default=1) < 1:
            raise ShapeError(n, op, f"window {attrs['kernel_shape']} does not fit input {sx} with pads {p}")
        return out

    # -- pooling and normalisation ---------------------------------------------------------------------------------

    def _pool(self, op: str, x: str, kernel_shape: Sequence[int], strides, pads, dilations, ceil_mode: bool,
              name: str | None, extra: dict) -> str:
        n = self._node_name(op, name)
        sx = self.shape(x)
        k = len(sx) - 2
        attrs = {"kernel_shape": _tuple(kernel_shape, k, 1, "kernel_shape", n, op),
                 "strides": _tuple(strides, k, 1, "strides", n, op), "pads": _pads(pads, k, n, op),
                 "dilations": _tuple(dilations, k, 1, "dilations", n, op), "ceil_mode": int(ceil_mode), **extra}
        return self._emit(n, op, [x], sx[:2] + self._spatial(n, op, sx, attrs, ceil_mode), self.dtype(x), attrs)

    def maxpool(self, x: str, kernel_shape: int | Sequence[int], strides: int | Sequence[int] | None = None,
                pads: int | Sequence[int] | None = None, dilations: int | Sequence[int] | None = None,
                ceil_mode: bool = False, name: str | None = None) -> str:
        return self._pool("MaxPool", x, kernel_shape, strides, pads, dilations, ceil_mode, name,
                          {"storage_order": 0})

    def avgpool(self, x: str, kernel_shape: int | Sequence[int], strides: int | Sequence[int] | None = None,
                pads: int | Sequence[int] | None = None, ceil_mode: bool = False, count_include_pad: bool = False,
                name: str | None = None) -> str:
        return self._pool("AveragePool", x, kernel_shape, strides, pads, None, ceil_mode, name,
                          {"count_include_pad": int(count_include_pad)})

    def global_avgpool(self, x: str, name: str | None = None) -> str:
        n = self._node_name("GlobalAveragePool", name)
        sx = self.shape(x)
        return self._emit(n, "GlobalAveragePool", [x], sx[:2] + (1,) * (len(sx) - 2), self.dtype(x))

    def batchnorm(self, x: str, scale: Operand, bias: Operand, mean: Operand, var: Operand, epsilon: float = 1e-5,
                  momentum: float = 0.9, name: str | None = None) -> str:
        """Inference BatchNormalization over channel dim 1: ``(x - mean) / sqrt(var + eps) * scale + bias``."""
        n = self._node_name("BatchNormalization", name)
        sx, dt = self.shape(x), self.dtype(x)
        ins = [x] + [self._operand(v, n, r, dt) for v, r in zip((scale, bias, mean, var), ("scale", "bias", "mean",
                                                                                          "var"))]
        for i in ins[1:]:
            if self.shape(i) != (sx[1],):
                raise ShapeError(n, "BatchNormalization", f"{i!r} must have shape {(sx[1],)}, not {self.shape(i)}")
        return self._emit(n, "BatchNormalization", ins, sx, dt, {"epsilon": float(epsilon),
                                                                 "momentum": float(momentum)})

    def _axis(self, n: str, op: str, axis: int, rank: int, inclusive: bool = False) -> int:
        return norm_axis(axis, rank, n, op, ShapeError, inclusive)

    def softmax(self, x: str, axis: int = -1, name: str | None = None) -> str:
        n = self._node_name("Softmax", name)
        return self._emit(n, "Softmax", [x], self.shape(x), self.dtype(x),
                          {"axis": self._axis(n, "Softmax", axis, len(self.shape(x)))})

    def layernorm(self, x: str, scale: Operand, bias: Operand | None = None, axis: int = -1, epsilon: float = 1e-5,
                  name: str | None = None) -> str:
        """LayerNormalization (opset 17) over dims ``axis..``; scale and bias have shape ``x.shape[axis:]``."""
        n = self._node_name("LayerNormalization", name)
        sx, dt = self.shape(x), self.dtype(x)
        a = self._axis(n, "LayerNormalization", axis, len(sx))
        ins = [x, self._operand(scale, n, "scale", dt)] + ([self._operand(bias, n, "bias", dt)] if bias is not None
                                                           else [])
        for i in ins[1:]:
            if self.shape(i) != sx[a:]:
                raise ShapeError(n, "LayerNormalization", f"{i!r} must have shape {sx[a:]}, not {self.shape(i)}")
        return self._emit(n, "LayerNormalization", ins, sx, dt, {"axis": a, "epsilon": float(epsilon),
                                                                 "stash_type": 1})

    def _reduce(self, op: str, x: str, axes: int | Sequence[int] | None, keepdims: bool, name: str | None) -> str:
        n = self._node_name(op, name)
        sx = self.shape(x)
        axes = range(len(sx)) if axes is None else (axes,) if isinstance(axes, int) else axes
        axes = tuple(sorted({self._axis(n, op, a, len(sx)) for a in axes}))
        out = tuple(1 if i in axes else d for i, d in enumerate(sx) if keepdims or i not in axes)
        return self._emit(n, op, [x], out, self.dtype(x), {"axes": axes, "keepdims": int(keepdims)})

    def reduce_mean(self, x: str, axes: int | Sequence[int] | None = None, keepdims: bool = True,
                    name: str | None = None) -> str:
        """Mean over ``axes`` (all if None)."""
        return self._reduce("ReduceMean", x, axes, keepdims, name)

    def reduce_sum(self, x: str, axes: int | Sequence[int] | None = None, keepdims: bool = True,
                   name: str | None = None) -> str:
        """Sum over ``axes`` (all if None)."""
        return self._reduce("ReduceSum", x, axes, keepdims, name)

    # -- data movement ---------------------------------------------------------------------------------------------

    def reshape(self, x: str, shape: Sequence[int] | str, name: str | None = None) -> str:
        """Reshape to ``shape`` (ONNX rules: 0 keeps the input dim, one -1 is inferred); ``shape`` may name a
        constant int64 tensor."""
        n = self._node_name("Reshape", name)
        sx = self.shape(x)
        target = self.tensor(shape).data if isinstance(shape, str) else np.asarray(shape, np.int64)
        if target is None or target.ndim != 1:
            raise ShapeError(n, "Reshape", "the target shape must be a 1-D constant")
        ts = self._operand(shape, n, "shape", np.int64)
        dims = [sx[i] if d == 0 else int(d) for i, d in enumerate(target.tolist())]
        if dims.count(-1) > 1 or any(d < -1 for d in dims):
            raise ShapeError(n, "Reshape", f"target shape {tuple(target.tolist())} is not valid")
        size, known = math.prod(sx), math.prod(d for d in dims if d != -1)
        if -1 in dims:
            if known == 0 or size % known:
                raise ShapeError(n, "Reshape", f"cannot reshape {sx} to {tuple(target.tolist())}")
            dims[dims.index(-1)] = size // known
        if math.prod(dims) != size:
            raise ShapeError(n, "Reshape", f"cannot reshape {sx} ({size} elements) to {tuple(dims)}")
        return self._emit(n, "Reshape", [x, ts], dims, self.dtype(x), {"allowzero": 0})

    def flatten(self, x: str, axis: int = 1, name: str | None = None) -> str:
        """To 2-D: dims before ``axis`` times dims from it."""
        n = self._node_name("Flatten", name)
        sx = self.shape(x)
        a = self._axis(n, "Flatten", axis, len(sx), inclusive=True)
        return self._emit(n, "Flatten", [x], (math.prod(sx[:a]), math.prod(sx[a:])), self.dtype(x), {"axis": a})

    def transpose(self, x: str, perm: Sequence[int] | None = None, name: str | None = None) -> str:
        """Permute dims (reverse them if ``perm`` is None): output dim i is input dim ``perm[i]``."""
        n = self._node_name("Transpose", name)
        sx = self.shape(x)
        perm = tuple(range(len(sx)))[::-1] if perm is None else tuple(int(p) for p in perm)
        if sorted(perm) != list(range(len(sx))):
            raise ShapeError(n, "Transpose", f"perm {perm} is not a permutation of {len(sx)} dims")
        return self._emit(n, "Transpose", [x], tuple(sx[p] for p in perm), self.dtype(x), {"perm": perm})

    def concat(self, xs: Sequence[str], axis: int, name: str | None = None) -> str:
        """Join along ``axis``; the other dims must agree."""
        n = self._node_name("Concat", name)
        shapes = [self.shape(x) for x in xs]
        if not shapes:
            raise ShapeError(n, "Concat", "needs at least one input")
        a = self._axis(n, "Concat", axis, len(shapes[0]))
        for s in shapes[1:]:
            if len(s) != len(shapes[0]) or any(d != e for i, (d, e) in enumerate(zip(s, shapes[0])) if i != a):
                raise ShapeError(n, "Concat", f"shapes {shapes} differ outside axis {a}")
        out = shapes[0][:a] + (sum(s[a] for s in shapes),) + shapes[0][a + 1:]
        return self._emit(n, "Concat", list(xs), out, self.dtype(xs[0]), {"axis": a})

    def split(self, x: str, sizes: Sequence[int], axis: int = 0, name: str | None = None) -> list[str]:
        """ONNX Split of ``x`` along ``axis`` into parts of ``sizes`` (given as an input, as from opset 13); the
        outputs are named ``<name>.<i>``."""
        n = self._node_name("Split", name)
        sx = self.shape(x)
        a = self._axis(n, "Split", axis, len(sx))
        if sum(sizes) != sx[a] or min(sizes, default=0) < 0:
            raise ShapeError(n, "Split", f"sizes {list(sizes)} must add up to axis {a} ({sx[a]})")
        outs = [f"{n}.{i}" for i in range(len(sizes))]
        for o, k in zip(outs, sizes):
            self._add_tensor(Tensor(o, sx[:a] + (k,) + sx[a + 1:], self.dtype(x)))
        ins = [x, self._operand(np.asarray(sizes, np.int64), n, "split", np.int64)]
        self._nodes.append(Node(n, "Split", tuple(ins), tuple(outs), {"axis": a}))
        return outs

    def slice(self, x: str, starts: Sequence[int], ends: Sequence[int], axes: Sequence[int] | None = None,
              steps: Sequence[int] | None = None, name: str | None = None) -> str:
        """ONNX Slice with constant starts/ends/axes/steps (out-of-range bounds clamp, as in Python)."""
        n = self._node_name("Slice", name)
        sx = self.shape(x)
        axes = list(range(len(starts))) if axes is None else [self._axis(n, "Slice", a, len(sx)) for a in axes]
        steps = [1] * len(starts) if steps is None else list(steps)
        if not len(starts) == len(ends) == len(axes) == len(steps) or 0 in steps:
            raise ShapeError(n, "Slice", "starts, ends, axes and steps must have one nonzero entry per axis")
        out = list(sx)
        for s, e, a, st in zip(starts, ends, axes, steps):
            out[a] = len(range(sx[a])[slice(s, e, st)])
        ins = [x] + [self._operand(np.asarray(v, np.int64), n, r, np.int64)
                     for v, r in zip((starts, ends, axes, steps), ("starts", "ends", "axes", "steps"))]
        return self._emit(n, "Slice", ins, out, self.dtype(x))

    def pad(self, x: str, pads: int | Sequence[int], mode: str = "constant", value: float = 0.0,
            name: str | None = None) -> str:
        """Pad every dim by ``pads`` (ONNX's ``(begin..., end...)`` over all dims, or one int for all)."""
        n = self._node_name("Pad", name)
        sx, dt = self.shape(x), self.dtype(x)
        p = _tuple(pads, 2 * len(sx), 0, "pads", n, "Pad")
        if mode not in ("constant", "reflect", "edge"):
            raise ShapeError(n, "Pad", f"mode must be 'constant', 'reflect' or 'edge', not {mode!r}")
        out = tuple(d + p[i] + p[len(sx) + i] for i, d in enumerate(sx))
        if min(out, default=1) < 0:
            raise ShapeError(n, "Pad", f"pads {p} remove more than {sx} holds")
        ins = [x, self._operand(np.asarray(p, np.int64), n, "pads", np.int64)]
        if mode == "constant":
            ins.append(self._operand(np.asarray(value, dt), n, "value", dt))
        return self._emit(n, "Pad", ins, out, dt, {"mode": mode})

    # -- quantisation ----------------------------------------------------------------------------------------------

    def quantize(self, x: str, scale: Operand, zero_point: Operand, axis: int = 1, name: str | None = None) -> str:
        """QuantizeLinear: ``saturate(round(x / scale) + zero_point)`` in zero_point's dtype (int8 or uint8);
        a 1-D scale is per channel along ``axis``."""
        n = self._node_name("QuantizeLinear", name)
        sx = self.shape(x)
        iz = self._operand(zero_point, n, "zero_point", None)
        if self.dtype(iz) not in (np.int8, np.uint8):
            raise ShapeError(n, "QuantizeLinear", f"zero_point must be int8 or uint8, not {self.dtype(iz)}")
        ins = [x, self._operand(scale, n, "scale", np.float32), iz]
        return self._emit(n, "QuantizeLinear", ins, sx, self.dtype(iz), {"axis": self._qaxis(n, "QuantizeLinear",
                                                                                                axis, sx, ins[1])})

    def dequantize(self, x: str, scale: Operand, zero_point: Operand | None = None, axis: int = 1,
                   name: str | None = None) -> str:
        """DequantizeLinear: ``(x - zero_point) * scale`` as float32; a 1-D scale is per channel along ``axis``."""
        n = self._node_name("DequantizeLinear", name)
        sx = self.shape(x)
        ins = [x, self._operand(scale, n, "scale", np.float32)]
        if zero_point is not None:
            ins.append(self._operand(zero_point, n, "zero_point", self.dtype(x)))
        return self._emit(n, "DequantizeLinear", ins, sx, np.float32,
                          {"axis": self._qaxis(n, "DequantizeLinear", axis, sx, ins[1])})

    def qlinear_conv(self, x: str, x_scale: Operand, x_zero_point: Operand, w: Operand, w_scale: Operand,
                     w_zero_point: Operand, y_scale: Operand, y_zero_point: Operand, b: Operand | None = None,
                     strides: int | Sequence[int] | None = None, pads: int | Sequence[int] | None = None,
                     dilations: int | Sequence[int] | None = None, group: int = 1, name: str | None = None) -> str:
        """QLinearConv: convolution of quantized x and w (per-tensor or per-output-channel w_scale), int32 bias
        ``b`` in scale ``x_scale * w_scale``, requantized to ``(y_scale, y_zero_point)``, in y_zero_point's dtype."""
        n = self._node_name("QLinearConv", name)
        sx, dt = self.shape(x), self.dtype(x)
        iw = self._operand(w, n, "w", None)
        ins = [x, self._operand(x_scale, n, "x_scale", np.float32), self._operand(x_zero_point, n, "x_zero_point", dt),
               iw, self._operand(w_scale, n, "w_scale", np.float32),
               self._operand(w_zero_point, n, "w_zero_point", self.dtype(iw)),
               self._operand(y_scale, n, "y_scale", np.float32), self._operand(y_zero_point, n, "y_zero_point", None)]
        if b is not None:
            ins.append(self._operand(b, n, "b", np.int32))
        sw, k = self.shape(iw), len(sx) - 2
        if k < 1 or len(sw) != len(sx) or group < 1 or sx[1] != sw[1] * group or sw[0] % group:
            raise ShapeError(n, "QLinearConv", f"x {sx} and w {sw} (group={group}) do not form a convolution")
        attrs = {"kernel_shape": tuple(sw[2:]), "strides": _tuple(strides, k, 1, "strides", n, "QLinearConv"),
                 "pads": _pads(pads, k, n, "QLinearConv"),
                 "dilations": _tuple(dilations, k, 1, "dilations", n, "QLinearConv"), "group": int(group)}
        out = self._spatial(n, "QLinearConv", sx, attrs, False)
        return self._emit(n, "QLinearConv", ins, (sx[0], sw[0]) + out, self.dtype(ins[7]), attrs)

    def qlinear_matmul(self, a: str, a_scale: Operand, a_zero_point: Operand, b: Operand, b_scale: Operand,
                       b_zero_point: Operand, y_scale: Operand, y_zero_point: Operand, name: str | None = None) -> str:
        """QLinearMatMul of quantized 2-D ``a @ b``, requantized to ``(y_scale, y_zero_point)``."""
        n = self._node_name("QLinearMatMul", name)
        ib = self._operand(b, n, "b", None)
        sa, sb = self.shape(a), self.shape(ib)
        if len(sa) != 2 or len(sb) != 2 or sa[1] != sb[0]:
            raise ShapeError(n, "QLinearMatMul", f"A and B must be 2-D with equal inner dims, not {sa} and {sb}")
        ins = [a, self._operand(a_scale, n, "a_scale", np.float32),
               self._operand(a_zero_point, n, "a_zero_point", self.dtype(a)), ib,
               self._operand(b_scale, n, "b_scale", np.float32),
               self._operand(b_zero_point, n, "b_zero_point", self.dtype(ib)),
               self._operand(y_scale, n, "y_scale", np.float32), self._operand(y_zero_point, n, "y_zero_point", None)]
        return self._emit(n, "QLinearMatMul", ins, (sa[0], sb[1]), self.dtype(ins[7]))

    def _qaxis(self, n: str, op: str, axis: int, sx: tuple[int, ...], scale: str) -> int:
        """The quantisation axis, checked against a per-channel scale (per-tensor scales ignore it)."""
        ss = self.shape(scale)
        if not ss or ss == (1,):
            return axis % max(len(sx), 1)
        a = self._axis(n, op, axis, len(sx))
        if ss != (sx[a],):
            raise ShapeError(n, op, f"a per-channel scale along axis {a} of {sx} must have shape {(sx[a],)}, "
                             f"not {ss}")
        return a


# -- to ONNX -------------------------------------------------------------------------------------------------------

def _onnx_attrs(attrs: dict[str, Any]) -> dict[str, Any]:
    from onnx import numpy_helper

    out = {}
    for k, v in attrs.items():
        if isinstance(v, np.ndarray):
            v = numpy_helper.from_array(v)
        elif isinstance(v, (tuple, list)):
            if not v:
                continue
            v = [x.item() if isinstance(x, np.generic) else x for x in v]
        elif isinstance(v, bool):
            v = int(v)
        elif isinstance(v, np.generic):
            v = v.item()
        out[k] = v
    return out


@cache
def _onnx_attributes(op: str, domain: str) -> frozenset[str]:
    """The attribute names ONNX's schema gives ``op`` (empty for an op it does not know)."""
    import onnx

    try:
        return frozenset(onnx.defs.get_schema(op, domain=domain).attributes)
    except onnx.defs.SchemaError:
        return frozenset()


def fused_steps(node: Node) -> dict[str, Any]:
    """What the fusion passes put into ``node`` (:data:`compiler.ir.FUSED_ATTRS`), without the ONNX attributes of
    the same name: LRN's and Shrink's ``bias`` is a number of the op, not a fused bias Add."""
    own = _onnx_attributes(node.op, node.domain or "")
    return {k: node.attrs[k] for k in FUSED_ATTRS if k in node.attrs and k not in own}


def _as_imported(node: Node) -> bool:
    """Whether ``node`` is still exactly the ONNX node it was imported from (no pass rewired or fused it)."""
    s = node.source
    return (s is not None and s.op_type == node.op and (s.domain or "") == (node.domain or "")
            and tuple(s.input) == node.inputs and tuple(s.output) == node.outputs and not fused_steps(node))


def _onnx_nodes(node: Node, graph: Graph, opset: int, consts: list) -> list:
    """The ONNX node(s) for one IR node at ``opset``: the node it was imported from when it is unchanged, else its
    IR form written out (what the fusion passes put into it, :data:`compiler.ir.FUSED_ATTRS`, as nodes of their own
    in their order; ops newer than ``opset`` as the nodes exporters write for them); constants it needs are appended
    to ``consts``."""
    from onnx import helper

    if _as_imported(node):
        return [node.source]
    if node.op == "FusedAttention":   # (not an ONNX op: the nodes it stands for)
        return _attention_nodes(node, graph, opset, consts)
    w = _Expansion(node, consts, graph.tensors[node.outputs[0]].dtype if node.outputs[0] in graph.tensors else None)
    attrs = dict(node.attrs)
    fused = fused_steps(node)
    for k in fused:
        del attrs[k]
    if fused:
        return _fused_nodes(w, graph, opset, attrs, fused)
    inputs = list(node.inputs)
    if node.domain in ("", "ai.onnx"):
        expanded = _older_op_nodes(w, graph, opset, attrs)
        if expanded is not None:
            return expanded
        inputs = _inputs_at_opset(w, opset, attrs, inputs)
    return [helper.make_node(node.op, inputs, list(node.outputs), name=node.name, domain=node.domain or None,
                             **_onnx_attrs(attrs))]


def _attention_nodes(node: Node, graph: Graph, opset: int, consts: list) -> list:
    """A ``FusedAttention`` node as the layers it stands for (:func:`compiler.ops.attention.unfused_nodes`)."""
    from compiler.ops.attention import unfused_nodes

    parts, tensors = unfused_nodes(node, graph)
    consts += [t for t in tensors.values() if t.is_const]
    g = dataclasses.replace(graph, tensors={**graph.tensors, **tensors})
    return [o for part in parts for o in _onnx_nodes(part, g, opset, consts)]


@dataclasses.dataclass(frozen=True)
class _Expansion:
    """Writes the ONNX nodes of one IR ``node``: their names and intermediate tensors are ``<node name>/<suffix>``,
    the constants they need go to ``consts``; ``dt`` is the node's output type (that of the constants)."""

    node: Node
    consts: list
    dt: Any

    def v(self, suffix: str) -> str:
        """The name of an intermediate tensor (or node, or constant) of the expansion."""
        return f"{self.node.name}/{suffix}"

    def const(self, suffix: str, value: np.ndarray) -> str:
        """A constant of the expansion: its name."""
        self.consts.append(Tensor.const(self.v(suffix), value))
        return self.v(suffix)

    def scalar(self, suffix: str, value: float) -> str:
        """A scalar constant of the node's output type :attr:`dt`: its name."""
        return self.const(suffix, np.asarray(value, self.dt))

    def make(self, op: str, ins: list, outs: list, suffix: str, **kw):
        from onnx import helper

        return helper.make_node(op, ins, outs, name=self.v(suffix), **kw)


def _fused_nodes(w: _Expansion, graph: Graph, opset: int, attrs: dict, fused: dict[str, Any]) -> list:
    """The op without what the fusion passes put into it, then its fused steps (divisor, bias, residual,
    activation) as nodes of their own, through intermediate tensors."""
    node = w.node
    out, inputs = node.outputs[0], list(node.inputs)
    extra = inputs[2:4] + ["", ""]
    inputs = inputs[:2] if fused.get("bias") else inputs[:3] if fused.get("residual") else inputs
    while inputs and not inputs[-1]:
        inputs.pop()
    core = dataclasses.replace(node, attrs=attrs, inputs=tuple(inputs), outputs=(w.v("core"),), source=None)
    nodes = _onnx_nodes(core, graph, opset, w.consts)
    steps = [("Div", w.scalar("divisor", fused["divisor"]), "div")] if "divisor" in fused else []
    steps += [("Add", extra[0], "bias")] if fused.get("bias") else []
    steps += [("Add", extra[1], "residual")] if fused.get("residual") else []
    last, act = w.v("core"), fused.get("activation")
    for i, (op, operand, suffix) in enumerate(steps):
        y = out if i == len(steps) - 1 and not act else w.v("sum" if suffix == "residual" else suffix)
        nodes.append(w.make(op, [last, operand], [y], suffix))
        last = y
    if act and act[0] in ("relu", "clamp"):
        nodes.append(w.make("Relu", [last], [out], "relu") if act[0] == "relu" else
                     w.make("Clip", [last, w.scalar("lo", act[1]), w.scalar("hi", act[2])], [out], "clip"))
    elif act:
        op, act_attrs = ACTIVATION_OPS[act[0]]
        nodes += _onnx_nodes(Node(w.v(act[0]), op, (last,), (out,), act_attrs), graph, opset, w.consts)
    return nodes


def _inputs_at_opset(w: _Expansion, opset: int, attrs: dict, inputs: list) -> list:
    """The inputs of a default-domain node written as one node at ``opset``, with ``attrs`` changed to match: axes
    and split sizes that became inputs, AveragePool's dilations (only 1 before 19), Cast's type as its number."""
    from onnx import helper

    node = w.node
    if node.op.startswith("Reduce") and "axes" in attrs and (node.op == "ReduceSum" or opset >= 18):
        return inputs[:1] + [w.const("axes", np.asarray(attrs.pop("axes"), np.int64))]
    if node.op == "Split" and "split" in attrs and opset >= 13:   # the sizes became an input at 13
        return inputs[:1] + [w.const("split", np.asarray(attrs.pop("split"), np.int64))]
    if node.op == "AveragePool" and opset < 19:
        if any(d != 1 for d in attrs.pop("dilations", ())):
            raise CompileError(f"node {node.name!r} (AveragePool): dilations need opset 19, not {opset}")
    elif node.op == "Cast" and isinstance(attrs.get("to"), str):
        attrs["to"] = helper.np_dtype_to_tensor_dtype(np.dtype(attrs["to"]))
    return inputs


def _older_op_nodes(w: _Expansion, graph: Graph, opset: int, attrs: dict) -> list | None:
    """The nodes exporters write for an op newer than ``opset`` (LayerNormalization before 17, Gelu before 20,
    RMSNormalization before 23, Swish before 24), or None when the node is written as itself."""
    op = w.node.op
    if op == "LayerNormalization" and opset < 17:
        return _layernorm_nodes(w, graph, opset, attrs)
    if op == "RMSNormalization" and opset < 23:
        return _rmsnorm_nodes(w, graph, opset, attrs)
    if op == "Gelu" and opset < 20:
        return _gelu_nodes(w, attrs.get("approximate", "none") == "tanh")
    if op == "Swish" and opset < 24:   # as PyTorch exports nn.SiLU: x * Sigmoid(x)
        x, y = w.node.inputs[0], w.node.outputs[0]
        alpha = float(attrs.get("alpha", 1.0))
        pre = [w.make("Mul", [x, w.scalar("alpha", alpha)], [w.v("ax")], "alpha")] if alpha != 1.0 else []
        return pre + [w.make("Sigmoid", [w.v("ax") if pre else x], [w.v("s")], "sigmoid"),
                      w.make("Mul", [x, w.v("s")], [y], "mul")]
    return None


def _layernorm_nodes(w: _Expansion, graph: Graph, opset: int, attrs: dict) -> list:
    """LayerNormalization as PyTorch exports nn.LayerNorm below opset 17."""
    node, v = w.node, w.v
    if attrs.get("stash_type", 1) != 1 or len(node.outputs) > 1:
        raise CompileError(f"node {node.name!r} (LayerNormalization): needs opset 17, not {opset}")
    x, y, inputs = node.inputs[0], node.outputs[0], node.inputs
    rank = len(graph.tensor(x).shape)
    mean = dict(axes=list(range(attrs.get("axis", -1) % rank, rank)), keepdims=1)
    scaled = v("scaled") if len(node.present_inputs) > 2 else y
    nodes = [w.make("ReduceMean", [x], [v("mean")], "mean", **mean),
             w.make("Sub", [x, v("mean")], [v("d")], "sub"),
             w.make("Pow", [v("d"), w.scalar("two", 2)], [v("sq")], "pow"),
             w.make("ReduceMean", [v("sq")], [v("var")], "var", **mean),
             w.make("Add", [v("var"), w.scalar("eps", attrs.get("epsilon", 1e-5))], [v("ve")], "eps"),
             w.make("Sqrt", [v("ve")], [v("std")], "sqrt"), w.make("Div", [v("d"), v("std")], [v("n")], "div"),
             w.make("Mul", [v("n"), inputs[1]], [scaled], "scale")]
    return nodes + ([w.make("Add", [scaled, inputs[2]], [y], "bias")] if scaled != y else [])


def _rmsnorm_nodes(w: _Expansion, graph: Graph, opset: int, attrs: dict) -> list:
    """RMSNormalization as PyTorch exports nn.RMSNorm below opset 23: ``x * Reciprocal(Sqrt(ReduceMean(Pow(x, 2)) +
    eps)) * scale`` (ReduceMean's axes an input from opset 18)."""
    node, v = w.node, w.v
    x, y = node.inputs[0], node.outputs[0]
    rank = len(graph.tensor(x).shape)
    axes = list(range(attrs.get("axis", -1) % rank, rank))
    mean = w.make("ReduceMean", [v("sq"), w.const("axes", np.asarray(axes, np.int64))], [v("ms")], "mean",
                  keepdims=1) if opset >= 18 else w.make("ReduceMean", [v("sq")], [v("ms")], "mean", axes=axes,
                                                          keepdims=1)
    return [w.make("Pow", [x, w.scalar("two", 2)], [v("sq")], "pow"), mean,
            w.make("Add", [v("ms"), w.scalar("eps", attrs.get("epsilon", 1e-5))], [v("me")], "eps"),
            w.make("Sqrt", [v("me")], [v("rms")], "sqrt"), w.make("Reciprocal", [v("rms")], [v("inv")], "inv"),
            w.make("Mul", [x, v("inv")], [v("n")], "norm"), w.make("Mul", [v("n"), node.inputs[1]], [y], "scale")]


def _gelu_nodes(w: _Expansion, tanh: bool) -> list:
    """Gelu as exporters write it below opset 20: PyTorch's gelu(approximate='tanh') with ``tanh``, else the erf
    form."""
    x, y, v = w.node.inputs[0], w.node.outputs[0], w.v
    if tanh:
        return [w.make("Mul", [x, x], [v("sq")], "sq"), w.make("Mul", [x, v("sq")], [v("cube")], "cube"),
                w.make("Mul", [v("cube"), w.scalar("kappa", 0.044715)], [v("kc")], "kappa"),
                w.make("Add", [x, v("kc")], [v("inner")], "inner"),
                w.make("Mul", [v("inner"), w.scalar("beta", math.sqrt(2 / math.pi))], [v("u")], "beta"),
                w.make("Tanh", [v("u")], [v("t")], "tanh"),
                w.make("Add", [v("t"), w.scalar("one", 1)], [v("t1")], "add"),
                w.make("Mul", [x, v("t1")], [v("xt")], "mul"),
                w.make("Mul", [v("xt"), w.scalar("half", 0.5)], [y], "half")]
    return [w.make("Div", [x, w.scalar("sqrt2", math.sqrt(2))], [v("div")], "div"),
            w.make("Erf", [v("div")], [v("erf")], "erf"),
            w.make("Add", [v("erf"), w.scalar("one", 1)], [v("add")], "add"),
            w.make("Mul", [x, v("add")], [v("mul")], "mul"),
            w.make("Mul", [v("mul"), w.scalar("half", 0.5)], [y], "half")]


def to_onnx(graph: Graph, opset: int | None = None):
    """``graph`` as an ``onnx.ModelProto`` at ``opset`` (default: the opsets it was imported at, else 17), constants
    as initializers, every tensor's type recorded.

    A node that is still the ONNX node it was imported from is written as that node; others in their canonical IR
    form, in that opset's spelling (ReduceSum/ReduceMean axes as inputs where the opset wants them, Gelu expanded to
    ``0.5 * x * (1 + Erf(x / sqrt 2))`` before opset 20, a fused activation or residual as its own node).
    """
    from onnx import helper, numpy_helper

    opset = opset or graph.opsets.get("", 17)
    consts: list[Tensor] = []
    nodes = [o for n in graph.nodes for o in _onnx_nodes(n, graph, opset, consts)]

    def info(name: str):
        t = graph.tensor(name)
        return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(t.dtype), list(t.shape))

    io = set(graph.inputs) | set(graph.outputs)
    inits = [numpy_helper.from_array(np.asarray(t.data), t.name) for t in [*graph.constants.values(), *consts]]
    value_info = [info(k) for k, t in graph.tensors.items() if not t.is_const and k not in io]
    g = helper.make_graph(nodes, graph.name, [info(i) for i in graph.inputs], [info(o) for o in graph.outputs],
                          initializer=inits, value_info=value_info)
    domains = sorted({n.domain for n in graph.nodes} - {"", "ai.onnx"})
    opsets = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, graph.opsets.get(d, 1)) for d in domains]
    model = helper.make_model(g, opset_imports=opsets, producer_name="npusim.compiler",
                              ir_version=helper.find_min_ir_version_for(opsets, ignore_unknown=True))
    return model
