"""compiler.kernels.gemm.gemm_estimate, the GEMM search's closed-form price of a tiling, against program_estimate of the
built program; and the search's choice against the built programs of its candidates."""

import itertools
from dataclasses import replace

import pytest

from compiler.errors import CompileError, TilingError
from compiler.kernels.common.epilogue import Epilogue
from compiler.kernels.common.sink import PriceMemo
from compiler.kernels.common.target import Target
from compiler.kernels.gemm import NEAR_TIE, GemmTiling, gemm_candidates, gemm_estimate, search_tiling, tiled_gemm
from isa import DType
from isa.arch import load_arch, preset_names
from isa.cost import program_estimate

# small; ragged M, N, K (not multiples of any array); K in one tile and in many; large N; one row (a classifier)
SHAPES = [(16, 16, 16), (100, 70, 90), (33, 300, 77), (128, 768, 64), (7, 40, 1000), (1, 1000, 512), (96, 2304, 256)]
EPILOGUES = [Epilogue(), Epilogue(bias=True, act="relu"), Epilogue(bias=True, residual=True),
             Epilogue(act="clamp", lo=-1.0, hi=6.0, residual=True), Epilogue(divisor=8.0, act="silu"),
             Epilogue(bias=True, act="gelu_tanh")]
FLOAT_ONLY = {4, 5}   # (a divisor and those activations need an f32 accumulator)


def _tilings(M, N, K, dtype, target, packed, ep):
    """The searched tiling, the other order and splits of it, and hand-picked ragged ones (tiles that do not divide
    M, N or K; several k tiles; one array block of columns; the largest tile rows), of at most 300 steps."""
    r, c = target.rows, target.cols
    t = search_tiling(M, N, K, dtype, target, packed, ep)
    tilings = [t, replace(t, order="nm" if t.order == "mn" else "mn"), replace(t, split=2),
               replace(t, split=4, order="nm"), GemmTiling(16, 2 * c, 2 * r, "nm", 1),
               GemmTiling(48, 3 * c, 3 * r, "mn", 3), GemmTiling(min(M, target.max_rows), c, r, "mn", 1)]
    return [t for t in tilings if -(-M // t.tm) * -(-N // t.tn) * -(-K // t.tk) <= 300]


def _cases(arch):
    dtypes = [d for d in (DType.I8, DType.F32, DType.BF16) if d.text in arch.matrix.dtypes]
    for k, ((M, N, K), dtype) in enumerate(itertools.product(SHAPES, dtypes)):
        for e in (k % len(EPILOGUES), (k + 2) % len(EPILOGUES)):   # each shape and dtype with two epilogues
            if dtype is DType.I8 and e in FLOAT_ONLY:
                e = 1
            yield M, N, K, dtype, EPILOGUES[e], bool(k % 2)


@pytest.mark.slow
@pytest.mark.parametrize("overrides", [[], ["matrix.dataflow=os"], ["matrix.dataflow=is"], ["dram.model=bandwidth"]],
                         ids=["preset", "os", "is", "bandwidth"])
@pytest.mark.parametrize("preset", preset_names())
def test_closed_form_price_equals_the_built_programs(preset, overrides):
    # program_estimate's busiest queue, bus, head and tail, summed over step groups instead of a built program: every
    # preset, each dataflow, both DRAM models; i8/f32/bf16, epilogues (bias, activations, residual, divisor), B packed
    # or row-major, searched and hand-picked tilings (both orders, B splits, ragged tiles, many k tiles)
    arch = load_arch(preset).with_overrides(overrides)
    target = Target.of(arch)
    priced = 0
    for M, N, K, dtype, ep, packed in _cases(arch):
        memo = PriceMemo()   # (shared by the tilings of one GEMM, as the search shares it)
        for t in _tilings(M, N, K, dtype, target, packed, ep):
            try:
                prog = tiled_gemm(M, N, K, dtype, target, t, packed, ep)
            except TilingError:   # (a hand-picked tiling this shape or preset cannot take)
                continue
            assert gemm_estimate(M, N, K, dtype, target, t, packed, ep, memo) == \
                program_estimate(prog, arch), (M, N, K, dtype, ep, packed, t)
            priced += 1
    assert priced >= 100


@pytest.mark.parametrize("preset", preset_names())
def test_the_search_takes_the_best_ranked_near_tie_of_its_candidates(preset):
    # the search's walk with bounds (a candidate priced only until it is out of the window) picks what pricing every
    # candidate's built program picks: the best-ranked whose program_estimate is within NEAR_TIE of the least
    target = Target.of(load_arch(preset))
    moved = 0
    for (M, N, K), ep, packed in [((128, 768, 768), Epilogue(bias=True, residual=True), True),
                                  ((128, 64, 128), Epilogue(), False), ((196, 196, 64), Epilogue(), False),
                                  ((100, 70, 90), Epilogue(divisor=8.0), True)]:
        ranked = gemm_candidates(M, N, K, DType.F32, target, packed, ep)
        assert len(ranked) > 1
        price = [program_estimate(tiled_gemm(M, N, K, DType.F32, target, t, packed, ep), target.arch) for t in ranked]
        want = next(t for t, p in zip(ranked, price) if p <= min(price) * (1 + NEAR_TIE))
        assert search_tiling(M, N, K, DType.F32, target, packed, ep) == want
        moved += want != ranked[0]
    # (edge16's 128x64x128 leaves the heuristic's first: its estimate is 12.5% over the least, and it simulates
    # 13.6% slower than the one taken)
    assert moved or preset != "edge16"


def test_a_bound_stops_the_walk_only_when_the_estimate_reaches_it():
    target = Target.of(load_arch("edge16"))
    t = GemmTiling(32, 32, 32, "nm", 2)
    exact = gemm_estimate(100, 70, 90, DType.I8, target, t)
    assert exact == program_estimate(tiled_gemm(100, 70, 90, DType.I8, target, t), target.arch)
    assert gemm_estimate(100, 70, 90, DType.I8, target, t, bound=exact + 1) == exact
    assert exact >= gemm_estimate(100, 70, 90, DType.I8, target, t, bound=exact // 2) >= exact // 2


def test_the_estimate_refuses_what_tiled_gemm_refuses():
    target = Target.of(load_arch("edge16"))
    with pytest.raises(CompileError, match="does not requantize"):   # (QLinearMatMul requantizes in its own pass)
        gemm_estimate(32, 32, 32, DType.I8, target, GemmTiling(16, 16, 16), epilogue=Epilogue(out=DType.I8))
    with pytest.raises(TilingError, match="needs"):
        gemm_estimate(4096, 4096, 4096, DType.F32, target, GemmTiling(4096, 4096, 4096))
