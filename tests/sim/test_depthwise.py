"""Depthwise convolution on the vector unit (compiler/kernels/depthwise.py) equals numpy for any kernel, stride,
padding, dilation, channel multiplier and batch; concurrent runs equal serial ones bit for bit."""


import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from compiler.errors import CompileError, TilingError
from compiler.kernels.common.target import Target
from compiler.kernels.conv2d import ConvShape, conv2d, conv_reference
from compiler.kernels.depthwise import (
    DepthwiseTiling,
    choose_depthwise_tiling,
    depthwise2d,
    depthwise_inputs,
    pack_depthwise,
)
from isa import DmaCopy, DType, VecBinary
from isa.arch import load_arch
from npusim import simulate
from npusim.sim.simulator import region_array

PRESETS = {name: load_arch(name) for name in ("edge16", "dc128")}
EPS32 = float(np.finfo(np.float32).eps)


def _target(arch, spm: int | None = None, lanes: int | None = None) -> Target:
    """The target of ``arch`` with an SPM of ``spm`` bytes and ``lanes`` vector lanes, where given."""
    target = Target.of(arch.with_overrides([f"vector.lanes={lanes}"] if lanes else []))
    return target.with_spm(spm) if spm else target


def check(cs: ConvShape, dtype: DType, arch, spm: int | None = None, lanes: int | None = None,
          tiling: DepthwiseTiling | None = None, seed: int = 0):
    """Simulate concurrently and serially, compare the two bit for bit and Y with conv_reference."""
    prog = depthwise2d(cs, dtype, _target(arch, spm, lanes), tiling)
    inputs, x, w = depthwise_inputs(cs, dtype, seed)
    res = simulate(prog, arch, inputs)
    serial = simulate(prog, arch, inputs, serial=True)
    assert np.array_equal(res.outputs["Y"], serial.outputs["Y"])
    acc = DType.F32 if dtype.is_float else DType.I32
    y = region_array(res, "Y", acc, (cs.N, cs.OH, cs.OW, cs.K)).transpose(0, 3, 1, 2)
    ref = conv_reference(x, w, cs)
    if dtype.is_float:
        # products rounded once, R*S sequential f32 additions: within (R*S + 1) eps32 of sum |x||w|
        bound = (cs.R * cs.S + 1) * EPS32 * conv_reference(np.abs(x), np.abs(w), cs)
        assert (np.abs(y - ref) <= bound).all(), float(np.max(np.abs(y - ref) - bound))
    else:
        np.testing.assert_array_equal(y, ref)   # i64 products, exact i32 sums
    return prog, res


@settings(max_examples=30, deadline=None)
@given(N=st.integers(1, 2), C=st.integers(1, 64), H=st.integers(1, 20), W=st.integers(1, 20), R=st.integers(1, 5),
       S=st.integers(1, 5), stride=st.integers(1, 3), pad=st.integers(0, 2), dilation=st.integers(1, 2),
       mult=st.sampled_from([1, 1, 1, 2, 3]), dtype=st.sampled_from([DType.F32, DType.I8]), seed=st.integers(0, 999))
def test_random_depthwise_convs_match_numpy(N, C, H, W, R, S, stride, pad, dilation, mult, dtype, seed):
    assume(H + 2 * pad >= dilation * (R - 1) + 1 and W + 2 * pad >= dilation * (S - 1) + 1)
    cs = ConvShape(N, C, H, W, C * mult, R, S, stride, pad, dilation, groups=C)
    for arch in PRESETS.values():
        check(cs, dtype, arch, seed=seed)


@pytest.mark.parametrize("dtype", [DType.U8, DType.F16])
def test_other_operand_types(dtype):
    check(ConvShape(2, 24, 9, 7, 24, 3, 3, 1, 1, 1, 24), dtype, PRESETS["edge16"])


def test_pack_depthwise_layout():
    cs = ConvShape(1, 3, 5, 5, 6, 2, 3, groups=3)
    w = np.arange(6 * 2 * 3, dtype=np.float32).reshape(6, 1, 2, 3)
    packed = pack_depthwise(w, cs).reshape(2, 3, 6)
    for k in range(6):
        np.testing.assert_array_equal(packed[:, :, k], w[k, 0])
    with pytest.raises(CompileError, match="shape"):
        pack_depthwise(w[:, :, :1], cs)


def test_small_scratchpad_splits_channels_columns_and_streams_weights():
    # 4 KiB of SPM: the weights (9 x 80 f32) do not stay resident, the channels split into blocks of lanes=4 and the
    # output into row and column tiles
    arch = PRESETS["edge16"]
    cs = ConvShape(2, 40, 9, 11, 80, 3, 3, 1, 1, 1, 40)
    t = choose_depthwise_tiling(cs, DType.F32, _target(arch, 4096, 4))
    assert not t.resident and t.cb < cs.C and t.cb % 4 == 0 and (t.toh < cs.OH or t.tow < cs.OW)
    prog, _ = check(cs, DType.F32, arch, spm=4096, lanes=4)
    assert prog.config.spm == 4096
    check(cs, DType.I8, arch, spm=4096, lanes=4)


@pytest.mark.parametrize("tiling", [DepthwiseTiling(2, 3, 8, True), DepthwiseTiling(5, 4, 16, False),
                                    DepthwiseTiling(7, 7, 20, True)])
def test_explicit_tilings_and_multiplier_layouts(tiling):
    # mult = 3: toh <= 3 gives one [tow, kh, kw, cb, mult] instruction per output row, toh > 3 one per filter
    cs = ConvShape(1, 20, 8, 9, 60, 3, 2, 2, 2, 2, 20)
    prog, _ = check(cs, DType.I8, PRESETS["edge16"], tiling=tiling)
    vec = [i for i in prog.instrs if isinstance(i, VecBinary)]
    steps = -(-cs.C // tiling.cb) * -(-cs.OH // tiling.toh) * -(-cs.OW // tiling.tow)
    per_step = 3 if tiling.toh > 3 else tiling.toh
    assert len(vec) <= steps * per_step and all(len(i.shape) == 5 for i in vec)


def test_window_entirely_in_padding():
    # H = W = 1 with pad 2 and stride 3: some output pixels only see padding (their window is filled, not loaded)
    check(ConvShape(1, 5, 1, 1, 5, 1, 1, 3, 2, 1, 5), DType.F32, PRESETS["edge16"])
    check(ConvShape(2, 3, 2, 3, 6, 2, 2, 3, 2, 2, 3), DType.I8, PRESETS["dc128"])


def test_errors():
    edge = PRESETS["edge16"]
    with pytest.raises(TilingError, match="no depthwise tiling"):
        depthwise2d(ConvShape(1, 64, 8, 8, 64, 5, 5, pad=2, groups=64), DType.F32, _target(edge, 1024))
    with pytest.raises(TilingError, match="does not fit"):
        depthwise2d(ConvShape(1, 64, 8, 8, 64, 3, 3, pad=1, groups=64), DType.F32, _target(edge, 1 << 16),
                    tiling=DepthwiseTiling(8, 8, 64, True))
    with pytest.raises(CompileError, match="groups == C"):
        depthwise2d(ConvShape(1, 8, 8, 8, 8, 3, 3, groups=4), DType.F32, _target(edge, 1 << 16))
    with pytest.raises(CompileError, match="operands"):
        depthwise2d(ConvShape(1, 8, 8, 8, 8, 3, 3, groups=8), DType.I16, _target(edge, 1 << 16))


@pytest.mark.parametrize("preset", ["edge16", "dc128"])
def test_mobilenetv2_layer(preset):
    # MobileNetV2's 56x56x144 stride-2 depthwise 3x3: one weight load, then per step one window load, one vector
    # instruction and one store; far fewer cycles than the grouped matrix-unit lowering (one k = n = 1 group per
    # matmul). How fast it simulates is bench/'s business, not a test's.
    arch = PRESETS[preset]
    cs = ConvShape(1, 144, 56, 56, 144, 3, 3, stride=2, pad=1, groups=144)
    prog = depthwise2d(cs, DType.F32, Target.of(arch))
    res = simulate(prog, arch, timing_only=True)
    t = choose_depthwise_tiling(cs, DType.F32, Target.of(arch))
    steps = -(-cs.C // t.cb) * -(-cs.OH // t.toh) * -(-cs.OW // t.tow)
    assert t.resident and t.cb == cs.C
    assert len(prog.instrs) == 1 + 3 * steps + 1 <= 200
    assert sum(isinstance(i, VecBinary) for i in prog.instrs) == steps
    assert sum(isinstance(i, DmaCopy) for i in prog.instrs) == 1 + 2 * steps
    assert res.cycles < simulate(prog, arch, timing_only=True, serial=True).cycles   # loads overlap compute
    grouped = conv2d(cs, DType.F32, Target.of(arch))
    assert 10 * res.cycles < simulate(grouped, arch, timing_only=True).cycles
