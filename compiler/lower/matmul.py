"""Gemm and MatMul on the matrix unit (:func:`compiler.gemm.tiled_gemm`); a Gemm's bias is a vector step."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from isa import DType

from ..canonical import CanonContext
from ..errors import UnsupportedOpError
from ..gemm import pack_b, search_tiling, tiled_gemm
from ..ir import Graph, Node
from .context import LoweringContext
from .spec import OpSpec
from .steps import bias_step

F32 = DType.F32


def gemm_into(low: LoweringContext, n: Node, a_off: int, b: np.ndarray | tuple[str, int], M: int, N: int, K: int,
              out_off: int, suffix: str = "") -> None:
    """One GEMM segment ``C[M,N] = A[M,K] @ B[K,N]`` from ACT offset ``a_off`` into ``out_off``; ``b`` is a constant
    ``K x N`` array (stored pre-blocked, :func:`compiler.gemm.pack_b`) or where B lives."""
    packed = isinstance(b, np.ndarray)
    tiling = search_tiling(M, N, K, F32, low.target, packed)
    prog = tiled_gemm(M, N, K, F32, low.target, tiling, b_packed=packed)
    b_loc = ("W", low.const(pack_b(b, K, N, F32, low.target, tiling))) if packed else b
    low.emit(n, prog, {"A": ("ACT", a_off), "B": b_loc, "C": ("ACT", out_off)}, M * N * K, suffix)


def lower_gemm(low: LoweringContext, n: Node) -> None:
    """``alpha * A @ B' + beta * C`` with a constant B (transposed offline if transB) and C."""
    a = n.attrs
    x = low.want(n.inputs[0], "rm")
    w = low.data(n.inputs[1]).astype(np.float32)
    w = (w.T if a.get("transB", 0) else w) * np.float32(a.get("alpha", 1.0))
    M, K = x.shape
    y = low.alloc((M, w.shape[1]), "rm")
    gemm_into(low, n, x.offset, np.ascontiguousarray(w), M, w.shape[1], K, y.offset)
    if len(n.present_inputs) > 2:
        y = bias_step(low, n, y, low.data(n.inputs[2]).astype(np.float32) * np.float32(a.get("beta", 1.0)))
    low.bind[n.outputs[0]] = y


def lower_matmul(low: LoweringContext, n: Node) -> None:
    """``A @ B`` with a constant 2-D B (one GEMM over all leading dims of A), or two activations with equal batch
    dims (one GEMM per batch element)."""
    x = low.want(n.inputs[0], "rm")
    out_shape = low.graph.tensor(n.outputs[0]).shape
    y = low.alloc(out_shape, "rm")
    K, N = x.shape[-1], out_shape[-1]
    if low.graph.is_const(n.inputs[1]) and low.data(n.inputs[1]).ndim == 2:
        M = math.prod(x.shape[:-1])
        gemm_into(low, n, x.offset, low.data(n.inputs[1]).astype(np.float32), M, N, K, y.offset)
    else:
        b = low.want(n.inputs[1], "rm") if not low.graph.is_const(n.inputs[1]) else None
        if b is None or x.shape[:-2] != b.shape[:-2]:
            raise UnsupportedOpError(n.name, n.op, "only A @ constant-2-D B or equal batch dims are supported")
        M = x.shape[-2]
        for i in range(math.prod(x.shape[:-2])):
            gemm_into(low, n, x.offset + i * M * K * 4, ("ACT", b.offset + i * K * N * 4), M, N, K,
                      y.offset + i * M * N * 4, suffix=f".{i}")
    low.bind[n.outputs[0]] = y


def _gemm(node: Node, ctx: CanonContext) -> Node:
    a = node.attrs
    return dataclasses.replace(node, attrs={"alpha": float(a.get("alpha", 1.0)), "beta": float(a.get("beta", 1.0)),
                                            "transA": int(a.get("transA", 0)), "transB": int(a.get("transB", 0))})


def _gemm_check(node: Node, graph: Graph) -> str | None:
    if node.attrs.get("transA", 0):
        return "transA=1 is not supported"
    if not all(graph.is_const(t) for t in node.present_inputs[1:]):
        return "B and C must be constants"
    return None


OPS = (
    OpSpec("Gemm", lower_gemm, _gemm, _gemm_check, npu="matrix unit; transA=0, constant B and C (C: a vector add)"),
    OpSpec("MatMul", lower_matmul, npu="matrix unit: A @ constant 2-D B, or two activations with equal batch dims"),
)
