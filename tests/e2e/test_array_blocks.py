"""Layers whose weight tiles do not fit the SPM run on a block of the array (issue 24, findings 3 and 4): the
issue's convolution on a 64x64 array with 256 KiB, a GEMM on a 256x256 array (k and n above 255 in its mxu.mm), and
what a search on a block keeps of the whole array."""

import json

import numpy as np
import pytest

from compiler.kernels.common.target import Target
from compiler.kernels.conv2d import ConvShape, conv_on_array, search_conv_tiling
from compiler.kernels.gemm import gemm_on_array, search_tiling, tiled_gemm
from isa import DType, MatMul
from isa.arch import load_arch
from isa.encoding import decode_program, encode_program
from npusim.app.cli import main
from npusim.app.driver import run_gemm

ISSUE_CONV = ["conv", "1", "128", "28", "28", "128", "3", "3", "--pad", "1", "--arch", "mid32", "--set",
              "spm.size=262144"]


def _conv_report(capsys, array: int, dtype: str) -> dict:
    code = main(ISSUE_CONV + ["--set", f"matrix.rows={array}", "--set", f"matrix.cols={array}", "--dtype", dtype,
                              "--json", "-", "--quiet"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize("dtype", ["f32", "i8"])
def test_finding3_issue_conv_runs_on_the_npu_of_a_64x64_array(capsys, dtype):
    """``npusim conv 1 128 28 28 128 3 3 --pad 1 --arch mid32 --set matrix.rows=64 --set matrix.cols=64 --set
    spm.size=262144``: in f32 its 9 x 64 x 64 weight tiles of 147 KiB per channel block did not fit twice in the 256
    KiB and no tiling was found; now it runs (on a 32 x 64 block of the array), matches numpy, and the 64x64 array is
    faster than 32x32 with the same SPM."""
    big, small = _conv_report(capsys, 64, dtype), _conv_report(capsys, 32, dtype)
    assert big["validation"]["ok"] and small["validation"]["ok"]
    assert big["cycles"] < small["cycles"]


def test_finding4_gemm_on_a_256x256_array_matches_numpy():
    """A 256x256 array (refused before: matrix.rows was at most 255): with 1 MiB of SPM the GEMM's mxu.mm take
    k = n = 256 (their high bytes in the record, round-tripped), with 128 KiB it runs on a block of the array;
    both match numpy."""
    M, N, K = 96, 300, 520
    for spm, widest in ((1 << 20, 256), (128 << 10, 128)):
        arch = load_arch("mid32", ["matrix.rows=256", "matrix.cols=256", f"spm.size={spm}"])
        target, tiling = gemm_on_array(M, N, K, DType.F32, Target.of(arch), True)
        program = tiled_gemm(M, N, K, DType.F32, target, tiling, b_packed=True)
        mms = [i for i in program.instrs if isinstance(i, MatMul)]
        assert max(max(i.k, i.n) for i in mms) == widest
        assert decode_program(encode_program(program)) == program
        _, validation = run_gemm(M, N, K, DType.F32, arch)
        assert validation.ok, validation


def test_a_block_of_the_array_only_where_the_whole_array_has_no_tiling():
    """The search keeps the whole array whenever a tiling fits it (the presets' programs do not change), and falls
    back to the largest block that fits, here half the array's rows or columns (the issue's conv, f32, 64x64, 256
    KiB); the winner among the blocks of that area is the cheaper by the estimate."""
    whole = Target.of(load_arch("mid32", ["spm.size=262144"]))   # 32x32
    cs = ConvShape(1, 128, 28, 28, 128, 3, 3, 1, 1)
    assert conv_on_array(cs, DType.F32, whole) == (whole, search_conv_tiling(cs, DType.F32, whole))
    big = Target.of(load_arch("mid32", ["matrix.rows=64", "matrix.cols=64", "spm.size=262144"]))
    with pytest.raises(Exception, match="no tiling of ConvShape"):
        search_conv_tiling(cs, DType.F32, big)
    block, _ = conv_on_array(cs, DType.F32, big)
    assert (block.rows, block.cols) in ((32, 64), (64, 32)) and block.arch is big.arch
    assert gemm_on_array(64, 64, 64, DType.F32, big) == (big, search_tiling(64, 64, 64, DType.F32, big))


def test_array_blocks_halve_the_area_level_by_level_most_square_first():
    t = Target.of(load_arch("mid32", ["matrix.rows=256", "matrix.cols=256"]))
    levels = [[(b.rows, b.cols) for b in level] for level in t.array_blocks()]
    assert levels[:3] == [[(256, 128), (128, 256)], [(128, 128), (256, 64), (64, 256)],
                          [(128, 64), (64, 128), (256, 32)]]
    assert levels[-1] == [(1, 1)] and all(np.prod(s) == 65536 >> (k + 1) for k, lv in enumerate(levels[:8])
                                          for s in lv[:1])
    odd = Target.of(load_arch("mid32", ["matrix.rows=6", "matrix.cols=16"]))
    assert [[(b.rows, b.cols) for b in lv] for lv in odd.array_blocks()][:2] == [[(6, 8), (3, 16)],
                                                                                 [(6, 4), (3, 8), (2, 16)]]


@pytest.mark.parametrize("argv", [["gemm", "512", "512", "512"], ["conv", "1", "8", "24", "300", "16", "7", "7",
                                                                    "--pad", "3"]])
def test_finding5_single_op_commands_refuse_no_tiling_in_the_one_rules_words(capsys, argv):
    """``npusim gemm``/``conv`` with no tiling on any block of the array: one line, exit 1, the reason a model
    compile gives its host op (what did not fit, what to raise)."""
    code = main(argv + ["--dtype", "f32", "--arch", "edge16", "--set", "spm.size=256", "--timing-only"])
    err = capsys.readouterr().err.strip()
    assert code == 1 and "\n" not in err
    assert err.startswith("npusim: error: no tiling fits the NPU: no ") and err.endswith("; raise spm.size or acc.size")
    assert "fits 256 B of SPM and 65536 B of ACC" in err


def test_a_given_tiling_of_more_steps_than_program_max_is_refused_by_every_generator():
    """:data:`~compiler.kernels.common.search.PROGRAM_MAX` bounds every program a generator builds, not only what its
    search offers: a given tiling of too many steps is a TilingError (run on the host), before any instruction."""
    from compiler.errors import TilingError
    from compiler.kernels.conv_transpose2d import ConvTransposeShape, TransposeTiling, conv_transpose2d
    from compiler.kernels.dequant_gemm import DequantTiling, WeightFormat, dequant_gemm
    from compiler.kernels.gemm import GemmTiling

    edge = Target.of(load_arch("edge16"))   # 16 x 16
    with pytest.raises(TilingError, match="steps, more than"):
        tiled_gemm(4096, 4096, 4096, DType.F32, edge, GemmTiling(16, 16, 16))
    with pytest.raises(TilingError, match="steps, more than"):
        dequant_gemm(1024, 4096, 4096, WeightFormat("int4", 32), edge, DequantTiling(1, 16, 32))
    with pytest.raises(TilingError, match="steps, more than"):
        conv_transpose2d(ConvTransposeShape(64, 16, 128, 128, 16, 2, 2, stride=2), DType.F32, edge,
                         TransposeTiling(1, 1, 1, 1))
