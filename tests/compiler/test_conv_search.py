"""The convolution tiling search is bounded: the tallest tile and the channel blocks per step come from binary
searches equal to trying every value (the old loops, kept here as the oracle), and a layer too large to build every
candidate takes the best rough estimate."""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.kernels.common.target import Target
from compiler.kernels.conv2d import (
    PRICE_MAX,
    ConvShape,
    ConvTiling,
    TilingError,
    choose_conv_tiling,
    conv_instructions,
    conv_plan,
    fit_tcb,
    grouped,
    pack_allowed,
    rank_tilings,
    rough_cycles,
    search_conv_tiling,
    tiling_fits,
)
from isa import DType
from isa.arch import load_arch, presets_by_size
from tests.compiler.util import linear_fit_tcb


def linear_choose(cs, dtype, target):
    """choose_conv_tiling as it was: every block count, every height, from the top."""
    tow = min(cs.OW, target.max_rows)
    for tcb in range(-(-cs.Cg // target.rows), 0, -1):
        for toh in range(cs.OH, 0, -1):
            if tiling_fits(cs, ConvTiling(toh, tow, tcb), dtype.size, target.rows, target.cols, target.spm, target.acc):
                return ConvTiling(toh, tow, tcb)
    return None


@st.composite
def convs(draw):
    groups = draw(st.sampled_from((1, 1, 2, 4)))
    c = groups * draw(st.integers(1, 40))
    k = groups * draw(st.integers(1, 40))
    r = draw(st.integers(1, 5))
    stride, dilation = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    pad = draw(st.integers(0, 2))
    h, w = (draw(st.integers(dilation * (r - 1) + 1, 60)) for _ in range(2))
    return ConvShape(draw(st.integers(1, 2)), c, h, w, k, r, r, stride, pad, dilation, groups)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(cs=convs(), rows=st.sampled_from((4, 8, 16)), cols=st.sampled_from((4, 8, 16)),
       spm=st.sampled_from((1024, 4096, 16384, 65536)), acc=st.sampled_from((1024, 4096, 65536)),
       es=st.sampled_from((1, 2, 4)), toh=st.integers(1, 8), tow=st.integers(1, 16), tnb=st.integers(1, 3),
       im2col=st.booleans(), x_all=st.booleans(), bufs=st.sampled_from((1, 2)), pack=st.sampled_from((1, 2, 4)),
       gpack=st.sampled_from((1, 2, 4)))
def test_binary_searches_equal_trying_every_value(cs, rows, cols, spm, acc, es, toh, tow, tnb, im2col, x_all, bufs,
                                                  pack, gpack):
    dtype = {1: DType.I8, 2: DType.F16, 4: DType.F32}[es]
    target = replace(Target.of(load_arch("edge16")), rows=rows, cols=cols, max_rows=16, spm=spm, acc=acc)
    try:
        got = choose_conv_tiling(cs, dtype, target)
    except TilingError:
        got = None
    assert got == linear_choose(cs, dtype, target)
    gpack = gpack if cs.groups % gpack == 0 else 1
    t = ConvTiling(min(toh, cs.OH), min(tow, cs.OW), 1, tnb, x_all, bufs, im2col, pack, gpack)
    args = (cs, t, es, rows, cols, spm, acc)
    assert fit_tcb(*args) == linear_fit_tcb(*args)


def test_a_huge_layer_is_not_built_once_per_candidate(monkeypatch):
    """conv 1 8 1000000 8 8 3 3 searched for minutes (a height loop over a million rows, then 20 programs of 35 K
    instructions built and priced); now the tallest tile is a binary search and the best rough candidate wins
    without any candidate priced."""
    import compiler.kernels.conv2d

    def priced(*args, **kw):
        raise AssertionError("a candidate of a layer above PRICE_MAX instructions was priced")

    monkeypatch.setattr(compiler.kernels.conv2d, "conv_estimate", priced)
    arch = load_arch("edge16")
    cs = ConvShape(1, 8, 1_000_000, 8, 8, 3, 3)
    t = search_conv_tiling(cs, DType.I8, Target.of(arch))
    assert conv_instructions(cs, t, 1, 16, 16, arch.spm.size) > PRICE_MAX


@settings(max_examples=200, deadline=None, derandomize=True)
@given(cs=convs(), preset=st.sampled_from(presets_by_size()), spm_div=st.sampled_from((1, 8, 64)),
       es=st.sampled_from((1, 4)), gpack=st.sampled_from((1, 2, 4)))
def test_the_ranking_equals_rough_cycles_of_each_tilings_plan(cs, preset, spm_div, es, gpack):
    # rank_tilings' sums written out once per tiling are rough_cycles of the plan with the most blocks that fit
    # (fit_tcb), for every tiling and accumulator depth that fits, in the same order
    target = Target.of(load_arch(preset))
    spm = target.spm // spm_div
    gpack = gpack if cs.groups % gpack == 0 else 1
    gs = grouped(cs, gpack)
    tilings = sorted(((toh, tow, tnb, im2col, pack) for toh in {1, 2, -(-gs.OH // 3), gs.OH}
                      for tow in {1, -(-gs.OW // 2), gs.OW} for tnb in (1, 2, 4) for im2col in (False, True)
                      for pack in (1, 2, 4) if not im2col or gs.groups == 1 and gs.R * gs.S > 1), reverse=True)
    got = rank_tilings(gs, gpack, tilings, es, target, spm)
    want = []
    for toh, tow, tnb, im2col, pack in tilings:
        if not pack_allowed(gs, pack, tow, target.cols, im2col) or pack > 1 and tnb > 1:
            continue
        for x_all in (False, True) if not im2col and pack == 1 else (False,):
            t = ConvTiling(toh, tow, 1, tnb, x_all, 2, im2col, pack, gpack)
            tcb = fit_tcb(cs, t, es, target.rows, target.cols, spm, 1 << 62)
            for bufs in (2, 1) if tcb else ():
                t = replace(t, tcb=tcb, acc_bufs=bufs)
                p = conv_plan(cs, t, es, target.rows, target.cols, spm)
                if bufs * p.acc_tile <= target.acc:
                    want.append((rough_cycles(gs, t, p, target.arch), bufs,
                                 (toh, tow, tcb, tnb, x_all, bufs, im2col, pack, gpack)))
    assert got == want


def test_a_stem_no_full_width_direct_tile_fits_gets_an_im2col_or_narrower_tiling():
    """A 7x7/2 stem over C=3 on a 32x32 array with 256 KiB of SPM: a direct tile holds 49 taps of a 32x32 weight
    tile (200 KB, twice), so no full-width direct tile fits; the search still tries narrower tiles and im2col ones
    (it tried none, and the layer ran on the host). The model then runs wholly on the NPU and matches onnxruntime."""
    from compiler.frontend.builder import GraphBuilder, to_onnx
    from npusim.app.driver import run_model

    arch = load_arch("mid32").with_overrides(["spm.size=262144"])
    cs = ConvShape(1, 3, 224, 224, 64, 7, 7, 2, 3)
    with pytest.raises(TilingError):   # (else the case no longer tests the fallback)
        choose_conv_tiling(cs, DType.F32, Target.of(arch))
    t = search_conv_tiling(cs, DType.F32, Target.of(arch))
    assert t.im2col
    rng = np.random.default_rng(0)
    b = GraphBuilder("stem")
    x = b.input("x", (1, 3, 40, 40))
    b.output(b.conv(x, b.const("w", rng.standard_normal((64, 3, 7, 7)).astype(np.float32)), strides=2, pads=3))
    _, _, _, report = run_model(to_onnx(b.build()), arch, validate=True)
    assert not report["host_ops"] and all(c["ok"] for c in report["validation"].values())
