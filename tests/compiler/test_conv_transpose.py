"""ConvTranspose by phase splitting (compiler/kernels/conv_transpose2d.py): the float64 scatter reference against the
ONNX definition, the phase tables against the reference, the weights as the same bytes, ONNX's pad formula, and the
programs (split and swell_spm) simulated against the reference on the three presets."""

import itertools

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from compiler.errors import CompileError, TilingError
from compiler.kernels.common.target import Target
from compiler.kernels.conv2d import conv_reference
from compiler.kernels.conv_transpose2d import (
    ConvTransposeShape,
    TransposeTiling,
    axis_phases,
    conv_transpose2d,
    conv_transpose_reference,
    pack_transposed_weights,
    phase_tap_sums,
    swell_shape,
    swell_weights,
    tapless,
    transpose_pads,
)
from isa import DType
from isa.arch import load_arch, presets_by_size
from npusim.app.driver import run_conv_transpose

RNG = np.random.default_rng(3)


def _definition(x: np.ndarray, w: np.ndarray, ct: ConvTransposeShape) -> np.ndarray:
    """ONNX's definition term by term (docs/perception.md#convtranspose-semantics):
    Y[n, g*Kg + m, oh, ow] += X[n, c, i, j] * W[c, m, kh, kw] whenever ``i*s + k*d - p_b`` lands inside the output."""
    y = np.zeros((ct.N, ct.K, ct.OH, ct.OW))
    (sh, sw), (dh, dw), (pt, pl, _, _) = ct.stride, ct.dilation, ct.pad
    for n, c, i, j, m, kh, kw in itertools.product(range(ct.N), range(ct.C), range(ct.H), range(ct.W), range(ct.Kg),
                                                   range(ct.R), range(ct.S)):
        oh, ow = i * sh + kh * dh - pt, j * sw + kw * dw - pl
        if 0 <= oh < ct.OH and 0 <= ow < ct.OW:
            y[n, c // ct.Cg * ct.Kg + m, oh, ow] += x[n, c, i, j] * w[c, m, kh, kw]
    return y


def _by_phases(x: np.ndarray, w: np.ndarray, ct: ConvTransposeShape) -> np.ndarray:
    """Y gathered phase by phase from :func:`axis_phases` (docs/perception.md#phase-splitting): output
    ``o = first + s*j`` of a phase sums ``X[(o + p_b - phase)/s + a_k] * W[k]`` over the phase's taps, X zero outside
    the input."""
    y = np.zeros((ct.N, ct.K, ct.OH, ct.OW))
    xp = np.zeros((ct.N, ct.C, ct.H + 2 * (ct.R * ct.dilation[0] + 2), ct.W + 2 * (ct.S * ct.dilation[1] + 2)))
    oh0, ow0 = ct.R * ct.dilation[0] + 2, ct.S * ct.dilation[1] + 2
    xp[:, :, oh0:oh0 + ct.H, ow0:ow0 + ct.W] = x
    for a, b in itertools.product(ct.phases_h, ct.phases_w):
        oh = a.first + ct.stride[0] * np.arange(a.count)
        ow = b.first + ct.stride[1] * np.arange(b.count)
        th, tw = (oh + ct.pad[0] - a.phase) // ct.stride[0], (ow + ct.pad[1] - b.phase) // ct.stride[1]
        for (kh, ah), (kw, aw) in itertools.product(zip(a.taps, a.offsets), zip(b.taps, b.offsets)):
            xs = xp[:, :, oh0 + th + ah][:, :, :, ow0 + tw + aw]
            for g in range(ct.groups):
                cs, ks = slice(g * ct.Cg, (g + 1) * ct.Cg), slice(g * ct.Kg, (g + 1) * ct.Kg)
                y[:, ks, oh[:, None], ow[None, :]] += np.einsum("nchw,cm->nmhw", xs[:, cs], w[cs, :, kh, kw])
    return y


@st.composite
def shapes(draw) -> ConvTransposeShape:
    """Small transposed convolutions: any strides, dilations, groups, pads up to the kernel's reach and
    output_padding below max(stride, dilation) (ONNX's bound), the output at least one pixel."""
    i = st.integers
    g, n, h, w, r, s = draw(i(1, 2)), draw(i(1, 2)), draw(i(1, 5)), draw(i(1, 5)), draw(i(1, 4)), draw(i(1, 4))
    (sh, sw), (dh, dw) = draw(st.tuples(i(1, 3), i(1, 3))), draw(st.tuples(i(1, 2), i(1, 2)))
    reach = ((r - 1) * dh, (s - 1) * dw)
    pads = tuple(draw(i(0, reach[k % 2])) for k in range(4))
    op = (draw(i(0, max(sh, dh) - 1)), draw(i(0, max(sw, dw) - 1)))
    try:
        return ConvTransposeShape(n, g * draw(i(1, 3)), h, w, g * draw(i(1, 3)), r, s, (sh, sw), pads, (dh, dw), op, g)
    except CompileError:   # the pads crop the whole output
        assume(False)


@settings(max_examples=60, deadline=None)
@given(shapes())
def test_reference_and_phase_tables_match_the_definition(ct):
    x = RNG.standard_normal((ct.N, ct.C, ct.H, ct.W))
    w = RNG.standard_normal((ct.C, ct.Kg, ct.R, ct.S))
    want = _definition(x, w, ct)
    np.testing.assert_allclose(conv_transpose_reference(x, w, ct), want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(_by_phases(x, w, ct), want, rtol=1e-12, atol=1e-12)
    # every output belongs to exactly one phase, and the phases use every tap exactly once
    for phases, s, k, out in ((ct.phases_h, ct.stride[0], ct.R, ct.OH), (ct.phases_w, ct.stride[1], ct.S, ct.OW)):
        assert sorted(p.first + s * j for p in phases for j in range(p.count)) == list(range(out))
        assert sorted(t for p in phases for t in p.taps) == list(range(k))


@pytest.mark.parametrize("size, k, s, d, pb, out, taps, offsets, first", [
    (5, 4, 2, 1, 1, 10, ((2, 0), (3, 1)), ((-1, 0), (-1, 0)), (1, 0)),     # k=4 s=2 p=1: two taps per phase
    (5, 3, 2, 1, 1, 10, ((2, 0), (1,)), ((-1, 0), (0,)), (1, 0)),          # k=3 s=2 p=1 op=1
    (4, 2, 2, 1, 0, 8, ((0,), (1,)), ((0,), (0,)), (0, 1)),                # k == s: one 1x1 tap per phase
    (4, 3, 2, 2, 0, 11, ((2, 1, 0), ()), ((-2, -1, 0), ()), (0, 1)),       # gcd(d, s) = 2: phase 1 bias-only
])
def test_axis_phases_by_hand(size, k, s, d, pb, out, taps, offsets, first):
    phases = axis_phases(size, k, s, d, pb, out)
    assert tuple(p.taps for p in phases) == taps
    assert tuple(p.offsets for p in phases) == offsets
    assert tuple(p.first for p in phases) == first


def test_tapless_phases_and_mac_ratio():
    assert tapless(ConvTransposeShape(1, 4, 4, 4, 4, 3, 3, 2, dilation=2))
    assert not tapless(ConvTransposeShape(1, 4, 4, 4, 4, 3, 3, 2, dilation=(1, 3)))
    # the swelled convolution does s_h * s_w times the split's MACs on the bench shapes (docs/perception.md)
    for ct, macs in ((ConvTransposeShape(1, 256, 90, 90, 256, 2, 2, 2), 2_123_366_400),
                     (ConvTransposeShape(1, 128, 100, 100, 128, 4, 4, 2, 1), 2_621_440_000),
                     (ConvTransposeShape(1, 128, 25, 25, 128, 3, 3, 2, 1, output_padding=1), 92_160_000)):
        assert ct.macs == macs and ct.swelled_macs == 4 * macs


def test_packed_weights_are_the_same_bytes_and_swelling_is_a_convolution():
    ct = ConvTransposeShape(1, 6, 4, 5, 9, 4, 3, (2, 3), (1, 0, 2, 1), (1, 2), (1, 0), 3)
    w = RNG.standard_normal((ct.C, ct.Kg, ct.R, ct.S)).astype(np.float32)
    wt = pack_transposed_weights(w, ct, 16, 16)
    assert np.array_equal(np.sort(wt[wt != 0]), np.sort(w[w != 0].ravel()))   # padding aside, a permutation
    # swell_dram's convolution: the zero-inserted, padded input with the rotated kernel
    x = RNG.standard_normal((ct.N, ct.C, ct.H, ct.W))
    cs = swell_shape(ct)
    xs = np.zeros((cs.N, cs.C, cs.H, cs.W))
    lead = [(ct.R - 1) * ct.dilation[0] - ct.pad[0], (ct.S - 1) * ct.dilation[1] - ct.pad[1]]
    for i, j in itertools.product(range(ct.H), range(ct.W)):
        h, v = i * ct.stride[0] + lead[0], j * ct.stride[1] + lead[1]
        if 0 <= h < cs.H and 0 <= v < cs.W:
            xs[:, :, h, v] = x[:, :, i, j]
    np.testing.assert_allclose(conv_reference(xs, swell_weights(w, ct).astype(np.float64), cs),
                               conv_transpose_reference(x, w, ct), rtol=1e-9, atol=1e-9)


def test_phase_tap_sums():
    ct = ConvTransposeShape(1, 4, 3, 3, 6, 3, 3, 2, 1, groups=2)
    w = RNG.integers(-5, 5, (ct.C, ct.Kg, ct.R, ct.S))
    sums = phase_tap_sums(w, ct)
    # the sum over a phase's taps is that phase's response to an all-ones input, away from the borders
    y = conv_transpose_reference(np.ones((1, ct.C, ct.H, ct.W), np.int64), w, ct)
    for a, b in itertools.product(ct.phases_h, ct.phases_w):
        assert np.array_equal(y[0, :, a.first + 2, b.first + 2], sums[a.phase, b.phase])


def test_transpose_pads_follow_onnx():
    # total = s*(I-1) + op + (k-1)*d + 1 - out; SAME_UPPER puts the odd one at the end, the others at the start
    assert transpose_pads(5, 3, 2, 1, 0, 10, "SAME_UPPER") == (0, 1)
    assert transpose_pads(5, 3, 2, 1, 0, 10, "SAME_LOWER") == (1, 0)
    assert transpose_pads(5, 3, 2, 1, 0, 10, "NOTSET") == (1, 0)
    assert transpose_pads(5, 4, 2, 1, 0, 10, "SAME_UPPER") == (1, 1)
    with pytest.raises(CompileError, match="exceeds"):
        transpose_pads(5, 3, 2, 1, 0, 12, "NOTSET")


def test_bad_shapes_and_tilings_say_what():
    with pytest.raises(CompileError, match="must divide"):
        ConvTransposeShape(1, 6, 4, 4, 4, 3, 3, 2, groups=4)
    with pytest.raises(CompileError, match="crop the whole"):
        ConvTransposeShape(1, 4, 1, 1, 4, 1, 1, 1, pad=(1, 0, 1, 0))
    ct = ConvTransposeShape(1, 8, 4, 4, 8, 3, 3, 2, 1)
    target = Target.of(load_arch("edge16"))
    with pytest.raises(TilingError, match="tiles at most"):
        conv_transpose2d(ct, DType.F32, target, TransposeTiling(2, 100))
    with pytest.raises(CompileError, match="mode must be"):
        conv_transpose2d(ct, DType.F32, target, mode="swell_dram")


CASES = [ConvTransposeShape(1, 8, 5, 6, 12, 3, 3, 2, 1, output_padding=1),             # C-like
         ConvTransposeShape(1, 16, 4, 4, 16, 2, 2, 2),                                   # k == s
         ConvTransposeShape(2, 6, 5, 4, 9, 4, 3, (2, 3), (1, 0, 2, 1), (1, 2), (1, 0), 3),
         ConvTransposeShape(1, 4, 3, 5, 4, 3, 3, 2, dilation=2),                         # bias-only phases
         ConvTransposeShape(1, 40, 6, 7, 36, 4, 4, 2, 1)]                                # several channel blocks


@pytest.mark.parametrize("preset", presets_by_size())
def test_programs_match_the_reference(preset):
    arch = load_arch(preset)
    for (ct, mode), dtype in zip(itertools.product(CASES, ("split", "swell_spm")), itertools.cycle((DType.F32,
                                                                                                     DType.I8))):
        for dt in (dtype,) if mode == "swell_spm" else (DType.F32, DType.I8):
            result, v = run_conv_transpose(ct, dt, arch, mode=mode)
            assert v.ok, (ct, mode, dt, v)


def test_split_runs_the_useful_macs_and_beats_swelling():
    arch = load_arch("mid32")
    ct = ConvTransposeShape(1, 64, 12, 12, 64, 4, 4, 2, 1)
    split, v = run_conv_transpose(ct, DType.F32, arch)
    swell, w = run_conv_transpose(ct, DType.F32, arch, mode="swell_spm")
    assert v.ok and w.ok
    assert swell.macs == ct.swelled_macs
    # no tap multiplies an inserted zero: per axis 2 phases x 2 taps over the 13 coarse positions p = 1 spans (the
    # first and last half cropped at the store), against the 12 outputs per phase of ct.macs
    assert split.macs == ct.K * ct.C * (2 * 2 * 13) ** 2 == round(ct.macs * (13 / 12) ** 2)
    assert split.cycles < swell.cycles / 2
