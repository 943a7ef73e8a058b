"""Finding 3 of issue 24 (see test_finding3_resnet18.py) for ResNet-50 over the whole grid of arrays 4x4..256x256 and
SPMs of 128 KiB, 256 KiB and 1 MiB: no host op. On main, 64x64 with 128 KiB ran 16 of its convolutions on the host,
128x128 with 128 KiB 53 (its classifier Gemm too) and 128x128 with 1 MiB 9."""

import itertools

import pytest

from tests.e2e.zoo_grid import ARRAYS, SPMS, host_ops


@pytest.mark.parametrize(("model", "array", "spm"), list(itertools.product(("resnet50",), ARRAYS, SPMS)))
def test_finding3_zoo_cnns_run_on_npu_for_every_array_and_spm(model, array, spm):
    assert host_ops(model, array, spm) == []
