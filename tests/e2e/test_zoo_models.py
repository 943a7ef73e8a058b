"""Zoo models compile to race-free programs, run and agree with onnxruntime (fp32: max|err| / max|ref| <= 1e-3, int8:
exactly) on every preset."""

import functools

import pytest

from isa.arch import load_arch, presets_by_size
from isa.races import find_races
from npusim.app.driver import run_model
from npusim.app.zoo import MODELS

PRESETS = presets_by_size()
FLOAT_MODELS = ["resnet18", "resnet50", "mobilenet_v2", "bert_layer", "vit_block", "bev_tiny"]
INT8_MODELS = ["resnet18_int8"]


@functools.cache
def built(name: str):
    return MODELS[name]()


@pytest.mark.slow
@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("name", FLOAT_MODELS + INT8_MODELS)
def test_zoo_model_validates(name, preset):
    compiled, result, outputs, report = run_model(built(name), load_arch(preset), validate=True)
    assert find_races(compiled.program) == []
    assert report["validation"], "no outputs compared"
    for output, check in report["validation"].items():
        assert check["ok"], (output, check)
        assert (check["rule"] == "exact") == (name in INT8_MODELS)
    assert result.cycles == max(lr["end"] for lr in report["layers"])


@pytest.mark.parametrize("preset", PRESETS)
def test_bev_tiny_runs_its_perception_operators_on_the_npu(preset):
    compiled, _, _, report = run_model(built("bev_tiny"), load_arch(preset), validate=True)
    ops = {lr.op for lr in compiled.layers}
    assert {"ConvTranspose", "Resize", "GridSample", "MSDeformAttn", "Conv", "MatMul", "Softmax"} <= ops
    assert sum(n.op == "GridSample" for n in compiled.graph.nodes) == 1   # the view transform
    assert sum(n.op == "MSDeformAttn" for n in compiled.graph.nodes) == 1   # the attention's two levels, fused
    assert report["host_ops"] == []
    assert all(check["ok"] for check in report["validation"].values())
