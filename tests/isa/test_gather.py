"""The row gather in the ISA: validation messages, assembly, the binary record, the verifier's whole-table bound."""

import re
import struct

import pytest

from isa import (
    DType,
    EncodingError,
    Gather,
    Halt,
    IsaError,
    Opcode,
    Program,
    ProgramConfig,
    Queue,
    Region,
    Space,
    VerifyError,
    View,
)
from isa.asm import format_instr, parse_instr, parse_program
from isa.encoding import RECORD_SIZE, decode_program, encode_program
from isa.verify import verify

CFG = ProgramConfig(rows=16, cols=16, spm=262144, acc=65536)
REGIONS = (Region("T", 3, 8192),)


def spm(base, dtype, *strides):
    return View(Space.SPM, base, dtype, strides)


def vpu_gather(**kw):
    args = dict(queue=Queue.VPU, shape=(4, 8), row=16, rows=100, dst=spm(0, DType.F32, 512, 64, 4),
                table=spm(0x8000, DType.F32, 64), idx=spm(0x4000, DType.I32, 32, 4), fill=0.0) | kw
    return Gather(**args)


TEXT = ("vpu.gather shape[4,8] row=16 rows=100 dst=spm:0x0<f32>{512,64,4} table=spm:0x8000<f32>{64} "
        "idx=spm:0x4000<i32>{32,4} fill=0.0")


def test_assembly_both_ways():
    g = vpu_gather()
    assert format_instr(g) == TEXT and parse_instr(TEXT) == g
    p = Program(CFG, REGIONS, (), ())
    dma = ("dma.ld.gather shape[3] row=4 rows=7 dst=acc:0x40<i8>{4,1} table=dram:T+0x10<u8>{8} idx=spm:0x0<i32>{4} "
           "fill=-1")
    g = parse_instr(dma, p)
    assert (g.queue, g.table.region, g.table.strides, g.fill) == (Queue.DMA_LD, "T", (8,), -1)
    assert format_instr(g) == dma
    # fill is optional when parsing (0), and always printed: a negative index's value is part of what it does
    assert parse_instr(TEXT.replace(" fill=0.0", "")) == vpu_gather()


@pytest.mark.parametrize("change,message", [
    (dict(queue=Queue.MXU), "a gather goes to vpu or dma.ld, not mxu"),
    (dict(shape=(2, 2, 2, 2, 2), dst=spm(0, DType.F32, 4, 4, 4, 4, 4, 4), idx=spm(0, DType.I32, 4, 4, 4, 4, 4)),
     "shape must have 1 to 4 dimensions, not 5"),
    (dict(dst=spm(0, DType.F32, 512, 64)),
     "operand dst must have 3 strides (one per shape dimension, then the element stride inside a row), not 2"),
    (dict(table=spm(0, DType.F32, 64, 4)), "operand table must have 1 strides (the byte stride between rows), not 2"),
    (dict(table=View(Space.DRAM, 0, DType.F32, (64,), "T")), "operand table must be in spm/acc, not dram"),
    (dict(queue=Queue.DMA_LD, table=View(Space.ACC, 0, DType.F32, (64,))),
     "operand table must be in dram/spm, not acc"),
    (dict(dst=View(Space.DRAM, 0, DType.F32, (512, 64, 4), "T")), "operand dst must be in spm/acc, not dram"),
    (dict(idx=spm(0, DType.I16, 16, 2)), "gather indices must be i32, not i16"),
    (dict(table=spm(0, DType.F16, 64)), "dst and table dtypes must have the same size, not f32 and f16"),
    (dict(row=0), "row (elements per table row) must be an integer in [1, 65535], not 0"),
    (dict(rows=0), "rows (table rows) must be an integer in [1, 2147483647], not 0"),
    (dict(rows=2**31), "rows (table rows) must be an integer in [1, 2147483647], not 2147483648"),
    (dict(dst=spm(0, DType.I8, 128, 16, 1), table=spm(0, DType.U8, 16), fill=300),
     "fill must be in [-128, 127] for i8"),
])
def test_validation_messages(change, message):
    with pytest.raises(IsaError, match=re.escape(message)):
        vpu_gather(**change)


def test_fill_takes_the_destination_type():
    assert vpu_gather(fill=0.1).fill == 0.10000000149011612            # rounded to f32
    assert vpu_gather(dst=spm(0, DType.I32, 512, 64, 4), table=spm(0, DType.I32, 64), fill=-7).fill == -7


def test_views_give_the_whole_table_span():
    # the table's footprint is rows x row elements at its row stride, whatever the shape: [0x8000, 0x8000 + 99*64 + 64)
    roles = {role: view.span(vpu_gather().shape, extra) for role, view, extra in vpu_gather().views()}
    assert roles == {"dst": (0, 3 * 512 + 7 * 64 + 15 * 4 + 4), "table": (0x8000, 0x8000 + 100 * 64),
                     "idx": (0x4000, 0x4000 + 3 * 32 + 7 * 4 + 4)}


def test_verifier_bounds_the_whole_table():
    fits = vpu_gather(table=spm(262144 - 100 * 64, DType.F32, 64))
    verify(Program(CFG, (), (), (fits, Halt())))
    one_row_out = vpu_gather(table=spm(262144 - 100 * 64 + 4, DType.F32, 64))
    with pytest.raises(VerifyError, match=r"pc 0 .*operand table touches bytes \[0x3e704, 0x40004\) outside the "
                                          r"262144-byte SPM"):
        verify(Program(CFG, (), (), (one_row_out, Halt())))
    dram = Gather(queue=Queue.DMA_LD, shape=(4,), row=16, rows=129, dst=spm(0, DType.F32, 64, 4),
                  table=View(Space.DRAM, 0, DType.F32, (64,), "T"), idx=spm(0x4000, DType.I32, 4))
    with pytest.raises(VerifyError, match=r"operand table touches bytes \[0x0, 0x2040\) outside the 8192-byte "
                                          r"region T"):
        verify(Program(CFG, REGIONS, (), (dram, Halt())))
    with pytest.raises(VerifyError, match="operand table must be aligned to its 4-byte elements"):
        verify(Program(CFG, (), (), (vpu_gather(table=spm(0x8000, DType.F32, 66)), Halt())))


def test_binary_record_layout():
    p = parse_program(".config rows=16 cols=16 spm=262144 acc=65536\n.region T r3 8192\n" + TEXT + "\n"
                      "dma.ld.gather shape[3] row=4 rows=7 dst=acc:0x40<i8>{4,1} table=dram:T+0x10<u8>{8} "
                      "idx=spm:0x0<i32>{4} fill=-1\n")
    data = encode_program(p)
    start = len(data) - 2 * RECORD_SIZE
    vpu, dma = data[start:start + RECORD_SIZE], data[start + RECORD_SIZE:]
    assert struct.unpack_from("<BBHBBH", vpu) == (Opcode.GATHER, Queue.VPU, 0, 2, 0, 16)   # R in m
    assert struct.unpack_from("<5HBB", vpu, 16) == (4, 8, 0, 0, 0, 0, 0)
    f32, i32 = DType.F32.code << 6, DType.I32.code << 6
    assert struct.unpack_from("<II5i", vpu, 28) == (0x80000001 | f32, 0, 512, 64, 4, 0, 0)      # dst: ndim + 1
    assert struct.unpack_from("<II5i", vpu, 56) == (0x80000001 | f32, 0x8000, 64, 0, 0, 0, 0)   # table: rs
    assert struct.unpack_from("<II5i", vpu, 84) == (0x80000001 | i32, 0x4000, 32, 4, 0, 0, 0)
    assert struct.unpack_from("<i", vpu, 112) == (100,) and vpu[116:] == bytes(12)              # N; fill 0.0
    assert struct.unpack_from("<BBHBBH", dma) == (Opcode.GATHER, Queue.DMA_LD, 0, 1, 0, 4)
    assert struct.unpack_from("<II", dma, 56) == (0x80000000 | DType.U8.code << 6 | 3 << 2, 0x10)  # dram region r3
    assert struct.unpack_from("<ii", dma, 112) == (7, -1) and dma[120:] == bytes(8)
    assert decode_program(data) == p
    with pytest.raises(EncodingError, match="non-canonical encoding"):   # a stride slot past the row stride
        decode_program(data[:start + 56 + 12] + b"\1" + data[start + 56 + 13:])
    with pytest.raises(EncodingError, match="rows .table rows. must be an integer in"):
        decode_program(data[:start + 112] + struct.pack("<i", 0) + data[start + 116:])
