"""``QuantMatMul`` (made by :mod:`compiler.passes.weight_quant` from ``DequantizeLinear`` -> ``MatMul`` and from
``com.microsoft.MatMulNBits``): an f32 activation times a constant weight kept int4/uint4/int8/uint8 (scales per
tensor, column or block) or fp8 E4M3 (per-tensor/column scale) in DRAM, applied per tile on chip
(:mod:`compiler.kernels.dequant_gemm`)."""

from __future__ import annotations

import math

import numpy as np

from compiler.ir import Node, Tensor
from compiler.kernels.dequant_gemm import (
    WeightFormat,
    dequant_gemm,
    pack_weights,
    search_dequant_tiling,
    zero_rows,
)
from compiler.ops.context import LoweringContext
from compiler.ops.spec import F32, OpSpec

OP = "QuantMatMul"
"""The op name of a MatMul by a quantized constant weight (not an ONNX op)."""


def weight_format(n: Node) -> WeightFormat:
    """The :class:`WeightFormat` of a QuantMatMul node's attributes."""
    a = n.attrs
    return WeightFormat(a["format"], int(a["block"]), int(a["zp"]), bool(a["per_block_zp"]))


def quant_matmul(name: str, a: str, outputs: tuple[str, ...], kind: str, block: int, codes: np.ndarray,
                 scale_rows: np.ndarray, zp_rows: np.ndarray | None) -> tuple[Node, dict[str, Tensor]]:
    """A QuantMatMul node ``name`` (what :func:`weight_format` reads) of activation ``a`` by the ``[K, N]`` ``codes``
    with f32 ``[blocks, N]`` scale and zero-point rows (None: zero), and its new constants ``<name>.codes``,
    ``<name>.scale`` and, unless the zero points are one integer, ``<name>.zero_point``."""
    uniform = zp_rows is None or bool(np.all(zp_rows == zp_rows.flat[0])) and float(zp_rows.flat[0]).is_integer()
    attrs = {"format": kind, "block": block, "zp": int(zp_rows.flat[0]) if uniform and zp_rows is not None else 0,
             "per_block_zp": int(not uniform)}
    tensors = {f"{name}.codes": Tensor.const(f"{name}.codes", codes),
               f"{name}.scale": Tensor.const(f"{name}.scale", scale_rows)}
    inputs = (a, f"{name}.codes", f"{name}.scale")
    if not uniform:
        tensors[f"{name}.zero_point"] = Tensor.const(f"{name}.zero_point", zp_rows)
        inputs += (f"{name}.zero_point",)
    return Node(name, OP, inputs, outputs, attrs), tensors


def lower_quant_matmul(low: LoweringContext, n: Node) -> None:
    """One dequantizing GEMM over all leading dims of A."""
    x = low.want(n.inputs[0], "rm")
    codes, scale = low.data(n.inputs[1]), low.data(n.inputs[2])
    (K, N), M = codes.shape, math.prod(x.shape[:-1])
    fmt = weight_format(n)
    t = search_dequant_tiling(M, N, K, fmt, low.target)
    y = low.alloc(low.graph.tensor(n.outputs[0]).shape, "rm")
    zero = zero_rows(fmt, t.scheme, scale, low.data(n.inputs[3]) if fmt.per_block_zp else None)
    image = pack_weights(codes, scale, zero, fmt, t, low.target.cols)
    bind = {"A": ("ACT", x.offset), "Q": ("W", low.const(image)), "C": ("ACT", y.offset)}
    low.emit(n, dequant_gemm(M, N, K, fmt, low.target, t), bind, M * N * K)
    low.bind[n.outputs[0]] = y


def _activations(n: Node, graph) -> str | None:
    for t in (n.inputs[0], n.outputs[0]):
        if np.dtype(graph.tensor(t).dtype) not in F32:
            return f"tensor {t!r} must be float32 (weight-only quantization), not {graph.tensor(t).dtype}"
    return None


OPS = (
    OpSpec(OP, lower_quant_matmul, check=_activations, dtypes=None,
           npu="DequantizeLinear (int4/uint4/int8/uint8 per tensor, per column or with block_size, or FLOAT8E4M3FN "
               "per tensor/column) of a constant MatMul weight, and com.microsoft MatMulNBits (bits 4, "
               "accuracy_level 0 or 1, constant B, scales, zero points and bias, no g_idx; the bias a following Add; "
               "else the host, with the reason), fused: the weight stays quantized in DRAM (int4: half a byte per "
               "element, int8: one) and the matrix unit takes one byte per code, the vector unit scaling its "
               "per-block partial sums (or, where cheaper and for fp8, dequantizing each tile to f32); ws dataflow"),
)
