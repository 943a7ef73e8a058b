"""Concat / Slice / Pad lowered by the DMA alone, and patch-embedding convolutions as DMA im2col + GEMM: the programs
against numpy, whole graphs compiled and simulated against onnxruntime."""

import math

import numpy as np
import pytest

import compiler.ops.conv
from compiler.compile import compile_model
from compiler.errors import CompileError, TilingError, UnsupportedOpError
from compiler.frontend.builder import GraphBuilder, to_onnx
from compiler.kernels.common.target import Target
from compiler.kernels.conv2d import ConvShape, conv2d, conv_reference
from compiler.kernels.gemm import GemmTiling
from compiler.kernels.patchify import (
    is_patchify,
    pack_b_loads,
    patch_gemm,
    patch_matrix,
    patch_reference,
    patch_weights,
)
from compiler.kernels.staged_copy import Box, Operand, staged_copy
from compiler.kernels.vector.strides import row_major
from isa import DmaCopy, DmaFill, DType, Region
from isa.arch import load_arch
from npusim import simulate
from npusim.app.driver import run_model
from npusim.app.zoo import MODELS
from npusim.sim.simulator import region_array

ARCH = load_arch("dc128")
F32 = DType.F32


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _run(graph, arch=ARCH, exact=True, **inputs):
    inputs = inputs or {n: _rand(*graph.tensor(n).shape, seed=i) for i, n in enumerate(graph.inputs)}
    compiled, result, outputs, report = run_model(to_onnx(graph), arch, inputs, validate=True)
    for name, check in report["validation"].items():
        assert check["ok"], (name, check)
        if exact:
            assert check["max_abs_error"] == 0, (name, check)
    return compiled, result, report


def _ops(compiled):
    return [lr.op for lr in compiled.layers]


# ------------------------------------------------------------------------------------------------ staged_copy

def test_staged_copy_tiles_pads_and_reverses():
    """One box with a reversed source dimension, small and wide pads, through 4 KiB tiles on edge16."""
    arch = load_arch("edge16")
    x = _rand(7, 50, 33)
    shape = (7 + 2 + 20, 50, 33 + 3 + 1)       # pads: dim 0 2/20 (wide: peeled), dim 2 3/1
    src = Operand("X", (50 - 1) * 33, (50 * 33, -33, 1))   # dim 1 reversed
    box = Box(shape, Operand("Y", 0, row_major(shape)), src, ((2, 20), (0, 0), (3, 1)), fill=-2.5)
    prog = staged_copy([box], F32, (Region("X", 0, x.nbytes), Region("Y", 1, int(np.prod(shape)) * 4)),
                       Target.of(arch), tile_bytes=4096)
    assert len(prog.instrs) > 20 and any(isinstance(i, DmaFill) for i in prog.instrs)
    assert all(len(i.shape) <= 5 and max(i.shape) <= 0xFFFF for i in prog.instrs[:-1])
    loads = [i for i in prog.instrs if isinstance(i, DmaCopy) and i.src.region == "X"]
    assert all(s >= 0 for i in loads for s in i.src.strides)    # DRAM walked forwards, reversed on the SPM side
    res = simulate(prog, arch, {"X": x, "Y": np.zeros(shape, np.float32)})
    want = np.pad(x[:, ::-1], ((2, 20), (0, 0), (3, 1)), constant_values=-2.5)
    np.testing.assert_array_equal(region_array(res, "Y", F32, shape), want)


def test_staged_copy_splits_extents_beyond_the_dma_limit():
    x = _rand(70000 * 2)
    box = Box((70000,), Operand("Y", 0, (1,)), Operand("X", 1, (2,)))
    prog = staged_copy([box], F32, (Region("X", 0, x.nbytes), Region("Y", 1, 70000 * 4)), Target.of(ARCH))
    assert all(max(i.shape) <= 0xFFFF for i in prog.instrs[:-1])
    res = simulate(prog, ARCH, {"X": x, "Y": np.zeros(70000, np.float32)})
    np.testing.assert_array_equal(region_array(res, "Y", F32, (70000,)), x[1::2])


def test_staged_copy_loads_a_broadcast_once_and_repeats_it_from_sram():
    # Y[i, j, k] = X[j, k] for 40 values of i: the DRAM source is never read with stride 0
    arch = load_arch("mid32")
    x = _rand(3, 50)
    box = Box((40, 3, 50), Operand("Y", 0, (150, 50, 1)), Operand("X", 0, (0, 50, 1)))
    prog = staged_copy([box], F32, (Region("X", 0, x.nbytes), Region("Y", 1, 40 * 150 * 4)), Target.of(arch))
    loads = [i for i in prog.instrs if isinstance(i, DmaCopy) and i.src.region == "X"]
    assert loads and all(e == 1 for i in loads for e, st in zip(i.shape, i.src.strides) if st == 0)
    assert sum(math.prod(i.shape) for i in loads) == len(loads) * x.size
    res = simulate(prog, arch, {"X": x, "Y": np.zeros((40, 3, 50), np.float32)})
    np.testing.assert_array_equal(region_array(res, "Y", F32, (40, 3, 50)), np.broadcast_to(x, (40, 3, 50)))


def test_staged_copy_in_source_order_loads_long_runs():
    # a permuting copy, Y = X^T of a 30 x 70 X: with src_order the loads walk X's rows (unit stride innermost), the
    # stores Y's rows; the reordering happens between the slot and DRAM on the store
    arch = load_arch("edge16")
    x = _rand(30, 70)
    box = Box((70, 30), Operand("Y", 0, (30, 1)), Operand("X", 0, (1, 70)), src_order=True)
    prog = staged_copy([box], F32, (Region("X", 0, x.nbytes), Region("Y", 1, x.nbytes)), Target.of(arch),
                       tile_bytes=2048)
    dram = [i.src if i.src.region else i.dst for i in prog.instrs if isinstance(i, DmaCopy)]
    assert len(dram) > 2 and all(v.strides[-1] == 4 for v in dram)
    res = simulate(prog, arch, {"X": x, "Y": np.zeros((70, 30), np.float32)})
    np.testing.assert_array_equal(region_array(res, "Y", F32, (70, 30)), x.T)


def test_staged_copy_refuses_nothing_to_do():
    with pytest.raises(CompileError, match="nothing to copy"):
        staged_copy([Box((0, 3), Operand("Y", 0, (3, 1)), fill=1.0)], F32, (Region("Y", 0, 4),), Target.of(ARCH))


# ------------------------------------------------------------------------------------------------ Concat

@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_concat_row_major_any_axis(axis):
    b = GraphBuilder("concat")
    shapes = [[2, 3, 5], [2, 3, 5], [2, 3, 5]]
    for s, extra in zip(shapes, (1, 4, 2)):
        s[axis] = extra
    x, y = b.input("x", shapes[0]), b.input("y", shapes[1])
    c = b.const("c", _rand(*shapes[2], seed=9))
    b.output(b.concat([x, c, y, x], axis))
    compiled, _, _ = _run(b.build())
    assert _ops(compiled) == ["Concat"]


def test_concat_nhwc_channels_stays_channels_last():
    b = GraphBuilder("concat_nhwc")
    x = b.input("x", (1, 3, 9, 7))
    p = b.conv(x, b.const("w1", _rand(4, 3, 3, 3, seed=1)), pads=1)
    q = b.conv(x, b.const("w2", _rand(5, 3, 1, 1, seed=2)))
    cat = b.concat([p, b.const("c", _rand(1, 2, 9, 7, seed=3)), q], 1)
    y = b.conv(cat, b.const("w3", _rand(6, 11, 3, 3, seed=4)), pads=1)
    b.output(y, cat)
    compiled, _, _ = _run(b.build(), exact=False)
    assert "Transpose" not in _ops(compiled)
    assert compiled.outputs[cat].layout == "nhwc"


def test_concat_nhwc_spatial_axis():
    b = GraphBuilder("concat_h")
    x = b.input("x", (2, 3, 6, 5))
    p = b.conv(x, b.const("w", _rand(4, 3, 3, 3, seed=1)), pads=1)
    b.output(b.concat([p, p, b.conv(x, b.const("w2", _rand(4, 3, 1, 1, seed=2)))], 2))
    _run(b.build(), exact=False)


def test_concat_many_inputs_splits_into_segments():
    b = GraphBuilder("concat_many")
    xs = [b.input(f"x{i}", (3, i + 1)) for i in range(20)]
    b.output(b.concat(xs, 1))
    compiled, _, _ = _run(b.build())
    assert [lr.name for lr in compiled.layers] == ["concat_0.0", "concat_0.1"]


# ------------------------------------------------------------------------------------------------ Slice

@pytest.mark.parametrize("starts,ends,axes,steps", [
    ([1, 0], [3, 10], [0, 2], [1, 2]),              # steps > 1
    ([-1], [-1000], [2], [-1]),                    # reversal of the innermost axis
    ([5, -2, 100], [-100, 0, -100], [0, 1, 2], [-2, -1, -3]),  # every axis backwards, clamped bounds
    ([-3, 1], [1000, 4], [-1, 1], [1, 1]),         # negative start, end clamped
])
def test_slice_row_major(starts, ends, axes, steps):
    b = GraphBuilder("slice")
    x = b.input("x", (6, 4, 9))
    b.output(b.slice(x, starts, ends, axes, steps))
    compiled, _, _ = _run(b.build())
    assert _ops(compiled) == ["Slice"]


def test_slice_of_rank_7_tiles_outer_dimensions():
    b = GraphBuilder("slice7")
    x = b.input("x", (2, 3, 4, 3, 4, 3, 5))
    b.output(b.slice(x, [0, 2, 0, 3, 1], [3, 0, 4, -100, 5], [1, 2, 3, 4, 6], [2, -1, 2, -2, 3]))
    _run(b.build())


def test_slice_of_a_contiguous_range_is_an_alias():
    b = GraphBuilder("slice_alias")
    x = b.input("x", (1, 197, 16))
    cls = b.slice(x, [0], [1], [1])                # ViT's class token: a contiguous range
    rows = b.slice(x, [3], [9], [1])
    b.output(b.relu(cls), b.relu(rows))
    compiled, _, _ = _run(b.build())
    assert "Slice" not in _ops(compiled)


def test_slice_nhwc_keeps_channels_last():
    b = GraphBuilder("slice_nhwc")
    x = b.input("x", (1, 3, 10, 10))
    p = b.conv(x, b.const("w", _rand(8, 3, 3, 3, seed=1)), pads=1)
    s = b.slice(p, [1, 8, 2], [7, 1, 9], [1, 2, 3], [2, -2, 1])
    b.output(b.conv(s, b.const("w2", _rand(2, 3, 1, 1, seed=2))), s)
    compiled, _, _ = _run(b.build(), exact=False)
    assert "Transpose" not in _ops(compiled)


# ------------------------------------------------------------------------------------------------ Pad

@pytest.mark.parametrize("pads,value", [
    ((1, 0, 2, 3, 0, 1), 0.0),                       # small pads: padded on the fly by the DMA
    ((20, 0, 1, 0, 17, 40), 1.5),                    # wider than 15: peeled into fills
    ((-2, 3, -1, 1, -4, 2), -3.0),                   # negative pads crop
    ((0, -5, 0, 0, 0, 0), 0.0),                      # a pure crop (a view of the input)
])
def test_pad_row_major(pads, value):
    b = GraphBuilder("pad")
    x = b.input("x", (5, 6, 7))
    b.output(b.pad(x, pads, value=value))
    compiled, _, _ = _run(b.build())
    assert _ops(compiled) == ["Pad"]


def test_pad_nhwc_spatial():
    b = GraphBuilder("pad_nhwc")
    x = b.input("x", (2, 3, 8, 8))
    p = b.conv(x, b.const("w", _rand(4, 3, 3, 3, seed=1)))
    q = b.pad(p, (0, 1, 2, 16, 0, 0, 1, 0), value=0.25)
    b.output(b.maxpool(q, 2, 2), q)
    compiled, _, _ = _run(b.build(), exact=False)
    assert "Transpose" not in _ops(compiled)


def test_pad_refuses_a_reflection_wider_than_the_axis():
    b = GraphBuilder("reflect")
    x = b.input("x", (1, 2, 5, 5))
    b.output(b.pad(x, (0, 0, 0, 5, 0, 0, 0, 0), mode="reflect"))
    with pytest.raises(UnsupportedOpError, match=r"node 'pad_0' \(Pad\): mode 'reflect' pads axis 3 by up to 4 "
                                                 r"\(it keeps 5 elements\), not 5"):
        compile_model(b.build(), ARCH, fallback=False)
    assert [h.node.op for h in compile_model(b.build(), ARCH).host_ops] == ["Pad"]   # the host CPU runs it


# ------------------------------------------------------------------------------------------------ patchify

def test_is_patchify():
    b = GraphBuilder("convs")
    x = b.input("x", (1, 3, 32, 32))
    w4, w3 = b.const("w4", _rand(8, 3, 4, 4)), b.const("w3", _rand(8, 3, 3, 3))
    yes = b.conv(x, w4, strides=4)
    no = [b.conv(x, w4, strides=2), b.conv(x, w4, strides=4, pads=1), b.conv(x, w3, strides=3, dilations=2),
          b.conv(x, b.const("w1", _rand(8, 3, 1, 1)))]
    b.output(yes, *no)
    g = b.build()
    assert is_patchify(g.node(yes), g)
    assert not any(is_patchify(g.node(n), g) for n in no)


@pytest.mark.parametrize("cs", [ConvShape(2, 5, 30, 27, 7, 4, 4, 4), ConvShape(1, 3, 64, 48, 4, 16, 16, 16)])
@pytest.mark.parametrize("ones", [False, True])
def test_patch_matrix_matches_numpy(cs, ones):
    arch = load_arch("edge16")
    x = _rand(cs.N, cs.H, cs.W, cs.C)
    prog = patch_matrix(cs, F32, Target.of(arch), ones=ones, tile_bytes=2048)
    res = simulate(prog, arch, {"X": x, "P": np.zeros(prog.region_map["P"].size, np.uint8)})
    want = patch_reference(x, cs)
    if ones:
        want = np.concatenate([want, np.ones((want.shape[0], 1), np.float32)], 1)
    np.testing.assert_array_equal(region_array(res, "P", F32, want.shape), want)


@pytest.mark.parametrize("dataflow", ["ws", "os", "is"])
@pytest.mark.parametrize("tiling", [None, GemmTiling(tm=9, tn=16, tk=32), GemmTiling(tm=70, tn=16, tk=48)])
def test_fused_patch_gemm_matches_numpy(tiling, dataflow):
    """A tiles that start and end mid output row, mid kernel row and span images: the A loads become several
    views of X; B is stored in the order its loads read it."""
    arch = load_arch("edge16", [f"matrix.dataflow={dataflow}"])
    cs = ConvShape(2, 3, 30, 27, 20, 4, 4, 4)
    x, w, bias = _rand(cs.N, cs.C, cs.H, cs.W), _rand(cs.K, cs.C, 4, 4, seed=1), _rand(cs.K, seed=2)
    B = np.concatenate([patch_weights(w), bias[None]])
    small = Target.of(arch.with_overrides(["matrix.max_rows=64"]))   # for the default tiling: tiles of 64 rows
    prog = patch_gemm(cs, F32, small, ones=True, tiling=tiling)
    assert "A" not in prog.region_map
    prog, packed = pack_b_loads(prog, B)
    assert packed.size == B.size
    res = simulate(prog, arch, {"X": x.transpose(0, 2, 3, 1).copy(), "B": packed,
                                "C": np.zeros(prog.region_map["C"].size, np.uint8)})
    got = region_array(res, "C", F32, (cs.N, cs.OH, cs.OW, cs.K)).transpose(0, 3, 1, 2)
    want = conv_reference(x, w, cs) + bias[None, :, None, None]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("fuse", [True, False])
@pytest.mark.parametrize("fold_bias", [True, False])
def test_patchify_conv_matches_onnxruntime(monkeypatch, fuse, fold_bias):
    patchify = compiler.ops.conv.lower_patchify   # with its options set
    monkeypatch.setattr(compiler.ops.conv, "lower_patchify",
                        lambda low, n: patchify(low, n, fuse=fuse, fold_bias=fold_bias))
    b = GraphBuilder("patches")
    x = b.input("x", (2, 5, 30, 27))
    y = b.conv(x, b.const("w", _rand(24, 5, 4, 4, seed=1)), b.const("b", _rand(24, seed=2)), strides=4)
    b.output(b.relu(y))
    compiled, _, _ = _run(b.build(), exact=False)
    # the relu was fused into the Conv node by fuse_activation; patchify applies it as its own step
    assert _ops(compiled).count("Conv") == 2 + (not fuse) + (not fold_bias)


@pytest.mark.parametrize("preset", ["edge16", "mid32"])
def test_patchify_and_layout_ops_on_small_presets(preset):
    b = GraphBuilder("small")
    x = b.input("x", (1, 3, 64, 64))
    y = b.conv(x, b.const("w", _rand(32, 3, 8, 8, seed=1)), b.const("b", _rand(32, seed=2)), strides=8)
    y = b.pad(b.concat([y, b.slice(y, [7, 0], [-100, 8], [2, 1], [-1, 1])], 1), (0, 0, 1, 1, 0, 0, 1, 1))
    b.output(y)
    compiled, _, _ = _run(b.build(), arch=load_arch(preset), exact=False)
    assert _ops(compiled) == ["Conv", "Slice", "Concat", "Pad"]


def _vit_patch_embedding():
    b = GraphBuilder("vit_patch_embed")
    x = b.input("x", (1, 3, 224, 224))
    w = b.const("w", _rand(768, 3, 16, 16, seed=1) * np.float32(0.05))
    b.output(b.conv(x, w, b.const("b", _rand(768, seed=2)), strides=16, name="patch_embed"))
    return b.build()


def test_vit_patch_embedding_does_not_tile_as_a_direct_convolution():
    with pytest.raises(TilingError):
        conv2d(ConvShape(1, 3, 224, 224, 768, 16, 16, 16), F32, Target.of(ARCH))


def test_vit_patch_embedding_compiles_and_validates():
    compiled, result, report = _run(_vit_patch_embedding(), exact=False)
    assert [lr["name"] for lr in report["layers"]] == ["patch_embed"]
    assert report["validation"]["patch_embed"]["max_rel_error"] < 1e-5
    assert result.macs == 196 * 768 * 768 + 196 * 768       # the bias rides in the GEMM as a ones column
    assert result.cycles < 100_000


def test_vit_block_end_to_end():
    compiled, result, outputs, report = run_model(MODELS["vit_block"](), ARCH, validate=True)
    assert all(check["ok"] for check in report["validation"].values()), report["validation"]
    assert report["layers"][0]["name"] == "patch_embed"
