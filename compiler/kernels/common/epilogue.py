"""Fused epilogues: what the vector unit does to a finished accumulator tile before it is stored, shared by the
direct convolution (:func:`compiler.kernels.conv2d.conv2d`) and the tiled GEMM
(:func:`compiler.kernels.gemm.tiled_gemm`); and the per-tile instruction sequences of the activations, shared with the
stand-alone activation streams (:func:`compiler.kernels.vector.streams.activation`).

An activation is named by a string: ``relu`` and ``clamp`` (applied by a binary op on the way out of its ALU, its
``act=``, when there is one), ``gelu`` (the erf form, one ``vpu.act.gelu``), ``gelu_tanh`` (onnxruntime's arithmetic,
eight instructions) and ``silu`` (``x * sigmoid(x)``, two). The last two need a scratch buffer shaped like the tile.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from compiler.kernels.common.pipeline import with_sync
from isa import Act, BinOp, DType, SemOp, VecBinary, VecConvert, VecUnary, View

ACTIVATIONS = ("relu", "clamp", "gelu", "gelu_tanh", "silu")
"""Activations an epilogue or an activation stream applies."""

SCRATCH_ACTS = frozenset({"gelu_tanh", "silu"})
"""Activations that need a scratch buffer the size of the tile."""

GELU_TANH_B = float(np.float32(0.7978845608028654))     # sqrt(2 / pi)
GELU_TANH_C = float(np.float32(0.035677408136300125))   # 0.044715 * sqrt(2 / pi)


def activation_ops(act: str, shape: tuple[int, ...], dst: View, src: View, scratch: View | None = None,
                   lo: float = 0.0, hi: float = 0.0, alpha: float = 1.0) -> list:
    """Vector instructions computing ``dst = act(src)`` over ``shape`` (``dst`` may be ``src``).

    ``gelu_tanh`` and ``silu`` need ``scratch`` (a view shaped like ``dst``; it may be ``dst`` itself when ``dst`` is
    not ``src``). ``gelu_tanh`` is computed as onnxruntime's Gelu(approximate='tanh') does:
    ``u = x * (C * x * x + B)``, then ``x * (tanh(u) + 1) * 0.5`` (the factor 0.5 last: scaling by 0.5 is exact).
    ``silu`` is ``x * sigmoid(alpha * x)`` (ONNX Swish; alpha 1 is SiLU)."""
    if act in ("relu", "clamp", "gelu"):
        fn = {"relu": Act.RELU, "clamp": Act.CLAMP, "gelu": Act.GELU}[act]
        bounds = dict(lo=lo, hi=hi) if act == "clamp" else {}
        return [VecUnary(fn=fn, shape=shape, dst=dst, src=src, **bounds)]
    if act not in SCRATCH_ACTS:
        raise ValueError(f"unknown activation {act!r}; one of {', '.join(ACTIVATIONS)}")
    if scratch is None or scratch == src:
        raise ValueError(f"activation {act!r} needs a scratch view other than its source")
    s = scratch

    def bin_(op: BinOp, d: View, a: View, b: View | None = None, imm: float = 0.0) -> VecBinary:
        return VecBinary(op=op, shape=shape, dst=d, src0=a, src1=b, imm=imm)

    if act == "silu":
        pre = [bin_(BinOp.MUL, s, src, imm=alpha)] if alpha != 1.0 else []
        return pre + [VecUnary(fn=Act.SIGMOID, shape=shape, dst=s, src=s if pre else src), bin_(BinOp.MUL, dst, src, s)]
    return [bin_(BinOp.MUL, s, src, imm=GELU_TANH_C), bin_(BinOp.MUL, s, s, src),
            bin_(BinOp.ADD, s, s, imm=GELU_TANH_B), bin_(BinOp.MUL, s, s, src),
            VecUnary(fn=Act.TANH, shape=shape, dst=s, src=s), bin_(BinOp.ADD, s, s, imm=1.0),
            bin_(BinOp.MUL, dst, src, s), bin_(BinOp.MUL, dst, dst, imm=0.5)]


@dataclass(frozen=True)
class Epilogue:
    """What the vector unit does to each finished accumulator tile before it is stored (fusion), in this order:
    divide by ``divisor`` (a true division), add the per-channel bias (region Bias, accumulator type, one element per
    output channel), then the activation ``act`` (one of :data:`ACTIVATIONS`; ``clamp`` to [lo, hi]).

    ``out`` set (an integer type) requantizes too, as onnxruntime's QLinearConv does: the i32 tile (plus bias) is
    converted to f32, multiplied by the per-channel f32 scale (region Scale, K elements), [activation,] then rounded
    half to even, offset by ``zp`` and saturated into ``out``; the tile is stored in ``out``.

    ``residual``: a tensor shaped like the output (region R, accumulator type) is added before everything else; the
    DMA loads its tile into the accumulators, so the products accumulate on top of it (no vector pass). It cannot be
    combined with a divisor (the division would apply to it too)."""

    bias: bool = False
    act: str | None = None
    lo: float = 0.0
    hi: float = 0.0
    out: DType | None = None
    zp: int = 0
    residual: bool = False
    divisor: float | None = None

    def __post_init__(self) -> None:
        if self.act is not None and self.act not in ACTIVATIONS:
            raise ValueError(f"unknown activation {self.act!r}; one of {', '.join(ACTIVATIONS)}")
        if self.residual and self.divisor is not None:
            raise ValueError("a residual loaded into the accumulators cannot be combined with a divisor")

    @property
    def active(self) -> bool:
        """Whether the vector unit touches the tile at all."""
        return self.bias or self.act is not None or self.out is not None or self.divisor is not None

    @property
    def spm_bytes(self) -> int:
        """SPM bytes per output channel the epilogue's constants take (bias, scale)."""
        return 4 * self.bias + 4 * (self.out is not None)

    @property
    def scratch(self) -> bool:
        """Whether the activation needs a scratch buffer the size of an accumulator tile (in SPM)."""
        return self.act in SCRATCH_ACTS

    @property
    def constants(self) -> int:
        """How many constant vectors (bias, scale) the first tile's epilogue waits for."""
        return int(self.bias) + int(self.out is not None)


NO_EPILOGUE = Epilogue()
"""The tile stored as the matrix unit left it."""


def epilogue_ops(ep: Epilogue, shape: tuple[int, ...], tile: View, bias: View | None = None,
                 scale: View | None = None, scratch: View | None = None) -> list:
    """Vector instructions applying ``ep`` in place to one accumulator tile (or part of one) of ``shape``, without
    synchronisation. A ``relu``/``clamp`` rides in the last binary op before the output conversion (the division,
    the bias add, or the scale multiply when requantizing) as its fused ``act``; only such an activation alone takes
    a ``vpu.act`` pass of its own; the other activations follow as :func:`activation_ops` (with ``scratch``)."""
    fused = {} if ep.act not in ("relu", "clamp") else dict(act=Act.RELU) if ep.act == "relu" else \
        dict(act=Act.CLAMP, lo=ep.lo, hi=ep.hi)
    ops: list = []
    if ep.divisor is not None:
        ops.append(VecBinary(op=BinOp.DIV, shape=shape, dst=tile, src0=tile, imm=ep.divisor))
    if ep.bias:
        ops.append(VecBinary(op=BinOp.ADD, shape=shape, dst=tile, src0=tile, src1=bias))
    val = tile
    if ep.out is not None:   # i32 -> f32 in place, times the per-channel scale
        val = View(tile.space, tile.base, DType.F32, tile.strides)
        ops += [VecConvert(shape=shape, dst=val, src=tile),
                VecBinary(op=BinOp.MUL, shape=shape, dst=val, src0=val, src1=scale)]
    if fused:
        if ops:
            ops[-1] = replace(ops[-1], **fused)
        else:
            ops += activation_ops(ep.act, shape, val, val, lo=ep.lo, hi=ep.hi)
    elif ep.act is not None:
        ops += activation_ops(ep.act, shape, val, val, scratch)
    if ep.out is not None:   # round half to even, add the zero point, saturate; packed at the tile's base
        eo = ep.out.size
        ops.append(VecConvert(shape=shape, dst=View(tile.space, tile.base, ep.out,
                                                    (shape[1] * shape[2] * eo, shape[2] * eo, eo)),
                              src=val, zp_out=ep.zp))
    return ops


def synced_epilogue(ep: Epilogue, ops: list, first: bool) -> list:
    """``ops`` (one tile's epilogue) waiting for the matrix unit (``acc_full``) and, on the first tile, for the
    epilogue's constants (``bias_ready``, one token per constant vector), then signalling the store (``out_full``)."""
    ops = list(ops)
    ops[0] = with_sync(ops[0], waits=("acc_full",))
    if first and ep.constants:
        ops[0] = replace(ops[0], waits=ops[0].waits + (SemOp("bias_ready", ep.constants),))
    ops[-1] = with_sync(ops[-1], signals=("out_full",))
    return ops
