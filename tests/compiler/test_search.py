"""compiler.kernels.common.search, the one tiling search: its ranking keeps the best of each group (ties to the first
offered), and its choice is the best-ranked price within the near-tie window, found with bounds and lower bounds as
pricing every candidate would find it."""

import random

import pytest

from compiler.kernels.common.epilogue import Epilogue
from compiler.kernels.common.search import Ranking, SearchRule, TilingSearch
from compiler.kernels.common.sink import EstimateSink
from compiler.kernels.common.target import Target
from compiler.kernels.gemm import GemmTiling, emit_gemm, gemm_plan, tiled_gemm
from isa import DType
from isa.arch import load_arch
from isa.cost import program_estimate


def test_a_ranking_keeps_the_best_of_each_group_ties_to_the_first_offered():
    rng = random.Random(1)
    for keep in (1, 3, 8):
        offers = [(rng.randrange(20), rng.choice("ab"), k) for k in range(200)]
        one, batch = Ranking(keep, ("a", "b")), Ranking(keep, ("a", "b"))
        for rank, group, k in offers:
            one.offer(rank, k, group)
        batch.offer_all(offers[:90])
        batch.offer_all(offers[90:])
        want = [k for g in "ab" for _, _, k in sorted((r, k, k) for r, gg, k in offers if gg == g)[:keep]]
        assert one.ranked() == batch.ranked() == want
        assert one.best() == min(offers, key=lambda o: (o[0], o[2]))[2]   # (rank, then offer order)


class _Toy(TilingSearch):
    """Candidates 0..n-1 (rank order) with given prices, lower bounds below them and a near-tie rule; counts what is
    priced."""

    def __init__(self, prices, floors=None, near_tie=0.0, keep=100):
        self.prices, self.rule, self.priced = prices, SearchRule(keep, near_tie), []
        if floors is not None:
            self.floors = (lambda t, bound: floors[t],)

    def rank(self, ranking):
        for t in range(len(self.prices)):
            ranking.offer(t, t)

    def price(self, t, bound):
        self.priced.append(t)
        p = self.prices[t]
        return p if bound is None or p < bound else bound + random.randrange(3)   # (any value >= bound)


@pytest.mark.parametrize("near_tie", [0.0, 0.1])
def test_the_choice_is_the_best_ranked_within_the_window_of_the_least_price(near_tie):
    rng = random.Random(2)
    for _ in range(300):
        prices = [rng.randrange(90, 130) for _ in range(rng.randrange(2, 12))]
        want = next(t for t, p in enumerate(prices) if p <= min(prices) * (1 + near_tie))
        assert _Toy(prices, near_tie=near_tie).choose() == want
        if near_tie == 0:   # lower bounds first: the same winner, and a candidate whose bound loses is not priced
            floors = [p - rng.randrange(0, 40) for p in prices]
            toy = _Toy(prices, floors)
            assert toy.choose() == want
            assert all(floors[t] <= prices[want] for t in toy.priced)


def test_sinks_give_the_program_and_its_estimate():
    # a generator emits once: into an estimating sink it prices the program tiled_gemm builds (its program_estimate)
    arch = load_arch("mid32")
    target = Target.of(arch)
    p = gemm_plan(100, 200, 300, DType.F32, target, GemmTiling(64, 64, 96, "nm", 2), False, Epilogue(bias=True))
    estimate = EstimateSink(arch)
    emit_gemm(p, estimate)
    built = tiled_gemm(100, 200, 300, DType.F32, target, GemmTiling(64, 64, 96, "nm", 2), False, Epilogue(bias=True))
    assert estimate.estimate.cycles == program_estimate(built, arch)
