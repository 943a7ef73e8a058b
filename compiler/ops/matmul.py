"""Gemm and MatMul on the matrix unit (:func:`compiler.kernels.gemm.tiled_gemm`); what the fusion passes put into a
MatMul rides in its GEMM's epilogue, a Gemm's bias is a vector step."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import numpy as np

from compiler.errors import TilingError
from compiler.frontend.canonical import CanonContext
from compiler.ir import Graph, Node
from compiler.kernels.common.epilogue import NO_EPILOGUE, Epilogue
from compiler.kernels.gemm import gemm_on_array, pack_b, tiled_gemm
from compiler.kernels.vector import streams
from compiler.ops.context import Binding, LoweringContext
from compiler.ops.spec import OpSpec
from compiler.ops.steps import activation_step, bias_step, fused_epilogue
from isa import BinOp, DType
from isa.cost import program_estimate

F32 = DType.F32


def gemm_into(low: LoweringContext, n: Node, a_off: int, b: np.ndarray | tuple[str, int], M: int, N: int, K: int,
              out_off: int, suffix: str = "", ep: Epilogue = NO_EPILOGUE, bias_off: int = 0, r_off: int = 0) -> None:
    """One GEMM segment ``C[M,N] = A[M,K] @ B[K,N]`` from ACT offset ``a_off`` into ``out_off``; ``b`` is a constant
    ``K x N`` array (stored pre-blocked, :func:`compiler.kernels.gemm.pack_b`) or where B lives. ``ep``: the epilogue
    fused into it, with its bias at W offset ``bias_off`` and its residual at ACT offset ``r_off``. TilingError when no
    tiling fits the target with that epilogue."""
    packed = isinstance(b, np.ndarray)
    target, tiling = gemm_on_array(M, N, K, F32, low.target, packed, ep)
    prog = tiled_gemm(M, N, K, F32, target, tiling, b_packed=packed, epilogue=ep)
    b_loc = ("W", low.const(pack_b(b, K, N, F32, target, tiling))) if packed else b
    bind = {"A": ("ACT", a_off), "B": b_loc, "C": ("ACT", out_off)}
    if ep.bias:
        bind["Bias"] = ("W", bias_off)
    if ep.residual:
        bind["R"] = ("ACT", r_off)
    low.emit(n, prog, bind, M * N * K, suffix)


def lower_gemm(low: LoweringContext, n: Node) -> None:
    """``alpha * A @ B' + beta * C`` with a constant B (transposed offline if transB) and C (a vector step). The
    GEMM epilogue could take a per-column C, but on the zoo's classifiers that saves at most 0.05% and, with
    prefetch and activations on chip, sometimes costs a few cycles, so the Gemm keeps its step."""
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
    dims (one GEMM per batch element); what the fusion passes put into it (``compiler.ir.FUSED_ATTRS``: divisor,
    bias, residual, activation) rides in each GEMM's epilogue, or follows as vector steps where that is predicted
    faster or the epilogue does not fit the SPM (:func:`cheapest`)."""
    ep = fused_epilogue(n, bool(n.attrs.get("bias")))
    bias = low.data(n.inputs[2]).astype(np.float32).reshape(-1) if ep.bias else None

    def steps() -> None:
        low.bind[n.outputs[0]] = _epilogue_steps(low, n, _matmul(low, n, NO_EPILOGUE, None), ep, bias)

    fused = [lambda: _matmul(low, n, ep, bias)]
    cheapest(low, fused if not ep.active or _same_tiles(low, n, ep) else fused + [steps])


def _same_tiles(low: LoweringContext, n: Node, ep: Epilogue) -> bool:
    """Whether the GEMM search takes the same tiling with epilogue ``ep`` as without it: then the epilogue only adds
    vector work that overlaps the matrix unit, where each vector step it saves is a pass through DRAM."""
    a, b = low.graph.tensor(n.inputs[0]), low.graph.tensor(n.inputs[1])
    packed = b.is_const
    M = math.prod(a.shape[:-1]) if packed else a.shape[-2]
    K, N = a.shape[-1], b.shape[-1]
    try:
        fused = gemm_on_array(M, N, K, F32, low.target, packed, ep)
    except TilingError:
        return False
    return fused == gemm_on_array(M, N, K, F32, low.target, packed)


def cheapest(low: LoweringContext, ways: list[Callable[[], None]]) -> None:
    """Lower a node each of ``ways`` and keep the one whose segments :func:`isa.cost.program_estimate` predicts
    fastest (the first on a tie); a way whose tiles do not fit (TilingError) is skipped, and if all of them fail the
    last one's error is raised."""
    saved, first, best = low.snapshot(), len(low.segments), None
    for k, way in enumerate(ways):
        low.restore(saved)
        try:
            way()
        except TilingError:
            if k == len(ways) - 1 and best is None:
                raise
            continue
        if len(ways) == 1:
            return
        est = sum(program_estimate(s.program, low.target.arch) for s in low.segments[first:])
        if best is None or est < best[0]:
            best = (est, low.snapshot())
    low.restore(best[1])


def _matmul(low: LoweringContext, n: Node, ep: Epilogue, bias: np.ndarray | None) -> Binding:
    x = low.want(n.inputs[0], "rm")
    b = None if low.graph.is_const(n.inputs[1]) else low.want(n.inputs[1], "rm")
    r = low.want(n.inputs[3], "rm") if ep.residual else None
    out_shape = low.graph.tensor(n.outputs[0]).shape
    y = low.alloc(out_shape, "rm")
    K, N = x.shape[-1], out_shape[-1]
    bias_off = low.const(bias) if ep.bias else 0
    if b is None:
        M = math.prod(x.shape[:-1])
        gemm_into(low, n, x.offset, low.data(n.inputs[1]).astype(np.float32), M, N, K, y.offset, ep=ep,
                  bias_off=bias_off, r_off=r.offset if r else 0)
    else:
        M = x.shape[-2]
        for i in range(math.prod(x.shape[:-2])):
            gemm_into(low, n, x.offset + i * M * K * 4, ("ACT", b.offset + i * K * N * 4), M, N, K,
                      y.offset + i * M * N * 4, suffix=f".{i}", ep=ep, bias_off=bias_off,
                      r_off=r.offset + i * M * N * 4 if r else 0)
    low.bind[n.outputs[0]] = y
    return y


def _epilogue_steps(low: LoweringContext, n: Node, y: Binding, ep: Epilogue, bias: np.ndarray | None) -> Binding:
    """The epilogue ``ep`` as vector steps after a GEMM that did not take it (segments ``<name>.div``, ``.bias``,
    ``.residual``, ``.<activation>``); the final binding."""
    if ep.divisor is not None:
        y = _binary_step(low, n, y, BinOp.DIV, ("W", low.const(np.float32([ep.divisor]))), (1,), "div")
    if bias is not None:
        y = bias_step(low, n, y, bias)
    if ep.residual:
        r = low.want(n.inputs[3], "rm")
        y = _binary_step(low, n, y, BinOp.ADD, ("ACT", r.offset), r.shape, "residual")
    return activation_step(low, n, y, n.attrs["activation"]) if ep.act else y


def _binary_step(low: LoweringContext, n: Node, y: Binding, op: BinOp, b: tuple[str, int], b_shape: tuple[int, ...],
                 suffix: str) -> Binding:
    out = low.alloc(y.shape, "rm")
    low.emit(n, streams.binary(op, y.shape, b_shape, F32, low.target),
             {"A": ("ACT", y.offset), "B": b, "Y": ("ACT", out.offset)}, suffix="." + suffix)
    return out


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


def _matmul_check(node: Node, graph: Graph) -> str | None:
    if min(graph.tensor(t).rank for t in node.inputs[:2]) < 2:
        return "1-D operands are not supported"
    a, b = graph.tensor(node.inputs[0]), graph.tensor(node.inputs[1])
    out = graph.tensor(node.outputs[0]).shape
    if a.is_const:
        return "a constant A is not lowered"
    if b.is_const and b.rank != 2:
        return f"a constant B must be 2-D, not shape {b.shape}"
    if not b.is_const and (a.rank < 2 or b.rank < 2 or a.shape[:-2] != b.shape[:-2]):
        return f"two activations need equal batch dims, not shapes {a.shape} and {b.shape}"
    ins = node.inputs + ("", "")
    if node.attrs.get("bias"):
        c = graph.tensor(ins[2]) if ins[2] else None
        if c is None or not c.is_const or c.size != out[-1] or (c.rank and c.shape[-1] != out[-1]):
            return f"a fused bias must be a constant with one value per output column ({out[-1]})"
    if node.attrs.get("residual") and (not ins[3] or graph.tensor(ins[3]).shape != out or graph.is_const(ins[3])):
        return f"a fused residual must be an activation of the output's shape {out}"
    return None


OPS = (
    OpSpec("Gemm", lower_gemm, _gemm, _gemm_check, npu="matrix unit; transA=0, constant B and C (C: a vector add)"),
    OpSpec("MatMul", lower_matmul, check=_matmul_check,
           npu="matrix unit: A @ constant 2-D B, or two activations with equal batch dims; a following division by a "
               "constant, bias Add, residual Add and activation (Relu, Clip, Gelu, Swish) fused into its epilogue"),
)
