"""The memory models: DRAM row buffers, SPM bank conflicts (bench/memory_micro.py's rows, derived by hand from
docs/timing.md), the row model against a burst-by-burst reference, and conflict-free GEMM programs."""

import math
import random
from fractions import Fraction

import pytest

from bench.memory_micro import dram_patterns, run, spm_patterns
from compiler.kernels.common.target import Target
from compiler.kernels.gemm import tiled_gemm
from isa import ArchError, DmaCopy, DType, Halt, Program, ProgramConfig, Queue, Region, Space, View
from isa.arch import load_arch, presets_by_size
from isa.cost import dram_window, instr_cost
from npusim import simulate
from tests.isa.cost_oracle import _addresses, _runs

EDGE = load_arch("edge16")


# ---------------------------------------------------------------------------------------------------- DRAM rows
# edge16: burst 64 B, 8 B/cycle -> d = 8 cycles per burst; interval I = max(8, ceil((120 + 8) / 16)) = 8;
# 4096 B = 64 bursts -> bandwidth-only window W0 = 64 * 8 - 8 + 8 = 512. Row buffer: 8 banks of 2048 B pages,
# miss L = 29 cycles. Burst j is seen at the start if j < 16 (outstanding), else when burst j - 16 issues; its
# activation starts then, or when the previous burst to its bank issues if that is later. The first burst adds 29;
# a miss seen at the start adds nothing (it activates alongside); any other adds max(0, 29 - 8 * (bursts between)).
# cycles = setup 16 + max(W, SPM 32 lines = 32) + latency 120.
@pytest.mark.parametrize("index,expected", [
    # sequential: pages 0 and 1 (banks 0, 1), 32 bursts each: 2 misses, 62 hits; burst 32 opens page 1 from burst
    # 16 on: 16 * 8 = 128 >= 29 cycles ahead, hidden. W = 512 + 29 = 541
    (0, (16 + 541 + 120, 541, 62, 2)),
    # the same in the bandwidth-only model: W = 512, no row accounting
    (1, (16 + 512 + 120, 512, 0, 0)),
    # stride 2048 = one page per burst, burst j in bank j % 8: 64 misses. Bursts 1..7 are the first to their bank
    # and seen at the start: 0; burst j >= 8 follows burst j - 8 in its bank: 64 cycles ahead, 0. W = 512 + 29
    (2, (16 + 541 + 120, 541, 0, 64)),
    # two streams 2048 B apart, interleaved burst by burst: pages 0 and 1 live in banks 0 and 1, so each stays
    # open: 2 misses (bursts 0 and 1; burst 1 is seen at the start), as sequential
    (3, (16 + 541 + 120, 541, 62, 2)),
    # two streams 2048 * 8 B apart: pages 0 and 8, both bank 0: every burst closes the other's row: 64 misses;
    # burst j >= 1 can only activate once burst j - 1 (same bank) issues, 8 cycles ahead: 29 - 8 = 21 each.
    # W = 512 + 29 + 63 * 21 = 1864
    (4, (16 + 1864 + 120, 1864, 0, 64)),
])
def test_dram_patterns_cycles_by_hand(index, expected):
    p = dram_patterns(EDGE)[index]
    res = run(EDGE, p)
    cost = instr_cost(p.instr, EDGE.with_overrides(list(p.overrides)))
    assert (res.cycles, cost.dram_window, res.dram_row_hits, res.dram_row_misses) == expected
    assert (cost.row_hits, cost.row_misses) == expected[2:]
    ld = res.unit["dma_load"]
    # busy = setup + W, the latency is a dram_latency stall
    assert (ld.busy, ld.stall["dram_latency"], ld.stall["bank_conflict"]) == (16 + expected[1], 120, 0)


CONTIGUOUS = View(Space.DRAM, 0, DType.I8, (1,), "A")  # i8 bytes from the start of region A


@pytest.mark.parametrize("preset,nbytes,expected", [
    # edge16: 64 KiB = 1024 bursts of 64 B, I = 8: W0 = 8192; 32 pages of 32 bursts, one per bank in turn. Page
    # p >= 1 starts at burst 32p >= 16, seen when burst 32p - 16 issues (its bank's previous burst, 32p - 225 for
    # p >= 8, is older): 16 * 8 = 128 cycles ahead >= 29. Only the first burst's miss shows: W = 8192 + 29
    ("edge16", 65536, (8192 + 29, 992, 32)),
    # mid32: 64 B bursts at 32 B/cycle: d = 2, I = max(2, ceil((100 + 2) / 64)) = 2: W0 = 2048; 8 pages of 8 KiB
    # (128 bursts), 32 banks: page p >= 1 starts at burst 128p, seen at burst 128p - 64: 128 cycles >= 38 ahead
    ("mid32", 65536, (2048 + 38, 1016, 8)),
    # dc128: 512 B bursts at 512 B/cycle: d = 1, I = max(1, ceil(251 / 1024)) = 1: 784 bursts, W0 = 784; 25 pages
    # of 32 bursts, 16 banks. Pages 1..15 are the first to their bank and seen at the start (burst < 1024): 0;
    # page p >= 16 follows page p - 16's last burst (32p - 481) in its bank: 481 cycles ahead >= 28. W = 784 + 28
    ("dc128", 401408, (784 + 28, 759, 25)),
])
def test_sequential_stream_hides_its_row_misses(preset, nbytes, expected):
    w = dram_window(CONTIGUOUS, (nbytes,), load_arch(preset))
    assert (w.cycles, w.row_hits, w.row_misses) == expected


def test_first_burst_pays_the_whole_activation():
    # one 64 B burst on edge16: nothing to hide it behind: W = d + L = 8 + 29
    assert dram_window(CONTIGUOUS, (64,), EDGE) == (8 + 29, 1, 0, 1)


def test_lookahead_is_bounded_by_outstanding_requests():
    # edge16's sequential 4 KiB with a 200-cycle activation: burst 32 (page 1) is seen when burst 32 - 16 issues,
    # 16 * 8 = 128 cycles ahead: it adds 200 - 128 = 72. W = 512 + 200 + 72 = 784. With 8 outstanding I is
    # max(8, ceil(128 / 8)) = 16: W0 = 63 * 16 + 8 = 1016, lookahead 8 * 16 = 128 again: W = 1016 + 200 + 72
    arch = EDGE.with_overrides(["dram.row_miss_ns=250"])   # 200 cycles at 0.8 GHz
    assert dram_window(CONTIGUOUS, (4096,), arch).cycles == 784
    assert dram_window(CONTIGUOUS, (4096,), arch.with_overrides(["dma.outstanding=8"])).cycles == 1288


# ---------------------------------------------------------------------------------------------------- SPM banks
# edge16 SPM: 8 banks x 16 B, a 128 B line; the DMA moves one line (128 i8 elements) per beat. The block is 16
# columns (block column 3: bytes 48..63 of each row) x 16 rows, read column by column: beat 0 is columns i = 0..7
# of all 16 rows, beat 1 columns 8..15; each beat needs one word per row: 16 distinct words, ideal ceil(16/8) = 2
# cycles. The dense destination needs 1 cycle per beat. cycles = setup 16 + max(source, destination).
@pytest.mark.parametrize("index,expected", [
    # pitch 128: row j's word is 8 j + 3 -> bank 3 for every j: 16 cycles per beat, 32 in all instead of 4:
    # cycles 16 + 32 = 48, conflict 32 - 4 = 28
    (0, (48, 28)),
    # pitch 144 = 9 words: word 9 j + 3 -> bank (j + 3) % 8: 2 words per bank, 2 cycles per beat: 16 + 4 = 20
    (1, (20, 0)),
    # XOR swizzle: word 8 j + (3 ^ (j % 8)) -> bank 3 ^ (j % 8), a permutation of the 8 banks for j = 0..7 and
    # again for 8..15: 2 cycles per beat: 20
    (2, (20, 0)),
])
def test_spm_patterns_cycles_by_hand(index, expected):
    p = spm_patterns(EDGE)[index]
    res = run(EDGE, p)
    assert (res.cycles, res.unit["dma_load"].stall["bank_conflict"]) == expected
    assert tuple(instr_cost(p.instr, EDGE)[:2]) == expected


@pytest.mark.parametrize("preset", presets_by_size())
@pytest.mark.parametrize("block", [0, 3, 5])
def test_xor_swizzled_view_reads_the_swizzled_column(preset, block):
    # the strided view reads exactly row j's word (block ^ (j % 2**s)), in row order, for every column i
    arch = load_arch(preset)
    ins = spm_patterns(arch, block)[2].instr
    word, pitch = arch.spm.bank_width, arch.spm.banks * arch.spm.bank_width
    s = min(arch.spm.banks.bit_length() - 1, 4)
    got = _addresses(ins.src.base, tuple(zip(ins.shape, ins.src.strides)))
    want = [j * pitch + (block ^ (j % 2**s)) * word + i for i in range(word) for j in range(16)]
    assert got.tolist() == want


# ---------------------------------------------------------------------------------------------------- row model
def _reference(base, shape, strides, es, arch):
    """Burst by burst, as docs/timing.md words it, in exact fractions of a cycle from the Arch's physical units:
    (hits, misses, bandwidth-only window, row delay cycles)."""
    burst, page, banks = arch.dma.burst_bytes, arch.dram.page_bytes, arch.dram.banks
    ghz, access = Fraction(repr(arch.clock.ghz)), arch.dram.access_bytes
    per_byte = ghz / Fraction(repr(arch.dram.gb_per_s))                     # cycles per byte on the bus
    latency = math.ceil(Fraction(repr(arch.dram.latency_ns)) * ghz)
    out, miss_latency = arch.dma.outstanding, math.ceil(Fraction(repr(arch.dram.row_miss_ns)) * ghz)
    starts, run_bytes = _runs(base, tuple(zip(shape, strides)), es)
    bursts = []                                   # (page, bus cycles) of every burst, in issue order
    for s in starts.tolist():
        a = s - s % burst
        while a < s + run_bytes:
            nbytes = min(a + burst, s + run_bytes) - max(a, s)
            bursts.append((a // page, math.ceil(nbytes / access) * access * per_byte))   # whole accesses
            a += burst
    issue, t = [], 0
    for _, d in bursts:
        issue.append(t)
        t += max(d, (latency + d) / out)
    open_row, last, hits, misses, actual = {}, {}, 0, 0, []
    for j, (row, _) in enumerate(bursts):        # a delayed burst delays every later one
        bank, at = row % banks, actual[-1] + (issue[j] - issue[j - 1]) if j else 0
        if open_row.get(bank) == row:
            hits += 1
        else:
            misses += 1
            open_row[bank] = row
            if j == 0:
                at = miss_latency
            elif bank in last or j >= out:        # not seen at the start: activates when burst `seen` issues
                at = max(at, actual[max(j - out, last.get(bank, -1))] + miss_latency)
        last[bank] = j
        actual.append(at)
    return hits, misses, issue[-1] + bursts[-1][1], actual[-1] - issue[-1]


def test_row_model_matches_burst_by_burst_reference():
    rng = random.Random(7)
    for _ in range(400):
        burst = rng.choice([32, 64, 128])
        page, banks = burst * rng.choice([1, 2, 8, 32]), rng.choice([1, 2, 4, 8, 16])
        arch = EDGE.with_overrides([f"dma.burst_bytes={burst}", f"dram.page_bytes={page}", f"dram.banks={banks}",
                                    f"dma.outstanding={rng.choice([1, 2, 4, 16])}",
                                    f"dram.row_miss_ns={rng.choice([0, 36.25, 300])}",
                                    f"dram.gb_per_s={rng.choice([6.4, 5.0, 17.3, 0.9])}",
                                    f"dram.access_bytes={rng.choice([8, 16, 32])}"])
        es = rng.choice([1, 2, 4])
        nd = rng.randint(1, 4)
        shape = tuple(rng.randint(1, 7) for _ in range(nd))
        picks = [es, -es, 0, burst, page, page * banks, page + burst, es * rng.randint(-3000, 3000)]
        strides = tuple(rng.choice(picks) for _ in range(nd))
        base = es * rng.randint(20000, 60000)
        view = View(Space.DRAM, base, DType.from_text({1: "i8", 2: "f16", 4: "i32"}[es]), strides, "A")
        w = dram_window(view, shape, arch)
        hits, misses, window, delay = _reference(base, shape, strides, es, arch)
        assert (w.row_hits, w.row_misses, w.cycles) == (hits, misses, math.ceil(window + delay))
        assert w.row_hits + w.row_misses == w.bursts
        bw = dram_window(view, shape, arch.with_overrides(["dram.model=bandwidth"]))
        assert (bw.cycles, bw.bursts, bw.row_hits, bw.row_misses) == (math.ceil(window), w.bursts, 0, 0)


def test_dram_to_dram_copy_pays_both_sides():
    # 256 B from A+0 to C+0: each side is 4 bursts in one page, rows closed at the start of the instruction, so each
    # side has 1 miss and 3 hits and a window of 32 + 29 = 61; both windows hold the bus (122) and the latency is
    # paid twice: cycles = 16 + 122 + 2 * 120 = 378, of which 240 are dram_latency stall.
    ins = DmaCopy(queue=Queue.DMA_LD, shape=(256,), dst=View(Space.DRAM, 0, DType.I8, (1,), "C"),
                  src=View(Space.DRAM, 0, DType.I8, (1,), "A"))
    cfg = ProgramConfig(rows=16, cols=16, spm=EDGE.spm.size, acc=EDGE.acc.size)
    p = Program(cfg, (Region("A", 0, 256), Region("C", 1, 256)), (), (ins, Halt()))
    res = simulate(p, EDGE, timing_only=True)
    assert res.cycles == 378
    assert (res.dram_row_hits, res.dram_row_misses) == (6, 2)
    ld = res.unit["dma_load"]
    assert (ld.busy, ld.stall["dram_latency"]) == (16 + 122, 240)


# ---------------------------------------------------------------------------------------------------- Arch fields
@pytest.mark.parametrize("override,message", [
    ("dram.model=ddr", "dram.model must be one of 'rowbuffer', 'bandwidth', not 'ddr'"),
    ("dram.banks=6", "dram.banks must be an integer in [1, 1024] and a power of two, not 6"),
    ("dram.page_bytes=1000", "dram.page_bytes must be an integer in [1, 2**20] and a power of two, not 1000"),
    ("dram.page_bytes=32", "dram.page_bytes (32) must be >= dma.burst_bytes (64) so that no burst spans two rows"),
    ("dram.access_bytes=128", "dma.burst_bytes (64) must be a multiple of dram.access_bytes (128): a DMA request "
                              "moves whole DRAM accesses; raise dma.burst_bytes or lower dram.access_bytes"),
    ("dram.row_miss_ns=-1", "dram.row_miss_ns must be a number in [0, 1e+06] (a millisecond), not -1.0"),
    ("vector.special_interval=0", "vector.special_interval must be an integer in [1, 1_000_000], not 0"),
])
def test_new_arch_fields_are_validated(override, message):
    with pytest.raises(ArchError) as e:
        EDGE.with_overrides([override])
    assert str(e.value) == message


def test_cross_section_checks_run_after_all_overrides():
    # raising burst and page together works in either order; the bandwidth model ignores the page size
    for order in (["dma.burst_bytes=4096", "dram.page_bytes=4096"], ["dram.page_bytes=4096", "dma.burst_bytes=4096"]):
        assert EDGE.with_overrides(order).dram.page_bytes == 4096
    assert EDGE.with_overrides(["dram.model=bandwidth", "dram.page_bytes=32"]).dram.page_bytes == 32


# ---------------------------------------------------------------------------------------------------- GEMM
SHAPES = [(64, 64, 64), (100, 70, 90), (256, 512, 384), (33, 300, 77)]


def _gemm_conflicts(arch, shape, dtype):
    p = tiled_gemm(*shape, dtype, Target.of(arch))
    return {pc: c.conflict for pc, i in enumerate(p.instrs) if (c := instr_cost(i, arch)).conflict}


@pytest.mark.parametrize("preset", presets_by_size())
@pytest.mark.parametrize("dataflow", ["preset", "os"])
def test_tiled_gemm_has_no_bank_conflicts(preset, dataflow):
    arch = load_arch(preset)
    if dataflow != "preset":
        arch = arch.with_overrides([f"matrix.dataflow={dataflow}"])
    for shape in SHAPES:
        for dtype in (DType.I8, DType.F16):
            assert _gemm_conflicts(arch, shape, dtype) == {}, (shape, dtype)


@pytest.mark.parametrize("preset", presets_by_size())
def test_tiled_gemm_is_dataflow_conflicts_are_negligible(preset):
    # is writes B transposed into SPM; its column pitch is padded to an odd number of bank words (is_pitch), so a
    # beat of consecutive columns spreads over all banks. A beat that wraps from one row of columns to the next
    # can load one bank once more than the others: at most 1 extra cycle per beat (a line of banks x bank_width).
    arch = load_arch(preset).with_overrides(["matrix.dataflow=is"])
    line = arch.spm.banks * arch.spm.bank_width
    for shape in SHAPES:
        p = tiled_gemm(*shape, DType.I8, Target.of(arch))
        for instr in p.instrs:
            beats = -(-math.prod(getattr(instr, "shape", (0,))) // line)
            assert instr_cost(instr, arch).conflict <= beats, (shape, str(instr))


def test_static_accounting_matches_the_engine():
    # UnitStats.add_static (for runs without contention, e.g. serial) splits one instruction as the engine does:
    # the 256 B load of test_single_dma_cycles_by_hand: 197 cycles = busy 16 + 61 + dram_latency 120; 3 hits, 1 miss
    from npusim.sim.stats import UnitStats

    ins = DmaCopy(queue=Queue.DMA_LD, shape=(4, 64), dst=View(Space.SPM, 0, DType.I8, (64, 1)),
                  src=View(Space.DRAM, 0, DType.I8, (64, 1), "A"))
    st = UnitStats("dma.ld")
    st.add_static(instr_cost(ins, EDGE))
    assert (st.busy, st.stall["dram_latency"], st.stall["bank_conflict"], st.row_hits, st.row_misses) == \
        (77, 120, 0, 3, 1)
