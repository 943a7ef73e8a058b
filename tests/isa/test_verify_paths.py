"""verify's two evaluations agree: the array checks (_passes) pass exactly the programs the program-order scan
(_scan) passes, with the same report (warnings, producer and consumer queues in the same order)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from isa import NpuSimError, VerifyError
from isa.asm import parse_program
from isa.columns import columns
from isa.verify import _passes, _scan, verify
from tests.isa.strategies import programs, synced_programs


def agree(program) -> str:
    """Assert the two paths agree on ``program``; return which way it went ("raises", "warns", "passes")."""
    fast = _passes(program, columns(program))
    try:
        slow = _scan(program)
    except VerifyError:
        assert fast is None
        return "raises"
    assert fast is not None
    assert (fast.warnings, list(fast.producer.items()), list(fast.consumer.items())) == \
           (slow.warnings, list(slow.producer.items()), list(slow.consumer.items()))
    return "warns" if slow.warnings else "passes"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(max_instrs=12))
def test_random_programs(program):
    agree(program)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(synced_programs())
def test_synced_programs(case):   # (balanced semaphores: these pass, and warn when a wait precedes its signal)
    agree(parse_program(case[0]))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_mutated_seed_programs(data):
    from tests.fuzz.cases import asm_cases

    try:
        program = parse_program(data.draw(asm_cases()).data.decode("utf-8"))
    except (NpuSimError, UnicodeDecodeError):
        return
    agree(program)


def test_seed_programs_both_ways():
    from tests.fuzz.fixtures import seed_programs

    outcomes = [agree(parse_program(t)) for t in seed_programs()]
    assert "warns" in outcomes and "passes" in outcomes   # (deadlock.s warns; the compiled ones pass)


@pytest.mark.parametrize("tail, message", [
    ("mxu.sync wait(s*2)\nvpu.sync signal(s)\nhalt\n", "semaphore s is unbalanced: it starts at 1"),
    ("mxu.sync wait(s)\nvpu.sync signal(s)\ndma.ld.sync signal(s)\nhalt\n", "is signalled by vpu and by dma.ld"),
    ("halt\nmxu.sync\nhalt\n", "halt must be the last instruction"),
    ("mxu.sync signal(s*127)\nmxu.sync signal(s*127)\nmxu.sync signal(s*127)\nvpu.sync wait(s*127)\n"
     "vpu.sync wait(s*127)\nvpu.sync wait(s*127)\nhalt\n", "semaphore s can reach 382 > 255"),
])
def test_errors_are_the_scans(tail, message):
    program = parse_program(".config rows=16 cols=16 spm=1024 acc=1024\n.sem s 1\n" + tail)
    assert _passes(program, columns(program)) is None
    with pytest.raises(VerifyError, match=message):
        verify(program)


def test_verify_takes_the_arrays_when_given_columns(monkeypatch):
    """With its columns, a long passing program is proved by the arrays alone (the scan is not run) and reports
    what the scan reports; without them, or short, it is scanned."""
    from compiler.kernels.common.target import Target
    from compiler.kernels.gemm import GemmTiling, tiled_gemm
    from isa import DType
    from isa import verify as verify_module
    from isa.arch import Arch

    program = tiled_gemm(128, 128, 128, DType.I8, Target.of(Arch()), GemmTiling(tm=16, tn=16, tk=16))
    assert len(program.instrs) >= verify_module.ARRAYS_FROM
    slow = _scan(program)
    scanned = []
    monkeypatch.setattr(verify_module, "_scan", lambda p: scanned.append(p) or slow)
    fast = verify(program, columns(program))
    assert not scanned and (fast.warnings, fast.producer, fast.consumer) == (slow.warnings, slow.producer,
                                                                              slow.consumer)
    verify(program)
    assert scanned == [program]
