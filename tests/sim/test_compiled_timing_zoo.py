"""The compiled timing evaluation equals the SimPy Engine on every zoo model and preset (a file of its own: the
compiles take most of its time, and `--dist loadfile` can run it beside tests/sim/test_compiled_timing.py)."""

from __future__ import annotations

import pytest

from isa.arch import load_arch, presets_by_size
from tests.sim.test_compiled_timing import same

ZOO = ("resnet18", "resnet50", "mobilenet_v2", "bert_layer", "vit_block", "resnet18_int8", "bev_tiny")
SLOW = {("resnet18", "edge16"), ("bert_layer", "edge16"), ("resnet50", "edge16"), ("resnet50", "mid32"),
        ("vit_block", "edge16"), ("vit_block", "mid32")}   # (5-8 s each, mostly the compile)


@pytest.mark.parametrize("model,preset", [pytest.param(m, p, marks=pytest.mark.slow if (m, p) in SLOW else ())
                                          for m in ZOO for p in presets_by_size()])
def test_zoo(model, preset):
    from npusim.app.driver import run_model
    from npusim.app.zoo import MODELS

    arch = load_arch(preset)
    compiled, result, _, _ = run_model(MODELS[model](), arch, timing_only=True)
    assert same(compiled.program, arch)["cycles"] == result.cycles
