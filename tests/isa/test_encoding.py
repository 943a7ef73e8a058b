"""Binary encoding: record layout, exact round trips, error cases; and the program file helpers."""

import dataclasses
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from isa import Act, AsmSyntaxError, EncodingError, Opcode, Program, SemOp, Sync
from isa.asm import parse_program
from isa.encoding import RECORD_SIZE, decode_instr, decode_program, encode_instr, encode_program
from isa.files import read_program, write_program
from tests.isa.strategies import programs

TEXT = """\
.config rows=16 cols=8 spm=262144 acc=65536
.region A r2 4096
.sem s0 1
.sem s1 0
dma.ld shape[4,8] dst=spm:0x10<i8>{8,1} src=dram:A+0x20<u8>{16,-1} pad{1:2/3} fill=-5 wait(s1) signal(s0*3)
mxu.mm.z shape[2] m=4 k=8 n=16 acc=acc:0x0<i32>{64} acc.row=-64 a=spm:0x0<i8>{32} a.row=8 b=spm:0x100<u8>{128}
vpu.max.sum shape[3,4] dst=spm:0x0<f32>{4,0} src0=spm:0x40<f16>{8,2} imm=1.5
vpu.act.clamp shape[4] dst=spm:0x0<i8>{1} src=spm:0x10<i8>{1} lo=-3 hi=6
vpu.cvt shape[4] dst=spm:0x0<i8>{1} src=spm:0x10<f32>{4} scale=0.25 zp_in=-7 zp_out=9
vpu.rq shape[4] dst=spm:0x0<i32>{4} src=acc:0x0<i32>{4} prm=spm:0x100<i32>{0} zp=100000 lo=-5 hi=2000000
vpu.rq shape[4] dst=spm:0x0<i8>{1} src=acc:0x0<i32>{4} prm=spm:0x100<i32>{0} zp=-3 lo=-128 hi=127
mxu.sync signal(s1)
halt
"""
START = 32 + 40 + 2 * 36  # header, one region, two semaphores


@pytest.fixture
def prog() -> Program:
    return parse_program(TEXT)


@pytest.fixture
def data(prog) -> bytes:
    return encode_program(prog)


def record(data: bytes, k: int) -> bytes:
    return data[START + k * RECORD_SIZE:START + (k + 1) * RECORD_SIZE]


def patch(data: bytes, offset: int, fmt: str, *values) -> bytes:
    b = bytearray(data)
    struct.pack_into(fmt, b, offset, *values)
    return bytes(b)


def test_round_trip(prog, data):
    assert len(data) == START + len(prog.instrs) * RECORD_SIZE
    assert decode_program(data) == prog
    assert encode_program(decode_program(data)) == data


def test_header_layout(data):
    assert struct.unpack_from("<4sHH4IHHI", data) == (b"NPU0", 1, 0, 16, 8, 262144, 65536, 1, 2, 9)
    assert struct.unpack_from("<32sB3xI", data, 32) == (b"A" + bytes(31), 2, 4096)
    assert struct.unpack_from("<32sH2x", data, 72) == (b"s0" + bytes(30), 1)
    assert struct.unpack_from("<32sH2x", data, 108) == (b"s1" + bytes(30), 0)


def test_dma_record_layout(data):
    r = record(data, 0)
    assert r[:8] == bytes([Opcode.COPY, 0, 0, 0, 2, 0, 0, 0])
    assert struct.unpack_from("<4H", r, 8) == (0x0101, 0x8300, 0, 0)  # wait s1*1, signal s0*3
    assert struct.unpack_from("<5HBB", r, 16) == (4, 8, 0, 0, 0, 0, 0)
    assert struct.unpack_from("<II5i", r, 28) == (0x80000001, 0x10, 8, 1, 0, 0, 0)  # spm, i8
    assert struct.unpack_from("<II5i", r, 56) == (0x80000000 | 1 << 6 | 2 << 2, 0x20, 16, -1, 0, 0, 0)  # dram r2 u8
    assert r[84:112] == bytes(28)
    assert struct.unpack_from("<i", r, 112) == (-5,)
    assert r[116:] == bytes([0xFF, 0xFF, 2, 3] + [0xFF] * 6 + [0, 0])


def test_mxu_and_vpu_record_layout(data):
    mm, bin_, clamp, cvt, rq32, rq8, sync, halt = (record(data, k) for k in range(1, 9))
    assert struct.unpack_from("<BBHBBH", mm) == (Opcode.MM, 2, 1, 1, 0, 4) and mm[26:28] == bytes([8, 16])
    assert struct.unpack_from("<II5i", mm, 28) == (0x80000000 | 3 << 6 | 2, 0, 64, 0, 0, 0, -64)  # acc.row in slot 4
    assert struct.unpack_from("<II5i", mm, 56)[-1] == 8  # a.row
    assert struct.unpack_from("<BBHBB", bin_) == (Opcode.BIN, 3, 0b1010, 2, 5)  # .sum, src1 is imm; op max
    assert bin_[84:112] == bytes(28) and struct.unpack_from("<f", bin_, 112) == (1.5,)
    assert struct.unpack_from("<hhii", clamp, 116) == (0, 0, -3, 6) and clamp[5] == 2
    assert struct.unpack_from("<f", cvt, 112) == (0.25,) and struct.unpack_from("<hhii", cvt, 116) == (-7, 9, 0, 0)
    assert struct.unpack_from("<hhii", rq32, 116) == (2, 100000 - 2 * 65536, -5, 2000000)
    assert struct.unpack_from("<hhii", rq8, 116) == (0, -3, -128, 127)
    assert struct.unpack_from("<BBHBBH4H", sync) == (Opcode.SYNC, 2, 0, 0, 0, 0, 0x8101, 0, 0, 0)
    assert halt == bytes([Opcode.HALT, 15]) + bytes(126)


def test_fused_act_record_layout():
    p = parse_program(".config rows=16 cols=8 spm=262144 acc=65536\n"
                      "vpu.add shape[4] dst=acc:0x0<i32>{4} src0=acc:0x0<i32>{4} src1=spm:0x0<i32>{4} act=relu\n"
                      "vpu.mul shape[4] dst=spm:0x0<i8>{1} src0=acc:0x0<f32>{4} imm=0.5 act=clamp lo=-1.5 hi=6\n"
                      "vpu.add shape[4] dst=acc:0x0<i32>{4} src0=acc:0x0<i32>{4} src1=spm:0x0<i32>{4}\n")
    data = encode_program(p)
    relu, clamp, plain = (data[32 + k * RECORD_SIZE:32 + (k + 1) * RECORD_SIZE] for k in range(3))
    assert struct.unpack_from("<BBHBB", relu) == (Opcode.BIN, 3, (Act.RELU + 1) << 4, 1, 0)  # act + 1 in bits 4-7
    assert relu[116:] == bytes(12)
    assert struct.unpack_from("<BBHBB", clamp) == (Opcode.BIN, 3, 0b1000 | (Act.CLAMP + 1) << 4, 1, 2)  # imm
    assert struct.unpack_from("<hhff", clamp, 116) == (0, 0, -1.5, 6.0)  # f32 bounds for a float source
    # a binary op without act encodes as before: flag bits 4-7 and bytes 116-127 zero, so old programs decode the same
    assert struct.unpack_from("<H", plain, 2) == (0,) and plain[116:] == bytes(12)
    assert decode_program(data) == p
    bad = patch(data, 32 + 2, "<H", (Act.ABS + 1) << 4)  # not fusable
    with pytest.raises(EncodingError, match="instruction 0 .*act=abs cannot be fused into a binary op"):
        decode_program(bad)
    with pytest.raises(EncodingError, match="unknown activation 14"):
        decode_program(patch(data, 32 + 2, "<H", 15 << 4))
    with pytest.raises(EncodingError, match="lo/hi are the bounds of act=clamp"):
        decode_program(patch(data, 32 + 2 * RECORD_SIZE + 120, "<i", 3))


@pytest.mark.parametrize("k,n", [(256, 256), (1024, 300), (255, 65535)])
def test_finding4_matmul_k_and_n_above_255_round_trip(k, n):
    """A 256 x 256 (or larger) array's weight tiles: k and n are 16-bit, their high bytes in the sub-op byte (k)
    and the flags' high byte (n), so a record with k, n <= 255 is the one it always was."""
    text = (f".config rows={k} cols={n} spm=262144 acc=262144\n"
            f"mxu.mm.z shape[2] m=4 k={k} n={n} acc=acc:0x0<f32>{{64}} acc.row=64 a=spm:0x0<f32>{{32}} a.row=8 "
            f"b=spm:0x100<f32>{{128}}\n")
    p = parse_program(text)
    data = encode_program(p)
    mm = data[32:32 + RECORD_SIZE]
    assert (mm[26], mm[27], mm[5], mm[3]) == (k & 0xFF, n & 0xFF, k >> 8, n >> 8)
    assert mm[2] == 1   # .z stays in the flags' low byte
    assert decode_program(data) == p and encode_program(decode_program(data)) == data
    small = encode_program(parse_program(text.replace(f"k={k} n={n}", "k=255 n=255")))[32:32 + RECORD_SIZE]
    assert (small[26], small[27], small[5], small[3]) == (255, 255, 0, 0)


def test_instr_level_api(prog):
    for instr in prog.instrs:
        assert decode_instr(encode_instr(instr, prog), prog) == instr
    with pytest.raises(EncodingError, match="an instruction record has 128 bytes, not 3"):
        decode_instr(b"abc", prog)


@settings(max_examples=200, deadline=None)
@given(programs())
def test_program_binary_program_round_trip(p):
    data = encode_program(p)
    assert decode_program(data) == p
    assert encode_program(decode_program(data)) == data


@settings(max_examples=200, deadline=None)
@given(programs(max_instrs=4), st.data())
def test_decode_is_exact_or_rejects(p, draw):
    """A corrupted byte is either rejected with EncodingError or decodes to a program that encodes to the same bytes."""
    data = bytearray(encode_program(p))
    data[draw.draw(st.integers(0, len(data) - 1))] ^= draw.draw(st.integers(1, 255))
    try:
        q = decode_program(bytes(data))
    except EncodingError:
        return
    assert encode_program(q) == bytes(data)


# ---- errors --------------------------------------------------------------------------------------------------

DMA, MM, BIN = START, START + RECORD_SIZE, START + 2 * RECORD_SIZE


@pytest.mark.parametrize(("corrupt", "message"), [
    (lambda d: b"NPU1" + d[4:], r"bad magic b'NPU1', expected b'NPU0' \(not an npusim binary program\)"),
    (lambda d: patch(d, 4, "<H", 2), "unsupported encoding version 2, expected 1"),
    (lambda d: d[:20], "truncated program: 20 bytes, the header alone has 32"),
    (lambda d: d[:-1], r"truncated program: the header announces 1 regions, 2 semaphores and 9 instructions"),
    (lambda d: d + b"\0\0", "2 trailing bytes after the last instruction"),
    (lambda d: patch(d, 8, "<I", 0), r"program header: .config rows must be a positive 32-bit integer, not 0"),
    (lambda d: patch(d, 32, "<B", ord("9")), "program header: region name must be"),
    (lambda d: patch(d, 32, "<B", 0xC3), r"program header: name b'\\xc3' is not ASCII"),
    (lambda d: patch(d, 72, "<4s", b"s1\0\0"), "program header: semaphore 's1' is declared twice"),
    (lambda d: patch(d, DMA, "<B", 42), r"instruction 0 \(byte 144\): unknown opcode 42"),
    (lambda d: patch(d, DMA + 1, "<B", 7), r"instruction 0 \(byte 144\): unknown queue 7"),
    (lambda d: patch(d, DMA + 4, "<B", 6), "instruction 0 .*: ndim must be at most 5, not 6"),
    (lambda d: patch(d, DMA + 28, "<I", 0x80000000 | 9 << 6 | 1), "instruction 0 .*: unknown dtype code 9"),
    (lambda d: patch(d, DMA + 28, "<I", 0x80000003), "instruction 0 .*: unknown memory space 3"),
    (lambda d: patch(d, DMA + 56, "<I", 0x80000000 | 1 << 6 | 5 << 2),
     "instruction 0 .*: operand refers to region index 5, which the program does not declare"),
    (lambda d: patch(d, DMA + 56, "<I", 0), "instruction 0 .*: operand src is missing"),
    (lambda d: patch(d, DMA + 56, "<I", 0x80000000 | 2 << 6 | 2 << 2),
     "instruction 0 .*: copy: DMA copies bytes: dst and src dtypes must have the same size, not i8 and i16"),
    (lambda d: patch(d, DMA + 8, "<H", 0x0109), "instruction 0 .*: sync slot names semaphore 9, but the program "
                                                "declares 2"),
    (lambda d: patch(d, DMA + 116, "<2B", 20, 0), r"instruction 0 .*: copy: pad amounts must be in \[0, 15\]"),
    (lambda d: patch(d, BIN + 5, "<B", 99), "instruction 2 .*: unknown binary op 99"),
    (lambda d: patch(d, MM + 26, "<B", 0), r"instruction 1 .*: mm: k must be in \[1, 65535\], not 0"),
    (lambda d: patch(d, 6, "<H", 1), r"non-canonical encoding at byte 6 \(the header\): reserved bits, padding"),
    (lambda d: patch(d, 33 + 32, "<B", 1), r"non-canonical encoding at byte 65 \(the header\)"),
    (lambda d: patch(d, DMA + 5, "<B", 1), r"non-canonical encoding at byte 149 \(instruction 0, record byte 5\)"),
    (lambda d: patch(d, MM + 2, "<H", 1 | 1 << 4), r"non-canonical .*\(instruction 1, record byte 2\)"),
    (lambda d: patch(d, MM + 84 + 24, "<i", 7), r"non-canonical .*\(instruction 1, record byte 108\)"),
    (lambda d: patch(d, BIN + 84, "<I", 0x80000001), r"non-canonical .*\(instruction 2, record byte 84\)"),
])
def test_decode_errors(data, corrupt, message):
    with pytest.raises(EncodingError, match=message):
        decode_program(corrupt(data))


def test_encode_errors(prog):
    mm = prog.instrs[1]
    object.__setattr__(mm, "m", 70000)  # bypass validation: a value that does not fit its u16 field
    with pytest.raises(EncodingError, match=r"instruction 1: mxu.mm.z .* a value does not fit its binary field"):
        encode_program(prog)
    bad = Program(prog.config, (), (), (Sync(on=prog.instrs[-2].on, waits=(SemOp("zz"),)),))
    with pytest.raises(EncodingError, match="instruction 0: semaphore 'zz' is not declared in the program"):
        encode_program(bad)
    bad = dataclasses.replace(prog, regions=())
    with pytest.raises(EncodingError, match="instruction 0: region 'A' is not declared in the program"):
        encode_program(bad)


# ---- files ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["prog.npub", "prog.s", "prog.asm", "PROG.NPUB"])
def test_files_round_trip(tmp_path, prog, name):
    path = tmp_path / name
    write_program(prog, path)
    assert read_program(path) == prog
    assert read_program(str(path)) == prog
    if name.lower().endswith(".npub"):
        assert path.read_bytes() == encode_program(prog)
    else:
        assert path.read_text() == TEXT


def test_file_errors_name_the_file(tmp_path):
    text = tmp_path / "bad.s"
    text.write_text(".config rows=1 cols=1 spm=1 acc=1\nhalt now\n")
    with pytest.raises(AsmSyntaxError, match=rf"^{text}:2:6: unknown field 'now' for halt"):
        read_program(text)
    binary = tmp_path / "bad.npub"
    binary.write_bytes(b"NPU0")
    with pytest.raises(EncodingError, match=rf"^{binary}: truncated program"):
        read_program(binary)
