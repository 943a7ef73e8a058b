"""Linking single-op programs into one: relocation into shared regions, per-queue-pair semaphores, layer order."""

import numpy as np

from compiler.kernels.common.target import Target
from compiler.kernels.conv2d import ConvShape, conv2d, conv_reference, pack_weights
from compiler.kernels.vector.streams import binary, unary
from compiler.link.linker import Segment, link
from isa import Act, BinOp, DType, ProgramConfig
from isa.arch import load_arch
from npusim import simulate


def test_conv_bias_relu_chain_matches_numpy():
    arch, R = load_arch("dc128"), 128
    cs = ConvShape(1, 16, 20, 20, 24, 3, 3, 1, 1)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 16, 20, 20)).astype(np.float32)
    w = rng.standard_normal((24, 16, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(24).astype(np.float32)
    ysh = (1, cs.OH, cs.OW, cs.K)
    ny, pw = int(np.prod(ysh)) * 4, pack_weights(w, cs, R, R)
    segs = [Segment("conv", "Conv", conv2d(cs, DType.F32, Target.of(arch)),
                    {"X": ("ACT", 0), "Wt": ("W", 0), "Y": ("ACT", x.nbytes)}, cs.macs),
            Segment("bias", "Add", binary(BinOp.ADD, ysh, (24,), DType.F32, Target.of(arch)),
                    {"A": ("ACT", x.nbytes), "B": ("W", pw.nbytes), "Y": ("ACT", x.nbytes + ny)}),
            Segment("relu", "Relu", unary(Act.RELU, ysh, DType.F32, Target.of(arch)),
                    {"X": ("ACT", x.nbytes + ny), "Y": ("ACT", x.nbytes + 2 * ny)})]
    wb = np.concatenate([pw.view(np.uint8), bias.view(np.uint8)])
    prog, layers = link(segs, ProgramConfig(R, R, arch.spm.size, arch.acc.size),
                        {"W": wb.nbytes, "ACT": x.nbytes + 3 * ny})
    assert [(lr.name, lr.start < lr.end) for lr in layers] == [("conv", True), ("bias", True), ("relu", True)]
    assert layers[0].end == layers[1].start and layers[-1].end == len(prog.instrs) - 1
    assert {s.name for s in prog.sems} >= {"x_full_ld_mxu", "w_full_ld_mxu", "in_full_ld_vpu", "seg_dep"}
    act = np.zeros(x.nbytes + 3 * ny, np.uint8)
    act[: x.nbytes] = x.transpose(0, 2, 3, 1).ravel().view(np.uint8)
    res = simulate(prog, arch, {"W": wb, "ACT": act})
    y = res.outputs["ACT"][x.nbytes + 2 * ny:].view(np.float32).reshape(ysh).transpose(0, 3, 1, 2)
    ref = np.maximum(conv_reference(x, w, cs) + bias[None, :, None, None], 0)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-4)
    # each segment starts after the previous one's last store
    for a, b in zip(layers, layers[1:]):
        assert res.start[b.start] >= res.end[a.end - 1]
