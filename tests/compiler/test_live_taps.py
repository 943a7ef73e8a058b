"""A convolution whose dilation exceeds its map drops the filter taps that read only padding
(``compiler.kernels.conv2d.live_taps``): the smaller convolution gives the same values (exact, in integers), its
cycles are never more than the full filter's, and DeepLabV3's ASPP form becomes the 1x1 convolution of its centre
tap."""


import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from compiler.kernels.common.target import Target
from compiler.kernels.conv2d import ConvShape, conv2d, conv_reference, live_taps, search_conv_tiling
from isa import DType
from isa.arch import load_arch
from npusim import simulate


def _taps_read(cs: ConvShape, axis: int) -> list[bool]:
    """Per tap of ``axis`` (0 rows, 1 columns): whether it reads an input element at some output."""
    size, k, s, d, lo, out = ((cs.H, cs.R, cs.stride[0], cs.dilation[0], cs.pad[0], cs.OH) if axis == 0 else
                              (cs.W, cs.S, cs.stride[1], cs.dilation[1], cs.pad[1], cs.OW))
    return [any(0 <= o * s + r * d - lo < size for o in range(out)) for r in range(k)]


@settings(max_examples=200, deadline=None)
@given(H=st.integers(1, 9), W=st.integers(1, 9), R=st.integers(1, 4), S=st.integers(1, 4),
       dh=st.integers(1, 12), dw=st.integers(1, 12), sh=st.integers(1, 3), sw=st.integers(1, 3),
       pads=st.tuples(*[st.integers(0, 30)] * 4), seed=st.integers(0, 99))
def test_the_smaller_convolution_is_exact(H, W, R, S, dh, dw, sh, sw, pads, seed):
    try:
        cs = ConvShape(1, 3, H, W, 2, R, S, (sh, sw), pads, (dh, dw))
    except Exception:
        assume(False)
    small, rows, cols = live_taps(cs)
    rng = np.random.default_rng(seed)
    x = rng.integers(-9, 10, (1, 3, H, W))
    w = rng.integers(-9, 10, (2, 3, R, S))
    assert (small.OH, small.OW) == (cs.OH, cs.OW)
    assert min(small.pad) >= 0 and small.R == rows.stop - rows.start and small.S == cols.stop - cols.start
    np.testing.assert_array_equal(conv_reference(x, w[:, :, rows, cols], small), conv_reference(x, w, cs))
    # what is dropped read only padding; what is kept at either end reads data or its pad does not cover it
    for axis, keep in ((0, rows), (1, cols)):
        read = _taps_read(cs, axis)
        assert not any(read[:keep.start]) and not any(read[keep.stop:])
        assert keep.stop > keep.start


def test_aspp_on_an_8x8_map_is_its_centre_tap():
    for rate in (12, 24, 36):
        cs = ConvShape(1, 64, 8, 8, 32, 3, 3, 1, rate, rate)
        small, rows, cols = live_taps(cs)
        assert small == ConvShape(1, 64, 8, 8, 32, 1, 1) and (rows, cols) == (slice(1, 2), slice(1, 2))
    cs = ConvShape(1, 64, 8, 8, 32, 3, 3, 1, 6, 6)   # rate 6 on an 8x8 map: every tap touches data
    assert live_taps(cs)[0] is cs


def test_a_pad_that_does_not_cover_a_dead_tap_keeps_it():
    # tap 0 reads rows -30 and -29 only, tap 1 rows 6 and 7, tap 2 rows 42 and 43: tap 2 goes (the bottom pad of 36
    # covers it), tap 0 stays (dropping it would need a top pad of -6, a crop)
    cs = ConvShape(1, 2, 8, 1, 2, 3, 1, 1, (30, 0, 36, 0), (36, 1))
    assert cs.OH == 2 and _taps_read(cs, 0) == [False, True, False]
    small, rows, cols = live_taps(cs)
    assert (rows, cols) == (slice(0, 2), slice(0, 1))
    assert (small.R, small.pad, small.dilation, small.OH) == (2, (30, 0, 0, 0), (36, 1), 2)


CYCLE_CASES = [ConvShape(1, 16, 6, 6, 16, 3, 3, 1, (7, 7, 3, 3), 7),   # 6x6, rate 7: taps 1-2 of each axis
               ConvShape(1, 32, 4, 4, 32, 3, 3, 1, 4, 4),      # 4x4, rate 4: the centre tap alone
               ConvShape(1, 8, 5, 7, 24, 3, 3, 2, (6, 1, 6, 1), (6, 1)),   # rows only, stride 2
               ConvShape(2, 12, 3, 9, 12, 3, 3, 1, 5, 5, groups=3)]        # grouped, batch 2


@pytest.mark.parametrize("cs", CYCLE_CASES, ids=lambda cs: f"{cs.H}x{cs.W}-{cs.text.replace(' ', '_')}")
@pytest.mark.parametrize("preset", ["edge16", "mid32"])
def test_dropping_taps_never_costs_cycles(cs, preset):
    arch = load_arch(preset)
    target = Target.of(arch)
    small, _, _ = live_taps(cs)
    assert small.R * small.S < cs.R * cs.S

    def cycles(c: ConvShape) -> int:
        return simulate(conv2d(c, DType.F32, target, search_conv_tiling(c, DType.F32, target)), arch,
                        timing_only=True).cycles

    assert cycles(small) <= cycles(cs)
