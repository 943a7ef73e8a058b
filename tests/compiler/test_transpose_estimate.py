"""compiler.kernels.conv_transpose2d.transpose_estimate, the search's price of a tiling (the emitter run into an
estimating sink), against the price of the built program; and the search's choice against its candidates' built
programs."""

import itertools

import pytest

from compiler.errors import TilingError
from compiler.kernels.common.epilogue import Epilogue
from compiler.kernels.common.search import program_price
from compiler.kernels.common.target import Target
from compiler.kernels.conv_transpose2d import (
    ConvTransposeShape,
    TransposeSearch,
    TransposeTiling,
    conv_transpose2d,
    search_conv_transpose_tiling,
    transpose_estimate,
)
from isa import DType
from isa.arch import load_arch

SHAPES = [ConvTransposeShape(1, 16, 8, 8, 32, 4, 4, 2, 1),                          # the usual 2x upsampling
          ConvTransposeShape(1, 32, 7, 9, 16, 3, 3, 2, (1, 0, 1, 1), 1, (1, 0)),    # odd kernel, output padding
          ConvTransposeShape(1, 3, 10, 10, 12, 5, 5, 3, 2, 2, 1),                   # dilated: tapless phases
          ConvTransposeShape(1, 64, 6, 6, 64, 3, 3, (1, 2), 1, (1, 2), 0, 4)]       # groups
EPILOGUES = [(Epilogue(), DType.F32), (Epilogue(bias=True, act="relu"), DType.F32),
             (Epilogue(bias=True, act="relu", out=DType.I8), DType.I8)]
TILINGS = [TransposeTiling(2, 3, 1, 1, False, 1), TransposeTiling(3, 2, 2, 2, True, 2, 1, "nb")]


@pytest.mark.parametrize("preset", ["edge16", "mid32"])
def test_the_estimate_equals_the_built_programs_price(preset):
    # program_estimate's terms, the hidden constant loads and the one-accumulator bound of the emitted instructions,
    # priced as they are emitted (the bias init priced where it is emitted, not where it is placed), for searched
    # and hand-picked tilings, both modes, per-phase bias
    target = Target.of(load_arch(preset))
    priced = 0
    for ct, (ep, dtype), mode, per_phase in itertools.product(SHAPES, EPILOGUES, ("split", "swell_spm"),
                                                              (False, True)):
        for t in TILINGS + [search_conv_transpose_tiling(ct, dtype, target, ep, mode, per_phase)]:
            try:
                prog = conv_transpose2d(ct, dtype, target, t, ep, mode=mode, per_phase_bias=per_phase)
            except TilingError:
                continue
            for hidden in (False, True):
                got = transpose_estimate(ct, dtype, target, t, ep, mode, per_phase, hidden)
                assert got == program_price(prog, target.arch, t.acc_bufs == 1, hidden), (ct, ep, mode, t, hidden)
                assert transpose_estimate(ct, dtype, target, t, ep, mode, per_phase, hidden, bound=got + 1) == got
                assert transpose_estimate(ct, dtype, target, t, ep, mode, per_phase, hidden, bound=got // 2) \
                    >= got // 2
            priced += 1
    assert priced >= 100


def test_the_search_takes_the_least_price_of_its_candidates_built():
    target = Target.of(load_arch("mid32"))
    for ct, (ep, dtype), hidden in itertools.product(SHAPES, EPILOGUES[:2], (False, True)):
        candidates = TransposeSearch(ct, dtype, target, ep, hidden_constants=hidden).candidates()
        prices = [program_price(conv_transpose2d(ct, dtype, target, t, ep), target.arch, t.acc_bufs == 1, hidden)
                  for t in candidates]
        want = candidates[min(range(len(candidates)), key=lambda i: (prices[i], i))]
        assert search_conv_transpose_tiling.__wrapped__(ct, dtype, target, ep, hidden_constants=hidden) == want
