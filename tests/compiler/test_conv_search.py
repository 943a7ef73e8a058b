"""The convolution tiling search is bounded: the tallest tile and the channel blocks per step come from binary
searches equal to trying every value (the old loops, kept here as the oracle), and a layer too large to build every
candidate takes the best rough estimate."""

import time

from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.conv import (
    PRICE_MAX,
    ConvShape,
    ConvTiling,
    TilingError,
    _fit_tcb,
    _fits,
    choose_conv_tiling,
    conv_instructions,
    search_conv_tiling,
)
from isa import DType
from isa.arch import load_arch


def linear_choose(cs, dtype, rows, cols, spm, acc, max_rows=256):
    """choose_conv_tiling as it was: every block count, every height, from the top."""
    tow = min(cs.OW, max_rows)
    for tcb in range(-(-cs.Cg // rows), 0, -1):
        for toh in range(cs.OH, 0, -1):
            if _fits(cs, ConvTiling(toh, tow, tcb), dtype.size, rows, cols, spm, acc):
                return ConvTiling(toh, tow, tcb)
    return None


def linear_fit_tcb(cs, toh, tow, tnb, es, rows, cols, spm, acc, im2col=False, x_all=False, acc_bufs=2, pack=1):
    kc = pack * (cs.R * cs.S * cs.Cg if im2col else cs.Cg)
    return next((tcb for tcb in range(-(-kc // rows), 0, -1)
                 if _fits(cs, ConvTiling(toh, tow, tcb, tnb, x_all, acc_bufs, im2col, pack), es, rows, cols, spm,
                          acc)), 0)


@st.composite
def convs(draw):
    groups = draw(st.sampled_from((1, 1, 2, 4)))
    c = groups * draw(st.integers(1, 40))
    k = groups * draw(st.integers(1, 40))
    r = draw(st.integers(1, 5))
    stride, dilation = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    pad = draw(st.integers(0, 2))
    h = draw(st.integers(dilation * (r - 1) + 1, 60))
    return ConvShape(draw(st.integers(1, 2)), c, h, draw(st.integers(r, 60)), k, r, r, stride, pad, dilation,
                     groups)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(cs=convs(), rows=st.sampled_from((4, 8, 16)), cols=st.sampled_from((4, 8, 16)),
       spm=st.sampled_from((1024, 4096, 16384, 65536)), acc=st.sampled_from((1024, 4096, 65536)),
       es=st.sampled_from((1, 2, 4)), toh=st.integers(1, 8), tow=st.integers(1, 16), tnb=st.integers(1, 3),
       im2col=st.booleans(), x_all=st.booleans(), bufs=st.sampled_from((1, 2)), pack=st.sampled_from((1, 2, 4)))
def test_binary_searches_equal_trying_every_value(cs, rows, cols, spm, acc, es, toh, tow, tnb, im2col, x_all, bufs,
                                                  pack):
    dtype = {1: DType.I8, 2: DType.F16, 4: DType.F32}[es]
    try:
        got = choose_conv_tiling(cs, dtype, rows, cols, spm, acc, 16)
    except TilingError:
        got = None
    assert got == linear_choose(cs, dtype, rows, cols, spm, acc, 16)
    args = (cs, min(toh, cs.OH), min(tow, cs.OW), tnb, es, rows, cols, spm, acc, im2col, x_all, bufs, pack)
    assert _fit_tcb(*args) == linear_fit_tcb(*args)


def test_a_huge_layer_is_not_built_once_per_candidate():
    """conv 1 8 1000000 8 8 3 3 searched for minutes (a height loop over a million rows, then 20 programs of 35 K
    instructions built and priced); now the tallest tile is a binary search and the best rough candidate wins."""
    arch = load_arch("edge16")
    cs = ConvShape(1, 8, 1_000_000, 8, 8, 3, 3)
    t0 = time.perf_counter()
    t = search_conv_tiling(cs, DType.I8, arch)
    assert time.perf_counter() - t0 < 10
    assert conv_instructions(cs, t, 1, 16, 16, arch.spm.size) > PRICE_MAX
