"""Plots of the JSON report: the numbers each plot draws agree with the report and per-cycle masks; files render."""

import copy
import json

import numpy as np
import pytest
from matplotlib.figure import Figure

from compiler.frontend.builder import GraphBuilder
from isa.arch import load_arch
from npusim.app.cli import main
from npusim.app.driver import run_model
from npusim.report.intervals import bucket_busy, covered, time_split, union
from npusim.report.plots import PlotError, plot_layers, plot_roofline, plot_timeline, plot_utilization, render

PNG = b"\x89PNG\r\n\x1a\n"
IN_INSTRUCTION = ("dram_bandwidth", "dram_latency", "bank_conflict")   # stalls between an instruction's start and end


def small_model():
    rng = np.random.default_rng(0)
    b = GraphBuilder("small")
    x = b.input("x", (1, 3, 16, 16))
    y = b.relu(b.conv(x, b.const("w", rng.standard_normal((8, 3, 3, 3)).astype(np.float32)), strides=2, pads=1))
    y = b.gemm(b.flatten(y), b.const("fc", rng.standard_normal((512, 10)).astype(np.float32)))
    b.output(y)
    return b.build()


@pytest.fixture(scope="module")
def report():
    return run_model(small_model(), load_arch("edge16"), timing_only=True)[3]


def ax():
    return Figure().add_subplot()


def mask(starts, ends, n):
    """Per-cycle occupancy, the slow obvious way the vectorized code must agree with."""
    m = np.zeros(n, bool)
    for s, e in zip(starts, ends):
        m[s:e] = True
    return m


# ------------------------------------------------------------------------------------------------ intervals
def test_interval_union_and_buckets_agree_with_a_per_cycle_mask():
    rng = np.random.default_rng(1)
    for _ in range(50):
        n = int(rng.integers(0, 30))
        s = rng.integers(0, 200, n)
        e = s + rng.integers(0, 40, n)
        m = mask(s, e, 300)
        us, ue = union(s, e)
        assert (mask(us, ue, 300) == m).all() and (us[1:] > ue[:-1]).all()
        assert covered(s, e) == m.sum()
        edges = np.sort(rng.integers(0, 300, 6))
        assert bucket_busy(s, e, edges).tolist() == [m[a:b].sum() for a, b in zip(edges[:-1], edges[1:])]


def test_time_split_takes_compute_then_memory_then_host():
    parts = ["compute", "memory_stall", "memory_stall", "host", "compute"]   # matrix, dma_load, dma_store, host, vector
    split = time_split(parts, [0, 2, 8, 9, 20], [4, 6, 10, 12, 25], (0, 22))
    # compute [0,4) + [20,22) clipped; DMA adds [4,6) and [8,10); host adds [10,12); nothing in [6,8) and [12,20)
    assert split == {"compute": 6, "memory_stall": 4, "host": 2, "sync_stall": 10}


# ------------------------------------------------------------------------------------------------ report fields
def test_layer_fields_partition_the_program_and_its_traffic(report):
    layers = report["layers"]
    pcs = [lr["pcs"] for lr in layers]
    assert pcs[0][0] == 0 and all(a[1] == b[0] for a, b in zip(pcs, pcs[1:]))
    assert max(i["pc"] for i in report["instructions"]) < pcs[-1][1]
    assert sum(lr["dram_bytes"] for lr in layers) == report["dram"]["bytes_read"] + report["dram"]["bytes_written"]
    queues = {u["queue"] for u in report["units"].values()}
    assert {i["unit"] for i in report["instructions"]} <= queues


def test_time_split_matches_per_cycle_masks_of_the_layers_instructions(report):
    role = {u["queue"]: ("compute" if name in ("matrix", "vector") else "memory_stall")
            for name, u in report["units"].items()}
    for lr in report["layers"]:
        mine = [i for i in report["instructions"] if lr["pcs"][0] <= i["pc"] < lr["pcs"][1]]
        n = lr["end"]
        comp = mask([i["start"] for i in mine if role[i["unit"]] == "compute"],
                    [i["end"] for i in mine if role[i["unit"]] == "compute"], n)[lr["start"]:]
        mem = mask([i["start"] for i in mine if role[i["unit"]] == "memory_stall"],
                   [i["end"] for i in mine if role[i["unit"]] == "memory_stall"], n)[lr["start"]:]
        assert lr["time_split"] == {"compute": comp.sum(), "memory_stall": (mem & ~comp).sum(), "host": 0,
                                    "sync_stall": (~mem & ~comp).sum()}
        assert sum(lr["time_split"].values()) == lr["cycles"]


# ------------------------------------------------------------------------------------------------ plots
def test_layers_plot_draws_each_layers_split_summing_to_its_cycles(report):
    drawn = plot_layers(report, ax())
    assert drawn.names == [lr["name"] for lr in report["layers"]]
    assert (sum(drawn.parts.values()) == drawn.cycles).all()
    assert drawn.cycles.tolist() == [lr["cycles"] for lr in report["layers"]]
    assert len(drawn.artists) == sum(1 for p in drawn.parts.values() if p.any())   # no host unit: no host bars


def test_utilization_buckets_add_up_to_each_units_time_in_instructions(report):
    drawn = plot_utilization(report, ax(), buckets=37)
    assert len(drawn.edges) == 38 and drawn.edges[-1] == report["cycles"]
    for name, unit in report["units"].items():
        in_flight = unit["busy_cycles"] + sum(unit["stall_cycles"][c] for c in IN_INSTRUCTION)
        assert drawn.busy[name].sum() == pytest.approx(in_flight, abs=1e-6 * report["cycles"])
        assert 0 <= drawn.fraction[name].min() and drawn.fraction[name].max() <= 1 + 1e-12


def test_roofline_points_are_macs_per_cycle_and_per_byte(report):
    drawn = plot_roofline(report, ax())
    arch = report["arch"]
    assert drawn.peak == arch["matrix"]["rows"] * arch["matrix"]["cols"] == 256
    assert drawn.bandwidth == pytest.approx(arch["dram"]["gb_per_s"] / arch["clock"]["ghz"])
    with_macs = [lr for lr in report["layers"] if lr["macs"]]
    assert drawn.names == [lr["name"] for lr in with_macs] and len(drawn.names) == 2   # the conv and the gemm
    assert drawn.attained.tolist() == [lr["macs"] / lr["cycles"] for lr in with_macs]
    assert drawn.intensity.tolist() == [lr["macs"] / lr["dram_bytes"] for lr in with_macs]
    assert (drawn.attained <= np.minimum(drawn.peak, drawn.intensity * drawn.bandwidth)).all()   # under the roof
    assert set(drawn.skipped) == {lr["name"] for lr in report["layers"]} - set(drawn.names)


def test_timeline_draws_one_bar_per_instruction_in_one_row_per_unit(report):
    drawn = plot_timeline(report, ax())
    assert drawn.units == list(report["units"])
    assert drawn.bars == {name: u["instructions"] for name, u in report["units"].items()}
    assert sum(len(c.get_paths()) for c in drawn.artists) == len(report["instructions"])
    assert set(drawn.legend) <= {lr["name"] for lr in report["layers"]}


def test_timeline_window_keeps_the_instructions_that_overlap_it(report):
    c0, c1 = report["cycles"] // 3, report["cycles"] // 2
    a = ax()
    drawn = plot_timeline(report, a, window=(c0, c1), color_by="op")
    assert a.get_xlim() == (c0, c1)
    assert sum(drawn.bars.values()) == sum(1 for i in report["instructions"] if i["end"] >= c0 and i["start"] <= c1)
    assert set(drawn.legend) <= {lr["op"] for lr in report["layers"]}


def test_timeline_of_a_report_without_layers_colours_by_unit(report):
    """`npusim simulate --json` reports have instructions but no layers."""
    r = {k: v for k, v in report.items() if k != "layers"}
    drawn = plot_timeline(r, ax())
    assert drawn.bars == {name: u["instructions"] for name, u in report["units"].items()} and drawn.legend == []
    colours = [{tuple(c) for c in artist.get_facecolor()} for artist in drawn.artists]
    assert all(len(c) == 1 for c in colours) and len(set.union(*colours)) == len(drawn.artists)


def test_a_host_unit_gets_a_row_and_its_part(report):
    """A fifth unit, as the host-CPU fallback will add: rows and parts follow the report, nothing is hard-coded."""
    r = copy.deepcopy(report)
    r["units"]["host"] = dict(r["units"]["vector"], queue="host", instructions=1)
    last = r["layers"][-1]
    r["instructions"].append({"pc": last["pcs"][1] - 1, "unit": "host", "text": "host.op", "dispatch": 0, "issue": 0,
                              "start": last["start"], "end": last["end"]})
    assert plot_timeline(r, ax()).bars["host"] == 1
    drawn = len(plot_layers(r, ax()).artists)
    last["time_split"] = {"compute": 0, "memory_stall": 0, "host": last["cycles"], "sync_stall": 0}
    assert len(plot_layers(r, ax()).artists) == drawn + 1


def test_missing_fields_and_bad_options_are_plot_errors(report):
    no_instructions = {k: v for k, v in report.items() if k != "instructions"}
    with pytest.raises(PlotError, match=r"timeline plot needs the report's 'instructions'.*npusim run --json"):
        plot_timeline(no_instructions, ax())
    old = copy.deepcopy(report)
    for lr in old["layers"]:
        del lr["dram_bytes"]
    with pytest.raises(PlotError, match=r"roofline plot needs layers\[\]\.dram_bytes"):
        plot_roofline(old, ax())
    with pytest.raises(PlotError, match="window must be two cycles 0 <= C0 < C1, not 5:5"):
        plot_timeline(report, ax(), window=(5, 5))
    with pytest.raises(PlotError, match=r"must end in one of .*\.png"):
        render(report, "util", "out.xyz")


# ------------------------------------------------------------------------------------------------ CLI and files
def test_cli_plot_writes_each_kind(report, tmp_path, capsys):
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    for kind in ("timeline", "util", "layers", "roofline"):
        out = tmp_path / f"{kind}.png"
        assert main(["plot", str(path), "--kind", kind, "-o", str(out)]) == 0
        assert out.read_bytes().startswith(PNG)
    window = tmp_path / "window.png"
    assert main(["plot", str(path), "--kind", "timeline", "--window", "100:2_000", "-o", str(window)]) == 0
    assert window.read_bytes().startswith(PNG)
    capsys.readouterr()
    assert main(["plot", str(path), "--kind", "timeline", "--window", "a:b", "-o", str(window)]) == 1
    assert capsys.readouterr().err == "npusim: error: --window must be C0:C1 (two cycle numbers), not 'a:b'\n"


def test_cli_run_writes_a_timeline(tmp_path, capsys):
    import onnx

    from compiler.frontend.builder import to_onnx

    model, out = tmp_path / "small.onnx", tmp_path / "t.png"
    onnx.save(to_onnx(small_model()), model)
    assert main(["run", str(model), "--arch", "edge16", "--timing-only", "--timeline", str(out)]) == 0
    assert out.read_bytes().startswith(PNG)


@pytest.mark.slow
@pytest.mark.parametrize("name,arch", [("resnet18", "mid32"), ("bert_layer", "mid32")])
def test_all_kinds_render_for_zoo_models(name, arch, tmp_path):
    from npusim.app.zoo import MODELS

    report = json.loads(json.dumps(run_model(MODELS[name](), load_arch(arch), timing_only=True)[3]))
    for kind in ("timeline", "util", "layers", "roofline"):
        out = tmp_path / f"{kind}.png"
        render(report, kind, out, title=name)
        assert out.stat().st_size > 10_000 and out.read_bytes().startswith(PNG)


def test_stacked_timeline_and_utilization_label_time_once_each(report):
    """With a shared x, the cycles label goes under the lowest panel only and the microseconds axis over the highest
    only: a label between the two panels would sit over the lower one's microseconds axis (notebook 01)."""
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, sharex=True)
    plot_timeline(report, top)
    plot_utilization(report, bottom)
    assert (top.get_xlabel(), bottom.get_xlabel()) == ("", "time (cycles)")

    def us_axes(ax):
        return [c for c in ax.child_axes if c.get_xlabel().startswith("time (µs")]
    assert (len(us_axes(top)), len(us_axes(bottom))) == (1, 0)
    plt.close(fig)
    fig, ax = plt.subplots()
    plot_utilization(report, ax)
    assert ax.get_xlabel() == "time (cycles)" and len(us_axes(ax)) == 1
    plt.close(fig)
