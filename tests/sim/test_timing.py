"""Cycle counts against hand-derived formulas (docs/timing.md), overlap, and the stall accounting invariant."""

import dataclasses

import pytest

from compiler.kernels.common.target import Target
from compiler.kernels.gemm import GemmTiling, tiled_gemm
from isa import (
    Act,
    BinOp,
    DmaCopy,
    DType,
    Halt,
    MatMul,
    Program,
    ProgramConfig,
    Queue,
    Region,
    SemDecl,
    SemOp,
    Space,
    VecBinary,
    VecUnary,
    View,
)
from isa.arch import load_arch, presets_by_size
from isa.cost import instr_cost
from npusim import simulate

CFG = ProgramConfig(rows=16, cols=16, spm=262144, acc=65536)


def edge(**over):
    arch = load_arch("edge16")
    return arch.with_overrides([f"{k.replace('__', '.')}={v}" for k, v in over.items()])


A_REGION = (Region("A", 0, 4096),)


def prog(*instrs, sems=(), regions=A_REGION):
    return Program(CFG, regions, sems, tuple(instrs) + (Halt(),))


def load_16x16(**kw):
    return DmaCopy(queue=Queue.DMA_LD, shape=(16, 16), dst=View(Space.SPM, 0, DType.I8, (16, 1)),
                   src=View(Space.DRAM, 0, DType.I8, (16, 1), "A"), **kw)


def mm_16(**kw):
    return MatMul(shape=(1,), m=16, k=16, n=16, acc=View(Space.ACC, 0, DType.I32, (0,)), acc_row=64,
                  a=View(Space.SPM, 0, DType.I8, (0,)), a_row=16, b=View(Space.SPM, 256, DType.I8, (0,)), **kw)


def test_single_dma_cycles_by_hand():
    # edge16: setup 16, burst 64 B, 8 B/cycle, latency 120, 16 outstanding; SPM 8 banks x 16 B;
    # DRAM rowbuffer, 8 banks of 2 KiB pages, row miss 29 cycles.
    # 256 contiguous bytes = 4 bursts of 64 B: d = 64/8 = 8 cycles, interval max(8, ceil((120+8)/16)=8) = 8,
    # bandwidth-only window = 4*8 - 8 + 8 = 32; all 4 bursts in page 0 (bank 0), closed at the start: the first
    # misses, 3 hit: window = 32 + 1*29 = 61; SPM side: 2 lines of 128 B, no conflicts = 2 cycles.
    # total = 16 + max(61, 2) + 120 = 197; busy = 16 + 61 = 77, the last 120 cycles are a dram_latency stall.
    res = simulate(prog(load_16x16()), edge(), timing_only=True)
    assert res.cycles == 197
    ld = res.unit["dma_load"]
    assert (ld.busy, ld.stall["dram_latency"], ld.stall["dram_bandwidth"]) == (77, 120, 0)
    assert (res.dram_row_hits, res.dram_row_misses) == (3, 1)
    assert res.to_dict()["dram"] | {"bytes_read": 0} == {"bytes_read": 0, "bytes_written": 0, "row_hits": 3,
                                                          "row_misses": 1}
    # dram.model = bandwidth: no rows: total = 16 + 32 + 120 = 168, no hits or misses counted
    res = simulate(prog(load_16x16()), edge(dram__model="bandwidth"), timing_only=True)
    assert res.cycles == 168
    assert (res.unit["dma_load"].busy, res.dram_row_hits, res.dram_row_misses) == (48, 0, 0)


def test_dma_latency_bound_by_outstanding_requests():
    # 2 outstanding: interval max(8, ceil(128/2) = 64) = 64; window = 3*64 + 8 + 1 miss * 29 = 229;
    # total 16 + 229 + 120 = 365
    res = simulate(prog(load_16x16()), edge(dma__outstanding=2), timing_only=True)
    assert res.cycles == 365


def test_unaligned_run_takes_an_extra_burst():
    # 256 B starting at offset 32: bursts of 32, 64, 64, 64, 32 B -> d = 4, 8, 8, 8, 4
    # intervals max(d, ceil((120+d)/16)) = 8, 8, 8, 8, 8 -> window = 4*8 + 4 = 36; bytes 32..287 are all in
    # page 0: 1 miss, 4 hits -> window 36 + 29 = 65; total 16 + 65 + 120 = 201
    ins = dataclasses.replace(load_16x16(), src=View(Space.DRAM, 32, DType.I8, (16, 1), "A"))
    res = simulate(prog(ins), edge(), timing_only=True)
    assert (res.cycles, res.dram_row_hits, res.dram_row_misses) == (201, 4, 1)


@pytest.mark.parametrize("dataflow,expected", [
    # one fold alone: P + s + R + C - 2 with R = C = 16: ws/is preload P = R = 16 and stream s = m = 16 / s = n = 16
    # -> 62; os has no preload and streams s = k = 16 -> 46
    ("ws", 62), ("os", 46), ("is", 62)])
def test_single_matmul_cycles_by_hand(dataflow, expected):
    res = simulate(prog(mm_16()), edge(matrix__dataflow=dataflow), timing_only=True)
    assert res.cycles == expected


def test_matmul_folds_with_and_without_overlap():
    # ws, 4 loop points, m = 40: without overlap 4 * (2*16 + 16 + 40 - 2) = 344;
    # with overlap 40 + 3 * max(40, 16) + 2*16 + 16 - 2 = 206
    mm = dataclasses.replace(mm_16(), shape=(4,), m=40, b=View(Space.SPM, 256, DType.I8, (256,)))
    assert simulate(prog(mm), edge(matrix__fold_overlap="false"), timing_only=True).cycles == 344
    assert simulate(prog(mm), edge(), timing_only=True).cycles == 206


def test_reused_stationary_operand_extends_the_stream():
    # ws with the same B tile for all 4 points (b stride 0): one fold streaming 4 * 40 rows: 16 + 160 + 30 = 206
    mm = dataclasses.replace(mm_16(), shape=(4,), m=40)
    assert simulate(prog(mm), edge(matrix__fold_overlap="false"), timing_only=True).cycles == 206
    # os accumulating the 4 points into the same rows (acc stride 0): ceil(40/16) = 3 folds of s = 4 * 16 = 64
    # reduction steps: 3 * (0 + 64 + 30) = 282
    mm_os = dataclasses.replace(mm, b=View(Space.SPM, 256, DType.I8, (256,)))
    assert simulate(prog(mm_os), edge(matrix__dataflow="os", matrix__fold_overlap="false"),
                    timing_only=True).cycles == 282


def test_os_dataflow_folds_over_m():
    # os: ceil(m / R) = ceil(40 / 16) = 3 folds per point, s = k = 16, no preload, no overlap:
    # 3 * (16 + 16 + 16 - 2) = 138; with overlap 16 + 2 * max(16, 16) + 16 + 16 - 2 = 78
    mm = dataclasses.replace(mm_16(), m=40)
    assert simulate(prog(mm), edge(matrix__dataflow="os", matrix__fold_overlap="false"),
                    timing_only=True).cycles == 138
    assert simulate(prog(mm), edge(matrix__dataflow="os"), timing_only=True).cycles == 78


def test_semaphore_orders_units_and_counts_stall():
    # mxu waits for the load (197 cycles, test_single_dma_cycles_by_hand): starts at 197, ends at 197 + 62 = 259;
    # the wait is a semaphore stall of 197
    sems = (SemDecl("ready", 0),)
    p = prog(load_16x16(signals=(SemOp("ready"),)), mm_16(waits=(SemOp("ready"),)), sems=sems)
    res = simulate(p, edge(), timing_only=True)
    assert res.cycles == 259
    assert (res.start[1], res.end[1]) == (197, 259)
    assert res.unit["matrix"].stall["semaphore"] == 197


def test_dram_bus_is_shared_between_channels():
    # a store (ACC -> DRAM, 1 KiB = 16 bursts in page 0 of C: window 16*8 + 1 miss * 29 = 157) and a load
    # (window 32 + 29 = 61) start together: the load gets the bus first (dispatched first) at cycle 16; the store's
    # window starts at 16 + 61 = 77 instead of 16, a dram_bandwidth stall of 61 cycles. Each then waits 120 cycles
    # of DRAM latency (dram_latency stall).
    store = DmaCopy(queue=Queue.DMA_ST, shape=(16, 16), dst=View(Space.DRAM, 0, DType.I32, (64, 4), "C"),
                    src=View(Space.ACC, 0, DType.I32, (64, 4)))
    p = prog(load_16x16(), store, regions=(Region("A", 0, 4096), Region("C", 1, 4096)))
    res = simulate(p, edge(), timing_only=True)
    st = res.unit["dma_store"]
    assert (st.stall["dram_bandwidth"], st.stall["dram_latency"], st.busy) == (61, 120, 16 + 157)
    assert res.unit["dma_load"].stall["dram_bandwidth"] == 0
    assert res.end[1] == 16 + 61 + 157 + 120
    assert (res.dram_row_hits, res.dram_row_misses) == (3 + 15, 1 + 1)


def test_bank_conflict_costs_exact_extra_cycles():
    # A DMA reading an SPM tile transposed: shape [16 i, 16 j], src address i + 128 j. edge16's SPM has 8 banks
    # of 16 B (a 128 B line), so a DMA beat is 128 elements: beat 0 is i = 0..7, j = 0..15. Word = addr // 16 =
    # 8 j: 16 distinct words, all in bank (8 j) % 8 = 0 -> 16 cycles; conflict-free would be ceil(16 / 8) = 2.
    # Two such beats: 32 cycles instead of 4, conflict = 28; total = setup 16 + 32 = 48.
    src = View(Space.SPM, 0, DType.I8, (1, 128))
    ins = DmaCopy(queue=Queue.DMA_ST, shape=(16, 16), dst=View(Space.SPM, 4096, DType.I8, (16, 1)), src=src)
    assert tuple(instr_cost(ins, edge())[:2]) == (48, 28)
    res = simulate(prog(ins), edge(), timing_only=True)
    assert res.cycles == 48 and res.unit["dma_store"].stall["bank_conflict"] == 28
    # the padded layout (row pitch 144 B = 9 words) spreads the same column over all banks: no conflict
    padded = dataclasses.replace(ins, src=View(Space.SPM, 0, DType.I8, (1, 144)))
    assert tuple(instr_cost(padded, edge())[:2]) == (16 + 4, 0)


def f16(base):
    return View(Space.SPM, base, DType.F16, (2,))


@pytest.mark.parametrize("instr,expected", [
    # edge16 vector unit: 16 lanes; (latency, interval) alu (2, 1), mul (3, 2), special (16, 8). 256 f16 elements
    # = 16 vectors; every operand is dense: a 16-element beat is 32 B = 2 words in 2 banks = 1 SRAM cycle, 16 in all.
    # cycles = latency + max(16 * interval, 16)
    (VecBinary(op=BinOp.ADD, shape=(256,), dst=f16(4096), src0=f16(0), imm=1.0), 2 + max(16 * 1, 16)),   # 18
    (VecBinary(op=BinOp.MUL, shape=(256,), dst=f16(4096), src0=f16(0), imm=2.0), 3 + max(16 * 2, 16)),   # 35
    (VecUnary(fn=Act.EXP, shape=(256,), dst=f16(4096), src=f16(0)), 16 + max(16 * 8, 16)),               # 144
    # a fused activation rides in the op's pass: the op's class, no extra latency or interval
    (VecBinary(op=BinOp.ADD, shape=(256,), dst=f16(4096), src0=f16(0), imm=1.0, act=Act.RELU), 2 + max(16 * 1, 16)),
    (VecBinary(op=BinOp.MUL, shape=(256,), dst=f16(4096), src0=f16(0), imm=2.0, act=Act.CLAMP, lo=-1, hi=6),
     3 + max(16 * 2, 16)),
])
def test_vector_throughput_by_op_class(instr, expected):
    res = simulate(prog(instr), edge(), timing_only=True)
    assert res.cycles == expected
    assert res.unit["vector"].busy == expected and res.unit["vector"].stall["bank_conflict"] == 0


def test_slow_vector_op_hides_bank_conflicts():
    # exp reading its source with a 128 B element stride: every 16-element beat needs 16 words of bank 0
    # (16 SRAM cycles per beat, 256 in all, ideal ceil(16/8) = 2 per beat, 32). With special_interval 8 the
    # compute takes 128 cycles: body = max(128, 256) = 256, conflict = 256 - max(128, 32) = 128;
    # cycles = 16 + 256 = 272. With special_interval 16 the compute (256) covers the conflicts: 16 + 256, conflict 0.
    ins = VecUnary(fn=Act.EXP, shape=(256,), dst=f16(65536), src=View(Space.SPM, 0, DType.F16, (128,)))
    assert tuple(instr_cost(ins, edge())[:2]) == (272, 128)
    assert tuple(instr_cost(ins, edge(vector__special_interval=16))[:2]) == (272, 0)


def gemm(arch, M, N, K, dtype=DType.I8, tiling=None):
    return tiled_gemm(M, N, K, dtype, Target.of(arch), tiling)


def test_double_buffering_overlap_by_predicted_amount():
    # One output tile, K split in 6 k-steps; each step = load A, load B (dma.ld) then one mm. Memory bound
    # (loads > mm), so with the ring of 2 every mm but the last hides under the next step's loads:
    # concurrent = 6 * (la + lb) + m + store; serial = 6 * (la + lb + m) + store; difference = 5 * m.
    arch = load_arch("mid32")
    p = gemm(arch, 32, 32, 6 * 32, tiling=GemmTiling(tm=32, tn=32, tk=32))
    costs = [instr_cost(i, arch) for i in p.instrs]
    la, lb, m, st = costs[0].cycles, costs[1].cycles, costs[2].cycles, costs[-2].cycles
    assert la + lb > m
    conc = simulate(p, arch, timing_only=True)
    ser = simulate(p, arch, timing_only=True, serial=True)
    assert ser.cycles == 6 * (la + lb + m) + st
    assert conc.cycles == 6 * (la + lb) + m + st
    assert ser.cycles - conc.cycles == 5 * m


def test_compute_bound_pipeline_hides_loads():
    # make DRAM very fast so the mm dominates: concurrent = (la + lb) + 6 * m + store
    arch = load_arch("mid32").with_overrides(["dram.gb_per_s=4915.2", "dram.access_bytes=4096", "dma.burst_bytes=4096",
                                              "dram.latency_ns=0.8", "dram.row_miss_ns=0", "dma.setup_latency=0"])
    p = gemm(arch, 256, 32, 6 * 32, tiling=GemmTiling(tm=256, tn=32, tk=32))
    costs = [instr_cost(i, arch) for i in p.instrs]
    la, lb, m, st = costs[0].cycles, costs[1].cycles, costs[2].cycles, costs[-2].cycles
    assert la + lb < m
    assert simulate(p, arch, timing_only=True).cycles == la + lb + 6 * m + st


@pytest.mark.parametrize("preset", presets_by_size())
def test_unit_cycles_add_up(preset):
    arch = load_arch(preset)
    res = simulate(gemm(arch, 100, 70, 90), arch, timing_only=True)
    for u in res.units:
        assert u.busy + u.idle + sum(u.stall.values()) == res.cycles
        assert min(u.busy, u.idle, *u.stall.values()) >= 0


def test_same_inputs_same_cycles():
    arch = load_arch("edge16")
    p = gemm(arch, 64, 48, 80)
    a, b = simulate(p, arch, timing_only=True), simulate(p, arch, timing_only=True)
    da, db = a.to_dict(), b.to_dict()
    da.pop("wall_seconds"), db.pop("wall_seconds")
    assert da == db and (a.end == b.end).all()
