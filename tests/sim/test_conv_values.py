"""Direct convolution lowered to the ISA equals numpy for any kernel, stride, padding, dilation, groups and batch."""

from dataclasses import replace

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from compiler.kernels.common.target import Target
from compiler.kernels.conv2d import ConvShape, ConvTiling, conv2d, conv_inputs, conv_reference, search_conv_tiling
from isa import DType
from isa.arch import load_arch, presets_by_size
from npusim import simulate
from npusim.app.driver import run_conv


@pytest.mark.parametrize("preset", presets_by_size())
@pytest.mark.parametrize("dtype", [DType.I8, DType.F16])
def test_resnet_like_conv_on_every_preset(preset, dtype):
    cs = ConvShape(1, 24, 14, 14, 40, 3, 3, stride=1, pad=1)
    res, check = run_conv(cs, dtype, load_arch(preset))
    assert check.ok, check
    assert res.macs == cs.macs


@settings(max_examples=30, deadline=None)
@given(N=st.integers(1, 2), C=st.integers(1, 40), HW=st.integers(1, 12), K=st.integers(1, 40), R=st.integers(1, 4),
       stride=st.integers(1, 3), pad=st.integers(0, 3), dilation=st.integers(1, 2), groups=st.sampled_from([1, 2, 4]),
       depthwise=st.booleans(), dtype=st.sampled_from([DType.I8, DType.F16]), seed=st.integers(0, 999))
def test_random_convs_match_numpy(N, C, HW, K, R, stride, pad, dilation, groups, depthwise, dtype, seed):
    if depthwise:
        groups, K = C, C
    assume(C % groups == 0 and K % groups == 0 and HW + 2 * pad >= dilation * (R - 1) + 1)
    cs = ConvShape(N, C, HW, HW + 1, K, R, R, stride, pad, dilation, groups)
    assume(cs.OW >= 1)
    _, check = run_conv(cs, dtype, load_arch("edge16"), seed=seed)
    assert check.ok, check


def test_channel_reduction_split_across_steps():
    # edge16 cannot hold 3x3x256 weights twice: the reduction over input channels is split across steps that
    # accumulate into the same accumulator tile
    from compiler.kernels.conv2d import choose_conv_tiling

    arch = load_arch("edge16")
    cs = ConvShape(1, 256, 6, 6, 40, 3, 3, pad=1)
    t = choose_conv_tiling(cs, DType.F32, Target.of(arch))
    assert t.tcb < 16
    _, check = run_conv(cs, DType.F32, arch)
    assert check.ok, check
    _, check = run_conv(ConvShape(1, 100, 5, 5, 20, 3, 3, pad=1), DType.I8, arch.with_overrides(["spm.size=32768"]))
    assert check.ok, check


def test_conv_tiles_overlap_loads_and_compute():
    # several row tiles on one preset: the concurrent run beats the serial one
    arch = load_arch("edge16")
    cs = ConvShape(1, 32, 20, 20, 32, 3, 3, pad=1)
    p = conv2d(cs, DType.I8, Target.of(arch), ConvTiling(toh=4, tow=20, tcb=1))
    assert simulate(p, arch, timing_only=True).cycles < simulate(p, arch, timing_only=True, serial=True).cycles


def test_conv_cli(capsys):
    from npusim.app.cli import main

    code = main(["conv", "1", "8", "9", "9", "12", "3", "3", "--stride", "2", "--pad", "1", "--arch", "mid32"])
    out = capsys.readouterr().out
    assert code == 0 and "-> 5x5" in out and "validation against numpy (exact)" in out and out.rstrip().endswith("ok")
    assert main(["conv", "1", "3", "5", "5", "4", "7", "7"]) == 1
    assert "a 7x7 filter (dilation 1) does not fit the padded 5x5 input" in capsys.readouterr().err


@pytest.mark.parametrize("stride", [2, 3])
@pytest.mark.parametrize("dtype", [DType.I8, DType.F32])
def test_strided_1x1_conv_loads_only_the_pixels_it_uses(stride, dtype):
    # ResNet's downsampling 1x1 convs: the DMA reads every stride-th pixel, so the SPM tile is dense and the input
    # bytes read from DRAM are exactly the used pixels (K = 24 fits one column block, so X is read once)
    import math

    arch = load_arch("mid32")
    cs = ConvShape(1, 40, 13, 11, 24, 1, 1, stride=stride)
    res, check = run_conv(cs, dtype, arch)
    assert check.ok, check
    x_bytes = sum(math.prod(i.src_shape) * dtype.size for i in res.program.instrs
                  if getattr(i, "src", None) is not None and i.src.region == "X")
    assert x_bytes == cs.OH * cs.OW * cs.C * dtype.size


def _dram_read(program, region: str, es: int) -> int:
    """Bytes a program's DMAs read from DRAM region ``region``."""
    import math

    return sum(math.prod(i.src_shape) * es for i in program.instrs
               if getattr(i, "src", None) is not None and i.src.region == region)


@pytest.mark.parametrize("preset", presets_by_size())
def test_input_window_and_weights_are_loaded_once(preset):
    # 4 output-channel blocks per tile, several row tiles: the window is read once for all blocks (no halo: 1x1),
    # and the weights, which all fit the SPM, once for the whole convolution
    arch = load_arch(preset)
    r, c = arch.matrix.rows, arch.matrix.cols
    cs = ConvShape(1, 2 * r, 12, 10, 4 * c, 1, 1)
    t = ConvTiling(toh=3, tow=10, tcb=2, tnb=4)
    p = conv2d(cs, DType.I8, Target.of(arch), t)
    assert _dram_read(p, "X", 1) == cs.H * cs.W * cs.C
    assert _dram_read(p, "Wt", 1) == 4 * 2 * r * c
    stores = [i for i in p.instrs if getattr(i, "dst", None) is not None and i.dst.region == "Y"]
    assert [s.shape for s in stores] == [(3, 10, 4 * c)] * 4     # whole pixels: one contiguous run per tile
    res = simulate(p, arch, conv_inputs(cs, DType.I8, r, c, 3)[0])
    x, w = conv_inputs(cs, DType.I8, r, c, 3)[1:]
    from npusim.sim.simulator import region_array

    y = region_array(res, "Y", DType.I32, (1, cs.OH, cs.OW, cs.K)).transpose(0, 3, 1, 2)
    assert (y == conv_reference(x, w, cs)).all()


@pytest.mark.parametrize("preset", presets_by_size())
@pytest.mark.parametrize("cs,dtype", [(ConvShape(1, 3, 20, 21, 24, 7, 7, 2, 3), DType.F32),
                                      (ConvShape(2, 5, 9, 9, 40, 3, 3, 1, 1), DType.I8)])
def test_im2col_tiling_matches_numpy(preset, cs, dtype):
    import numpy as np

    from npusim.sim.simulator import region_array

    arch = load_arch(preset)
    r, c = arch.matrix.rows, arch.matrix.cols
    p = conv2d(cs, dtype, Target.of(arch), ConvTiling(4, 6, 1 << 16, 2, im2col=True))
    gathers = [i for i in p.instrs if getattr(i, "src", None) is not None and i.src.space.name == "SPM"]
    assert gathers and all(g.shape[2:] == (cs.R, cs.S * cs.C) for g in gathers)
    inputs, x, w = conv_inputs(cs, dtype, r, c, 1, im2col=True)
    y = region_array(simulate(p, arch, inputs), "Y", DType.F32 if dtype.is_float else DType.I32,
                     (cs.N, cs.OH, cs.OW, cs.K)).transpose(0, 3, 1, 2)
    ref = conv_reference(x, w, cs)
    if dtype.is_float:
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
    else:
        assert (y == ref).all()


def test_search_gathers_patches_for_an_rgb_stem():
    # ResNet's 7x7/2 stem on 3 channels: direct lowering uses 3 of 16 array rows; the search picks im2col (147
    # patch channels fill 10 blocks of 16) and it runs more than 3x faster
    arch = load_arch("edge16")
    cs = ConvShape(1, 3, 224, 224, 64, 7, 7, 2, 3)
    t = search_conv_tiling(cs, DType.F32, Target.of(arch))
    assert t.im2col
    direct = replace(search_conv_tiling(ConvShape(1, 3, 224, 224, 64, 7, 7, 2, 3, dilation=1), DType.F32,
                                        Target.of(arch)), im2col=False, tcb=1)
    fast = simulate(conv2d(cs, DType.F32, Target.of(arch), t), arch, timing_only=True).cycles
    slow = simulate(conv2d(cs, DType.F32, Target.of(arch), direct), arch,
                    timing_only=True).cycles
    assert 3 * fast < slow


@settings(max_examples=40, deadline=None)
@given(C=st.integers(1, 40), HW=st.integers(3, 10), K=st.integers(1, 40), R=st.integers(1, 3),
       stride=st.integers(1, 2), pad=st.integers(0, 1), toh=st.integers(1, 6), tow=st.integers(1, 10),
       tcb=st.integers(1, 3), tnb=st.integers(1, 3), x_all=st.booleans(), acc_bufs=st.sampled_from([1, 2]),
       im2col=st.booleans(), pack=st.sampled_from([1, 2, 4]), residual=st.booleans(), bias=st.booleans(),
       seed=st.integers(0, 99))
def test_any_tiling_matches_numpy(C, HW, K, R, stride, pad, toh, tow, tcb, tnb, x_all, acc_bufs, im2col, pack,
                                  residual, bias, seed):
    # every ConvTiling field (pack where it applies, else 1), a residual and a bias (which then starts the
    # accumulators, or is added by the vector unit after a residual), in any combination that fits, on a 16x16 array
    import numpy as np

    from compiler.kernels.conv2d import Epilogue, TilingError, pack_allowed
    from npusim.sim.simulator import region_array

    cs = ConvShape(1, C, HW, HW, K, R, R, stride, pad)
    assume(not im2col or R > 1)
    arch = load_arch("edge16")
    tow = min(tow, cs.OW)
    pack = pack if pack_allowed(cs, pack, tow, 16, im2col) else 1
    t = ConvTiling(min(toh, cs.OH), tow, tcb, tnb, x_all, acc_bufs, im2col, pack)
    ep = Epilogue(bias=bias, residual=residual)
    try:
        p = conv2d(cs, DType.I8, Target.of(arch), t, epilogue=ep)
    except TilingError:
        assume(False)
    inputs, x, w = conv_inputs(cs, DType.I8, 16, 16, seed, im2col, pack)
    rng = np.random.default_rng(seed)
    r = rng.integers(-1000, 1000, (1, cs.OH, cs.OW, K)).astype(np.int32)
    if residual:
        inputs["R"] = r
    bias_k = rng.integers(-5000, 5000, K).astype(np.int32)
    if bias:
        inputs["Bias"] = bias_k
    y = region_array(simulate(p, arch, inputs), "Y", DType.I32, (1, cs.OH, cs.OW, K))
    want = conv_reference(x, w, cs).transpose(0, 2, 3, 1) + (r if residual else 0) + (bias_k if bias else 0)
    assert (y == want).all()


@pytest.mark.parametrize("act,lo,hi", [("relu", 0, 0), ("clamp", -2000, 3000)])
def test_residual_bias_and_activation_take_one_vector_pass_per_tile(act, lo, hi):
    # residual in the accumulators, then per tile bias + activation: one vpu.add with the activation fused (act=),
    # where an unfused epilogue spends two passes (vpu.add, vpu.act); each pass costs alu_latency + ceil(E / lanes)
    # * alu_interval cycles (edge16: 2 + E / 16; dense i32 tiles, 64 B beats, conflict-free).
    import numpy as np

    from compiler.kernels.conv2d import Epilogue
    from isa import Act, DmaCopy, Queue, Space, VecBinary
    from npusim.sim.simulator import region_array

    arch = load_arch("edge16")
    cs = ConvShape(1, 16, 8, 8, 32, 3, 3, 1, 1)
    p = conv2d(cs, DType.I8, Target.of(arch),
               epilogue=Epilogue(bias=True, act=act, lo=lo, hi=hi, residual=True))
    vpu = [i for i in p.instrs if i.queue is Queue.VPU]
    stores = [i for i in p.instrs if isinstance(i, DmaCopy) and i.dst.space is Space.DRAM]
    assert len(vpu) == len(stores) > 1
    want_act = Act.RELU if act == "relu" else Act.CLAMP
    assert all(isinstance(i, VecBinary) and i.act is want_act and (i.lo, i.hi) == (lo, hi) for i in vpu)
    inputs, x, w = conv_inputs(cs, DType.I8, 16, 16, 3)
    rng = np.random.default_rng(3)
    inputs["R"] = r = rng.integers(-3000, 3000, (1, 8, 8, 32)).astype(np.int32)
    inputs["Bias"] = bias = rng.integers(-3000, 3000, 32).astype(np.int32)
    res = simulate(p, arch, inputs)
    y = region_array(res, "Y", DType.I32, (1, 8, 8, 32))
    raw = conv_reference(x, w, cs).transpose(0, 2, 3, 1) + r + bias
    want = np.maximum(raw, 0) if act == "relu" else np.clip(raw, lo, hi)
    assert (y == want).all() and (want != raw).any() and (want == raw).any()   # the activation bit on some values
    lanes, lat, ii = arch.vector.lanes, arch.vector.alu_latency, arch.vector.alu_interval
    assert res.unit["vector"].busy == sum(lat + -(-int(np.prod(i.shape)) // lanes) * ii for i in vpu)


def test_requantizing_epilogue_fuses_the_activation_into_the_scale_multiply():
    # with requantization the order is cvt, mul, act, cvt: the act rides in the mul (3 passes per tile, not 4)
    import numpy as np

    from compiler.kernels.conv2d import Epilogue
    from isa import Act, BinOp, Queue, VecBinary, VecConvert
    from npusim.sim.simulator import region_array

    arch = load_arch("edge16")
    cs = ConvShape(1, 16, 6, 6, 16, 3, 3, 1, 1)
    p = conv2d(cs, DType.I8, Target.of(arch),
               epilogue=Epilogue(bias=True, act="clamp", lo=-3.0, hi=40.0, out=DType.I8, zp=-5))
    vpu = [i for i in p.instrs if i.queue is Queue.VPU]
    kinds = [(type(i), getattr(i, "op", None), getattr(i, "act", None)) for i in vpu]
    per_tile = [(VecConvert, None, None), (VecBinary, BinOp.MUL, Act.CLAMP), (VecConvert, None, None)]
    assert vpu and kinds == per_tile * (len(vpu) // 3)
    inputs, x, w = conv_inputs(cs, DType.I8, 16, 16, 5)
    rng = np.random.default_rng(5)
    inputs["Bias"] = bias = rng.integers(-2000, 2000, 16).astype(np.int32)
    inputs["Scale"] = scale = rng.uniform(0.001, 0.02, 16).astype(np.float32)
    y = region_array(simulate(p, arch, inputs), "Y", DType.I8, (1, 6, 6, 16))
    acc = (conv_reference(x, w, cs).transpose(0, 2, 3, 1) + bias).astype(np.float32)
    v = np.clip(acc * scale, np.float32(-3.0), np.float32(40.0))
    want = np.clip(np.rint(v) - 5, -128, 127).astype(np.int8)
    assert (y == want).all() and (v == 40).any() and (v == -3).any()


@st.composite
def conv_forms(draw, max_pad: int = 3):
    """A random convolution of any ONNX form: per-axis strides and dilations, four pads (sometimes wider than the
    DMA's 15), groups (depthwise too), or 1-D (H = R = 1, no vertical padding)."""
    one_d = draw(st.booleans())
    groups = draw(st.sampled_from([1, 1, 2, 3, 4]))
    C, K = groups * draw(st.integers(1, 12)), groups * draw(st.integers(1, 12))
    R, S = (1 if one_d else draw(st.integers(1, 4))), draw(st.integers(1, 4))
    wide = draw(st.booleans()) and draw(st.booleans())                 # a quarter: pads of 16 to 20 on one side
    pads = [draw(st.integers(0, max_pad)) for _ in range(4)]
    if wide:
        pads[draw(st.integers(1 if one_d else 0, 3))] = draw(st.integers(16, 20))
    if one_d:
        pads[0] = pads[2] = 0
    stride = (1 if one_d else draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dilation = (1 if one_d else draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    H = 1 if one_d else draw(st.integers(max(1, dilation[0] * (R - 1) + 1 - pads[0] - pads[2]), 12))
    W = draw(st.integers(max(1, dilation[1] * (S - 1) + 1 - pads[1] - pads[3]), 14))
    return ConvShape(draw(st.integers(1, 2)), C, H, W, K, R, S, stride, tuple(pads), dilation, groups)


@settings(max_examples=30, deadline=None)
@given(cs=conv_forms(), dtype=st.sampled_from([DType.I8, DType.F32]), seed=st.integers(0, 999))
def test_random_conv_forms_match_numpy(cs, dtype, seed):
    # the search's tiling (group packing, pixel packing, im2col where they apply), the whole program simulated:
    # int8 exactly, f32 within the fp32 accumulation bound of run_conv's validation
    _, check = run_conv(cs, dtype, load_arch("edge16"), seed=seed)
    assert check.ok, (cs, check)


@settings(max_examples=30, deadline=None)
@given(cs=conv_forms(max_pad=2), toh=st.integers(1, 6), tow=st.integers(1, 10), tcb=st.integers(1, 3),
       tnb=st.integers(1, 3), x_all=st.booleans(), acc_bufs=st.sampled_from([1, 2]), im2col=st.booleans(),
       pack=st.sampled_from([1, 2, 4]), gpack=st.integers(1, 4), residual=st.booleans(), bias=st.booleans(),
       seed=st.integers(0, 99))
def test_any_tiling_of_any_form_matches_numpy(cs, toh, tow, tcb, tnb, x_all, acc_bufs, im2col, pack, gpack, residual,
                                              bias, seed):
    # every ConvTiling field on every form: groups packed into array tiles (gpack, any divisor of groups), pixels
    # packed, patches gathered, where each applies; with a residual and a bias in the accumulators
    import numpy as np

    from compiler.kernels.conv2d import Epilogue, TilingError, grouped, im2col_allowed, pack_allowed
    from npusim.sim.simulator import region_array

    gpack = gpack if cs.groups % gpack == 0 else 1
    gs = grouped(cs, gpack)
    tow = min(tow, cs.OW)
    im2col = im2col and im2col_allowed(gs)
    pack = pack if pack_allowed(gs, pack, tow, 16, im2col) else 1
    t = ConvTiling(min(toh, cs.OH), tow, tcb, tnb, x_all, acc_bufs, im2col, pack, gpack)
    arch = load_arch("edge16")
    try:
        p = conv2d(cs, DType.I8, Target.of(arch), t, epilogue=Epilogue(bias=bias, residual=residual))
    except TilingError:
        assume(False)
    inputs, x, w = conv_inputs(cs, DType.I8, 16, 16, seed, im2col, pack, gpack)
    rng = np.random.default_rng(seed)
    r = rng.integers(-1000, 1000, (cs.N, cs.OH, cs.OW, cs.K)).astype(np.int32)
    bias_k = rng.integers(-5000, 5000, cs.K).astype(np.int32)
    inputs |= ({"R": r} if residual else {}) | ({"Bias": bias_k} if bias else {})
    y = region_array(simulate(p, arch, inputs), "Y", DType.I32, (cs.N, cs.OH, cs.OW, cs.K))
    want = conv_reference(x, w, cs).transpose(0, 2, 3, 1) + (r if residual else 0) + (bias_k if bias else 0)
    assert (y == want).all()


@pytest.mark.parametrize("cs", [ConvShape(1, 4, 7, 9, 6, 3, 2, (2, 1), (0, 1, 2, 0), (1, 2)),
                                ConvShape(2, 6, 1, 17, 4, 1, 3, (1, 2), (0, 4, 0, 1), (1, 3), groups=2),
                                ConvShape(1, 4, 5, 6, 8, 3, 3, (1, 2), (17, 0, 1, 20), 1, groups=4)])
def test_conv_reference_matches_onnxruntime(cs):
    # the numpy reference the program tests trust, against onnxruntime's Conv for asymmetric forms and 1-D
    import numpy as np
    from onnx import helper, numpy_helper

    from tests.compiler.util import model, ort_run, vi

    rng = np.random.default_rng(1)
    x = rng.standard_normal((cs.N, cs.C, cs.H, cs.W)).astype(np.float32)
    w = rng.standard_normal((cs.K, cs.Cg, cs.R, cs.S)).astype(np.float32)
    one_d = cs.H == cs.R == 1 and cs.pad[0] == cs.pad[2] == 0
    xs, ws = (x[:, :, 0], w[:, :, 0]) if one_d else (x, w)
    (pt, pl, pb, pr), axes = cs.pad, slice(1, 2) if one_d else slice(0, 2)
    node = helper.make_node("Conv", ["x", "w"], ["y"], strides=list(cs.stride[axes]),
                            dilations=list(cs.dilation[axes]), group=cs.groups,
                            pads=[pl, pr] if one_d else [pt, pl, pb, pr])
    (y,) = ort_run(model([node], [vi("x", list(xs.shape))], [vi("y", None)], 17, [numpy_helper.from_array(ws, "w")]),
                   {"x": xs})
    np.testing.assert_allclose(conv_reference(x, w, cs).reshape(y.shape), y, rtol=1e-5, atol=1e-5)
