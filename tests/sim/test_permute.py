"""compiler.kernels.transpose.permute: any transpose equals numpy's, its DMAs move long runs in both directions, and the
common 4-D permutations lose no cycle to SPM bank conflicts on any preset."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.frontend.builder import GraphBuilder
from compiler.kernels.common.target import Target
from compiler.kernels.transpose import permute
from isa import DmaCopy, DType, Space
from isa.arch import load_arch, presets_by_size
from isa.cost import instr_cost
from npusim import simulate
from npusim.app.driver import run_model
from npusim.sim.simulator import region_array


@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(1, 9), min_size=2, max_size=5), data=st.data(),
       preset=st.sampled_from(["edge16", "dc128"]), spm=st.sampled_from([None, 4096]),
       dtype=st.sampled_from([DType.F32, DType.I8]))
def test_any_transpose_matches_numpy(shape, data, preset, spm, dtype):
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    arch = load_arch(preset)
    x = (np.arange(np.prod(shape)) % 251 - 125).astype(dtype.storage).reshape(shape)
    target = Target.of(arch)
    p = permute(tuple(shape), perm, dtype, target.with_spm(spm) if spm else target)  # small SPM: many tiles
    got = region_array(simulate(p, arch, {"X": x}), "Y", dtype, x.transpose(perm).shape)
    assert (got == x.transpose(perm)).all()


def test_attention_head_split_reads_and_writes_contiguous_runs():
    # BERT's K^T: (1, 128, 12, 64) -> (1, 12, 64, 128); the DRAM side of every DMA is unit-stride innermost, the
    # reordering happens in SPM
    arch = load_arch("mid32")
    p = permute((1, 128, 12, 64), (0, 2, 3, 1), DType.F32, Target.of(arch))
    dmas = [i for i in p.instrs if isinstance(i, DmaCopy)]
    dram = [i.src if i.src.space is Space.DRAM else i.dst for i in dmas]
    assert dmas and all(v.strides[-1] == 4 for v in dram)


COMMON = [((1, 64, 32, 32), (0, 2, 3, 1)),       # NCHW -> NHWC
          ((1, 56, 56, 64), (0, 3, 1, 2)),       # NHWC -> NCHW
          ((1, 3, 64, 64), (0, 2, 3, 1)),        # an image's 3 channels last
          ((1, 128, 12, 64), (0, 2, 1, 3)),      # BERT's head split
          ((1, 128, 12, 64), (0, 2, 3, 1)),      # BERT's K^T
          ((1, 12, 128, 64), (0, 2, 1, 3)),      # heads merged back
          ((1, 196, 12, 64), (0, 2, 3, 1)),      # ViT's K^T (196 tokens)
          ((1, 768, 196), (0, 2, 1))]            # ViT's patch tokens


@pytest.mark.parametrize("preset", presets_by_size())
@pytest.mark.parametrize("dtype", [DType.F32, DType.I8])
def test_common_transposes_have_no_bank_conflicts(preset, dtype):
    # the SPM pitch the vector unit walks across is skewed by whole bank words: no beat waits for a busy bank, by the
    # cost model's count (isa.cost) and by the simulator's stall accounting
    arch = load_arch(preset)
    for shape, perm in COMMON:
        p = permute(shape, perm, dtype, Target.of(arch))
        assert sum(instr_cost(i, arch).conflict for i in p.instrs) == 0, (shape, perm)
        res = simulate(p, arch, timing_only=True)
        assert {u: s.stall["bank_conflict"] for u, s in res.unit.items() if s.stall["bank_conflict"]} == {}, \
            (shape, perm)


def test_nchw_to_nhwc_costs_what_its_dram_traffic_costs():
    # the 64x32x32 transpose of the issue (mid32: 67,892 cycles, 61,440 of them bank-conflict stalls): the vector
    # unit now hides under the DMAs, whose stores' DRAM time bounds the whole
    arch = load_arch("mid32")
    p = permute((1, 64, 32, 32), (0, 2, 3, 1), DType.F32, Target.of(arch))
    res = simulate(p, arch, timing_only=True)
    windows = sum(instr_cost(i, arch).dram_window for i in p.instrs if isinstance(i, DmaCopy))
    assert res.unit["vector"].busy < res.cycles / 4
    assert windows <= res.cycles < 1.1 * windows


@pytest.mark.parametrize("preset", presets_by_size())
def test_transpose_nodes_report_no_bank_conflict_stalls(preset):
    # through the driver: values against onnxruntime, and the report's per-unit stall split
    b = GraphBuilder("t")
    x = b.input("x", (1, 32, 16, 24))
    b.output(b.transpose(x, (0, 2, 3, 1)), b.transpose(x, (0, 3, 1, 2)), b.transpose(x, (0, 2, 1, 3)))
    compiled, _, _, report = run_model(b.build(), load_arch(preset), validate=True)
    assert all(v["ok"] and v["max_abs_error"] == 0 for v in report["validation"].values())
    assert [lr.op for lr in compiled.layers] == ["Transpose"] * 3
    assert sum(u["stall_cycles"]["bank_conflict"] for u in report["units"].values()) == 0
