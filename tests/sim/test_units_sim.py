"""Units of one kind run in parallel: a machine with ``units.matrix = 2`` runs two matrix instructions at once, both
timing engines agree, statistics, energy and the report count each unit, and extra units that nothing uses are named
in a warning."""

from __future__ import annotations

import pytest

from isa import VerifyError
from isa.arch import load_arch
from isa.asm import parse_program
from isa.cost import instr_cost
from npusim import simulate
from tests.sim.test_compiled_timing import same

HEAD = ".config rows=16 cols=16 spm=65536 acc=16384\n.sem a 0\n.sem b 0\n"
MM = ("mxu.mm.z shape[64] m=64 k=16 n=16 acc=acc:{acc:#x}<i32>{{0}} acc.row=64 a=spm:0x0<i8>{{0}} a.row=16 "
      "b=spm:0x4000<i8>{{0}}")


def two_matmuls(second_unit: int):
    return parse_program(HEAD + MM.format(acc=0) + " signal(a)\n" + MM.format(acc=0x2000) +
                         f" unit={second_unit} signal(b)\nvpu.sync wait(a)\ndma.st.sync wait(b)\nhalt\n")


def test_two_matrix_units_run_two_matmuls_at_once():
    arch = load_arch("edge16", ("units.matrix=2",))
    one = instr_cost(two_matmuls(1).instrs[0], arch).cycles
    parallel = simulate(two_matmuls(1), arch, timing_only=True)
    serial = simulate(two_matmuls(0), arch, timing_only=True)   # both on the first unit: one after the other
    assert (parallel.cycles, serial.cycles) == (one, 2 * one)
    assert parallel.unit["matrix"].busy == parallel.unit["matrix1"].busy == one
    assert serial.unit["matrix1"].busy == 0 and serial.unit["matrix"].busy == 2 * one
    assert [u.name for u in parallel.units] == ["dma_load", "dma_store", "matrix", "matrix1", "vector", "host"]
    assert parallel.issued_mac_utilization == pytest.approx(2 * 64 * 64 * 16 * 16 / (one * 2 * 16 * 16))


@pytest.mark.parametrize("second_unit", [0, 1])
def test_both_engines_agree_with_two_units_of_a_kind(second_unit):
    same(two_matmuls(second_unit), load_arch("edge16", ("units.matrix=2", "units.vector=3")))


def test_a_program_for_more_units_than_the_arch_has_is_refused():
    with pytest.raises(VerifyError, match=r"^pc 1 `mxu\.mm\.z .*`: it runs on mxu\[1\], but arch edge16 has "
                                          r"units\.matrix = 1; raise units\.matrix \(--set units\.matrix=2\)$"):
        simulate(two_matmuls(1), load_arch("edge16"), timing_only=True)


def test_extra_units_nothing_runs_on_are_named_in_a_warning():
    result = simulate(two_matmuls(0), load_arch("edge16", ("units.matrix=2",)), timing_only=True)
    assert result.warnings == [
        "units.matrix = 2, but no instruction runs on matrix1 (mxu[1]): the compiler drives the first unit of each "
        "kind; an instruction picks another with unit=N"]
    assert simulate(two_matmuls(1), load_arch("edge16", ("units.matrix=2",)), timing_only=True).warnings == []


def test_each_unit_has_its_energy_and_area_in_the_report():
    arch = load_arch("edge16", ("units.matrix=2",))
    report = simulate(two_matmuls(1), arch, timing_only=True).to_dict()
    m0, m1 = report["units"]["matrix"], report["units"]["matrix1"]
    assert (m0["queue"], m1["queue"]) == ("mxu", "mxu[1]")
    assert m0["energy_pj"] == pytest.approx(m1["energy_pj"]) and m0["energy_pj"] > 0
    one = simulate(two_matmuls(0), load_arch("edge16"), timing_only=True).to_dict()
    assert report["area"]["matrix_mm2"] == pytest.approx(2 * one["area"]["matrix_mm2"])
    assert {i["unit"] for i in report["instructions"]} == {"mxu", "mxu[1]", "vpu", "dma.st"}
