"""Instr.resynced: dataclasses.replace of the semaphore operations, checking only the semaphore rules again."""

import re
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from isa import DType, IsaError, Region, SemDecl, SemOp, Space, View
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


@settings(max_examples=200, deadline=None)
@given(instructions(REGIONS, SEMS), st.data())
def test_resynced_operands_equal_replace(instr, data):
    """Rebased and renamed operands (same space, dtype and strides) replace the old ones as dataclasses.replace
    would; any other view makes the whole instruction checked again, as replace does."""
    views = [r for r, v in ((r, getattr(instr, r, None)) for r in ("dst", "src", "src0", "src1", "a", "b", "acc",
                                                                       "table", "idx")) if isinstance(v, View)]
    if not views:
        return
    role = data.draw(st.sampled_from(views))
    old = getattr(instr, role)
    new_view = data.draw(st.sampled_from([
        replace(old, base=(old.base + 4 * data.draw(st.integers(0, 64))) % 2**32),
        replace(old, region="B") if old.region else old,
        View(Space.DRAM, old.base, old.dtype, old.strides, "A") if old.space is not Space.DRAM else old,
        replace(old, strides=old.strides[:-1]),
        replace(old, dtype=DType.I8 if old.dtype is not DType.I8 else DType.F16)]))
    try:
        want = replace(instr, **{role: new_view})
    except IsaError as e:
        with pytest.raises(IsaError, match=re.escape(str(e))):
            instr.resynced(instr.waits, instr.signals, **{role: new_view})
        return
    new = instr.resynced(instr.waits, instr.signals, **{role: new_view})
    assert type(new) is type(instr) and new == want and str(new) == str(want)
