"""fuse_residual: ``Add(Conv(x), r)`` (+ its activation) runs as one Conv whose accumulators start from r."""

import numpy as np
import pytest

from compiler.compile import compile_model, run_passes
from compiler.frontend.builder import GraphBuilder
from isa import DmaCopy, Space
from isa.arch import load_arch, presets_by_size
from npusim.app.driver import run_model

RNG = np.random.default_rng(7)


def _block(stride_conv: bool = False, share: bool = False, depthwise: bool = False):
    """x -> conv(3x3, 8->8) -> add(., x or a 1x1 stride-2 shortcut conv) -> relu; ``share``: the conv's output is
    also a graph output (so it cannot be folded away)."""
    b = GraphBuilder("block")
    x = b.input("x", (1, 8, 12, 12))
    w = b.const("w", (RNG.standard_normal((8, 1 if depthwise else 8, 3, 3)) * 0.3).astype(np.float32))
    kw = {"group": 8} if depthwise else {}
    y = b.conv(x, w, b.const("bias", RNG.standard_normal(8).astype(np.float32)), strides=2 if stride_conv else 1,
               pads=1, **kw)
    r = x
    if stride_conv:
        r = b.conv(x, b.const("ws", (RNG.standard_normal((8, 8, 1, 1)) * 0.3).astype(np.float32)), strides=2)
    b.output(b.relu(b.add(y, r)), *([y] if share else []))
    return b.build()


@pytest.mark.parametrize("preset", presets_by_size())
@pytest.mark.parametrize("stride_conv", [False, True])
def test_fused_block_matches_onnxruntime_and_saves_the_add(preset, stride_conv):
    g = _block(stride_conv)
    fused = run_passes(g)
    assert [n.op for n in fused.nodes] == ["Conv"] * (1 + stride_conv)
    conv = fused.nodes[-1]
    assert conv.attrs["residual"] and conv.attrs["activation"] == ("relu",) and conv.outputs == g.outputs[:1]
    arch = load_arch(preset)
    _, res, _, report = run_model(g, arch, validate=True)
    assert all(v["ok"] for v in report["validation"].values()), report["validation"]
    _, unfused, _, _ = run_model(g, arch, timing_only=True, fuse=False)
    assert res.cycles < unfused.cycles
    # the residual is read from DRAM once, straight into the accumulators: no vector add, one load of r's bytes
    r_loads = [i for i in res.program.instrs if isinstance(i, DmaCopy) and i.dst.space is Space.ACC]
    assert sum(int(np.prod(i.shape)) for i in r_loads) == 8 * (6 if stride_conv else 12) ** 2


def test_what_is_not_fused():
    # the conv's output is needed elsewhere, or the conv runs on the vector unit (depthwise): the Add stays
    for g in (_block(share=True), _block(depthwise=True)):
        assert "Add" in [n.op for n in run_passes(g).nodes]
    assert "Add" in [n.op for n in compile_model(_block(), load_arch("mid32"), fuse=False).graph.nodes]
