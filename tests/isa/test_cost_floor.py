"""isa.cost.instr_floor, the lower bound a compiler ranks candidates by before pricing them: never above instr_cost
(cycles and bus window), and the same wherever a DRAM view starts."""

import math
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings

from isa import DmaCopy, DmaFill, DType, Queue, Space, View
from isa.arch import load_arch, presets_by_size
from isa.cost import dram_floor, dram_window, instr_cost, instr_costs, instr_floor
from tests.isa.strategies import runnable_programs

ARCHS = [load_arch(p) for p in presets_by_size()]


@settings(max_examples=120, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(prog=runnable_programs(max_instrs=12))
def test_a_floor_is_at_most_the_cost_and_reads_no_dram_base(prog):
    for arch in ARCHS:
        for ins in prog.instrs:
            floor, cost = instr_floor(ins, arch), instr_cost(ins, arch)
            assert floor.cycles <= cost.cycles and floor.dram_window <= cost.dram_window, ins
            if type(ins) in (DmaCopy, DmaFill):
                moved = {v: replace(getattr(ins, v), base=getattr(ins, v).base + 1000) for v in ("dst", "src")
                         if hasattr(ins, v) and getattr(ins, v).space is Space.DRAM}
                assert instr_floor(replace(ins, **moved), arch) == floor
            else:
                assert floor == cost


@pytest.mark.parametrize("arch", [*ARCHS, load_arch("mid32", ["dram.gb_per_s=50"])], ids=lambda a: a.name)
def test_dram_floor_is_the_bytes_over_the_bandwidth_plus_one_activation(arch):
    # a long contiguous stream of full bursts comes close to it; a strided one holds the bus far longer
    view = View(Space.DRAM, 0, DType.F32, (4,), "X")
    n = 1 << 14
    floor, window = dram_floor(view, (n,), arch).cycles, dram_window(view, (n,), arch).cycles
    t = arch.dram_timing   # (mid32 at 50 GB/s: 41 2/3 B/cycle)
    assert floor == math.floor(n * 4 / t.bytes_per_cycle) + t.row_miss
    assert floor <= window <= 1.5 * floor
    strided = View(Space.DRAM, 0, DType.F32, (4096,), "X")
    assert dram_floor(strided, (64,), arch).cycles < dram_window(strided, (64,), arch).cycles


def test_floors_have_their_own_memo_keys():
    # instr_costs(floor=True) keys DRAM views without their base: two loads that differ only there share a floor
    arch = ARCHS[0]
    loads = [DmaCopy(queue=Queue.DMA_LD, shape=(8, 64), dst=View(Space.SPM, 0, DType.F32, (256, 4)),
                     src=View(Space.DRAM, base, DType.F32, (4096, 4), "X")) for base in (0, 100, 2048 + 36)]
    memo = {}
    floors = instr_costs(loads, arch, memo, floor=True)
    assert len(memo) == 1 and floors == [instr_floor(ld, arch) for ld in loads]
    assert instr_costs(loads, arch) == [instr_cost(ld, arch) for ld in loads]
