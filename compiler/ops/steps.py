"""Vector steps a lowering appends after its main program when it cannot fold them into it: a per-channel bias add
and a fused activation. ``low`` is the :class:`~compiler.ops.context.LoweringContext`; ``y`` a binding."""

from __future__ import annotations

import numpy as np

from compiler.kernels.common.epilogue import Epilogue
from compiler.kernels.vector import streams
from isa import Act, BinOp, DType


def bias_step(low, node, y, bias: np.ndarray):
    """``y + bias`` (bias broadcast over the last physical dimension) as segment ``<node>.bias``; the new binding."""
    out = low.alloc(y.shape, y.layout)
    prog = streams.binary(BinOp.ADD, y.phys, bias.shape, DType.F32, low.target)
    low.emit(node, prog, {"A": ("ACT", y.offset), "B": ("W", low.const(bias.astype(np.float32))),
                          "Y": ("ACT", out.offset)}, suffix=".bias")
    return out


def activation_step(low, node, y, act: tuple):
    """A fused activation (``("relu",)``, ``("clamp", lo, hi)``, ``("gelu",)``, ...: see
    :data:`compiler.ir.FUSED_ATTRS`) as segment ``<node>.<act>``; the new binding."""
    out = low.alloc(y.shape, y.layout)
    lo, hi = (act[1], act[2]) if len(act) > 1 else (0.0, 0.0)
    if act[0] in ("relu", "clamp"):
        prog = streams.unary(Act.RELU if act[0] == "relu" else Act.CLAMP, y.phys, DType.F32, low.target, lo, hi)
    else:
        prog = streams.activation(act[0], y.phys, DType.F32, low.target)
    low.emit(node, prog, {"X": ("ACT", y.offset), "Y": ("ACT", out.offset)}, suffix="." + act[0])
    return out


def fused_epilogue(node, bias: bool) -> Epilogue:
    """The :class:`~compiler.kernels.common.epilogue.Epilogue` of a node's fused attributes
    (``compiler.ir.FUSED_ATTRS``): its divisor, activation and residual, and a bias when ``bias``."""
    a = node.attrs
    act = a.get("activation")
    clamp = act is not None and act[0] == "clamp"
    return Epilogue(bias=bias, act=act[0] if act else None, lo=act[1] if clamp else 0.0, hi=act[2] if clamp else 0.0,
                    residual=bool(a.get("residual")), divisor=a.get("divisor"))
