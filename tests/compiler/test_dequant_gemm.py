"""The dequantizing GEMM (compiler/kernels/dequant_gemm.py) program by program: both schemes' values against numpy
for every weight format, ragged tiles, blocks smaller and larger than the array and zero points uniform and per
block; and the decode bound (issue 26, item 4): at M = 1 the ``array`` scheme leaves the vector unit no per-weight
dequantization, so int8 weights run at the DRAM bus's pace and int4 ones at the array's weight loading.

Value tolerance: 1e-5 of the output's largest magnitude. The array scheme reorders the f32 arithmetic (each K block's
sum ``A . q`` of unshifted codes, then times the scale, minus ``zp * scale * rowsum(A_blk)``), so it does not
reproduce ``A @ ((q - zp) * scale)`` bit for bit; its rounding error is of order ``sqrt(K) * 2**-24 * (|q| + zp) /
|q - zp|``, about 1e-6 of the output here, while a wrong scale, zero point, block or column is off by 1e-2 or more."""

import math

import ml_dtypes
import numpy as np
import pytest

from compiler.kernels.common.target import Target
from compiler.kernels.dequant_gemm import (
    DequantTiling,
    WeightFormat,
    candidates,
    dequant_gemm,
    floor_cycles,
    pack_weights,
    search_dequant_tiling,
    zero_rows,
)
from isa import DType, MatMul, VecBinary, VecConvert, VecUnary
from isa.arch import load_arch
from isa.cost import program_estimate
from isa.races import find_races
from isa.verify import verify
from npusim import simulate
from npusim.sim.simulator import region_array

RANGES = {"int4": (-8, 8), "uint4": (0, 16), "int8": (-128, 128), "uint8": (0, 256)}


def weights(K: int, N: int, fmt: WeightFormat, seed: int = 0):
    """(codes, f32 scale rows, zero-point rows or None, the dequantized weight) of a random weight."""
    rng = np.random.default_rng(seed)
    rows = -(-K // fmt.block) if fmt.block else 1
    scale = (rng.random((rows, N)) * 0.1 + 0.01).astype(np.float32)
    if fmt.kind == "fp8":
        w8 = (rng.standard_normal((K, N)) * 4).astype(ml_dtypes.float8_e4m3fn)
        return w8.view(np.uint8), scale, None, w8.astype(np.float32) * np.repeat(scale, K, 0)
    lo, hi = RANGES[fmt.kind]
    codes = rng.integers(lo, hi, (K, N))
    zp = rng.integers(lo, hi, (rows, N)).astype(np.float32) if fmt.per_block_zp else None
    zfull = zp if zp is not None else np.full((rows, N), fmt.zp, np.float32)
    rep = fmt.block or K
    w = (codes - np.repeat(zfull, rep, 0)[:K]) * np.repeat(scale, rep, 0)[:K]
    return codes, scale, zp, w.astype(np.float32)


def run(M: int, K: int, N: int, fmt: WeightFormat, arch, t: DequantTiling, seed: int = 0) -> tuple[np.ndarray, ...]:
    """(NPU output, numpy reference in f64) of one program with values."""
    codes, scale, zp, w = weights(K, N, fmt, seed)
    x = np.random.default_rng(seed + 1).standard_normal((M, K)).astype(np.float32)
    target = Target.of(arch)
    image = pack_weights(codes, scale, zero_rows(fmt, t.scheme, scale, zp), fmt, t, target.cols)
    res = simulate(dequant_gemm(M, N, K, fmt, target, t), arch, {"A": x, "Q": image})
    return region_array(res, "C", DType.F32, (M, N)), x.astype(np.float64) @ w.astype(np.float64)


CASES = [  # (M, K, N, format, preset): K, N not multiples of the array or the block: ragged tiles
    (3, 100, 40, WeightFormat("int4", 32), "mid32"),
    (3, 100, 40, WeightFormat("int4", 16, per_block_zp=True), "mid32"),
    (3, 100, 40, WeightFormat("uint4", 32, zp=8), "edge16"),
    (5, 200, 40, WeightFormat("uint4", 16, per_block_zp=True), "dc128"),    # blocks < rows: block-diagonal A
    (1, 300, 200, WeightFormat("int4", 32, zp=-2), "dc128"),
    (2, 96, 40, WeightFormat("int4", 48), "mid32"),                       # blocks > rows, not a multiple
    (2, 96, 40, WeightFormat("int4", 24, zp=-1), "mid32"),                # blocks < rows, not a divisor
    (5, 200, 72, WeightFormat("int8", 0), "mid32"),
    (5, 200, 72, WeightFormat("uint8", 0, zp=130), "edge16"),
    (5, 200, 72, WeightFormat("int8", 64, per_block_zp=True), "mid32"),
    (300, 64, 40, WeightFormat("int4", 32), "mid32"),                     # two m tiles
    (16, 520, 48, WeightFormat("int4", 32, zp=1), "edge16"),              # the zero point's term on the array
    (8, 300, 40, WeightFormat("uint4", 16, per_block_zp=True), "mid32"),  # the same, per-block zero points
    (3, 96, 40, WeightFormat("fp8", 0), "mid32"),
]


@pytest.mark.parametrize("M,K,N,fmt,preset", CASES, ids=lambda c: getattr(c, "kind", None) and
                         f"{c.kind}-b{c.block}-zp{c.zp}{'-pb' if c.per_block_zp else ''}")
def test_every_scheme_and_tiling_extreme_matches_numpy(M, K, N, fmt, preset):
    """The largest and the smallest tiling of each scheme the format takes."""
    arch = load_arch(preset)
    cands = candidates(M, N, K, fmt, Target.of(arch))
    for scheme in fmt.schemes:
        mine = [t for t in cands if t.scheme == scheme]
        for t in (mine[0], mine[-1]):
            got, want = run(M, K, N, fmt, arch, t)
            err = np.abs(got - want).max() / np.abs(want).max()
            assert err < 1e-5, (t, err)


@pytest.mark.parametrize("M,K,N,fmt,preset", [CASES[1], CASES[3], CASES[8], CASES[11], CASES[12]],
                         ids=["int4-pb", "uint4-diag", "uint8", "int4-zp-array", "uint4-pb-zp-array"])
def test_programs_are_race_free_and_verify_without_warnings(M, K, N, fmt, preset):
    """Weight slots shared by two DMA queues, unpacked codes, row sums, partial sums and C tiles: every reader is
    ordered after its writer and before the next write (isa.races), and the semaphores cannot deadlock (isa.verify
    has no warning)."""
    target = Target.of(load_arch(preset))
    for t in candidates(M, N, K, fmt, target)[::5]:
        prog = dequant_gemm(M, N, K, fmt, target, t)
        assert find_races(prog) == [] and verify(prog).warnings == [], t


def _corrections(prog) -> int:
    """The array scheme's f32 x f32 ``mxu.mm`` (the zero point's term on the array)."""
    return sum(isinstance(i, MatMul) and i.b.dtype is DType.F32 for i in prog.instrs)


@pytest.mark.parametrize("M,preset,on_array", [(1, "mid32", False), (16, "edge16", True), (16, "mid32", True)])
def test_zero_point_term_goes_where_it_costs_fewer_cycles(M, preset, on_array):
    """int4 in blocks of 32 (zero point 8 once stored unsigned), 1024 x 1024, the search's tiling: at M = 1 the
    vector unit's sum of ``rowsum * -zp * scale`` over the blocks is short (the array is the bottleneck); at M = 16 it
    costs the vector unit M multiply-adds per block and column, more than an f32 ``mxu.mm`` of the row sums by the
    scales (k = blocks) and one addition per output."""
    target, fmt = Target.of(load_arch(preset)), WeightFormat("int4", 32)
    t = search_dequant_tiling(M, 1024, 1024, fmt, target)
    assert t.scheme == "array"
    assert (_corrections(dequant_gemm(M, 1024, 1024, fmt, target, t)) > 0) == on_array


@pytest.mark.parametrize("M,K,N,fmt,preset", [(1, 1024, 512, WeightFormat("int4", 32), "mid32"),
                                               (16, 512, 1024, WeightFormat("int8", 0), "edge16"),
                                               (64, 300, 200, WeightFormat("fp8", 0), "dc128")])
def test_search_prunes_by_a_true_lower_bound_and_finds_the_cheapest(M, K, N, fmt, preset):
    """floor_cycles never exceeds the program's estimate, so the search, which stops pricing once the floor of the
    next candidate exceeds the best price, picks what pricing every candidate picks (the first on a tie)."""
    target = Target.of(load_arch(preset))
    cands = candidates(M, N, K, fmt, target)
    prices = [program_estimate(dequant_gemm(M, N, K, fmt, target, t), target.arch) for t in cands]
    assert all(floor_cycles(M, N, K, fmt, target, t) <= e for t, e in zip(cands, prices))
    assert search_dequant_tiling(M, N, K, fmt, target) == cands[prices.index(min(prices))]


def test_fp8_takes_the_vector_scheme_only():
    assert WeightFormat("fp8", 0).schemes == ("vector",)
    assert {t.scheme for t in candidates(1, 64, 64, WeightFormat("fp8", 0), Target.of(load_arch("mid32")))} == \
        {"vector"}


def _vector_elements(prog) -> int:
    return sum(math.prod(i.shape) for i in prog.instrs if isinstance(i, VecBinary | VecUnary | VecConvert))


@pytest.mark.parametrize("fmt,per_weight", [(WeightFormat("int8", 0), 0.0), (WeightFormat("int4", 32), 3 / 8),
                                            (WeightFormat("uint4", 128, zp=8), 3 / 8)])
def test_array_scheme_does_no_dequantization_per_weight(fmt, per_weight):
    """Vector elements the array scheme's program computes at M = 1: 4-bit codes are unpacked by three word ops per
    eight codes (3/8 an element per weight), 8-bit codes not at all; the scaling and the zero point's term are one
    element per block and column each, plus the row sums: nothing like the vector scheme's 2 or more per weight."""
    K = N = 1024
    target = Target.of(load_arch("mid32"))
    cands = candidates(1, N, K, fmt, target)
    t = next(t for t in cands if t.scheme == "array")
    got = _vector_elements(dequant_gemm(1, N, K, fmt, target, t))
    blocks = K // (fmt.block or t.tk)
    per_block = 2 if fmt.zero_term else 1
    assert got <= per_weight * K * N + per_block * blocks * N + 2 * K
    assert got >= per_weight * K * N
    vector = _vector_elements(dequant_gemm(1, N, K, fmt, target, next(t for t in cands if t.scheme == "vector")))
    assert vector >= 2 * K * N


def _bounds(M: int, K: int, N: int, nbytes: float, arch) -> tuple[float, float]:
    """(DRAM bound, array-load bound) in cycles: weight bytes over DRAM bytes per cycle; one R x C weight fold per
    max(M, R) cycles."""
    r, c = arch.matrix.rows, arch.matrix.cols
    return nbytes / (arch.dram.gb_per_s / arch.clock.ghz), K / r * N / c * max(r, M)


def _cycles(M: int, K: int, N: int, fmt: WeightFormat, arch) -> tuple[int, DequantTiling]:
    target = Target.of(arch)
    t = search_dequant_tiling(M, N, K, fmt, target)
    return simulate(dequant_gemm(M, N, K, fmt, target, t), arch, timing_only=True).cycles, t


def test_finding4_int8_decode_runs_at_the_dram_bound_on_mid32():
    """M = 1, 2048 x 2048 int8 per column (4 MiB of codes, 8 KiB of scales) on mid32 (32 B per cycle; a 32-column
    array loads 32 weights per cycle: the two bounds coincide): within 10% of the DRAM bound, by the array scheme."""
    arch = load_arch("mid32")
    K = N = 2048
    dram, array = _bounds(1, K, N, K * N + N * 4, arch)
    cycles, t = _cycles(1, K, N, WeightFormat("int8", 0), arch)
    assert t.scheme == "array"
    assert max(dram, array) <= cycles <= 1.10 * max(dram, array), (cycles, dram, array)


def test_finding4_int4_decode_is_bound_by_the_array_not_the_vector_unit():
    """M = 1, 2048 x 2048 int4 in blocks of 32 on mid32: the DRAM bus brings 64 codes a cycle but the 32-column array
    takes 32, so the array's bound (twice the DRAM bound for the codes) holds it, within 10%; before, the vector unit's
    dequantization took 3.5x that."""
    arch = load_arch("mid32")
    K = N = 2048
    dram, array = _bounds(1, K, N, K * N / 2 + K // 32 * N * 4, arch)
    cycles, _ = _cycles(1, K, N, WeightFormat("int4", 32), arch)
    assert dram < array <= cycles <= 1.10 * array, (cycles, dram, array)


def test_prefill_sized_m_takes_the_vector_scheme():
    """At M = 256 the array scheme's scaling (M / block multiply-adds per weight) costs more than dequantizing each
    weight tile once (a few per weight, whatever M): the search picks the vector scheme."""
    t = search_dequant_tiling(256, 256, 256, WeightFormat("int4", 32), Target.of(load_arch("mid32")))
    assert t.scheme == "vector"


def test_int4_codes_are_stored_unsigned_two_a_byte_per_column_pair():
    """Region Q of one 32 x 32 int4 tile on a 32-column array: byte j of a row holds columns j (low nibble) and
    j + 16 (high nibble), each code plus 8; then the scales (64-byte aligned)."""
    fmt, t = WeightFormat("int4", 32), DequantTiling(1, 32, 32)
    codes = np.arange(32 * 32).reshape(32, 32) % 16 - 8
    scale = np.full((1, 32), 0.5, np.float32)
    image = pack_weights(codes, scale, None, fmt, t, 32)
    assert image.size == 32 * 16 + 32 * 4
    rows = image[:512].reshape(32, 16)
    np.testing.assert_array_equal(rows & 0x0F, codes[:, :16] + 8)
    np.testing.assert_array_equal(rows >> 4, codes[:, 16:] + 8)
    np.testing.assert_array_equal(image[512:].view(np.float32), scale.ravel())


def test_array_scheme_needs_the_code_type_in_matrix_dtypes():
    """An Arch whose array takes no u8 keeps 4-bit weights on the vector scheme (f32 x f32)."""
    arch = load_arch("mid32", ["matrix.dtypes=i8,f32"])
    assert {t.scheme for t in candidates(1, 64, 64, WeightFormat("int4", 32), Target.of(arch))} == {"vector"}
    assert {t.scheme for t in candidates(1, 64, 64, WeightFormat("int8", 0), Target.of(arch))} == {"array", "vector"}
