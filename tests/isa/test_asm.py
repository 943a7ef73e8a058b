"""Text assembly: parsing, canonical printing, exact round trips and error messages."""

import pytest
from hypothesis import given, settings

from isa import (
    Act,
    AsmSyntaxError,
    Barrier,
    BinOp,
    DmaCopy,
    DmaFill,
    DType,
    Halt,
    MatMul,
    Pad,
    Queue,
    Reduce,
    SemOp,
    Space,
    Sync,
    VecBinary,
    VecConvert,
    VecRequant,
    VecUnary,
    View,
)
from isa.asm import format_instr, format_program, parse_instr, parse_program
from tests.isa.strategies import programs

HEADER = """\
.config rows=16 cols=16 spm=262144 acc=65536
.region A r0 32768
.region C r3 4096
.sem a_empty 1
.sem a_full 0
"""

BODY = """\
dma.ld shape[64,128] dst=spm:0x0<i8>{128,1} src=dram:A+0x80<i8>{256,1} pad{0:1/0,1:1/1} fill=0 wait(a_empty) signal(a_full*2)
dma.st shape[64,64] dst=dram:C+0x0<i8>{64,1} src=spm:0x8000<i8>{64,1}
dma.ld.fill shape[16,16] dst=acc:0x0<i32>{64,4} value=0
dma.st.fill shape[8] dst=spm:0x40<f16>{2} value=-1.5
mxu.mm.z shape[4,8] m=64 k=16 n=16 acc=acc:0x0<i32>{4096,0} acc.row=64 a=spm:0x0<i8>{0,16} a.row=128 b=spm:0x4000<i8>{2048,256}
vpu.add shape[4,64] dst=spm:0x0<i8>{64,1} src0=spm:0x100<i8>{64,1} src1=spm:0x200<i8>{64,1}
vpu.mul.sum.z shape[8,3] dst=acc:0x0<i32>{4,0} src0=spm:0x0<i8>{3,1} imm=3
vpu.act.relu shape[64] dst=spm:0x0<i8>{1} src=spm:0x100<i8>{1}
vpu.act.clamp shape[64] dst=spm:0x0<i8>{1} src=spm:0x100<i8>{1} lo=0 hi=6
vpu.red.max.z shape[4,16] dst=spm:0x0<i8>{1,0} src=spm:0x100<i8>{16,1}
vpu.act.exp.sum shape[4,16] dst=spm:0x0<f32>{4,0} src=spm:0x100<f16>{32,2}
vpu.act.mov shape[4] dst=spm:0x0<bf16>{2} src=spm:0x100<bf16>{2}
vpu.cvt shape[64] dst=spm:0x0<i8>{1} src=acc:0x0<f32>{4} scale=0.5 zp_in=0 zp_out=3
vpu.rq shape[4,64,16] dst=spm:0x0<i8>{16,64,1} src=acc:0x0<i32>{4096,64,4} prm=spm:0xa000<i32>{192,0,12} zp=-3 lo=-128 hi=127
vpu.add shape[16,64] dst=acc:0x0<i32>{256,4} src0=acc:0x0<i32>{256,4} src1=spm:0x0<i32>{0,4} act=relu
vpu.mul shape[64] dst=spm:0x0<i8>{1} src0=acc:0x0<f32>{4} imm=0.5 act=clamp lo=-1.5 hi=6.0
dma.ld.sync wait(a_full) signal(a_empty)
vpu.sync wait(a_empty, a_full*2)
barrier
halt
"""  # noqa: E501

CANONICAL = HEADER + BODY


def spm(base, dtype, *strides):
    return View(Space.SPM, base, dtype, strides)


def acc(base, dtype, *strides):
    return View(Space.ACC, base, dtype, strides)


I8, I32, F32 = DType.I8, DType.I32, DType.F32


def test_parse_header_and_examples():
    p = parse_program(CANONICAL)
    assert (p.config.rows, p.config.cols, p.config.spm, p.config.acc) == (16, 16, 262144, 65536)
    assert [(r.name, r.index, r.size) for r in p.regions] == [("A", 0, 32768), ("C", 3, 4096)]
    assert [(s.name, s.init) for s in p.sems] == [("a_empty", 1), ("a_full", 0)]
    i = p.instrs
    assert i[0] == DmaCopy(queue=Queue.DMA_LD, shape=(64, 128), dst=spm(0, I8, 128, 1),
                           src=View(Space.DRAM, 0x80, I8, (256, 1), "A"), pad=(Pad(0, 1, 0), Pad(1, 1, 1)),
                           waits=(SemOp("a_empty"),), signals=(SemOp("a_full", 2),))
    assert i[1].dst == View(Space.DRAM, 0, I8, (64, 1), "C") and i[1].queue is Queue.DMA_ST
    assert i[2] == DmaFill(queue=Queue.DMA_LD, shape=(16, 16), dst=acc(0, I32, 64, 4), value=0)
    assert i[3] == DmaFill(queue=Queue.DMA_ST, shape=(8,), dst=spm(0x40, DType.F16, 2), value=-1.5)
    assert i[4] == MatMul(shape=(4, 8), m=64, k=16, n=16, acc=acc(0, I32, 4096, 0), acc_row=64, a=spm(0, I8, 0, 16),
                          a_row=128, b=spm(0x4000, I8, 2048, 256), zero=True)
    assert i[5] == VecBinary(op=BinOp.ADD, shape=(4, 64), dst=spm(0, I8, 64, 1), src0=spm(0x100, I8, 64, 1),
                             src1=spm(0x200, I8, 64, 1))
    assert i[6] == VecBinary(op=BinOp.MUL, shape=(8, 3), dst=acc(0, I32, 4, 0), src0=spm(0, I8, 3, 1), imm=3,
                             reduce=Reduce.SUM, zero=True)
    assert i[7] == VecUnary(fn=Act.RELU, shape=(64,), dst=spm(0, I8, 1), src=spm(0x100, I8, 1))
    assert i[8] == VecUnary(fn=Act.CLAMP, shape=(64,), dst=spm(0, I8, 1), src=spm(0x100, I8, 1), lo=0, hi=6)
    assert i[9] == VecUnary(fn=Act.MOV, shape=(4, 16), dst=spm(0, I8, 1, 0), src=spm(0x100, I8, 16, 1),
                            reduce=Reduce.MAX, zero=True)
    assert i[10].fn is Act.EXP and i[10].reduce is Reduce.SUM and not i[10].zero
    assert i[11] == VecUnary(fn=Act.MOV, shape=(4,), dst=spm(0, DType.BF16, 2), src=spm(0x100, DType.BF16, 2))
    assert i[12] == VecConvert(shape=(64,), dst=spm(0, I8, 1), src=acc(0, F32, 4), scale=0.5, zp_out=3)
    assert i[13] == VecRequant(shape=(4, 64, 16), dst=spm(0, I8, 16, 64, 1), src=acc(0, I32, 4096, 64, 4),
                               prm=spm(0xA000, I32, 192, 0, 12), zp=-3, lo=-128, hi=127)
    assert i[14] == VecBinary(op=BinOp.ADD, shape=(16, 64), dst=acc(0, I32, 256, 4), src0=acc(0, I32, 256, 4),
                             src1=spm(0, I32, 0, 4), act=Act.RELU)
    assert i[15] == VecBinary(op=BinOp.MUL, shape=(64,), dst=spm(0, I8, 1), src0=acc(0, F32, 4), imm=0.5,
                              act=Act.CLAMP, lo=-1.5, hi=6)
    assert i[16] == Sync(on=Queue.DMA_LD, waits=(SemOp("a_full"),), signals=(SemOp("a_empty"),))
    assert i[17] == Sync(on=Queue.VPU, waits=(SemOp("a_empty"), SemOp("a_full", 2)))
    assert i[18:] == (Barrier(), Halt())


def test_canonical_text_round_trip():
    assert format_program(parse_program(CANONICAL)) == CANONICAL
    p = parse_program(CANONICAL)
    assert parse_program(format_program(p)) == p


def test_instr_str_and_parse_instr():
    p = parse_program(CANONICAL)
    for line, instr in zip(BODY.splitlines(), p.instrs):
        assert str(instr) == format_instr(instr) == line
        assert parse_instr(line, p) == instr


def test_free_form_text_parses_like_canonical():
    text = r"""
    # comments, blank lines, continuations, constants and expressions
    .region A r0 32768 ; a region before .config is fine
    .config rows=16 cols=0x10 spm=256*1024 acc=65536
    .region C r3 0x1000
    .sem a_empty 1
    .sem a_full                        ; init defaults to 0
    .equ ROWS 64
    .equ TILE (ROWS + 64) // 2 * 0x100
    dma.ld shape[ROWS,128] src=dram:A+TILE//0x100*2<i8>{256,1} \
           dst=spm:0<i8>{2*ROWS,1} signal(a_full*2) wait(a_empty) pad{1:1/1,0:1/0}
    dma.st shape[64,64] dst=dram:C<i8>{64,1} src=spm:0x8000<i8>{64,1}
    dma.ld.fill shape[16,16] dst=acc:0<i32>{64,4}
    """
    p = parse_program(text)
    canon = parse_program(HEADER + "\n".join(BODY.splitlines()[:3]) + "\n")
    assert p.instrs == canon.instrs
    assert set(p.regions) == set(canon.regions) and p.sems == canon.sems and p.config == canon.config


@pytest.mark.parametrize(("text", "value"), [
    ("1.5e3", 1500.0), ("-2.5E-1", -0.25), (".5", 0.5), ("3.", 3.0), ("1_000.0", 1000.0), ("inf", float("inf")),
    ("-inf", float("-inf")), ("0x7f", 127.0), ("-1e+2", -100.0),
])
def test_float_immediates(text, value):
    i = parse_instr(f"dma.ld.fill shape[1] dst=spm:0x0<f32>{{4}} value={text}")
    assert i.value == value and isinstance(i.value, float)


def test_nan_immediate_parses():
    i = parse_instr("vpu.max shape[2] dst=spm:0x0<f32>{4} src0=spm:0x8<f32>{4} imm=nan")
    assert i.imm != i.imm and str(i).endswith("imm=nan")


def test_optional_fields_printed_only_when_not_default():
    i = parse_instr("dma.ld shape[4] dst=spm:0x0<f32>{4} src=spm:0x10<f32>{4} fill=2")
    assert str(i).endswith("fill=2.0")
    i = parse_instr("dma.ld shape[4] dst=spm:0x0<f32>{4} src=spm:0x10<f32>{4} pad{0:1/1}")
    assert str(i).endswith("pad{0:1/1} fill=0.0")
    i = parse_instr("vpu.act.relu shape[4] dst=spm:0x0<f32>{4} src=spm:0x10<f32>{4} lo=0 hi=0")
    assert "lo=" not in str(i)
    i = parse_instr("vpu.act.relu shape[4] dst=spm:0x0<f32>{4} src=spm:0x10<f32>{4} hi=6")
    assert str(i).endswith("lo=0.0 hi=6.0")
    i = parse_instr("vpu.act.mov.sum shape[4] dst=spm:0x0<f32>{0} src=spm:0x10<f32>{4}")
    assert str(i) == "vpu.red.sum shape[4] dst=spm:0x0<f32>{0} src=spm:0x10<f32>{4}"
    i = parse_instr("vpu.add shape[4] dst=spm:0x0<i8>{1} src0=spm:0x10<i8>{1} imm=0")
    assert str(i).endswith("src0=spm:0x10<i8>{1} imm=0")
    i = parse_instr("vpu.add shape[4] dst=spm:0x0<i8>{1} src0=spm:0x10<i8>{1} imm=1 act=clamp lo=0 hi=0")
    assert str(i).endswith("imm=1 act=clamp") and i.act is Act.CLAMP


@settings(max_examples=200, deadline=None)
@given(programs())
def test_program_text_program_round_trip(p):
    text = format_program(p)
    assert parse_program(text) == p
    assert format_program(parse_program(text)) == text


# ---- errors --------------------------------------------------------------------------------------------------

V = "dst=spm:0x0<i8>{1} src=spm:0x10<i8>{1}"


@pytest.mark.parametrize(("line", "where", "message"), [
    # unknown mnemonic, with a suggestion
    ("vpu.mull shape[4] " + V, "6:1", r"unknown mnemonic 'vpu.mull'; did you mean 'vpu.mul'\?"),
    ("frobnicate", "6:1", "unknown mnemonic 'frobnicate'"),
    # fields: unknown, duplicate, missing, trailing garbage
    ("halt foo=1", "6:6", "unknown field 'foo' for halt, expected one of: wait, signal"),
    ("vpu.act.relu shape[4] " + V + " dst=spm:0x0<i8>{1}", "6:62", "duplicate field 'dst'"),
    ("vpu.act.relu shape[4] dst=spm:0x0<i8>{1}", "6:1", "missing field 'src' for vpu.act.relu"),
    ("vpu.act.relu " + V, "6:1", "missing field 'shape' for vpu.act.relu"),
    ("halt 5", "6:6", "expected a field name or end of line, found '5'"),
    ("halt wait", "6:10", r"expected '\(' after wait, found end of line"),
    ("vpu.act.relu shape[4] dst:spm:0x0<i8>{1}", "6:26", "expected '=' after dst, found ':'"),
    # shapes and numbers
    ("vpu.act.relu shape[4 4] " + V, "6:22", "expected ',' or ']' after a shape extent, found '4'"),
    ("vpu.act.relu shape[4x] " + V, "6:20", "malformed number '4x'"),
    ("vpu.act.relu shape[1.5] " + V, "6:20", "expected an integer, found 1.5"),
    ("vpu.act.relu shape[] " + V, "6:1", "shape must have 1 to 5 dimensions, not 0"),
    ("vpu.act.relu shape[N] " + V, "6:20", r"undefined name 'N' \(define it with .equ\)"),
    ("vpu.act.relu shape[4//0] " + V, "6:21", "division by zero"),
    ("vpu.act.relu shape[(4] " + V, "6:22", r"expected '\)' to close '\(', found '\]'"),
    # views
    ("vpu.act.relu shape[4] dst=spx:0x0<i8>{1} src=spm:0x10<i8>{1}", "6:27",
     "unknown memory space 'spx', expected dram, spm or acc"),
    ("vpu.act.relu shape[4] dst=spm0x0<i8>{1} src=spm:0x10<i8>{1}", "6:27", "unknown memory space 'spm0x0'"),
    ("vpu.act.relu shape[4] dst=spm:0x0{1} src=spm:0x10<i8>{1}", "6:34",
     "expected '<' before the view's dtype, found '{'"),
    ("vpu.act.relu shape[4] dst=spm:0x0<i9>{1} src=spm:0x10<i8>{1}", "6:35",
     "unknown dtype 'i9', expected one of i8, u8, i16, i32, f16, bf16, f32"),
    ("vpu.act.relu shape[4] dst=spm:0x0<i8>{1 2} src=spm:0x10<i8>{1}", "6:41", "expected ',' or '}' after a stride"),
    ("vpu.act.relu shape[4] dst=spm:0xg<i8>{1} src=spm:0x10<i8>{1}", "6:31", "malformed number '0xg'"),
    ("vpu.act.relu shape[4] dst=spm:-1<i8>{1} src=spm:0x10<i8>{1}", "6:27", r"view base must be in \[0, 2\*\*32\)"),
    ("dma.ld shape[4] dst=dram:B+0x0<i8>{1} src=spm:0x10<i8>{1}", "6:26",
     r"unknown region 'B' \(declare it with .region\)"),
    ("dma.ld shape[4] dst=dram:0x0<i8>{1} src=spm:0x10<i8>{1}", "6:26", "expected a region name, found '0x0'"),
    # semaphores
    ("vpu.sync wait(zz)", "6:15", r"unknown semaphore 'zz' \(declare it with .sem\)"),
    ("vpu.sync signal(s*200)", "6:17", r"semaphore count must be in \[1, 127\], not 200"),
    ("vpu.sync wait(s s)", "6:17", r"expected ',' or '\)' after a semaphore, found 's'"),
    # errors of the instruction classes carry the mnemonic's position
    ("barrier wait(s)", "6:1", "barrier takes no semaphore operations"),
    ("vpu.add.z shape[4] dst=spm:0x0<i8>{1} src0=spm:0x10<i8>{1} imm=1", "6:1",
     r"vpu.add: .z initializes a reduction; it needs .sum/.max/.min"),
    # fused activations: only relu and clamp, no reduction, lo/hi only with clamp
    ("vpu.add shape[4] dst=spm:0x0<f32>{4} src0=spm:0x10<f32>{4} imm=1 act=sigmoid", "6:1",
     r"vpu.add: act=sigmoid cannot be fused into a binary op; allowed: relu, clamp \(apply others with a vpu.act"),
    ("vpu.sub shape[4] dst=spm:0x0<i8>{1} src0=spm:0x10<i8>{1} imm=1 act=abs", "6:1",
     "vpu.sub: act=abs cannot be fused into a binary op; allowed: relu, clamp"),
    ("vpu.add shape[4] dst=spm:0x0<i8>{1} src0=spm:0x10<i8>{1} imm=1 act=rleu", "6:68",
     "unknown activation 'rleu', expected one of: mov, relu, clamp, abs"),
    ("vpu.add.sum shape[4] dst=spm:0x0<i8>{0} src0=spm:0x10<i8>{1} imm=1 act=relu", "6:1",
     r"vpu.add: a fused act does not combine with a reduction \(.sum\)"),
    ("vpu.add shape[4] dst=spm:0x0<i8>{1} src0=spm:0x10<i8>{1} imm=1 act=relu hi=6", "6:1",
     "vpu.add: lo/hi are the bounds of act=clamp; they must be 0 without it, not lo=0 hi=6"),
    ("vpu.add shape[4] dst=spm:0x0<i8>{1} src0=spm:0x10<i8>{1} imm=1 act=clamp lo=6 hi=0", "6:1",
     "vpu.add: clamp needs lo <= hi, not lo=6 hi=0"),
    ("vpu.add shape[4] dst=spm:0x0<i8>{1} src0=spm:0x10<i8>{1} imm=1 act=clamp lo=0.5 hi=6", "6:1",
     "lo must be an integer for i32, not 0.5"),
    # tokens, directives, declarations
    ("halt @", "6:6", "unexpected character '@'"),
    ("halt \\ x", "6:8", r"expected end of line after '\\' \(line continuation\), found 'x'"),
    (".sem t 0 junk", "6:10", "expected end of line, found 'junk'"),
    (".sem s 1", "6:6", "semaphore 's' is declared twice"),
    (".sem 9t 1", "6:6", "expected a semaphore name, found '9t'"),
    (".sem t 300", "6:6", r"semaphore t initial count must be in \[0, 255\], not 300"),
    (".region A 0 16", "6:9", "region 'A' is declared twice"),
    (".region B 0 16", "6:11", "expected a region index like r0, found '0'"),
    (".region B r0 16", "6:11", "region index r0 is used twice"),
    (".region B r16 16", "6:9", r"region index must be in \[0, 16\), not 16"),
    (".equ 2X 1", "6:6", "expected a constant name, found '2X'"),
    (".equ inf 1", "6:6", ".equ name must be letters, digits and '_' not starting with a digit, not 'inf'"),
    (".equ X 1.5", "6:8", "expected an integer, found 1.5"),
    (".foo 1", "6:1", r"unknown directive '.foo', expected .config, .region, .sem or .equ"),
    (".config rows=1 cols=1 spm=1 acc=1", "6:1", ".config is given twice"),
    ("5 halt", "6:1", "expected a mnemonic or a directive, found '5'"),
])
def test_syntax_errors(line, where, message):
    text = ".config rows=16 cols=16 spm=262144 acc=65536\n.region A r0 32768\n.sem s 0\n\n; comment\n" + line
    with pytest.raises(AsmSyntaxError, match=rf"^prog\.s:{where}: {message}"):
        parse_program(text, "prog.s")


def test_missing_config():
    with pytest.raises(AsmSyntaxError, match=r"^<asm>:2:1: missing .config: it must come before the first"):
        parse_program(".sem s 0\nhalt\n")
    with pytest.raises(AsmSyntaxError, match=r"^<asm>:1:1: missing .config directive"):
        parse_program("; nothing\n.sem s 0\n")
    with pytest.raises(AsmSyntaxError, match=r"^<asm>:1:1: missing field 'acc' for .config"):
        parse_program(".config rows=1 cols=1 spm=1\n")
    with pytest.raises(AsmSyntaxError, match=r"^<asm>:1:1: .config rows must be a positive 32-bit integer, not 0"):
        parse_program(".config rows=0 cols=1 spm=1 acc=1\n")


def test_isa_error_is_reraised_at_the_mnemonic():
    text = ".config rows=16 cols=16 spm=262144 acc=65536\n" + "; padding\n" * 10 + \
        "        dma.ld shape[4] dst=spm:0x0<i8>{1} src=spm:0x10<i16>{2}\n"
    with pytest.raises(AsmSyntaxError) as info:
        parse_program(text, "prog.s")
    e = info.value
    assert (e.line, e.col, e.source) == (12, 9, "prog.s")
    assert str(e) == ("prog.s:12:9: DMA copies bytes: dst and src dtypes must have the same size, not i8 and i16 "
                      "(use vpu.cvt to convert)")


def test_errors_on_continued_lines_point_at_the_physical_line():
    text = ".config rows=1 cols=1 spm=1 acc=1\nvpu.act.relu shape[4] \\\n   dst=spm:0x0<i8>{1} src=spm:0x0<q8>{1}\n"
    with pytest.raises(AsmSyntaxError, match=r"^<asm>:3:35: unknown dtype 'q8'"):
        parse_program(text)
