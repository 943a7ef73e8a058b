"""Host fallback: a node the NPU cannot run becomes one ``host.call`` segment.

Its inputs are in DRAM already (every activation is), in whatever layout they have (the host transposes as it
reads); its constant inputs go to region ``W``; its outputs are channels-last when a 4-D input was, else row-major.
:class:`HostOp` records where everything is, so whoever launches the program (the driver) can supply the function
the call runs. The call's cost inputs are the bytes it reads and writes and an estimate of its scalar operations
(:func:`host_ops`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from compiler.errors import UnsupportedDTypeError
from compiler.frontend.dtypes import NPU_STORAGE, from_storage, graph_dtype_names, npu_dtype, to_storage
from compiler.ir import Graph, Node, Tensor, short_dtype
from compiler.ops.context import channels_first, channels_last
from isa import DType, Halt, HostCall, Program, ProgramConfig


@dataclass(frozen=True)
class HostTensor:
    """A tensor the host reads or writes: DRAM ``region`` (ACT or W), byte ``offset``, logical ``shape`` stored in
    ``layout`` (``rm`` row-major, or ``nhwc`` channels-last for a 3-D or 4-D ``(N, C, *spatial)`` tensor). ``dtype``
    is its graph type, what the host computes in; ``stored``: the numpy type it has in DRAM (an activation's NPU
    storage, :mod:`compiler.frontend.dtypes`; None: ``dtype`` itself, as constants in W are kept)."""

    name: str
    region: str
    offset: int
    shape: tuple[int, ...]
    dtype: np.dtype
    layout: str = "rm"
    stored: np.dtype | None = None

    @property
    def memory_dtype(self) -> np.dtype:
        """The numpy type of its bytes in DRAM."""
        return self.dtype if self.stored is None else self.stored

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.memory_dtype.itemsize

    def read(self, dram: dict[str, np.ndarray]) -> np.ndarray:
        """The logical (NCHW / row-major) value, in the graph type (widened from its storage)."""
        raw = dram[self.region][self.offset: self.offset + self.nbytes].view(self.memory_dtype)
        if self.layout == "nhwc":
            rank = len(self.shape)
            raw = raw.reshape([self.shape[i] for i in channels_last(rank)]).transpose(channels_first(rank))
        value = raw.reshape(self.shape)
        return np.array(value if self.stored is None else from_storage(value, self.dtype), order="C")

    def write(self, dram: dict[str, np.ndarray], value: np.ndarray) -> None:
        """Store a logical value of the graph type in this tensor's layout and storage (ValueRangeError for an
        integer its storage cannot hold)."""
        value = np.asarray(value, self.dtype).reshape(self.shape)
        if self.stored is not None:
            value = to_storage(value, self.dtype, f"tensor {self.name!r} (a host call's result)")
        if self.layout == "nhwc":
            value = value.transpose(channels_last(value.ndim))
        data = np.ascontiguousarray(value).view(np.uint8).ravel()
        dram[self.region][self.offset: self.offset + data.size] = data


@dataclass(frozen=True)
class HostOp:
    """One node run on the host: the ``host.call`` name, the node, where its inputs and outputs live, and why."""

    fn: str
    node: Node
    inputs: tuple[HostTensor, ...]
    outputs: tuple[HostTensor, ...]
    reason: str

    def fed(self, graph: Graph) -> tuple[HostTensor, ...]:
        """The inputs computed at run time: those the host reads from DRAM and feeds to the node (a constant input
        is an initializer of :meth:`subgraph`)."""
        return tuple(t for t in self.inputs if not graph.is_const(t.name))

    def subgraph(self, graph: Graph) -> Graph:
        """The node alone as a graph (its run-time inputs as graph inputs, its constant inputs as initializers, as
        in the model, so that an ONNX runtime treats them as it does there: onnxruntime prepacks a constant
        MatMulNBits weight, and only then quantizes A at ``accuracy_level`` 4; the graph's opsets), for running it
        with an ONNX runtime: :func:`compiler.frontend.builder.to_onnx` writes it as the ONNX node it was imported
        from."""
        names = (*(t.name for t in self.inputs), *(t.name for t in self.outputs))
        return Graph(f"host_{self.fn}", tuple(t.name for t in self.fed(graph)), tuple(t.name for t in self.outputs),
                     (self.node,), {n: graph.tensor(n) for n in names}, graph.opsets)


def storage_dtype(tensor: Tensor, node: Node | None = None) -> DType:
    """The NPU type ``tensor`` is stored as in DRAM (:func:`compiler.frontend.dtypes.npu_dtype`: a bool as u8, an
    int64 as i32, ...); :class:`UnsupportedDTypeError` naming the tensor (and ``node``) for a type it has none of."""
    if tensor.dtype not in NPU_STORAGE:
        raise UnsupportedDTypeError(tensor.name, short_dtype(tensor.dtype), graph_dtype_names(),
                                    node and node.name, node and node.op)
    return npu_dtype(tensor.dtype)


def host_fn_name(index: int, node: Node) -> str:
    """A unique ``host.call`` name for the ``index``-th host node: ``h<index>_<node name, sanitized>``."""
    return f"h{index}_" + re.sub(r"[^A-Za-z0-9_]", "_", node.name)[:24]


def host_ops(node: Node, graph: Graph) -> int:
    """Scalar operations of a node, for the host cost model: 2 per multiply-accumulate for Conv, Gemm and MatMul,
    otherwise one per element read or written."""
    shape = lambda name: graph.tensor(name).shape
    out = math.prod(shape(node.outputs[0]))
    if node.op == "Conv":
        w = shape(node.inputs[1])
        return 2 * out * math.prod(w[1:])
    if node.op in ("Gemm", "MatMul"):
        a = shape(node.inputs[0])
        k = a[0] if node.op == "Gemm" and node.attrs.get("transA", 0) else a[-1]
        return 2 * out * k
    return sum(math.prod(shape(t)) for t in (*node.present_inputs, *node.outputs) if t)


def host_program(fn: str, rd: int, wr: int, ops: int, config: ProgramConfig) -> Program:
    """The one-instruction segment of a host node."""
    return Program(config, (), (), (HostCall(fn=fn, rd=rd, wr=wr, ops=ops), Halt()))
