"""Cross-layer weight prefetch: layers alternate SPM halves, and a layer's weight loads overlap the previous layer."""

import numpy as np
import pytest

from compiler.compile import compile_model
from compiler.errors import CompileError
from compiler.frontend.builder import GraphBuilder
from compiler.kernels.conv2d import ConvShape, conv_reference
from isa import DmaCopy, Queue, Space
from isa.arch import load_arch
from npusim import simulate

RNG = np.random.default_rng(1)
C0, C1, C2, HW = 24, 40, 32, 14


def two_convs():
    """conv 3x3 -> relu -> conv 3x3 (+bias): two Conv segments back to back, each with its own weights."""
    w1 = RNG.standard_normal((C1, C0, 3, 3)).astype(np.float32) * 0.1
    w2 = RNG.standard_normal((C2, C1, 3, 3)).astype(np.float32) * 0.1
    b2 = RNG.standard_normal(C2).astype(np.float32)
    b = GraphBuilder("two_convs")
    x = b.input("x", (1, C0, HW, HW))
    y = b.relu(b.conv(x, b.const("w1", w1), pads=1))
    b.output(b.conv(y, b.const("w2", w2), b.const("b2", b2), pads=1))
    return b.build(), w1, w2, b2


def spm_range(instrs) -> tuple[int, int]:
    """[lo, hi) of the SPM bytes ``instrs`` touch."""
    spans = [view.span(ins.src_shape if role == "src" and type(ins) is DmaCopy else ins.shape, extra)
             for ins in instrs for role, view, extra in ins.views() if view.space is Space.SPM]
    return min(lo for lo, _ in spans), max(hi for _, hi in spans)


def run(prefetch: bool, arch=None):
    graph, w1, w2, b2 = two_convs()
    arch = arch or load_arch("dc128")
    compiled = compile_model(graph, arch, prefetch=prefetch, resident=False)   # SPM halves only
    x = RNG.standard_normal((1, C0, HW, HW)).astype(np.float32)
    res = simulate(compiled.program, arch, compiled.dram_inputs({"x": x}))
    y = next(iter(compiled.read_outputs(res.outputs["ACT"]).values()))
    cs1, cs2 = ConvShape(1, C0, HW, HW, C1, 3, 3, 1, 1), ConvShape(1, C1, HW, HW, C2, 3, 3, 1, 1)
    ref = conv_reference(np.maximum(conv_reference(x, w1, cs1), 0), w2, cs2) + b2[None, :, None, None]
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
    return compiled, res, arch


def test_prefetch_keeps_values_and_puts_consecutive_layers_in_disjoint_spm_halves():
    compiled, _, arch = run(prefetch=True)
    instrs, half = compiled.program.instrs, arch.spm.size // 2
    ranges = [spm_range(instrs[lr.start:lr.end]) for lr in compiled.layers]
    assert len(ranges) == 2
    assert ranges[0][1] <= half <= ranges[1][0] and ranges[1][1] <= arch.spm.size


def test_prefetch_loads_next_weights_before_previous_layer_ends():
    compiled, res, _ = run(prefetch=True)
    first, second = compiled.layers
    body = range(second.start, second.end)
    w_loads = [pc for pc in body if compiled.program.instrs[pc].queue is Queue.DMA_LD
               and compiled.program.instrs[pc].src.region == "W"]
    x_load = next(pc for pc in body if compiled.program.instrs[pc].queue is Queue.DMA_LD
                  and compiled.program.instrs[pc].src.region == "ACT")
    assert w_loads and w_loads[0] < x_load
    last_store = max(pc for pc in range(first.start, first.end) if compiled.program.instrs[pc].queue is Queue.DMA_ST)
    assert res.start[w_loads[0]] < res.end[last_store] <= res.start[x_load]   # weights early, input after the write


def test_without_prefetch_each_layer_waits_and_starts_at_spm_zero():
    compiled, res, _ = run(prefetch=False)
    first, second = compiled.layers
    assert [spm_range(compiled.program.instrs[lr.start:lr.end])[0] for lr in compiled.layers] == [0, 0]
    last_store = max(pc for pc in range(first.start, first.end) if compiled.program.instrs[pc].queue is Queue.DMA_ST)
    assert min(res.start[second.start:second.end]) >= res.end[last_store]


def test_prefetch_is_the_default_when_half_the_spm_is_whole_bank_rows():
    graph, arch = two_convs()[0], load_arch("dc128")
    assert compile_model(graph, arch).program == compile_model(graph, arch, prefetch=True).program \
        != compile_model(graph, arch, prefetch=False).program
    odd = load_arch("dc128", [f"spm.size={1024 * 4097}"])   # 32 banks x 32 B; half of it is 2048.5 bank rows
    assert compile_model(graph, odd).program == compile_model(graph, odd, prefetch=False).program
    with pytest.raises(CompileError, match="prefetch=False"):
        compile_model(graph, odd, prefetch=True)
    edge = load_arch("edge16")     # 256 KiB: below PREFETCH_MIN_SPM, off unless asked for
    assert compile_model(graph, edge).program == compile_model(graph, edge, prefetch=False).program


def test_a_layer_better_off_with_the_whole_spm_keeps_it_and_waits_at_its_first_load():
    """On a 32 KiB SPM the compiler's estimate prefers tilings that take more than half of it: the second convolution
    keeps the whole SPM, waits for the first layer at its first load, and values stay right."""
    arch = load_arch("edge16", ["spm.size=32768"])
    compiled, res, _ = run(prefetch=True, arch=arch)
    instrs, (first, second) = compiled.program.instrs, compiled.layers
    assert spm_range(instrs[second.start:second.end])[1] > arch.spm.size // 2
    load = next(i for i in instrs[second.start:second.end] if i.queue is Queue.DMA_LD)
    assert "seg_dep" in [w.name for w in load.waits]
    last_store = max(pc for pc in range(first.start, first.end) if instrs[pc].queue is Queue.DMA_ST)
    assert min(res.start[second.start:second.end]) >= res.end[last_store]


def test_prefetch_after_a_host_segment_waits_at_the_first_load():
    """conv -> host Sin -> conv -> host Floor -> Add -> host Conv (computed weights): right values, and a layer
    after a host call (which loads nothing, so it does not order the load queue) keeps its wait on its first load."""
    from npusim.app.driver import run_model
    from tests.e2e.test_host_fallback import _model

    compiled, _, _, report = run_model(_model(host_conv=True), load_arch("dc128"), validate=True, prefetch=True)
    assert report["validation"]["p"]["ok"], report["validation"]
    instrs = compiled.program.instrs
    after_host = [lr for prev, lr in zip(compiled.layers, compiled.layers[1:])
                  if instrs[prev.start].queue is Queue.HOST and instrs[lr.start].queue is not Queue.HOST]
    assert [lr.name for lr in after_host] == ["conv2", "add"]
    for lr in after_host:
        first = next(i for i in instrs[lr.start:lr.end] if i.queue is Queue.DMA_LD)
        assert "seg_dep_host_ld" in [w.name for w in first.waits]
