"""The fused attention kernel (compiler/kernels/attention.py): numpy's values on every dataflow, with key tiles
streamed or resident and the mask's blocks held or streamed; race-free; its estimate is program_estimate of the
program it emits; the blocks a causal mask kills are skipped; its DRAM traffic is Q, K, V, O and the mask's distinct
blocks."""

from dataclasses import replace

import numpy as np
import pytest

from compiler.kernels.attention import (
    AttentionSpec,
    AttentionTiling,
    attention_estimate,
    attention_program,
    layout,
    mask_table,
    reference,
)
from compiler.kernels.attention_mask import DEAD, ZERO, MaskInfo
from compiler.kernels.attention_search import AttentionSearch, search_attention
from compiler.kernels.common.target import Target
from isa import DType, MatMul
from isa.arch import load_arch
from isa.cost import program_estimate
from isa.races import find_races
from npusim import simulate
from npusim.sim.simulator import region_array

TOLERANCE = 1e-5


def _arch(preset="edge16", dataflow=None):
    arch = load_arch(preset)
    return arch if dataflow is None else replace(arch, matrix=replace(arch.matrix, dataflow=dataflow))


def _spec(n=2, lq=33, lk=40, d=16, dv=8, scale=0.25, divide=False, shared_kv=False):
    heads = tuple(range(n))
    kv = (0,) * n if shared_kv else heads
    return AttentionSpec(lq, lk, d, dv, heads, kv, kv, scale, divide)


def _causal(spec):
    keys, pos = np.arange(spec.lk)[None, :], np.arange(spec.lk - spec.lq, spec.lk)[:, None]
    return MaskInfo.of_mask(np.where(keys <= pos, 0, -np.inf).astype(np.float32), (spec.n,), spec.lq, spec.lk)


def _run(spec, target, tiling, mask=None, seed=0):
    prog = attention_program(spec, target, tiling, mask)
    rng = np.random.default_rng(seed)
    nk = max(spec.k_of) + 1
    q = rng.standard_normal((spec.n, spec.lq, spec.d), np.float32)
    k = rng.standard_normal((nk, spec.d, spec.lk), np.float32)
    v = rng.standard_normal((nk, spec.lk, spec.dv), np.float32)
    inputs = {"Q": q, "K": k, "V": v}
    table = mask_table(mask, tiling)
    if table is not None:
        inputs["Mk"] = table
    res = simulate(prog, target.arch, inputs)
    got = region_array(res, "O", DType.F32, (spec.n, spec.lq, spec.dv))
    return prog, res, got, reference(q, k, v, spec, mask)


@pytest.mark.parametrize("dataflow", ["ws", "os", "is"])
@pytest.mark.parametrize("tiling,masked,dv", [
    (AttentionTiling(16, 16), True, 8), (AttentionTiling(16, 32, True), True, 8), (AttentionTiling(32, 16), False, 8),
    (AttentionTiling(8, 40, True), False, 8), (AttentionTiling(16, 16, False, True), True, 16),
    (AttentionTiling(16, 32, True, True), True, 15), (AttentionTiling(32, 16, False, True), False, 33)])
def test_values_match_numpy_on_every_dataflow_and_the_program_is_race_free(dataflow, tiling, masked, dv):
    # ragged query and key tiles (33 rows, 40 keys), K/V streamed or resident, a causal mask or none, d != dv, the
    # row sums by the vector unit or by a column of ones (a whole column block of its own when dv fills the array's)
    spec = _spec(divide=True, scale=4.0, dv=dv)
    target = Target.of(_arch("edge16", dataflow))
    mask = _causal(spec) if masked else None
    prog, _, got, want = _run(spec, target, tiling, mask)
    assert np.abs(got - want).max() <= TOLERANCE * np.abs(want).max()
    assert find_races(prog) == []


def test_a_mask_too_big_for_the_spm_is_streamed_block_by_block():
    # a different bias per head (no block alike): 18 distinct 16 x 16 blocks; an SPM with room for the streaming ring
    # but not for all of them
    spec = _spec(shared_kv=True)
    mask = MaskInfo.of_mask(np.random.default_rng(1).standard_normal((2, 33, 40)).astype(np.float32), (2,), 33, 40)
    t = AttentionTiling(16, 16)
    full = Target.of(_arch())
    ring = layout(spec, full, t, None, True).spm
    target = full.with_spm(ring)
    assert not layout(spec, target, t, mask.blocks(16, 16).table.size * 4, True).table
    assert layout(spec, full, t, mask.blocks(16, 16).table.size * 4, True).table
    prog, _, got, want = _run(spec, target, t, mask)
    assert np.abs(got - want).max() <= TOLERANCE * np.abs(want).max()
    assert find_races(prog) == []


@pytest.mark.parametrize("preset", ["edge16", "mid32", "dc128"])
def test_the_estimate_is_program_estimate_of_the_program(preset):
    target = Target.of(_arch(preset))
    spec = _spec(n=3, lq=70, lk=90, d=16, dv=16)
    for tiling in (AttentionTiling(16, 32), AttentionTiling(32, 16, True), AttentionTiling(64, 90, False, True)):
        for mask in (None, _causal(spec)):
            prog = attention_program(spec, target, tiling, mask)
            assert attention_estimate(spec, target, tiling, mask) == program_estimate(prog, target.arch)


def test_causal_blocks_above_the_diagonal_are_skipped():
    # Lq = Lk = 64 in tiles of 16: 4 + 3 + 2 + 1 of the 16 blocks per head, each one score and one context product;
    # the diagonal blocks are one distinct block, added to the scores; the others are used as they are
    spec = _spec(n=2, lq=64, lk=64, d=16, dv=16)
    target = Target.of(_arch("mid32"))
    mask = _causal(spec)
    t = AttentionTiling(16, 16)
    blocks = mask.blocks(16, 16)
    assert blocks.kinds.shape == (1, 4, 4)   # (one mask for both heads)
    assert blocks.table.size == 16 * 16 and (blocks.kinds == DEAD).sum() == 6
    assert (blocks.kinds == ZERO).sum() == 6 and (blocks.kinds == 0).sum() == 4
    prog = attention_program(spec, target, t, mask)
    assert sum(isinstance(i, MatMul) for i in prog.instrs) == 2 * 10 * 2   # one mxu.mm each on a 32 x 32 array
    _, res, got, want = _run(spec, target, t, mask)
    assert np.abs(got - want).max() <= TOLERANCE * np.abs(want).max()


def test_dram_traffic_is_q_k_v_o_and_the_masks_distinct_blocks():
    spec = _spec(n=2, lq=64, lk=64, d=16, dv=16)
    target = Target.of(_arch("mid32"))
    mask = _causal(spec)
    q = o = spec.n * spec.lq * spec.d * 4
    kv = spec.n * spec.lk * (spec.d + spec.dv) * 4
    for t, kv_reads in ((AttentionTiling(16, 16, True), kv), (AttentionTiling(64, 64), kv),
                        (AttentionTiling(32, 64), 2 * kv)):
        _, res, _, _ = _run(spec, target, t, mask)
        assert res.dram_bytes_written == o
        assert res.dram_bytes_read == q + kv_reads + mask_table(mask, t).size * 4, t


def test_a_row_with_no_live_key_keeps_its_blocks():
    # -1e38 everywhere in row 0 (finite: its weights are uniform, as onnxruntime's), -inf above the diagonal in the
    # others: the blocks of row 0's tile stay, the rest of the dead ones go
    m = np.where(np.arange(8)[None, :] <= np.arange(8)[:, None], 0, -np.inf).astype(np.float32)
    m[0] = -1e38
    info = MaskInfo.of_mask(m, (1,), 8, 8)
    assert info.kinds(4, 4)[0].tolist() == [[0, 0], [ZERO, 0]]
    assert (info.kinds(2, 2)[0, 1:] == DEAD).sum() == 3 and (info.kinds(2, 2)[0, 0] != DEAD).all()


@pytest.mark.parametrize("preset", ["edge16", "mid32", "dc128"])
@pytest.mark.parametrize("shape", [(2, 96, 96, 32), (2, 256, 64, 64)])
def test_the_search_takes_the_least_priced_candidate_that_fits(preset, shape):
    # each candidate priced alone (a fresh memo) as the search prices them together
    n, lq, lk, d = shape
    spec = _spec(n=n, lq=lq, lk=lk, d=d, dv=d)
    target = Target.of(_arch(preset))
    mask = _causal(spec)
    search = AttentionSearch(spec, target, mask)
    candidates = search.candidates()
    best = search_attention(spec, target, mask)
    prices = {c: attention_estimate(spec, target, c, mask) for c in candidates}
    assert {c: search.price(c, None) for c in candidates} == prices   # (the search's memo keys tell them apart)
    assert best in prices and prices[best] == min(prices.values())
    prog = attention_program(spec, target, best, mask)
    assert prog.spm_top() <= target.spm
