"""isa.cost.instr_costs, the memoised pricing of a whole instruction list, against instr_cost one by one."""

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from isa.arch import load_arch, presets_by_size
from isa.cost import _moduli, instr_cost, instr_costs
from tests.isa.strategies import _small_instr

ARCHS = [load_arch(p) for p in presets_by_size()] + \
    [load_arch("edge16").with_overrides(["dram.model=bandwidth"])]


def _shifted(instr, arch, k: int):
    """``instr`` with every operand's base moved by ``k`` times its space's cost modulus (the same cost)."""
    mod = _moduli(arch)
    return replace(instr, **{role: replace(v, base=v.base + k * mod[v.space]) for role, v, _ in instr.views()})


@settings(max_examples=60, deadline=None)
@given(st.lists(_small_instr(), min_size=1, max_size=30), st.sampled_from(ARCHS), st.integers(1, 3))
def test_memoised_costs_equal_instr_cost(instrs, arch, k):
    # small operands in a 256-byte space collide often, so many instructions share a key: each must still get its
    # own instr_cost, and so must the same instruction with its bases moved by whole bank periods / DRAM pages
    instrs = instrs + [_shifted(i, arch, k) for i in instrs]
    assert instr_costs(instrs, arch) == [instr_cost(i, arch) for i in instrs]


@pytest.mark.parametrize("preset", presets_by_size())
def test_memoised_costs_of_a_compiled_model(preset):
    from compiler.compile import compile_model
    from npusim.app.driver import load_model
    from npusim.app.zoo import MODELS

    arch = load_arch(preset)
    program = compile_model(load_model(MODELS["resnet18"]()), arch).program
    assert instr_costs(program.instrs, arch) == [instr_cost(i, arch) for i in program.instrs]
