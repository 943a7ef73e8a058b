"""The unit table (isa/units.py) and the units of a machine: one table says every fact of a unit kind, the Arch says
how many of each a core has, an instruction names its unit (queue + ``unit``) in assembly and binary, and the
verifier and race sanitizer tell units of one kind apart."""

from __future__ import annotations

import numpy as np
import pytest

from isa import ArchError, AsmSyntaxError, EncodingError, IsaError, Queue, VerifyError
from isa.arch import Arch, load_arch
from isa.asm import format_program, parse_program
from isa.encoding import decode_program, encode_program
from isa.instructions import Barrier, Sync
from isa.machine import machine, machine_units
from isa.races import find_races, happens_before
from isa.units import (
    CTRL_KEY,
    DMA_QUEUES,
    MAX_PER_KIND,
    UNIT_OF,
    UNITS,
    Pool,
    Role,
    key_text,
    unit_key,
)
from isa.verify import verify

HEAD = ".config rows=16 cols=16 spm=65536 acc=16384\n"
MM = ("mxu.mm.z shape[4] m=64 k=16 n=16 acc=acc:{acc:#x}<i32>{{0}} acc.row=64 a=spm:0x0<i8>{{0}} a.row=16 "
      "b=spm:0x4000<i8>{{0}}")


def test_every_queue_but_ctrl_feeds_one_unit_kind_of_the_table():
    assert {u.queue for u in UNITS} == set(Queue) - {Queue.CTRL}
    assert len({u.name for u in UNITS}) == len({u.short for u in UNITS}) == len(UNITS)
    assert all(UNIT_OF[u.queue] is u and u.queue.unit is u for u in UNITS)
    assert DMA_QUEUES == {Queue.DMA_LD, Queue.DMA_ST}
    assert [u for u in UNITS if Pool.DMA_CHANNEL in u.pools] == [u for u in UNITS if u.role.is_dma]
    with pytest.raises(KeyError):
        _ = Queue.CTRL.unit


def test_a_preset_machine_has_one_unit_of_each_kind_in_table_order():
    units = machine_units(load_arch("mid32"))
    assert [u.name for u in units] == ["dma_load", "dma_store", "matrix", "vector", "host"]
    assert [u.index for u in units] == list(range(5))
    assert [u.label for u in units] == ["dma.ld", "dma.st", "mxu", "vpu", "host"]


def test_units_section_adds_units_of_a_kind_after_the_first():
    arch = load_arch("mid32", ("units.matrix=2", "units.dma_load=3"))
    units = machine_units(arch)
    assert [u.name for u in units] == ["dma_load", "dma_load1", "dma_load2", "dma_store", "matrix", "matrix1",
                                       "vector", "host"]
    m = machine(arch)
    assert m.index(unit_key(Queue.MXU, 1)) == 5 and m.index(unit_key(Queue.MXU, 2)) == -1
    assert m.index(CTRL_KEY) == -1
    assert m.indices(np.array([unit_key(Queue.DMA_LD, 2), unit_key(Queue.HOST)])).tolist() == [2, 7]
    assert arch.peak_macs_per_cycle == 2 * 32 * 32
    assert key_text(unit_key(Queue.MXU, 1)) == "mxu[1]" and units[5].label == "mxu[1]"


@pytest.mark.parametrize("setting, message", [
    ("units.matrix=0", r"units\.matrix must be an integer in \[1, 16\] \(an instruction names its unit in 4 bits\)"),
    (f"units.vector={MAX_PER_KIND + 1}", r"units\.vector must be an integer in \[1, 16\]"),
    ("units.host=2", r"unknown Arch field 'units\.host'"),
])
def test_units_section_is_validated(setting, message):
    with pytest.raises(ArchError, match=message):
        load_arch("edge16", (setting,))


def test_an_arch_file_may_leave_the_units_section_out():
    toml = load_arch("edge16").to_toml()
    assert "[units]" in toml
    without = toml[:toml.index("[units]")] + toml[toml.index("[matrix]"):]
    assert Arch.from_toml(without) == load_arch("edge16")


def test_an_instruction_names_its_unit_in_assembly_and_binary():
    text = HEAD + ".sem s 0\n" + MM.format(acc=0) + " unit=1 signal(s)\nvpu.sync wait(s)\nhalt\n"
    program = parse_program(text)
    mm = program.instrs[0]
    assert (mm.queue, mm.unit, mm.unit_key) == (Queue.MXU, 1, int(Queue.MXU) | 1 << 4)
    assert format_program(program) == text
    blob = encode_program(program)
    assert blob[32 + 40 * 0 + 36 * 1 + 1] == int(Queue.MXU) | 1 << 4   # byte 1 of the first record: queue | unit << 4
    assert decode_program(blob) == program
    assert program.instrs[1].unit == 0 and " unit=" not in format_program(program).splitlines()[3]


def test_a_unit_out_of_range_or_on_the_dispatcher_is_refused():
    with pytest.raises(IsaError, match=r"unit \(which of its queue's units runs it\) must be an integer in \[0, 16\)"):
        Sync(on=Queue.VPU, unit=16)
    with pytest.raises(IsaError, match=r"barrier runs in the dispatcher, on no unit \(unit must be 0\)"):
        Barrier(unit=1)
    with pytest.raises(AsmSyntaxError, match=r"unknown field 'unit' for halt"):
        parse_program(HEAD + "halt unit=1\n")
    blob = bytearray(encode_program(parse_program(HEAD + "halt\n")))
    blob[32 + 1] |= 1 << 4
    with pytest.raises(EncodingError, match="halt: halt runs in the dispatcher"):
        decode_program(bytes(blob))


def test_one_semaphore_has_one_producer_unit_even_among_units_of_one_kind():
    text = (HEAD + ".sem s 0\n" + MM.format(acc=0) + " signal(s)\n" + MM.format(acc=0x1000) + " unit=1 signal(s)\n"
            "vpu.sync wait(s*2)\nhalt\n")
    with pytest.raises(VerifyError, match=r"semaphore s is signalled by mxu and by mxu\[1\]; each semaphore has one "
                                          r"producer queue"):
        verify(parse_program(text))


def test_two_units_of_one_kind_are_two_queues_for_happens_before_and_races():
    # both write ACC [0, 4096): on one unit the queue orders them, on two units nothing does
    same = parse_program(HEAD + MM.format(acc=0) + "\n" + MM.format(acc=0) + "\nhalt\n")
    two = parse_program(HEAD + MM.format(acc=0) + "\n" + MM.format(acc=0) + " unit=1\nhalt\n")
    assert find_races(same) == []
    hb = happens_before(two)
    assert hb.keys == (int(Queue.MXU), int(Queue.MXU) | 1 << 4) and not hb.ordered(0, 1)
    [race] = find_races(two)
    assert (race.first.pc, race.second.pc, race.memory) == (0, 1, "acc")
    assert str(race.second).startswith("mxu[1] pc 1 ")


def test_roles_say_how_a_unit_is_accounted():
    assert [u.role.time_part for u in UNITS] == ["memory_stall", "memory_stall", "compute", "compute", "host"]
    assert [u for u in UNITS if u.role is Role.MATRIX][0].part == "matrix"
    assert [u.per_core for u in UNITS] == [True, True, True, True, False]
