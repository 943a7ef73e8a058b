"""Finding 3 of issue 24: every conv, pooling and GEMM of ResNet-18 and the BEV model tiles onto the NPU for every
array from 4x4 to 256x256 with an SPM of at least 128 KiB (the whole grid; the other zoo models are in the other
test_finding3 files), and a sample simulated with values matches onnxruntime. On main, 64x64 with 128 or 256 KiB and
every larger array ran 8-21 of ResNet-18's layers on the host ("no tiling"; 12 of 24 convs at 64x64 with 256 KiB),
the BEV model 9 at 128x128 with 128 KiB, and 256x256 was refused."""

import itertools

import pytest

from npusim.app.driver import run_model, zoo_model
from tests.e2e.zoo_grid import ARRAYS, SPMS, grid_arch, host_ops

VALIDATED = [(256, 128 << 10), (64, 256 << 10)]
"""ResNet-18's grid points that the last test compiles, checks for host ops and simulates with values."""
GRID = [(m, a, s) for m, a, s in itertools.product(("resnet18", "bev_tiny"), ARRAYS, SPMS)
        if m != "resnet18" or (a, s) not in VALIDATED]
"""The whole grid for both models but those points (not compiled twice)."""


@pytest.mark.parametrize(("model", "array", "spm"), GRID)
def test_finding3_zoo_cnns_run_on_npu_for_every_array_and_spm(model, array, spm):
    assert host_ops(model, array, spm) == []


@pytest.mark.parametrize(("array", "spm"), VALIDATED)
def test_finding3_resnet18_on_a_large_array_matches_onnxruntime(array, spm):
    """Full-size ResNet-18 where main ran layers on the host, simulated with values: its output matches
    onnxruntime's, so the array blocks and partial weight tiles compute what the model does."""
    compiled, result, _, report = run_model(zoo_model("resnet18"), grid_arch(array, spm), validate=True)
    assert not compiled.host_ops and result.cycles > 0
    assert report["validation"] and all(c["ok"] for c in report["validation"].values()), report["validation"]
