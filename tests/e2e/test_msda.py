"""Multi-scale deformable attention (docs/perception.md): mmcv's exported graph, the fuse_msda pass, the unfused path
against onnxruntime within the bound of docs/perception.md#msda-error-bound, and the fused lowering bit for bit against
the numpy reference in the CUDA kernel's order, with the level tables in the SPM and gathered from DRAM, on every
preset."""

import numpy as np
import onnx
import pytest

from compiler.compile import run_passes
from compiler.frontend.onnx_import import import_onnx
from compiler.passes.fuse_msda import fuse_msda
from isa.arch import load_arch, presets_by_size
from npusim.app.driver import ort_session
from npusim.app.seedbench.msda import CASES, SMALL, run_variant
from npusim.app.zoo.msda import msda_inputs, msda_mmcv
from npusim.functional import sampling_reference as sampling

PRESETS = presets_by_size()
LEVELS = ((6, 5), (3, 3))


def _ops(g):
    return [n.op for n in g.nodes]


def _graph(model):
    return run_passes(import_onnx(model), skip=("fuse_msda",))


def test_the_exported_graph_is_mmcvs_and_the_reference_matches_onnxruntime_within_the_bound():
    m = msda_mmcv(levels=LEVELS)
    ops = [n.op_type for n in m.graph.node]
    assert ops.count("GridSample") == 2 and ops[-4:] == ["Mul", "ReduceSum", "Reshape", "Transpose"]
    assert ["Unsqueeze", "Concat"] == [o for o in ops if o in ("Unsqueeze", "Concat")][-2:]
    inp = msda_inputs(m, seed=3)
    got = ort_session(m).run(None, inp)[0]
    want = sampling.ms_deform_attn_mmcv(inp["value"], LEVELS, inp["sampling_locations"], inp["attention_weights"])
    assert got.shape == want.shape == (1, 7, 16)
    # the bound (docs/perception.md#msda-error-bound), per output, from the same samples
    bs, heads, d, q = 1, 2, 8, 7
    value, loc, aw = inp["value"], inp["sampling_locations"], inp["attention_weights"]
    grid = loc * np.float32(2) - np.float32(1)
    starts = np.cumsum([0] + [h * w for h, w in LEVELS])
    vals = [value[:, starts[i]:starts[i + 1]].transpose(0, 2, 3, 1).reshape(bs * heads, d, h, w)
            for i, (h, w) in enumerate(LEVELS)]
    grids = [grid[:, :, :, i].transpose(0, 2, 1, 3, 4).reshape(bs * heads, q, 2, 2) for i in range(2)]
    attn = aw.transpose(0, 2, 1, 3, 4).reshape(bs * heads, q, 4)
    bound = sampling.ms_deform_attn_bound(vals, grids, attn).reshape(bs, heads * d, q).transpose(0, 2, 1)
    assert np.all(np.abs(got.astype(np.float64) - want) <= bound) and bound.max() > 0


def test_fuse_msda_takes_the_whole_module_in_mmcvs_layouts_and_dump_after_names_it():
    g = _graph(msda_mmcv(levels=LEVELS))
    out = fuse_msda(g)
    assert _ops(out) == ["Mul", "Sub", "MSDeformAttn"]   # 2*loc - 1 stays; no Split, Transpose, Gather, Reshape
    node = out.nodes[-1]
    assert node.inputs == ("value", "sampling_grids", "attention_weights") and node.outputs == ("output",)
    assert node.attrs == {"levels": 2, "points": 2, "heads": 2, "shapes": LEVELS}
    keep = _with_attr(msda_mmcv(levels=LEVELS), "ReduceSum", "keepdims", 1)   # (N, D, Q, 1), then the same view
    assert _ops(fuse_msda(_graph(keep))) == ["Mul", "Sub", "MSDeformAttn"]
    dumped = []
    run_passes(import_onnx(msda_mmcv(levels=LEVELS)), dump_after="fuse_msda", dump=dumped.append)
    assert "MSDeformAttn" in dumped[0]


def _planar_model():
    """mmcv's graph with level 0's value table also a graph output: the layout chains cannot go, the core can."""
    m = msda_mmcv(levels=LEVELS)
    m.graph.output.append(onnx.helper.make_tensor_value_info("value_l_0", onnx.TensorProto.FLOAT, None))
    return m


def test_fuse_msda_keeps_the_core_when_a_layout_chain_is_read_elsewhere():
    out = fuse_msda(_graph(_planar_model()))
    assert "GridSample" not in _ops(out) and "Split" in _ops(out) and _ops(out).count("Transpose") == 6
    node = next(n for n in out.nodes if n.op == "MSDeformAttn")
    assert node.attrs == {"levels": 2, "points": 2} and len(node.inputs) == 5
    assert out.tensor(node.outputs[0]).shape == (2, 8, 7)


@pytest.mark.parametrize("tables", ["spm", "dram"])
def test_planar_form_is_bit_exact(tables):
    from isa.races import find_races
    from npusim.app.driver import run_model

    m = _planar_model()
    inp = msda_inputs(m, seed=2)
    compiled, _, out, rep = run_model(m, load_arch("edge16"), inp, msda_tables=tables)
    assert find_races(compiled.program) == []
    assert rep["host_ops"] == [] and "MSDeformAttn" in _ops(compiled.graph)
    assert any(lr.name.endswith(".coords") for lr in compiled.layers) == (tables == "dram")
    want = sampling.ms_deform_attn_mmcv(inp["value"], LEVELS, inp["sampling_locations"], inp["attention_weights"])
    assert np.array_equal(out["output"].view(np.int32), want.view(np.int32))


def _with_attr(model, op, name, value):
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for n in m.graph.node:
        if n.op_type == op:
            for a in n.attribute:
                if a.name == name:
                    a.i = value
    return m


@pytest.mark.parametrize("change", ["align_corners", "stack_is_output"])
def test_near_misses_stay_unfused(change):
    m = msda_mmcv(levels=LEVELS)
    if change == "align_corners":   # not what the module calls: another bilinear rule
        m = _with_attr(m, "GridSample", "align_corners", 1)
    else:                           # the stacked samples are read outside the pattern
        m.graph.output.append(onnx.helper.make_tensor_value_info("sampled_lp", onnx.TensorProto.FLOAT, None))
    g = _graph(m)
    assert _ops(fuse_msda(g)) == _ops(g)


@pytest.mark.parametrize("preset", PRESETS)
def test_unfused_graph_runs_on_the_npu_within_the_bound(preset):
    row = run_variant(SMALL[0], "unfused", load_arch(preset), values=True)
    assert row["validated"] == "tol" and row["tables"] == "-"


@pytest.mark.parametrize("tables", ["fused-spm", "fused-dram"])
@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("case", SMALL, ids=lambda c: c.name)
def test_fused_lowering_is_bit_exact_against_the_reference(case, preset, tables):
    row = run_variant(case, tables, load_arch(preset), values=True, seed=1)
    assert row["validated"] == "exact" and row["tables"] == tables.split("-")[1]


@pytest.mark.parametrize("preset", PRESETS)
def test_fused_run_keeps_every_node_on_the_npu_and_matches_onnxruntime(preset):
    """Four heads: the SPM table buffers alternate by head, so heads 2 and 3 reuse the first two's (the race
    checker sees every step's semaphores)."""
    from isa.races import find_races
    from npusim.app.driver import run_model

    m = msda_mmcv(heads=4, levels=LEVELS, queries=20)
    inp = msda_inputs(m, seed=5)
    compiled, _, out, rep = run_model(m, load_arch(preset), inp, validate=True)
    assert rep["host_ops"] == [] and rep["validation"]["output"]["ok"]
    assert _ops(compiled.graph) == ["Mul", "Sub", "MSDeformAttn"]
    assert find_races(compiled.program) == []
    want = sampling.ms_deform_attn_mmcv(inp["value"], LEVELS, inp["sampling_locations"], inp["attention_weights"])
    assert np.array_equal(out["output"].view(np.int32), want.view(np.int32))


@pytest.mark.slow
def test_fused_m2_moves_at_least_the_sampled_tensor_fewer_dram_bytes():
    """BEVFormer-tiny's TSA (M2) timing-only on mid32 (its tables in the SPM)."""
    m2 = CASES[0]
    for preset, tables in (("mid32", "spm"),):
        arch = load_arch(preset)
        unfused, fused = (run_variant(m2, v, arch) for v in ("unfused", "fused"))
        assert fused["tables"] == tables
        saved = unfused["dram_rd"] + unfused["dram_wr"] - fused["dram_rd"] - fused["dram_wr"]
        assert saved >= m2.sampled_bytes and fused["cycles"] < unfused["cycles"]


def test_reduce_rows_steps_stay_within_one_shape_extent():
    """Unfused M2 on dc128 reduces 640,000 rows of 4: more than 65,535 rows per step fit its SPM (IsaError before)."""
    from compiler.kernels.common.target import Target
    from compiler.kernels.vector.rowwise import reduce_rows
    from isa import DType, Reduce

    prog = reduce_rows(Reduce.SUM, 640_000, 4, DType.F32, Target.of(load_arch("dc128")))
    assert max(max(i.shape) for i in prog.instrs if hasattr(i, "shape")) <= 65_535
