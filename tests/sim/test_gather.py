"""The row gather in the simulator: cycles against the hand-derived formulas of docs/timing.md (row gather), the
same cycles whatever the index values and with or without values, and what it writes (fill, bounds, aliasing,
dtypes)."""

import dataclasses
import re

import numpy as np
import pytest

from isa import (
    ArchError,
    DmaCopy,
    DType,
    Gather,
    Halt,
    Program,
    ProgramConfig,
    Queue,
    Region,
    SemDecl,
    SemOp,
    SimulationError,
    Space,
    View,
)
from isa.arch import load_arch
from isa.cost import gather_cost, instr_cost
from isa.energy import KINDS, instruction_energy, table_of
from npusim import simulate
from npusim.functional.execute import execute
from npusim.functional.memory import DeviceMemory
from npusim.sim.simulator import region_array

CFG = ProgramConfig(rows=16, cols=16, spm=262144, acc=65536)
REGIONS = (Region("T", 0, 8192), Region("I", 1, 4096), Region("Y", 2, 8192))


def edge(*over):
    # edge16: 16 lanes, alu latency 2; SPM 8 banks x 16 B (a 128 B line); DMA setup 16, 64 B bursts, 16 outstanding;
    # DRAM 8 B/cycle, latency 120, rowbuffer with a 29-cycle row miss
    return load_arch("edge16", list(over))


def spm(base, dtype, *strides):
    return View(Space.SPM, base, dtype, strides)


def prog(*instrs, regions=REGIONS):
    return Program(CFG, regions, (), tuple(instrs) + (Halt(),))


def vpu_gather(table_base=0x4000, rs=16, row=4, points=64, rows=32):
    """``points`` rows of ``row`` f32 from an SPM table; dense dst and idx."""
    return Gather(queue=Queue.VPU, shape=(points,), row=row, rows=rows, dst=spm(0, DType.F32, row * 4, 4),
                  table=spm(table_base, DType.F32, rs), idx=spm(0x8000, DType.I32, 4))


@pytest.mark.parametrize("table_base,rs,lines", [
    (0x4000, 16, 1),   # rs = 16 divides the 128 B line and b = 16 <= rs: no row straddles a line
    (0x4000, 48, 1),   # rs = 48 does not divide it, but rows start at multiples of 16: the last, 112 + 16 = 128, fits
    (0x4008, 16, 2),   # rows start at 8 + 16 i: the row at 120 straddles -> r = 2 for every row
    (0x4000, 24, 2),   # rows start at multiples of 8: the row at 120 straddles
])
@pytest.mark.parametrize("G", [1, 2, 4])
def test_vpu_gather_cycles_by_hand(table_base, rs, lines, G):
    # 64 points of 4 f32 (b = 16 B): gather ceil(64 / G) * r; dst 256 dense f32 = 16 beats of 16 lanes, each 64 B in
    # 4 banks = 16 SRAM cycles; idx 64 i32 = 4 beats = 4 cycles. cycles = alu latency 2 + max(64 / G * r, 16, 4).
    g = vpu_gather(table_base, rs)
    arch = edge(f"vector.gather_rows={G}")
    expected = 2 + max(64 // G * lines, 16, 4)
    assert expected == {(1, 1): 66, (2, 1): 34, (4, 1): 18, (1, 2): 130, (2, 2): 66, (4, 2): 34}[G, lines]
    res = simulate(prog(g), arch, timing_only=True)
    assert res.cycles == expected
    assert (res.unit["vector"].busy, res.unit["vector"].stall["bank_conflict"]) == (expected, 0)
    assert res.spm_bytes == 64 * 16 * 2 + 64 * 4      # table rows read + dst written, idx read


def test_the_line_is_the_table_memorys():
    # 8 rows of 64 B, 256 B apart from byte 96: in the SPM (128 B lines) each row crosses a line (96 + 64 > 128),
    # r = 2; in edge16's ACC (4 banks x 64 B = 256 B lines) none does, r = 1. dst 128 f32 = 8 beats, idx 1 beat:
    # cycles = 2 + max(8 * r, 8, 1) = 18 and 10
    def gather(space):
        return Gather(queue=Queue.VPU, shape=(8,), row=16, rows=8, dst=spm(0, DType.F32, 64, 4),
                      table=View(space, 0x4000 + 96, DType.F32, (256,)), idx=spm(0x8000, DType.I32, 4))

    assert (instr_cost(gather(Space.SPM), edge()).cycles, instr_cost(gather(Space.ACC), edge()).cycles) == (18, 10)


def test_vpu_gather_bank_conflicts_of_dst():
    # dst rows 128 B apart: a 16-lane beat of 4 rows x 4 f32 needs 4 words of bank 0 (4 cycles, ideal 1): dst takes
    # 16 * 4 = 64 SRAM cycles against 16 conflict-free; with G = 4 the gather itself needs 16: body 64, conflict 48
    g = dataclasses.replace(vpu_gather(), dst=spm(0, DType.F32, 128, 4))
    c = instr_cost(g, edge("vector.gather_rows=4"))
    assert (c.cycles, c.conflict) == (2 + 64, 64 - 16)


def dram_gather(base=0, rs=64, row=16, points=16):
    return Gather(queue=Queue.DMA_LD, shape=(points,), row=row, rows=64, dst=spm(0, DType.F32, row * 4, 4),
                  table=View(Space.DRAM, base, DType.F32, (rs,), "T"), idx=spm(0x8000, DType.I32, 4))


def test_dma_gather_burst_aligned_rows_by_hand():
    # 16 rows of 64 B at multiples of 64: one full burst each, d = 64 / 8 = 8, I = max(8, ceil((120 + 8) / 16)) = 8;
    # bus = 16 * 8 - 8 + 8 = 128; issue 16 * 1 = 16; W = max(16, 128) + 29 (one activation) = 157.
    # dst: 1 KiB dense = 8 lines of 128 B, 8 SRAM cycles. cycles = 16 + max(157, 8) + 120 = 293: busy 173,
    # dram_latency 120; every burst counted a row miss.
    res = simulate(prog(dram_gather()), edge(), timing_only=True)
    ld = res.unit["dma_load"]
    assert (res.cycles, ld.busy, ld.stall["dram_latency"]) == (293, 173, 120)
    assert (res.dram_bytes_read, res.dram_row_hits, res.dram_row_misses) == (16 * 64, 0, 16)
    # bandwidth model: no activation, no row outcomes: 16 + 128 + 120 = 264
    res = simulate(prog(dram_gather()), edge("dram.model=bandwidth"), timing_only=True)
    assert (res.cycles, res.dram_row_misses) == (264, 0)


def test_dma_gather_rows_that_are_not_burst_aligned():
    # rows at 32 + 64 i: each cut into two 32 B bursts (d = 4, I = max(4, (120 + 4) / 16) = 7.75): 15.5 per row;
    # bus = ceil(16 * 15.5 - 7.75 + 4) = ceil(244.25) = 245, W = 245 + 29 = 274, cycles = 16 + 274 + 120 = 410;
    # 32 bursts, all misses
    res = simulate(prog(dram_gather(base=32)), edge(), timing_only=True)
    assert (res.cycles, res.dram_row_misses) == (410, 32)
    # rs = 96 from base 0: rows start at offsets 0 and 32 of a burst; every row is charged as the worse one, the
    # two-burst row at 32: the same 410 cycles
    assert gather_cost(dram_gather(rs=96), edge()).cycles == 410
    # 32 B rows (row = 8) at 32 + 64 i fit one burst each: d = 4, I = 7.75: bus ceil(16 * 7.75 - 7.75 + 4) = 121,
    # W = 150; dst 512 B = 4 lines: cycles = 16 + 150 + 120 = 286
    assert gather_cost(dram_gather(base=32, row=8), edge()).cycles == 286


def test_dma_gather_issue_bound():
    # 20 cycles per index: issue 16 * 20 = 320 > bus 128: W = 320 + 29 = 349, cycles = 16 + 349 + 120 = 485
    assert simulate(prog(dram_gather()), edge("dma.gather_issue=20"), timing_only=True).cycles == 485


def test_dma_gather_from_spm():
    # table in SPM, 64 B rows at multiples of 64 (r = 1): setup 16 + max(16 * 1 issue, 16 * 1 lines, dst 8) = 32;
    # with gather_issue = 3: 16 + 48
    g = dataclasses.replace(dram_gather(), table=spm(0x4000, DType.F32, 64))
    assert simulate(prog(g), edge(), timing_only=True).cycles == 32
    assert instr_cost(g, edge("dma.gather_issue=3")).cycles == 16 + 48


def test_dma_gather_shares_the_dram_bus():
    # the gather (window 157) and a store of 1 KiB from ACC (window 16 * 8 + 29 = 157, test_timing) start together on
    # the two channels: the gather, dispatched first, holds the bus from 16 to 173; the store's window waits 157
    store = DmaCopy(queue=Queue.DMA_ST, shape=(16, 16), dst=View(Space.DRAM, 0, DType.I32, (64, 4), "Y"),
                    src=View(Space.ACC, 0, DType.I32, (64, 4)))
    res = simulate(prog(dram_gather(), store), edge(), timing_only=True)
    st = res.unit["dma_store"]
    assert (st.stall["dram_bandwidth"], res.end[0], res.end[1]) == (157, 293, 16 + 157 + 157 + 120)
    assert (res.dram_bytes_read, res.dram_bytes_written, res.dram_row_misses) == (1024, 1024, 16 + 1)


def table_and_indices(rng, rows=64, row=16, points=16, valid=1.0):
    table = rng.standard_normal((rows, row)).astype(np.float32)
    idx = rng.integers(0, rows, points).astype(np.int32)
    idx[rng.random(points) >= valid] = -1
    return table, idx


@pytest.mark.parametrize("valid", [1.0, 0.5, 0.0])
def test_dma_gather_values_and_cycles_do_not_depend_on_the_indices(valid):
    # DRAM table -> SPM -> DRAM, with a share of -1 indices: the values are the rows (fill for -1) and the cycles the
    # ones timing-only gives, whatever the indices
    ld_idx = DmaCopy(queue=Queue.DMA_LD, shape=(16,), dst=spm(0x8000, DType.I32, 4), src=View(Space.DRAM, 0, DType.I32,
                                                                                            (4,), "I"))
    st = DmaCopy(queue=Queue.DMA_LD, shape=(16, 16), dst=View(Space.DRAM, 0, DType.F32, (64, 4), "Y"),
                 src=spm(0, DType.F32, 64, 4))
    p = prog(ld_idx, dataclasses.replace(dram_gather(), fill=-2.5), st)
    table, idx = table_and_indices(np.random.default_rng(3), valid=valid)
    res = simulate(p, edge(), {"T": table, "I": idx})
    want = np.where(idx[:, None] >= 0, table[np.maximum(idx, 0)], np.float32(-2.5))
    assert np.array_equal(region_array(res, "Y", DType.F32, (16, 16)), want)
    assert res.cycles == simulate(p, edge(), timing_only=True).cycles


def run_one(g: Gather, spm_bytes: dict[int, np.ndarray]) -> DeviceMemory:
    """Apply one gather to an SPM preloaded with ``{address: array}``; the memory after it."""
    mem = DeviceMemory(CFG.spm, CFG.acc, {})
    for at, data in spm_bytes.items():
        raw = np.ascontiguousarray(data).view(np.uint8).ravel()
        mem.spm[at:at + raw.size] = raw
    execute(g, mem)
    return mem


@pytest.mark.parametrize("dtype,fill", [(DType.I8, -7), (DType.U8, 200), (DType.I16, -300), (DType.I32, 2**31 - 1),
                                        (DType.F16, -0.0), (DType.BF16, 1.5), (DType.F32, float("inf"))])
def test_fill_and_rows_in_every_dtype(dtype, fill):
    rng = np.random.default_rng(1)
    table = rng.integers(0, 256, (10, 3 * dtype.size), dtype=np.uint8)   # any bytes, NaN patterns included
    idx = np.array([4, -1, 9, 0, -100], np.int32)
    g = Gather(queue=Queue.VPU, shape=(5,), row=3, rows=10, dst=spm(0, dtype, 3 * dtype.size, dtype.size),
               table=spm(0x1000, dtype, 3 * dtype.size), idx=spm(0x2000, DType.I32, 4), fill=fill)
    out = run_one(g, {0x1000: table, 0x2000: idx}).spm[:5 * 3 * dtype.size].reshape(5, -1)
    fill_bytes = np.full(3, g.fill, dtype.storage if dtype is not DType.BF16 else np.float32)
    if dtype is DType.BF16:
        fill_bytes = (fill_bytes.view(np.uint32) >> 16).astype(np.uint16)
    for k, i in enumerate(idx):
        assert np.array_equal(out[k], table[i] if i >= 0 else fill_bytes.view(np.uint8)), (k, i)


def test_index_out_of_range_names_the_point_and_writes_nothing():
    g = Gather(queue=Queue.VPU, shape=(2, 3), row=2, rows=7, dst=spm(0, DType.F32, 24, 8, 4),
               table=spm(0x1000, DType.F32, 8), idx=spm(0x2000, DType.I32, 12, 4), waits=(SemOp("idx"),))
    idx = np.array([[0, 1, 2], [3, 7, -1]], np.int32)
    ld = DmaCopy(queue=Queue.DMA_LD, shape=(6,), dst=spm(0x2000, DType.I32, 4),
                 src=View(Space.DRAM, 0, DType.I32, (4,), "I"), signals=(SemOp("idx"),))
    p = dataclasses.replace(prog(ld, g), sems=(SemDecl("idx", 0),))
    with pytest.raises(SimulationError, match=r"pc 1 `vpu\.gather shape\[2,3\] .*`: vpu\.gather index 7 at point "
                                              r"\[1, 1\] is outside the table's 7 rows"):
        simulate(p, edge(), {"I": idx})
    assert simulate(p, edge(), timing_only=True).cycles > 0   # the timing does not read indices
    before = np.full(12, 5, np.float32)
    mem = DeviceMemory(CFG.spm, CFG.acc, {})
    mem.spm[0x2000:0x2018], mem.spm[:48] = idx.view(np.uint8).ravel(), before.view(np.uint8)
    with pytest.raises(SimulationError, match=r"index 7 at point \[1, 1\]"):
        execute(g, mem)
    assert np.array_equal(mem.spm[:48].view(np.float32), before)   # nothing written


def test_aliasing_reads_every_row_before_writing():
    # dst is the table itself: reversing its rows in place needs every row read before the first write
    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    g = Gather(queue=Queue.VPU, shape=(4,), row=3, rows=4, dst=spm(0x1000, DType.F32, 12, 4),
               table=spm(0x1000, DType.F32, 12), idx=spm(0x2000, DType.I32, 4))
    mem = run_one(g, {0x1000: table, 0x2000: np.array([3, 2, 1, 0], np.int32)})
    assert np.array_equal(mem.spm[0x1000:0x1030].view(np.float32).reshape(4, 3), table[::-1])
    # dst over the indices: the indices are read first too
    g = dataclasses.replace(g, dst=spm(0x2000, DType.F32, 12, 4), table=spm(0x1000, DType.F32, 12))
    mem = run_one(g, {0x1000: table, 0x2000: np.array([1, 1, 0, 2], np.int32)})
    assert np.array_equal(mem.spm[0x2000:0x2030].view(np.float32).reshape(4, 3), table[[1, 1, 0, 2]])


@pytest.mark.parametrize("field,hi", [("vector.gather_rows", "4096"), ("dma.gather_issue", "1_000_000")])
def test_new_arch_fields_are_validated(field, hi):
    assert getattr(getattr(load_arch("edge16"), field.split(".")[0]), field.split(".")[1]) == 1   # the default
    for bad in (0, int(hi.replace("_", "")) + 1):
        with pytest.raises(ArchError, match=f"{re.escape(field)} must be an integer in \\[1, {hi}\\], not {bad}"):
            edge(f"{field}={bad}")


def test_energy_prices_the_gathers():
    # vpu.gather: its written elements at the alu class, plus its SRAM bytes; dma.ld.gather: a DMA (bytes written)
    arch, t = edge(), table_of(edge())
    vpu, dma = vpu_gather(), dram_gather()
    e = instruction_energy(prog(vpu, dma), [instr_cost(i, arch) for i in (vpu, dma, Halt())], arch)
    kinds = dict(zip(KINDS, e[0]))
    assert kinds["vector"] == pytest.approx(64 * 4 * t.value("vector_pj", "alu")) and kinds["dma"] == 0
    assert kinds["spm_write"] == pytest.approx(64 * 16 * t.sram_pj_per_byte(arch.spm.size, write=True))
    kinds = dict(zip(KINDS, e[1]))
    assert kinds["vector"] == 0 and kinds["dma"] == pytest.approx(16 * 64 * t.value("dma", "pj_per_byte"))
    assert kinds["dram_read"] == pytest.approx(16 * 64 * t.dram_pj_per_byte(arch.energy.dram))
