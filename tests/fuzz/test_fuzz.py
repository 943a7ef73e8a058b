"""The fuzzers' CI profile: a few thousand cases over every input surface, each under a time bound, in the suite.

Every case must end accepted (and pass the oracles) or refused with the project's own error: never an uncaught
exception, a hang, a CLI traceback or wrong exit status, a bad input accepted, or an oracle mismatch. ``make fuzz``
runs the long seeded version (python -m tests.fuzz).
"""

import pytest
from hypothesis import HealthCheck, given, settings

from .cases import STRATEGIES
from .runner import BUGS, Context, run_case

CASES = {"asm": 500, "binary": 500, "arch": 500, "inputs": 250, "onnx": 300, "cli": 450}
"""Examples per surface in the suite (2,500 in all; make fuzz runs 10,000)."""
SECONDS = 5.0


@pytest.fixture(scope="module")
def ctx(tmp_path_factory):
    return Context(tmp_path_factory.mktemp("fuzz"))


def _fuzz(surface: str):
    @pytest.mark.slow
    @settings(max_examples=CASES[surface], derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(case=STRATEGIES[surface]())
    def test(ctx, case):
        result = run_case(case, ctx, SECONDS)
        assert result.outcome not in BUGS, f"{result.outcome}: {result.detail}\ncase: {case.short()}"

    test.__name__ = f"test_fuzz_{surface}"
    test.__doc__ = f"{CASES[surface]} {surface} cases: accepted or refused, never a bug outcome."
    return test


test_fuzz_asm = _fuzz("asm")
test_fuzz_binary = _fuzz("binary")
test_fuzz_arch = _fuzz("arch")
test_fuzz_inputs = _fuzz("inputs")
test_fuzz_onnx = _fuzz("onnx")
test_fuzz_cli = _fuzz("cli")
