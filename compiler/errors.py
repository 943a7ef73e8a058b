"""Errors of the compiler front: every one is a :class:`CompileError`, itself an :class:`isa.errors.NpuSimError`.

Messages name the node (``node 'conv_3' (Conv): ...``) or the tensor they are about, then the reason and, where
there is one, the fix, so the CLI can print ``str(err)`` as one line.
"""

from __future__ import annotations

from isa.errors import NpuSimError


def where(node: str | None, op: str | None) -> str:
    """The ``node 'name' (Op): `` prefix of a message, or ``''`` when no node is known."""
    if node is None:
        return ""
    return f"node {node!r} ({op}): " if op else f"node {node!r}: "


class CompileError(NpuSimError, ValueError):
    """A model or graph the compiler cannot take."""


class GraphError(CompileError):
    """A malformed graph: a tensor used before it is produced, produced twice, or never declared."""


class ShapeError(CompileError):
    """Operand shapes an operator does not accept (raised by the graph builder)."""

    def __init__(self, node: str | None, op: str | None, reason: str):
        self.node, self.op, self.reason = node, op, reason
        super().__init__(f"{where(node, op)}{reason}")


FALLBACK_HINT = "; without --no-fallback (Python: allow_unknown=True, fallback=True) such nodes run on the host CPU"


class UnsupportedOpError(CompileError):
    """An operator, or an attribute value of one, that the compiler does not support."""

    def __init__(self, node: str, op: str, reason: str):
        self.node, self.op, self.reason = node, op, reason
        super().__init__(f"{where(node, op)}{reason}")


class UnsupportedOpsetError(CompileError):
    """A model whose default-domain opset is outside the supported range."""

    def __init__(self, opset: int, lo: int, hi: int):
        self.opset = opset
        super().__init__(f"model opset {opset} is not supported; supported opsets are {lo} to {hi}, the ones the "
                         f"installed onnx package defines (a newer onnx may know opset {opset})")


class DynamicShapeError(CompileError):
    """A tensor whose shape is not fully known at compile time (symbolic, unknown or missing dims)."""

    def __init__(self, tensor: str, reason: str, node: str | None = None, op: str | None = None,
                 fix: str | None = None):
        self.tensor, self.node, self.op, self.reason = tensor, node, op, reason
        if fix is None:
            fix = "; only static shapes are supported (fix the dims, e.g. with onnx.tools.update_model_dims)"
        super().__init__(f"{where(node, op)}tensor {tensor!r} {reason}{fix}")


class UnsupportedDTypeError(CompileError):
    """A tensor element type the compiler does not support."""

    def __init__(self, tensor: str, dtype: str, supported: tuple[str, ...], node: str | None = None,
                 op: str | None = None):
        self.tensor, self.dtype, self.node, self.op = tensor, dtype, node, op
        super().__init__(f"{where(node, op)}tensor {tensor!r} has dtype {dtype}, which is not supported; "
                         f"supported: {', '.join(supported)}")


class ConstantFoldError(CompileError):
    """A node whose inputs are all constants but whose op refuses them (an index out of range, shapes that do not
    broadcast): the model computes something invalid at compile time, whatever would run it."""


class ValueRangeError(CompileError):
    """A value the NPU cannot hold in the type it narrows the tensor to (an int64 outside int32), where it enters:
    a graph input written to DRAM, a constant put in the weights, a host call's result."""


class TilingError(CompileError):
    """No tiling of an operator fits the scratchpad and accumulator of the target."""


def no_tiling(e: TilingError) -> str:
    """The one reason every op gives when no tiling of it fits (a convolution, a GEMM, a pooling, a transpose...):
    what did not fit and what to raise. A model compile runs such a node on the host with it (or, without fallback,
    refuses the node with it); a single-op command refuses with it."""
    return f"no tiling fits the NPU: {e}; raise spm.size or acc.size"
