"""The small models of the onnx wheel's corpus (pytorch-converted, pytorch-operator: PyTorch-exported modules and
operators with their reference data) on npusim, mid32: each either matches its reference output (on the NPU or with
host help) or is refused with a one-line NpuSimError; never a wrong value, never another exception. The model-zoo
classics (light/) are too large for the suite: `make conformance` runs everything and writes docs/conformance.md."""

from __future__ import annotations

import pytest

from isa.arch import load_arch
from npusim.app.conformance import DATA, KINDS, corpus, run_one, table

pytestmark = pytest.mark.slow

SMALL = corpus(KINDS[1:])

KNOWN_BUGS: dict[str, str] = {}
"""``kind/name`` of corpus models that crash or mismatch today, with the reason: strict xfails, removed once
fixed."""


def test_corpus_is_the_onnx_wheels():
    """The corpus the docs count: 9 model-zoo classics, 82 PyTorch-converted modules, 35 PyTorch operators."""
    counts = {kind: sum(m.kind == kind for m in corpus()) for kind in KINDS}
    assert counts == {"light": 9, "pytorch-converted": 82, "pytorch-operator": 35}
    assert all(m.path.is_relative_to(DATA) for m in SMALL)


@pytest.mark.parametrize("cm", SMALL, ids=[f"{m.kind}/{m.name}" for m in SMALL])
def test_small_model_matches_or_is_refused_in_one_line(cm, request):
    if f"{cm.kind}/{cm.name}" in KNOWN_BUGS:
        request.applymarker(pytest.mark.xfail(reason=KNOWN_BUGS[f"{cm.kind}/{cm.name}"], strict=True))
    out = run_one(cm, load_arch("mid32"))
    row = table([out]).splitlines()[-1]
    assert out.status in ("npu", "host", "refused"), row
    if out.status == "refused":
        assert out.error and "\n" not in out.error, row
    else:
        assert out.cycles is not None and out.reference.startswith("max rel err"), row
        assert (out.status == "host") == bool(out.host_ops), row
