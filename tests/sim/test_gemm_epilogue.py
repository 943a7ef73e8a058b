"""The tiled GEMM's fused epilogue (divisor, bias, residual, activation) computes numpy's values on every dataflow,
costs no DRAM traffic of its own, and its SPM is part of the tiling search."""

import math
from dataclasses import replace

import numpy as np
import pytest

from compiler.errors import CompileError, TilingError
from compiler.kernels.common.epilogue import Epilogue
from compiler.kernels.common.target import Target
from compiler.kernels.gemm import GemmTiling, search_tiling, slot_bytes, tiled_gemm
from compiler.kernels.vector import streams
from isa import BinOp, DmaCopy, DType, Space, VecBinary, VecUnary
from isa.arch import load_arch
from isa.races import find_races
from npusim import simulate
from npusim.sim.simulator import region_array

ERF = np.vectorize(math.erf)
EPILOGUES = [Epilogue(bias=True, act="gelu"), Epilogue(bias=True, act="relu", residual=True),
             Epilogue(divisor=8.0), Epilogue(bias=True, act="gelu_tanh"), Epilogue(act="silu", residual=True),
             Epilogue(bias=True, act="clamp", lo=-0.5, hi=0.7)]


def _arch(dataflow: str, preset: str = "edge16"):
    arch = load_arch(preset)
    return replace(arch, matrix=replace(arch.matrix, dataflow=dataflow))


def _reference(a, b, ep: Epilogue, bias, res):
    y = a.astype(np.float64) @ b.astype(np.float64)
    y = y + res if ep.residual else y
    y = y / ep.divisor if ep.divisor is not None else y
    y = y + bias if ep.bias else y
    return {None: lambda v: v, "relu": lambda v: np.maximum(v, 0), "clamp": lambda v: np.clip(v, ep.lo, ep.hi),
            "gelu": lambda v: 0.5 * v * (1 + ERF(v / math.sqrt(2))),
            "gelu_tanh": lambda v: 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3))),
            "silu": lambda v: v / (1 + np.exp(-v))}[ep.act](y)


def _run(arch, M, N, K, ep, tiling, seed=0):
    prog = tiled_gemm(M, N, K, DType.F32, Target.of(arch), tiling, epilogue=ep)
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K), np.float32)
    b = (rng.standard_normal((K, N), np.float32) / np.float32(math.sqrt(K))).astype(np.float32)
    bias, res = rng.standard_normal(N).astype(np.float32), rng.standard_normal((M, N)).astype(np.float32)
    inputs = {"A": a, "B": b, **({"Bias": bias} if ep.bias else {}), **({"R": res} if ep.residual else {})}
    out = simulate(prog, arch, inputs)
    return prog, out, region_array(out, "C", DType.F32, (M, N)), _reference(a, b, ep, bias, res)


@pytest.mark.parametrize("dataflow", ["ws", "os", "is"])
@pytest.mark.parametrize("ep", EPILOGUES, ids=lambda e: f"{e.act}-b{int(e.bias)}-r{int(e.residual)}-d{e.divisor}")
def test_epilogue_matches_numpy_on_every_dataflow(dataflow, ep):
    # ragged in every dimension, several tiles, and a tiling whose B tiles (and the last output tile) come in two
    # pieces with the n-outer loop order; both race-free
    arch = _arch(dataflow)
    M, N, K = 53, 35, 71
    for tiling in (GemmTiling(32, 16, 32), GemmTiling(32, 32, 32, "nm", 2)):
        prog, _, got, want = _run(arch, M, N, K, ep, tiling)
        assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max(), (tiling, np.abs(got - want).max())
        assert find_races(prog) == []


def test_the_epilogue_costs_no_dram_traffic_and_one_vector_pass_per_tile():
    # bias + relu + residual: C is written once (M x N f32), the residual read once straight into the accumulators,
    # the bias once; per output tile one vpu.add with the relu fused (act=) and nothing else on the vector unit
    arch = _arch("ws")
    M, N, K = 64, 32, 48
    ep = Epilogue(bias=True, act="relu", residual=True)
    prog, out, got, want = _run(arch, M, N, K, ep, GemmTiling(32, 16, 48))
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()
    dram = [i for i in prog.instrs if isinstance(i, DmaCopy)]
    written = sum(math.prod(i.shape) * 4 for i in dram if i.dst.space is Space.DRAM)
    to_acc = sum(math.prod(i.shape) * 4 for i in dram if i.dst.space is Space.ACC)
    assert written == M * N * 4 and to_acc == M * N * 4
    vpu = [i for i in prog.instrs if isinstance(i, (VecBinary, VecUnary))]
    tiles = (M // 32) * (N // 16)
    assert len(vpu) == tiles and all(isinstance(i, VecBinary) and i.act is not None for i in vpu)
    # cheaper than the GEMM alone plus the cheapest of the passes it replaces (one vector add through DRAM)
    target = Target.of(arch)
    plain = simulate(tiled_gemm(M, N, K, DType.F32, target, GemmTiling(32, 16, 48)), arch, timing_only=True)
    add = simulate(streams.binary(BinOp.ADD, (M, N), (M, N), DType.F32, target), arch, timing_only=True)
    assert out.cycles < plain.cycles + add.cycles


def test_silu_and_tanh_gelu_take_two_and_eight_vector_instructions_per_tile():
    arch = _arch("os")
    for act, per_tile in (("silu", 2), ("gelu_tanh", 8), ("gelu", 1)):
        prog = tiled_gemm(32, 16, 32, DType.F32, Target.of(arch), GemmTiling(16, 16, 32), epilogue=Epilogue(act=act))
        assert sum(isinstance(i, (VecBinary, VecUnary)) for i in prog.instrs) == 2 * per_tile


def test_the_search_leaves_spm_for_the_bias_and_the_scratch_tile():
    # a wide GEMM (a vocabulary projection): the plain GEMM's best tiles leave no room for a 64 KiB bias and a
    # scratch tile; with the epilogue the search takes shallower tiles, and the program fits
    target = Target.of(load_arch("edge16"))
    M, N, K = 128, 16384, 768
    ep = Epilogue(bias=True, act="silu")
    plain = search_tiling(M, N, K, DType.F32, target, True)
    with pytest.raises(TilingError, match="needs .* B of SPM"):
        tiled_gemm(M, N, K, DType.F32, target, plain, b_packed=True, epilogue=ep)
    t = search_tiling(M, N, K, DType.F32, target, True, ep)
    a, b, c = slot_bytes(t, DType.F32, target)
    assert t.tk < plain.tk and 2 * (a + b) + N * 4 + c <= target.spm
    tiled_gemm(M, N, K, DType.F32, target, t, b_packed=True, epilogue=ep)


def test_integer_accumulators_take_only_bias_relu_and_clamp():
    target = Target.of(load_arch("edge16"))
    tiled_gemm(32, 32, 32, DType.I8, target, epilogue=Epilogue(bias=True, act="relu"))
    for ep in (Epilogue(act="gelu"), Epilogue(divisor=2.0)):
        with pytest.raises(CompileError, match="i32 accumulator takes only"):
            tiled_gemm(32, 32, 32, DType.I8, target, epilogue=ep)
    with pytest.raises(ValueError, match="residual.*divisor"):
        Epilogue(residual=True, divisor=2.0)
