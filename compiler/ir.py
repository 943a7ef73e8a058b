"""The compiler's graph IR: named tensors with static shapes, ONNX-spelled operator nodes in topological order.

A :class:`Graph` is what :func:`compiler.frontend.onnx_import.import_onnx` and
:class:`compiler.frontend.builder.GraphBuilder` produce and what the passes rewrite (with :func:`dataclasses.replace`;
nothing is mutated in place).

Conventions, shared by the importer, the builder and the passes:

- Shapes are tuples of ints (static), in elements; dtypes are :class:`numpy.dtype` (``bfloat16`` is ml_dtypes').
- Node inputs keep ONNX's positions; an absent optional input is ``""``.
- Attributes are plain Python values (int, float, str, tuples of them), with the ONNX defaults filled in and axes made
  non-negative for the recognised ops (see :data:`compiler.ops.REGISTRY`). One departure from ONNX:
  ``ReduceMean``/``ReduceSum`` always carry ``axes`` as an attribute (ONNX moved it to an input in opsets 13/18).
- Constants are :class:`Tensor` s with ``data`` (read-only arrays); graph inputs and intermediates have none.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from compiler.errors import GraphError

SHORT_DTYPE = {"float32": "f32", "float16": "f16", "bfloat16": "bf16", "float64": "f64", "int8": "i8", "uint8": "u8",
               "int16": "i16", "uint16": "u16", "int32": "i32", "uint32": "u32", "int64": "i64", "uint64": "u64",
               "bool": "bool"}


FUSED_ATTRS = ("activation", "residual", "bias", "divisor")
"""Attributes the fusion passes add to a node (not ONNX's), applied to its result in this order: ``divisor`` (a
number it is divided by), ``bias`` (True: input 2 is added, broadcast along the last axis; a MatMul's), ``residual``
(True: input 3 is added), ``activation`` (a tuple: ``("relu",)``, ``("clamp", lo, hi)`` or one of
:data:`ACTIVATION_OPS`)."""

ACTIVATION_OPS = {"relu": ("Relu", {}), "gelu": ("Gelu", {"approximate": "none"}),
                  "gelu_tanh": ("Gelu", {"approximate": "tanh"}), "silu": ("Swish", {"alpha": 1.0})}
"""The single-input ONNX op (and canonical attributes) of each fused ``activation`` but ``clamp`` (a Clip with
constant bounds)."""

NODE_PREFIX = {"MatMul": "matmul", "BatchNormalization": "batchnorm", "LayerNormalization": "layernorm",
               "GlobalAveragePool": "global_avgpool", "AveragePool": "avgpool", "MaxPool": "maxpool",
               "QuantizeLinear": "quantize", "DequantizeLinear": "dequantize", "QLinearConv": "qlinear_conv",
               "QLinearMatMul": "qlinear_matmul"}


def node_prefix(op: str) -> str:
    """The stem of generated node names: ``conv``, ``matmul``, ``reduce_mean``, ``non_max_suppression``."""
    if op in NODE_PREFIX:
        return NODE_PREFIX[op]
    return "".join("_" + c.lower() if c.isupper() and i and not op[i - 1].isupper() else c.lower()
                   for i, c in enumerate(op))


def short_dtype(dtype: np.dtype) -> str:
    """``f32``, ``i8``, ... (the ISA's spelling where it has one) for a numpy dtype."""
    return SHORT_DTYPE.get(np.dtype(dtype).name, np.dtype(dtype).name)


@dataclass(frozen=True)
class Tensor:
    """A named value: static ``shape`` in elements, numpy ``dtype``, and ``data`` if it is a compile-time constant."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    data: np.ndarray | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))
        object.__setattr__(self, "dtype", np.dtype(self.dtype))
        if any(d < 0 for d in self.shape):
            raise GraphError(f"tensor {self.name!r}: shape must have non-negative dims, not {self.shape}")
        if self.data is not None:
            data = np.asarray(self.data, dtype=self.dtype)
            if data.flags.writeable:
                data = data.copy()
            if data.shape != self.shape:
                raise GraphError(f"tensor {self.name!r}: data shape {data.shape} differs from shape {self.shape}")
            data.flags.writeable = False
            object.__setattr__(self, "data", data)

    @classmethod
    def const(cls, name: str, data: Any, dtype: Any = None) -> Tensor:
        """A constant tensor holding ``data`` (converted to ``dtype`` if given)."""
        arr = np.asarray(data, dtype=dtype)
        return cls(name, arr.shape, arr.dtype, arr)

    @property
    def is_const(self) -> bool:
        return self.data is not None

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def nbytes(self) -> int:
        """Size in bytes in its dtype."""
        return self.size * self.dtype.itemsize

    def type_str(self) -> str:
        """``f32[1,3,224,224]``."""
        return f"{short_dtype(self.dtype)}[{','.join(map(str, self.shape))}]"


@dataclass(frozen=True)
class Node:
    """One operator application: ONNX ``op`` (and ``domain``), tensor names in and out, plain-Python ``attrs``.

    ``unsupported`` is empty for the ops the compiler handles; :func:`~compiler.frontend.onnx_import.import_onnx` with
    ``allow_unknown=True`` sets it to the reason for any other, so a later pass can send that node to the host CPU.
    ``source`` is the ONNX node it was imported from (an ``onnx.NodeProto``, at the graph's opset), so the host can
    run exactly that node (:func:`compiler.ops.host.host_model`); None for nodes built or rewritten in Python.
    """

    name: str
    op: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: dict[str, Any] = field(default_factory=dict, hash=False)
    domain: str = ""
    unsupported: str = ""
    source: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        object.__setattr__(self, "attrs", dict(self.attrs))

    @property
    def on_host(self) -> bool:
        """Whether this node must run on the host CPU (it is not supported by the compiler)."""
        return bool(self.unsupported)

    @property
    def present_inputs(self) -> tuple[str, ...]:
        """The inputs that are not absent optionals (``""``)."""
        return tuple(i for i in self.inputs if i)

    @property
    def qualified_op(self) -> str:
        """``Conv``, or ``domain::Op`` outside the default ONNX domain."""
        return f"{self.domain}::{self.op}" if self.domain not in ("", "ai.onnx") else self.op


@dataclass(frozen=True, eq=False)
class Graph:
    """A dataflow graph: ``inputs``/``outputs`` name tensors, ``nodes`` are in topological order, ``tensors`` holds
    every tensor (inputs, constants, intermediates, outputs) by name. ``opsets`` maps each operator domain (``""``
    the default one) to the opset version of the model it was imported from (empty for graphs built in Python)."""

    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    nodes: tuple[Node, ...]
    tensors: dict[str, Tensor]
    opsets: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "tensors", dict(self.tensors))
        object.__setattr__(self, "opsets", dict(self.opsets))

    @cached_property
    def _producers(self) -> dict[str, Node]:
        return {o: n for n in self.nodes for o in n.outputs if o}

    @cached_property
    def _consumers(self) -> dict[str, tuple[Node, ...]]:
        users: dict[str, list[Node]] = {}
        for n in self.nodes:
            for i in dict.fromkeys(n.present_inputs):
                users.setdefault(i, []).append(n)
        return {k: tuple(v) for k, v in users.items()}

    @cached_property
    def _by_name(self) -> dict[str, Node]:
        return {n.name: n for n in self.nodes}

    def tensor(self, name: str) -> Tensor:
        """The tensor called ``name``."""
        try:
            return self.tensors[name]
        except KeyError:
            raise GraphError(f"graph {self.name!r} has no tensor {name!r}") from None

    def node(self, name: str) -> Node:
        """The node called ``name``."""
        try:
            return self._by_name[name]
        except KeyError:
            raise GraphError(f"graph {self.name!r} has no node {name!r}") from None

    def producer(self, tensor: str) -> Node | None:
        """The node that outputs ``tensor``; None for graph inputs and constants."""
        return self._producers.get(tensor)

    def consumers(self, tensor: str) -> tuple[Node, ...]:
        """The nodes that read ``tensor``, in graph order (each once)."""
        return self._consumers.get(tensor, ())

    def is_const(self, name: str) -> bool:
        return name in self.tensors and self.tensors[name].is_const

    @property
    def constants(self) -> dict[str, Tensor]:
        """The constant tensors by name."""
        return {k: t for k, t in self.tensors.items() if t.is_const}

    @property
    def param_count(self) -> int:
        """Elements held in constant tensors (weights, biases, normalisation statistics, shape operands)."""
        return sum(t.size for t in self.tensors.values() if t.is_const)

    def op_counts(self) -> dict[str, int]:
        """How many nodes of each op, most frequent first."""
        return dict(Counter(n.qualified_op for n in self.nodes).most_common())

    def topo_check(self) -> None:
        """Raise :class:`GraphError` unless the graph is well formed: unique node names, every tensor declared,
        produced at most once, every node input defined before use, outputs defined, inputs not constant."""
        for key, t in self.tensors.items():
            if key != t.name:
                raise GraphError(f"graph {self.name!r}: tensor {t.name!r} is filed under {key!r}")
        defined: set[str] = set()
        for name in self.inputs:
            t = self.tensor(name)
            if t.is_const:
                raise GraphError(f"graph {self.name!r}: input {name!r} is a constant")
            if name in defined:
                raise GraphError(f"graph {self.name!r}: input {name!r} is listed twice")
            defined.add(name)
        defined |= {k for k, t in self.tensors.items() if t.is_const}
        names: set[str] = set()
        for n in self.nodes:
            if n.name in names:
                raise GraphError(f"graph {self.name!r}: node name {n.name!r} is used twice")
            names.add(n.name)
            for i in n.present_inputs:
                if i not in self.tensors:
                    raise GraphError(f"node {n.name!r} ({n.op}): input {i!r} is not a tensor of the graph")
                if i not in defined:
                    where = "later" if i in self._producers else "nowhere"
                    raise GraphError(f"node {n.name!r} ({n.op}): input {i!r} is used before it is produced "
                                     f"(produced {where}); nodes must be in topological order")
            for o in n.outputs:
                if not o:
                    continue
                if o not in self.tensors:
                    raise GraphError(f"node {n.name!r} ({n.op}): output {o!r} is not a tensor of the graph")
                if o in defined:
                    raise GraphError(f"node {n.name!r} ({n.op}): output {o!r} is already defined")
                defined.add(o)
        for o in self.outputs:
            if o not in defined:
                raise GraphError(f"graph {self.name!r}: output {o!r} is never produced")

    def dump(self) -> str:
        """The graph as text: a header, its inputs and outputs, then one line per node
        ``name  Op  inputs -> outputs  attrs`` with each tensor as ``name:dtype[shape]`` (constants marked)."""
        lines = [f"graph {self.name} ({len(self.nodes)} nodes, {self.param_count} constant elements)"]
        lines += [f"  input  {self._tensor_str(i)}" for i in self.inputs]
        lines += [f"  output {self._tensor_str(o)}" for o in self.outputs]
        width = max((len(n.name) for n in self.nodes), default=0)
        op_width = max((len(n.qualified_op) for n in self.nodes), default=0)
        for n in self.nodes:
            ins = ", ".join(self._tensor_str(i) if i else "-" for i in n.inputs)
            outs = ", ".join(self._tensor_str(o) if o else "-" for o in n.outputs)
            attrs = " ".join(f"{k}={_fmt(v)}" for k, v in n.attrs.items())
            host = f"  [host: {n.unsupported}]" if n.unsupported else ""
            lines.append(f"  {n.name:<{width}}  {n.qualified_op:<{op_width}}  {ins} -> {outs}"
                         f"{'  ' + attrs if attrs else ''}{host}")
        return "\n".join(lines)

    def _tensor_str(self, name: str) -> str:
        t = self.tensors.get(name)
        if t is None:
            return f"{name}:?"
        s = f"{name}:{t.type_str()}"
        if t.is_const:
            s += f"={_fmt(t.data.tolist())}" if t.size <= 8 and t.rank <= 1 else "=const"
        return s


def _fmt(v: Any) -> str:
    """Compact text for an attribute value or a small constant."""
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, (tuple, list)):
        return "(" + ",".join(_fmt(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    if isinstance(v, np.ndarray):
        return f"array{short_dtype(v.dtype)}{list(v.shape)}"
    return repr(v)
