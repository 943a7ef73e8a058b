"""Pooling of any form (compiler.kernels.vector.pooling.pool2d) against a numpy reference that counts as onnxruntime
does: any window, per-axis strides and dilations, four pads (some wider than the DMA's 15), ceil_mode,
count_include_pad; max in f32 and int8 (exact), average in f32. Also the halo loads
(compiler.kernels.common.halo.padded_load) that split wide padding."""

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from compiler.frontend.canonical import window_out
from compiler.kernels.common.halo import padded_load
from compiler.kernels.common.target import Target
from compiler.kernels.vector.pooling import avgpool_counts, pool2d
from isa import DmaCopy, DmaFill, DType, Space, View
from isa.arch import load_arch
from isa.instructions import MAX_PAD
from npusim import simulate
from npusim.sim.simulator import region_array
from tests.compiler.util import model, ort_run, vi

ARCH = load_arch("edge16")


def pool_reference(kind: str, x: np.ndarray, k, s, p, d, ceil: bool, include: bool) -> np.ndarray:
    """NHWC pooling, one output position at a time: the max of the window's positions inside the input, or their
    sum over the count of positions inside the input (or, with ``include``, inside the padded input)."""
    N, H, W, C = x.shape
    OH, OW = window_out(H, k[0], s[0], p[0], p[2], d[0], ceil), window_out(W, k[1], s[1], p[1], p[3], d[1], ceil)
    y = np.zeros((N, OH, OW, C), np.float64)
    for oh in range(OH):
        for ow in range(OW):
            hs = [oh * s[0] - p[0] + i * d[0] for i in range(k[0])]
            ws = [ow * s[1] - p[1] + j * d[1] for j in range(k[1])]
            hin, win = [h for h in hs if 0 <= h < H], [w for w in ws if 0 <= w < W]
            window = x[:, hin][:, :, win].astype(np.float64)
            if kind == "max":
                y[:, oh, ow] = window.max((1, 2))
            else:
                count = len(hin) * len(win) if not include else \
                    sum(-p[0] <= h < H + p[2] for h in hs) * sum(-p[1] <= w < W + p[3] for w in ws)
                y[:, oh, ow] = window.sum((1, 2)) / count
    return y


@st.composite
def pool_forms(draw):
    k = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    d = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    p = [draw(st.integers(0, (k[i % 2] - 1) * d[i % 2])) for i in range(4)]   # every window keeps an input position
    s = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    H = draw(st.integers(max(1, (k[0] - 1) * d[0] + 1 - p[0] - p[2]), 12))
    W = draw(st.integers(max(1, (k[1] - 1) * d[1] + 1 - p[1] - p[3]), 12))
    return k, s, tuple(p), d, H, W, draw(st.booleans()), draw(st.booleans())


@settings(max_examples=40, deadline=None)
@given(form=pool_forms(), kind=st.sampled_from(["max", "avg", "max8"]), C=st.integers(1, 20), seed=st.integers(0, 99))
def test_random_pool_forms_match_numpy(form, kind, C, seed):
    k, s, p, d, H, W, ceil, include = form
    OH, OW = window_out(H, k[0], s[0], p[0], p[2], d[0], ceil), window_out(W, k[1], s[1], p[1], p[3], d[1], ceil)
    assume((avgpool_counts(H, W, k, s, p, d, (OH, OW), False) > 0).all())   # (a dilated window can skip the input)
    rng = np.random.default_rng(seed)
    dtype = DType.I8 if kind == "max8" else DType.F32
    x = rng.integers(-128, 128, (2, H, W, C)).astype(np.int8) if dtype is DType.I8 else \
        rng.standard_normal((2, H, W, C)).astype(np.float32)
    prog = pool2d(kind[:3], 2, H, W, C, k, s, p, dtype, Target.of(ARCH), include, dilation=d, ceil=ceil)
    inputs = {"X": x}
    counts = avgpool_counts(H, W, k, s, p, d, (OH, OW), include)
    if any(r.name == "RC" for r in prog.regions):
        inputs["RC"] = (1 / counts).astype(np.float32)
    else:   # a count the same everywhere is an immediate
        assert kind != "avg" or (counts == counts.flat[0]).all()
    got = region_array(simulate(prog, ARCH, inputs), "Y", dtype, (2, OH, OW, C)).astype(np.float64)
    want = pool_reference(kind[:3], x, k, s, p, d, ceil, include)
    if kind == "avg":
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    else:
        assert (got == want).all()


@pytest.mark.parametrize("k,s,p,d,ceil,include", [((3, 3), (2, 2), (1, 1, 1, 1), (1, 1), True, True),
                                                   ((3, 2), (2, 3), (0, 1, 2, 0), (1, 1), True, False),
                                                   ((3, 3), (2, 2), (1, 2, 1, 0), (2, 1), True, True),
                                                   ((2, 3), (1, 2), (1, 1, 0, 2), (2, 1), False, True)])
def test_pool_reference_matches_onnxruntime(k, s, p, d, ceil, include):
    # the reference's counts (ceil_mode windows past the end padding, count_include_pad, dilations) are
    # onnxruntime's
    from onnx import helper

    x = np.random.default_rng(2).standard_normal((1, 3, 9, 8)).astype(np.float32)
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=list(k), strides=list(s), pads=list(p),
                            dilations=list(d), ceil_mode=int(ceil), count_include_pad=int(include))
    (y,) = ort_run(model([node], [vi("x", [1, 3, 9, 8])], [vi("y", None)], 19), {"x": x})
    want = pool_reference("avg", x.transpose(0, 2, 3, 1), k, s, p, d, ceil, include).transpose(0, 3, 1, 2)
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


def test_wide_padding_is_filled_in_strips_before_the_copy():
    # pads of 20 and 17 exceed the DMA's 15: each becomes a dma.ld.fill strip, the copy keeps the narrow ones; the
    # first instruction carries the waits, the last the signals; a box wholly in the padding is one fill
    from isa import SemOp

    dst = View(Space.SPM, 0, DType.F32, (30 * 8 * 4, 8 * 4, 4))
    src = View(Space.DRAM, 0, DType.F32, (10 * 8 * 4, 8 * 4, 4), "X")
    loads = padded_load((40, 30, 8), dst, src, ((20, 3), (17, 2)), -1.0, waits=(SemOp("a"),), signals=(SemOp("b"),))
    assert [type(i) for i in loads] == [DmaFill, DmaFill, DmaCopy]
    assert [i.shape for i in loads] == [(20, 30, 8), (20, 17, 8), (20, 13, 8)]
    assert [i.dst.base for i in loads] == [0, 20 * 30 * 32, 20 * 30 * 32 + 17 * 32]
    assert [(q.dim, q.lo, q.hi) for q in loads[-1].pad] == [(0, 0, 3), (1, 0, 2)]
    assert max(q.hi for q in loads[-1].pad) <= MAX_PAD and loads[-1].src_shape == (17, 11, 8)
    assert [w.name for w in loads[0].waits] == ["a"] and not loads[0].signals and not loads[-1].waits
    assert [w.name for w in loads[-1].signals] == ["b"]
    (fill,) = padded_load((4, 30, 8), dst, src, ((20, 0), (0, 0)), 0.0)
    assert isinstance(fill, DmaFill) and fill.shape == (4, 30, 8)


def test_an_average_of_dequantized_int8_divides_by_each_count():
    # divide=True (the pool follows a DequantizeLinear): integer-valued sums are exact in f32, and the vector unit
    # divides each by its count (region CNT) as onnxruntime does, so the result is bit for bit sum / count
    x = np.random.default_rng(3).integers(-128, 128, (1, 7, 9, 5)).astype(np.float32)
    k, s, p = (3, 2), (2, 2), (1, 0, 1, 1)
    prog = pool2d("avg", 1, 7, 9, 5, k, s, p, DType.F32, Target.of(ARCH), divide=True, ceil=True)
    OH, OW = window_out(7, 3, 2, 1, 1, 1, True), window_out(9, 2, 2, 0, 1, 1, True)
    counts = avgpool_counts(7, 9, k, s, p, (1, 1), (OH, OW), False)
    assert [r.name for r in prog.regions] == ["X", "Y", "CNT"] and len(set(counts.ravel())) > 1
    got = region_array(simulate(prog, ARCH, {"X": x, "CNT": counts}), "Y", DType.F32, (1, OH, OW, 5))
    sums = pool_reference("avg", x, k, s, p, (1, 1), True, False) * counts[None, :, :, None]
    assert (got == (sums.astype(np.float32) / counts[None, :, :, None])).all()
