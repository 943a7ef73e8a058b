"""Lowerings of the int8 path: QuantizeLinear, DequantizeLinear, QLinearConv and QLinearMatMul.

Every one reproduces onnxruntime's CPU arithmetic bit for bit, so int8 models validate exactly:

- QuantizeLinear: ``saturate(round_half_even(x / scale) + zp)`` with an f32 division
  (:func:`compiler.kernels.vector.quantization.quantize`).
- DequantizeLinear: ``f32(x - zp) * scale`` (:func:`compiler.kernels.vector.quantization.dequantize`).
- QLinearConv / QLinearMatMul: the i8 x i8 products accumulate in i32 on the matrix unit; then ``acc + bias`` (i32),
  converted to f32, times the f32 scale ``(x_scale * w_scale[c]) / y_scale`` (computed in that order, in f32, like
  onnxruntime's ``ComputeOutputScale``), rounded half to even, plus ``y_zp``, saturated. A nonzero input zero point
  is folded exactly: the halo padding reads it, and ``x_zp * sum(w[c])`` is subtracted from the i32 bias.

Scales and zero points must be constants; weight zero points must be 0 (symmetric weights). Anything else raises
:class:`UnsupportedOpError` naming the node and the input.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from compiler.errors import UnsupportedDTypeError, UnsupportedOpError
from compiler.frontend.canonical import CanonContext
from compiler.ir import Node
from compiler.kernels.conv2d import Epilogue, conv2d, conv_on_array, conv_shape, live_taps, pack_weights
from compiler.kernels.gemm import gemm_on_array, pack_b, tiled_gemm
from compiler.kernels.vector import quantization
from compiler.ops.context import LoweringContext
from compiler.ops.conv import conv_canonical, conv_check, conv_out_shape
from compiler.ops.spec import OpSpec
from isa import DType

QUANT_OPS = frozenset({"QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul"})
"""The ops of the int8 path (a model with any of them is validated exactly)."""
INT8 = (np.dtype(np.int8), np.dtype(np.uint8))


def _const(low, n: Node, index: int, what: str) -> np.ndarray | None:
    """Input ``index`` of ``n`` as a constant array (None when the optional input is absent)."""
    name = n.inputs[index] if index < len(n.inputs) else ""
    if not name:
        return None
    if not low.graph.is_const(name):
        raise UnsupportedOpError(n.name, n.op, f"{what} ({name!r}) must be a constant")
    return np.asarray(low.data(name))


def _scalar(low, n: Node, index: int, what: str) -> np.ndarray:
    v = _const(low, n, index, what)
    if v is None:
        return np.zeros(1, np.uint8)
    if v.size != 1:
        raise UnsupportedOpError(n.name, n.op, f"{what} must be one value (per tensor), not shape {v.shape}")
    return v.ravel()


def _int_type(low, n: Node, name: str, what: str) -> DType:
    dtype = low.graph.tensor(name).dtype
    if dtype not in INT8:
        raise UnsupportedOpError(n.name, n.op, f"{what} ({name!r}) must be int8 or uint8, not {dtype}")
    return DType.from_numpy(dtype)


def _zero_weights_zp(low, n: Node, index: int) -> None:
    zp = _const(low, n, index, "the weight zero point")
    if zp is not None and np.any(zp != 0):
        raise UnsupportedOpError(n.name, n.op, "only symmetric weights (weight zero point 0) are supported")


def requant_scale(x_scale: np.ndarray, w_scale: np.ndarray, y_scale: np.ndarray, channels: int) -> np.ndarray:
    """The requantization scale of a quantized matrix op's output: per-channel f32 ``(x_scale * w_scale) / y_scale``
    (``channels`` values; a per-tensor ``w_scale`` is broadcast), rounded after each step as onnxruntime computes it."""
    s = (np.float32(x_scale[0]) * w_scale.astype(np.float32).ravel()) / np.float32(y_scale[0])
    return np.ascontiguousarray(np.broadcast_to(s.astype(np.float32), (channels,)))


def bias_i32(values: np.ndarray, n: Node) -> np.ndarray:
    """A quantized op's int32 bias (the input zero point folded in, computed in int64) as int32; refuses node ``n``
    when a value does not fit int32."""
    lo, hi = np.iinfo(np.int32).min, np.iinfo(np.int32).max
    if values.min(initial=0) < lo or values.max(initial=0) > hi:
        raise UnsupportedOpError(n.name, n.op, "the bias with the input zero point folded in overflows int32")
    return values.astype(np.int32)


def lower_quantize(low: LoweringContext, n: Node) -> None:
    """QuantizeLinear of an f32 activation (per-tensor scale and zero point)."""
    x = low.bind[n.inputs[0]]
    if x.dtype is not DType.F32:
        raise UnsupportedOpError(n.name, n.op, f"the input must be float32, not {x.dtype.text}")
    out = _int_type(low, n, n.outputs[0], "the output")
    scale, zp = _scalar(low, n, 1, "the scale"), _scalar(low, n, 2, "the zero point")
    y = low.alloc(x.shape, x.layout, out)
    low.emit(n, quantization.quantize(x.phys, out, float(np.float32(scale[0])), int(zp[0]), low.target),
             {"X": ("ACT", x.offset), "Y": ("ACT", y.offset)})
    low.bind[n.outputs[0]] = y


def lower_dequantize(low: LoweringContext, n: Node) -> None:
    """DequantizeLinear of an int8/uint8 activation (per-tensor scale and zero point)."""
    if low.graph.is_const(n.inputs[0]):
        raise UnsupportedOpError(n.name, n.op, "dequantizing a constant (QDQ weights) is not lowered; use the "
                                 "QLinearConv/QLinearMatMul form")
    x = low.bind[n.inputs[0]]
    src = _int_type(low, n, n.inputs[0], "the input")
    scale, zp = _scalar(low, n, 1, "the scale"), _scalar(low, n, 2, "the zero point")
    y = low.alloc(x.shape, x.layout, DType.F32)
    low.emit(n, quantization.dequantize(x.phys, src, float(np.float32(scale[0])), int(zp[0]), low.target),
             {"X": ("ACT", x.offset), "Y": ("ACT", y.offset)})
    low.bind[n.outputs[0]] = y


def check_matrix_types(low: LoweringContext, n: Node, x: DType, w: DType) -> None:
    """Refuse node ``n`` unless its input type ``x`` and weight type ``w`` are one type the matrix unit multiplies."""
    if x is not w:
        raise UnsupportedOpError(n.name, n.op, f"input and weights must have the same type, not {x.text} and {w.text}")
    if x.text not in low.target.arch.matrix.dtypes:
        raise UnsupportedDTypeError(n.inputs[0], x.text, tuple(low.target.arch.matrix.dtypes), n.name, n.op)


def lower_qlinear_conv(low: LoweringContext, n: Node) -> None:
    """QLinearConv: the int8 convolution with bias and requantization fused into its accumulator epilogue."""
    xd = _int_type(low, n, n.inputs[0], "the input")
    x = low.want(n.inputs[0], "nhwc")
    w = _const(low, n, 3, "the weight")
    check_matrix_types(low, n, xd, _int_type(low, n, n.inputs[3], "the weight"))
    x_scale, x_zp = _scalar(low, n, 1, "the input scale"), int(_scalar(low, n, 2, "the input zero point")[0])
    w_scale = _const(low, n, 4, "the weight scale")
    _zero_weights_zp(low, n, 5)
    y_scale, y_zp = _scalar(low, n, 6, "the output scale"), int(_scalar(low, n, 7, "the output zero point")[0])
    yd = _int_type(low, n, n.outputs[0], "the output")
    cs = conv_shape(n, x.shape, w.shape)
    w = w.reshape(cs.K, cs.Cg, cs.R, cs.S)   # (a 1-D conv's OIL weights as OIHW)
    cs, rows, cols = live_taps(cs)   # (taps that read only the zero-point padding dropped: exact)
    w = np.ascontiguousarray(w[:, :, rows, cols])
    bias = _const(low, n, 8, "the bias")
    bias = np.zeros(cs.K, np.int64) if bias is None else bias.astype(np.int64)
    bias = bias_i32(bias - x_zp * w.reshape(cs.K, -1).astype(np.int64).sum(1), n)
    target = low.target
    y = low.alloc(conv_out_shape(cs, len(x.shape)), "nhwc", yd)
    ep = Epilogue(bias=True, out=yd, zp=y_zp)
    target, tiling = conv_on_array(cs, xd, target, ep, low.prefetched, blocks=not low.prefetched)
    prog = conv2d(cs, xd, target, tiling, ep, pad_value=x_zp)
    wt = pack_weights(w, cs, target.rows, target.cols, tiling.im2col, tiling.pack, tiling.gpack)
    low.emit(n, prog, {"X": ("ACT", x.offset), "Wt": ("W", low.const(wt)),
                       "Y": ("ACT", y.offset), "Bias": ("W", low.const(bias)),
                       "Scale": ("W", low.const(requant_scale(x_scale, w_scale, y_scale, cs.K)))}, cs.macs)
    low.bind[n.outputs[0]] = y


def lower_qlinear_matmul(low: LoweringContext, n: Node) -> None:
    """QLinearMatMul of an activation by a constant 2-D int8 matrix: an i32 GEMM, then a requantization segment."""
    xd = _int_type(low, n, n.inputs[0], "input A")
    b = _const(low, n, 3, "input B")
    if b.ndim != 2:
        raise UnsupportedOpError(n.name, n.op, f"only a 2-D constant B, not shape {b.shape}")
    check_matrix_types(low, n, xd, _int_type(low, n, n.inputs[3], "input B"))
    x = low.want(n.inputs[0], "rm")
    a_scale, a_zp = _scalar(low, n, 1, "the A scale"), int(_scalar(low, n, 2, "the A zero point")[0])
    b_scale = _const(low, n, 4, "the B scale")
    _zero_weights_zp(low, n, 5)
    y_scale, y_zp = _scalar(low, n, 6, "the output scale"), int(_scalar(low, n, 7, "the output zero point")[0])
    yd = _int_type(low, n, n.outputs[0], "the output")
    (K, N), M = b.shape, math.prod(x.shape[:-1])
    target, tiling = gemm_on_array(M, N, K, xd, low.target, True)
    acc = low.alloc((M, N), "rm", DType.I32)
    prog = tiled_gemm(M, N, K, xd, target, tiling, b_packed=True)
    low.emit(n, prog, {"A": ("ACT", x.offset), "B": ("W", low.const(pack_b(b, K, N, xd, target, tiling))),
                       "C": ("ACT", acc.offset)}, M * N * K)
    y = low.alloc(low.graph.tensor(n.outputs[0]).shape, "rm", yd)
    bias = bias_i32(-a_zp * b.astype(np.int64).sum(0), n)
    low.emit(n, quantization.requantize(M, N, yd, y_zp, low.target),
             {"C": ("ACT", acc.offset), "Bias": ("W", low.const(bias)),
              "Scale": ("W", low.const(requant_scale(a_scale, b_scale, y_scale, N))), "Y": ("ACT", y.offset)},
             suffix=".requant")
    low.bind[n.outputs[0]] = y


def _qdq(node: Node, ctx: CanonContext) -> Node:
    if node.attrs.get("block_size", 0):
        raise UnsupportedOpError(node.name, node.op, "blocked quantization (block_size != 0) is not supported")
    rank = max(len(ctx.shape(node.inputs[0])), 1)
    return dataclasses.replace(node, attrs={"axis": int(node.attrs.get("axis", 1)) % rank})


_EXACT = "onnxruntime's arithmetic bit for bit; constant per-tensor scales and zero points"
OPS = (
    OpSpec("QuantizeLinear", lower_quantize, _qdq, dtypes=None, npu="vector unit, f32 to int8/uint8; " + _EXACT),
    OpSpec("DequantizeLinear", lower_dequantize, _qdq, dtypes=None,
           npu="vector unit, int8/uint8 activations to f32; " + _EXACT),
    OpSpec("QLinearConv", lower_qlinear_conv, conv_canonical(3), conv_check(3), dtypes=None, nhwc=True,
           npu="1-D and 2-D, every Conv form; matrix unit (i8 x i8 -> i32) with bias and requantization fused; "
               "symmetric weights (per-channel scales fine); " + _EXACT),
    OpSpec("QLinearMatMul", lower_qlinear_matmul, dtypes=None,
           npu="matrix unit, constant 2-D B, then a requantization pass; symmetric B; " + _EXACT),
)
