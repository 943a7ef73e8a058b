"""compiler.kernels.conv2d.conv_estimate, the search's price of a tiling (conv2d's emitter run into an estimating
sink), against the price of the built program."""

import itertools
from dataclasses import replace

import pytest

from compiler.errors import TilingError
from compiler.kernels.common.search import program_price
from compiler.kernels.common.sink import PriceMemo
from compiler.kernels.common.target import Target
from compiler.kernels.conv2d import (
    ACC_TYPE,
    ConvShape,
    ConvTiling,
    Epilogue,
    conv2d,
    conv_candidates,
    conv_estimate,
    conv_plan,
    epilogue_spm_bytes,
    fit_tcb,
    grouped,
    plan_floor,
    search_conv_tiling,
)
from isa import DType
from isa.arch import load_arch, presets_by_size
from tests.compiler.util import linear_fit_tcb

SHAPES = [ConvShape(1, 64, 28, 28, 64, 3, 3, 1, 1),            # ResNet's 3x3 body
          ConvShape(1, 256, 14, 14, 512, 1, 1, 2),              # a subsampled 1x1 projection
          ConvShape(1, 3, 40, 40, 32, 7, 7, 2, 3),              # a stem: im2col, pixel packing
          ConvShape(2, 32, 9, 11, 48, 3, 3, (1, 2), (2, 1, 0, 3), (1, 2), 2),   # batch, per-axis forms, groups
          ConvShape(1, 16, 6, 6, 16, 3, 3, 1, 17),              # pads wider than a DMA inserts: fills
          ConvShape(1, 64, 12, 12, 64, 3, 3, 1, 1, groups=16)]  # grouped: group packing
EPILOGUES = [(Epilogue(), DType.F32), (Epilogue(bias=True, act="relu"), DType.F32),
             (Epilogue(bias=True, residual=True), DType.F32), (Epilogue(bias=True, act="relu", out=DType.I8), DType.I8)]
TILINGS = [ConvTiling(4, 8, 1, 1, False, 1), ConvTiling(3, 5, 2, 2, True, 2), ConvTiling(2, 8, 1, 1, False, 2, pack=2),
           ConvTiling(5, 8, 1 << 16, 1, False, 2, im2col=True), ConvTiling(4, 6, 1, 1, False, 2, gpack=4)]


@pytest.mark.slow
@pytest.mark.parametrize("preset", presets_by_size())
def test_closed_form_price_equals_the_built_programs(preset):
    # every term of program_estimate (busiest queue, bus, head, tail), the hidden constants and the one-accumulator
    # bound, summed over tile kinds instead of over a built program, on the searched tiling and hand-picked ones
    # (split reductions, several channel blocks, x_all, one accumulator tile, packing, im2col, group packing)
    target = Target.of(load_arch(preset))
    priced = 0
    for k, cs in enumerate(SHAPES):   # each shape with two of the epilogues
        for (ep, dtype), tiling in itertools.product((EPILOGUES[k % 4], EPILOGUES[(k + 1) % 4]), TILINGS + [None]):
            tiling = tiling or search_conv_tiling(cs, dtype, target, ep)
            try:
                prog = conv2d(cs, dtype, target, tiling, ep)
            except TilingError:   # (a hand-picked tiling this shape or preset cannot take)
                continue
            for hidden in (False, True):
                assert conv_estimate(cs, dtype, target, tiling, ep, hidden) == \
                    program_price(prog, target.arch, tiling.acc_bufs == 1, hidden), (cs, ep, tiling, hidden)
            priced += 1
    assert priced >= 30


@pytest.mark.parametrize("preset", ["edge16", "dc128"])
def test_the_most_input_blocks_that_fit_is_the_first_fitting_from_the_top(preset):
    # fit_tcb's shortcut (the SPM bytes alone, the accumulator check once) against tiling_fits tried for every tcb
    target = Target.of(load_arch(preset))
    r, c, spm, acc = target.rows, target.cols, target.spm, target.acc
    tried = 0
    for cs, dtype in itertools.product(SHAPES, (DType.F32, DType.I8)):
        for t, budget in itertools.product(TILINGS + [ConvTiling(cs.OH, cs.OW, 1, 4, False, 1)], (spm, spm // 8)):
            gs = grouped(cs, t.gpack) if cs.groups % t.gpack == 0 else None
            if gs is None:
                continue
            want = linear_fit_tcb(cs, t, dtype.size, r, c, budget, acc)
            assert fit_tcb(cs, t, dtype.size, r, c, budget, acc) == want, (cs, t, budget)
            tried += bool(want)
    assert tried >= 10


@pytest.mark.parametrize("preset", ["edge16", "dc128"])
def test_a_bounded_estimate_stops_at_the_bound_and_is_exact_below_it(preset):
    # the search passes its best price so far: a tiling that cannot beat it gets the bound back (often before its
    # last tile is priced), one that can gets its exact price
    target = Target.of(load_arch(preset))
    for cs, tiling in itertools.product(SHAPES[:3], TILINGS[:3]):
        try:
            exact = conv_estimate(cs, DType.F32, target, tiling)
        except TilingError:
            continue
        for bound in (exact // 2, exact - 1, exact, exact + 1, 2 * exact):
            got = conv_estimate(cs, DType.F32, target, tiling, bound=bound)
            assert got == exact if exact < bound else got >= bound, (cs, tiling, bound)
        assert conv_estimate(cs, DType.F32, target, tiling, bound=1) == 1   # (stopped after the first tile)


@pytest.mark.parametrize("preset", ["edge16", "mid32"])
def test_estimates_of_both_accumulator_depths_may_share_built_steps(preset):
    # the search shares one step memo between a tiling with one and with two accumulator tiles
    target = Target.of(load_arch(preset))
    for cs, (ep, dtype), tiling in itertools.product(SHAPES[:4], EPILOGUES, TILINGS[:3]):
        memo = PriceMemo()
        for bufs in (2, 1):
            t = replace(tiling, acc_bufs=bufs)
            try:
                prog = conv2d(cs, dtype, target, t, ep)
            except TilingError:
                continue
            assert conv_estimate(cs, dtype, target, t, ep, memo=memo) == \
                program_price(prog, target.arch, t.acc_bufs == 1), (cs, ep, t)


@pytest.mark.slow
@pytest.mark.parametrize("preset", presets_by_size())
def test_the_search_picks_the_cheapest_built_program_of_its_candidates(preset):
    # the search prices few candidates (lower bounds first); its winner is still the least (price of the built
    # program, rank) of all of them
    target = Target.of(load_arch(preset))
    for k, (cs, hidden) in enumerate(itertools.product(SHAPES, (False, True))):
        ep, dtype = EPILOGUES[k % 4]
        candidates = conv_candidates(cs, dtype, target, ep)
        prices = [program_price(conv2d(cs, dtype, target, t, ep), target.arch, t.acc_bufs == 1, hidden)
                  for t in candidates]
        want = candidates[min(range(len(candidates)), key=lambda i: (prices[i], i))]
        assert search_conv_tiling.__wrapped__(cs, dtype, target, ep, hidden) == want, (cs, ep, hidden)


@pytest.mark.parametrize("preset", presets_by_size())
def test_the_bounds_the_search_goes_by_are_at_most_the_price(preset):
    # plan_floor (closed form) <= conv_estimate(floor=True) <= the price, on every candidate, with and without
    # hidden constants; a bounded floor is exact below its bound
    target = Target.of(load_arch(preset))
    tried = 0
    for k, cs in enumerate(SHAPES):
        ep, dtype = EPILOGUES[k % 4]
        spm = target.spm - epilogue_spm_bytes(cs, ep, dtype.size)
        for j, (t, hidden) in enumerate(itertools.product(conv_candidates(cs, dtype, target, ep), (False, True))):
            price = conv_estimate(cs, dtype, target, t, ep, hidden)
            plan = conv_plan(cs, t, dtype.size, target.rows, target.cols, spm)
            low = plan_floor(grouped(cs, t.gpack), t, plan, target.arch, dtype.size,
                              (ep.out or ACC_TYPE[dtype]).size, ep, hidden)
            assert low <= price, (cs, t, hidden, low, price)
            if j % 6 == 0:
                floor = conv_estimate(cs, dtype, target, t, ep, floor=True)
                assert floor <= price, (cs, t, floor, price)
                assert conv_estimate(cs, dtype, target, t, ep, bound=floor + 1, floor=True) == floor
            tried += 1
    assert tried >= 40
