"""Instr.resynced: dataclasses.replace of the semaphore operations, checking only the semaphore rules again."""

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from isa import IsaError, Region, SemDecl, SemOp
from isa.instructions import MAX_SYNC_SLOTS
from tests.isa.strategies import instructions

SEMS = tuple(SemDecl(n, 0) for n in ("a", "b", "c", "d_1"))
REGIONS = (Region("A", 0, 4096), Region("B", 1, 4096))


@settings(max_examples=200, deadline=None)
@given(instructions(REGIONS, SEMS), st.data())
def test_resynced_equals_replace(instr, data):
    names = [s.name for s in SEMS]
    waits = tuple(SemOp(n) for n in data.draw(st.lists(st.sampled_from(names), unique=True, max_size=2)))
    signals = tuple(SemOp(n, 2) for n in data.draw(st.lists(st.sampled_from(names), unique=True, max_size=2)))
    try:
        want = replace(instr, waits=waits, signals=signals)
    except IsaError as e:   # (barrier and halt take no semaphore operations)
        with pytest.raises(IsaError, match=str(e)):
            instr.resynced(waits, signals)
        return
    new = instr.resynced(waits, signals)
    assert type(new) is type(instr) and new == want and hash(new) == hash(want) and str(new) == str(want)


@given(instructions(REGIONS, SEMS))
def test_resynced_checks_the_semaphore_rules(instr):
    with pytest.raises(IsaError, match="at most|takes no semaphore"):
        instr.resynced(tuple(SemOp(f"s{i}") for i in range(MAX_SYNC_SLOTS + 1)), ())
    with pytest.raises(IsaError, match="once among the waits|takes no semaphore"):
        instr.resynced((SemOp("a"), SemOp("a")), ())
