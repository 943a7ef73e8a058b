"""Pixel packing (ConvTiling.pack): P output pixels per array row with block-diagonal weights equals numpy for every
kind of convolution and epilogue it applies to, streams P times fewer rows per weight tile, and the search uses it
where channels fill at most half of the array."""

from dataclasses import replace

import numpy as np
import pytest

from compiler.kernels.common.target import Target
from compiler.kernels.conv2d import (
    ConvShape,
    ConvTiling,
    Epilogue,
    TilingError,
    conv2d,
    conv_inputs,
    conv_reference,
    pack_weights,
    search_conv_tiling,
)
from isa import DType, MatMul
from isa.arch import load_arch
from isa.cost import mxu_cycles
from npusim import simulate
from npusim.sim.simulator import region_array

EDGE = load_arch("edge16")   # 16 x 16 array: K <= 8 packs 2 pixels, K <= 4 packs 4


def _run(cs: ConvShape, t: ConvTiling, dtype: DType, ep: Epilogue | None = None, extra: dict | None = None,
         seed: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Simulate ``cs`` with tiling ``t`` on edge16; (Y as NHWC, NCHW input, OIHW weights)."""
    ep = ep or Epilogue()
    p = conv2d(cs, dtype, Target.of(EDGE), t, epilogue=ep)
    assert any(isinstance(i, MatMul) and i.n == t.pack * cs.K for i in p.instrs)   # the packed outputs side by side
    inputs, x, w = conv_inputs(cs, dtype, 16, 16, seed, t.im2col, t.pack)
    yt = ep.out or (DType.F32 if dtype.is_float else DType.I32)
    y = region_array(simulate(p, EDGE, {**inputs, **(extra or {})}), "Y", yt, (cs.N, cs.OH, cs.OW, cs.K))
    return y, x, w


@pytest.mark.parametrize("cs,t,dtype", [
    (ConvShape(2, 5, 7, 8, 6, 1, 1), ConvTiling(3, 4, pack=2), DType.I8),                         # 1x1, ragged rows
    (ConvShape(1, 5, 9, 16, 6, 1, 1, stride=2), ConvTiling(4, 8, pack=2), DType.I8),              # subsampled 1x1
    (ConvShape(1, 4, 6, 8, 8, 3, 3, pad=1), ConvTiling(3, 8, pack=2), DType.I8),                  # 3x3, padding
    (ConvShape(1, 4, 6, 8, 4, 3, 3, pad=1), ConvTiling(2, 8, pack=4), DType.I8),                  # 4 pixels a row
    (ConvShape(1, 12, 6, 12, 8, 3, 3, pad=1), ConvTiling(3, 4, tcb=1, pack=2), DType.I8),         # 24 rows: 2 steps
    (ConvShape(1, 3, 6, 10, 6, 3, 3, pad=2, dilation=2), ConvTiling(2, 4, pack=2), DType.F32),    # dilation 2
    (ConvShape(1, 3, 20, 20, 8, 7, 7, 2, 3), ConvTiling(3, 6, im2col=True, pack=2), DType.F32),   # stem-like im2col
    (ConvShape(1, 3, 20, 20, 8, 7, 7, 2, 3), ConvTiling(4, 10, im2col=True, pack=2), DType.F16),
])
def test_packed_conv_matches_numpy(cs, t, dtype):
    y, x, w = _run(cs, t, dtype)
    ref = conv_reference(x, w, cs).transpose(0, 2, 3, 1)
    if dtype.is_float:
        np.testing.assert_allclose(y, ref, rtol=1e-3 if dtype is DType.F16 else 1e-5, atol=1e-3)
    else:
        assert (y == ref).all()


def test_packed_conv_with_bias_relu_and_residual():
    cs, t = ConvShape(1, 4, 6, 8, 8, 3, 3, pad=1), ConvTiling(3, 8, pack=2)
    rng = np.random.default_rng(5)
    bias = rng.integers(-3000, 3000, cs.K).astype(np.int32)
    res = rng.integers(-3000, 3000, (1, cs.OH, cs.OW, cs.K)).astype(np.int32)
    y, x, w = _run(cs, t, DType.I8, Epilogue(bias=True, act="relu"), {"Bias": bias})
    conv = conv_reference(x, w, cs).transpose(0, 2, 3, 1)
    assert (y == np.maximum(conv + bias, 0)).all() and (conv + bias < 0).any()
    y, *_ = _run(cs, t, DType.I8, Epilogue(bias=True, act="relu", residual=True), {"Bias": bias, "R": res})
    assert (y == np.maximum(conv + res + bias, 0)).all()


def test_packed_conv_with_int8_requantizing_epilogue():
    # QLinearConv's epilogue: (acc + bias) in f32 times the per-channel scale, round half to even, + zero point,
    # saturated to int8 (the scale makes some outputs saturate)
    cs, t = ConvShape(1, 6, 5, 8, 8, 3, 3, pad=1), ConvTiling(5, 4, pack=2)
    rng = np.random.default_rng(7)
    bias = rng.integers(-2000, 2000, cs.K).astype(np.int32)
    scale = rng.uniform(0.002, 0.02, cs.K).astype(np.float32)
    y, x, w = _run(cs, t, DType.I8, Epilogue(bias=True, out=DType.I8, zp=3), {"Bias": bias, "Scale": scale})
    acc = (conv_reference(x, w, cs).transpose(0, 2, 3, 1) + bias).astype(np.float32)
    want = np.clip(np.rint(acc * scale) + 3, -128, 127)
    assert (y == want).all() and ((want == 127).any() or (want == -128).any())


def test_pack_weights_are_block_diagonal():
    # 2 copies of the 3 x 5 (C x K) block on the diagonal of one 6 x 10 tile in a 16 x 16 slot, zeros elsewhere
    cs = ConvShape(1, 3, 4, 4, 5, 1, 1)
    w = np.arange(1, 16, dtype=np.int8).reshape(5, 3, 1, 1)
    tile = pack_weights(w, cs, 16, 16, pack=2)[: 6 * 10].reshape(6, 10)
    blk = w[:, :, 0, 0].T
    assert (tile[:3, :5] == blk).all() and (tile[3:, 5:] == blk).all()
    assert not tile[:3, 5:].any() and not tile[3:, :5].any()


def test_packed_stream_is_halved_on_the_matrix_unit():
    # layer1's 3x3 64->64 conv on dc128, 8-row tiles: per tile one mxu.mm over 9 taps (9 folds of the 128 x 128
    # block-diagonal tile) streaming s = 8 * 56 / 2 rows: R + s + 8 * max(s, R) + R + C - 2 cycles (docs/timing.md)
    arch = load_arch("dc128")
    cs = ConvShape(1, 64, 56, 56, 64, 3, 3, pad=1)
    p = conv2d(cs, DType.F32, Target.of(arch), ConvTiling(8, 56, pack=2))
    mms = [i for i in p.instrs if isinstance(i, MatMul)]
    s = 8 * 56 // 2
    assert len(mms) == 7 and all((mm.m, mm.k, mm.n) == (28, 128, 128) for mm in mms)
    assert sum(mxu_cycles(mm, arch) for mm in mms) == 7 * (128 + s + 8 * max(s, 128) + 128 + 128 - 2)


def test_search_packs_small_channel_convs():
    arch = load_arch("dc128")
    cs = ConvShape(1, 64, 56, 56, 64, 3, 3, pad=1)      # ResNet-50 layer1.0.conv2
    t = search_conv_tiling(cs, DType.F32, Target.of(arch), Epilogue(bias=True, act="relu"))
    assert t.pack == 2
    packed, unpacked = (simulate(conv2d(cs, DType.F32, Target.of(arch), t_), arch,
                                 timing_only=True).cycles for t_ in (t, replace(t, pack=1)))
    assert 1.25 * packed < unpacked
    wide = ConvShape(1, 64, 56, 56, 96, 3, 3, pad=1)
    assert search_conv_tiling(wide, DType.F32, Target.of(arch)).pack == 1   # 2 * 96 > 128


@pytest.mark.parametrize("cs,t", [
    (ConvShape(1, 4, 6, 8, 8, 3, 3, pad=1), ConvTiling(3, 8, pack=4)),                # 4 * 8 > 16 columns
    (ConvShape(1, 4, 6, 8, 8, 3, 3, pad=1, groups=2), ConvTiling(3, 8, pack=2)),      # groups
    (ConvShape(1, 4, 9, 9, 8, 3, 3, stride=2), ConvTiling(2, 4, pack=2)),             # strided window
    (ConvShape(1, 4, 6, 7, 8, 1, 1), ConvTiling(3, 4, pack=2)),                       # last column tile 3 wide
])
def test_unpackable_tilings_are_refused(cs, t):
    with pytest.raises(TilingError, match="use pack=1"):
        conv2d(cs, DType.I8, Target.of(EDGE), t)


def test_model_lowering_packs_and_matches_onnxruntime():
    # Conv (3x3, 8 -> 8) + bias + ReLU in an ONNX graph on edge16: the search packs 2 pixels per array row and the
    # model lowering binds the block-diagonal weights that go with it
    from compiler.frontend.builder import GraphBuilder
    from npusim.app.driver import run_model

    rng = np.random.default_rng(3)
    b = GraphBuilder("packed")
    x = b.input("x", (1, 8, 16, 16))
    w = b.const("w", (rng.standard_normal((8, 8, 3, 3)) * 0.3).astype(np.float32))
    b.output(b.relu(b.conv(x, w, b.const("bias", rng.standard_normal(8).astype(np.float32)), pads=1)))
    _, res, _, report = run_model(b.build(), EDGE, validate=True)
    assert all(v["ok"] for v in report["validation"].values()), report["validation"]
    assert any(isinstance(i, MatMul) and (i.m, i.n) == (8, 16) for i in res.program.instrs)
