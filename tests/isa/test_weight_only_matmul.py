"""Weight-only mixed-precision ``mxu.mm``: a float A (f16/bf16/f32) by i8/u8 codes B, accumulating in f32. What the
instruction accepts and refuses, its operands' byte extents, its cost (SPM bytes per operand's own element size,
the cycles of the float matmul) and its assembly and binary round trips. Values: tests/functional/test_cases.py."""

import re

import pytest

from isa import DType, Halt, IsaError, MatMul, Program, ProgramConfig, Space, VerifyError, View
from isa.arch import load_arch
from isa.asm import format_instr, parse_instr
from isa.cost import instr_cost, mxu_cycles
from isa.encoding import decode_instr, encode_instr
from npusim import simulate

F32, F16, BF16, I8, U8, I32 = DType.F32, DType.F16, DType.BF16, DType.I8, DType.U8, DType.I32


def mm(a: DType, b: DType, acc: DType = F32, m: int = 5, k: int = 16, n: int = 12, points: int = 3) -> MatMul:
    """``points`` loop points, each its own k x n B tile (so ws folds do not share it)."""
    return MatMul(shape=(points,), m=m, k=k, n=n, acc=View(Space.ACC, 0, acc, (0,)), acc_row=4 * n,
                  a=View(Space.SPM, 0, a, (m * k * a.size,)), a_row=k * a.size,
                  b=View(Space.SPM, 8192, b, (k * n * b.size,)))


@pytest.mark.parametrize("a", [F32, F16, BF16])
@pytest.mark.parametrize("b", [I8, U8])
def test_float_activations_by_byte_codes_accumulate_in_f32(a, b):
    assert mm(a, b).acc.dtype is F32
    with pytest.raises(IsaError, match=f"^mxu.mm with {a.text} operands accumulates in f32, not i32$"):
        mm(a, b, acc=I32)


@pytest.mark.parametrize("a,b", [(I8, F32), (U8, F16), (F32, F16), (F16, BF16), (I8, I32)])
def test_other_mixes_are_refused_naming_both_types(a, b):
    """An integer A with a float B (the weight-only form is float x integer, not the other way), or two different
    floats."""
    want = ("mxu.mm operands must be i8/u8 x i8/u8, one of f16/bf16/f32 on both, or f16/bf16/f32 x i8/u8 "
            f"(weight-only), not {a.text} x {b.text}")
    with pytest.raises(IsaError, match=f"^{re.escape(want)}$"):
        mm(a, b, acc=I32 if a in (I8, U8) else F32)


def test_b_extent_is_b_own_element_size():
    """views(): A's k elements of 4 bytes, B's k * n elements of one byte each (not A's size)."""
    roles = {role: extra for role, _, extra in mm(F32, I8).views()}
    assert roles["a"] == ((5, 64), (16, 4)) and roles["b"] == ((16 * 12, 1),)


def test_cost_reads_each_operand_at_its_own_size_in_the_float_matmul_cycles():
    """SPM bytes = points * (m * k * 4 + k * n * 1) for f32 x i8; the cycles, MACs and ACC bytes those of the f32 x
    f32 instruction of the same shape (the array does not care how the weights were stored)."""
    arch = load_arch("mid32")
    mixed, flt = mm(F32, I8), mm(F32, F32)
    c, f = instr_cost(mixed, arch), instr_cost(flt, arch)
    assert c.spm_bytes == 3 * (5 * 16 * 4 + 16 * 12 * 1)
    assert f.spm_bytes == 3 * (5 * 16 * 4 + 16 * 12 * 4)
    # ws with fold overlap: 3 folds of s = m = 5 streamed rows: R + s + 2 * max(s, R) + R + C - 2
    assert c.cycles == f.cycles == mxu_cycles(mixed, arch) == 32 + 5 + 2 * 32 + 32 + 32 - 2
    # ACC: m * n f32 sums per point written, and read first (no .z)
    assert (c.macs, c.acc_bytes, c.acc_write) == (f.macs, f.acc_bytes, f.acc_write) == (3 * 5 * 16 * 12, 1440, 720)


@pytest.mark.parametrize("a,b", [(F32, I8), (F16, U8), (BF16, I8)])
def test_assembly_and_binary_round_trip(a, b):
    ins = mm(a, b)
    text = format_instr(ins)
    assert f"a=spm:0x0<{a.text}>" in text and f"b=spm:0x2000<{b.text}>" in text
    assert parse_instr(text) == ins
    header = Program(ProgramConfig(rows=32, cols=32, spm=1 << 20, acc=1 << 18), (), (), (ins, Halt()))
    assert decode_instr(encode_instr(ins, header), header) == ins


def test_an_arch_without_the_code_type_refuses_the_program_naming_it():
    """The simulator's check of ``matrix.dtypes`` names the operand type the Arch lacks (here B's u8)."""
    arch = load_arch("mid32", ["matrix.dtypes=i8,f32"])
    prog = Program(ProgramConfig(rows=32, cols=32, spm=1 << 20, acc=1 << 18), (), (), (mm(F32, U8), Halt()))
    with pytest.raises(VerifyError, match=r"matrix unit takes i8, f32, not u8$"):
        simulate(prog, arch, timing_only=True)
    assert simulate(prog, load_arch("mid32"), timing_only=True).cycles > 0
