"""Running sweeps in this process (scheduler "synchronous", the same evaluate/store path the clusters use): rows equal
to running each point alone, error rows, the result store and resuming, Ctrl-C, compile sharing, Pareto fronts."""

from __future__ import annotations

import ast
import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from compiler.kernels.conv2d import ConvShape
from isa import DType
from isa.arch import load_arch
from npusim.app.driver import run_conv, run_gemm, run_model
from npusim.app.sweep import (
    COMPILE_FREE_FIELDS,
    METRICS,
    Gemm,
    ResultStore,
    compile_view,
    evaluate,
    load_spec,
    pareto,
    pareto_mask,
    sweep,
)
from npusim.app.sweep import workloads as wl
from npusim.app.zoo import resnet18

ROOT = Path(__file__).resolve().parents[2]
TINY = {"zoo": "resnet18", "args": {"image": 32, "width": 8, "classes": 10}}
GEMM = {"gemm": {"M": 64, "N": 96, "K": 64}}
BIG = {"gemm": {"M": 1024, "N": 1024, "K": 1024}}   # (more steps than a program may have with 256 B of SPM)


def _spec(**extra) -> dict:
    return {"arch": "mid32", "grid": {"matrix.rows,matrix.cols": [8, 16], "spm.size": [256, 65536]},
            "workloads": [BIG, TINY]} | extra


def test_every_row_is_the_point_run_alone_and_points_that_cannot_run_are_error_rows_or_host_rows():
    df = sweep(_spec(), scheduler="synchronous")
    assert list(df.columns) == ["workload", "matrix.rows", "matrix.cols", "spm.size", *METRICS, "error"]
    assert len(df) == 8 and df.attrs == {"computed": 8, "reused": 0}
    assert list(df["workload"]) == ["gemm 1024x1024x1024 i8", "resnet18(image=32, width=8, classes=10)"] * 4
    assert list(df["matrix.rows"]) == [8] * 4 + [16] * 4 and list(df["spm.size"]) == [256, 256, 65536, 65536] * 2
    # with 256 B of SPM no tiling of the GEMM fits, not even on a block of the array (its 1 x 1 tiles would take
    # more steps than a program may have): a bare kernel that does not fit is an error row, while a model's layers
    # that no tiling fits run on the host CPU, and the row says how many (the others run on blocks of the array)
    bad = df[df["error"].notna()]
    assert list(bad.index) == [0, 4] and set(bad["spm.size"]) == {256}
    assert all(bad["error"].str.startswith("TilingError: ")) and bad[list(METRICS)].isna().all().all()
    assert (df["host_ops"][[1, 5]] > 0).all() and (df["host_ops"][[3, 7]] == 0).all()
    base = load_arch("mid32")
    model = resnet18(image=32, width=8, classes=10)
    for _, row in df[df["error"].isna()].iterrows():
        arch = base.with_overrides([f"matrix.rows={row['matrix.rows']}", f"matrix.cols={row['matrix.cols']}",
                                    f"spm.size={row['spm.size']}"])
        if row["workload"].startswith("gemm"):
            res = run_gemm(1024, 1024, 1024, DType.I8, arch, timing_only=True)[0]
            macs = 1024 ** 3
        else:
            _, res, _, report = run_model(model, arch, timing_only=True)
            macs = report["macs"]
        assert row["cycles"] == res.cycles and row["macs"] == macs
        assert row["time_s"] == pytest.approx(res.cycles / (arch.clock.ghz * 1e9))
        assert row["dram_bytes"] == res.dram_bytes_read + res.dram_bytes_written
        assert row["mac_utilization"] == pytest.approx(macs / (res.cycles * row["matrix.rows"] ** 2))
        energy = res.to_dict(instructions=False)["energy"]   # energy, power, EDP and area: the run report's
        assert row["energy_pj"] == energy["total_pj"] == row["energy_per_inference_pj"]
        assert row["power_w"] == pytest.approx(row["energy_pj"] * 1e-12 / row["time_s"])
        assert row["edp_js"] == pytest.approx(row["energy_pj"] * 1e-12 * row["time_s"])
        assert row["area_mm2"] == res.to_dict(instructions=False)["area"]["total_mm2"] > 0
        assert row["host_ops"] == (0 if row["workload"].startswith("gemm") else len(report["host_ops"]))


def test_a_point_whose_layer_runs_on_the_host_says_so():
    """On 32x32 with 512 B of SPM no tiling of ResNet-18's convolutions fits, not even on a block of the array (an
    output row's input window needs more), so they run on the host CPU: the row counts them, so a front need not be
    read as the NPU's. With 64 KiB, where its 3x3 convolutions ran on the host before they could take a block of the
    array (issue 24, finding 3), every layer runs on the NPU."""
    df = sweep({"arch": "mid32", "grid": {"spm.size": [512, 65536, 1048576]}, "workloads": [{"zoo": "resnet18"}]},
               scheduler="synchronous")
    assert df["host_ops"][0] > 0 and (df["host_ops"][1:] == 0).all() and df["error"].isna().all()
    assert df["cycles"][0] > 2 * df["cycles"][1]


def test_an_arch_that_does_not_exist_is_an_error_row_not_a_failed_sweep():
    # each value is fine alone; together a burst is smaller than one DRAM access
    df = sweep({"arch": "mid32", "grid": {"dram.access_bytes": [32, 128], "dma.burst_bytes": [64, 256]},
                "workloads": [GEMM]}, scheduler="synchronous")
    bad = df[df["error"].notna()]
    assert list(zip(bad["dram.access_bytes"], bad["dma.burst_bytes"])) == [(128, 64)]
    assert bad["error"].iloc[0].startswith("ArchError: dma.burst_bytes (64) must be a multiple of dram.access_bytes "
                                           "(128)")
    assert df["cycles"].notna().sum() == 3


def test_conv_and_topology_workloads(tmp_path):
    (tmp_path / "t.csv").write_text("name, M, N, K,\nfc1, 32, 64, 48,\nfc2, 32, 16, 64,\n")
    df = sweep({"arch": "mid32", "workloads": [
        {"conv": {"N": 1, "C": 8, "H": 10, "W": 10, "K": 16, "R": 3, "S": 3, "pad": 1}},
        {"topology": str(tmp_path / "t.csv"), "format": "gemm"}]}, scheduler="synchronous")
    arch = load_arch("mid32")
    cs = ConvShape(1, 8, 10, 10, 16, 3, 3, pad=1)
    conv = run_conv(cs, DType.I8, arch, timing_only=True)[0]
    layers = [run_gemm(32, 64, 48, DType.I8, arch, timing_only=True)[0],
              run_gemm(32, 16, 64, DType.I8, arch, timing_only=True)[0]]
    assert list(df["cycles"]) == [conv.cycles, sum(r.cycles for r in layers)]
    assert list(df["macs"]) == [cs.macs, 32 * 64 * 48 + 32 * 16 * 64]
    assert df["dram_bytes"].iloc[1] == sum(r.dram_bytes_read + r.dram_bytes_written for r in layers)
    assert df["energy_pj"].iloc[0] == conv.energy.total
    topo = df.iloc[1]
    assert topo["energy_pj"] == pytest.approx(sum(r.energy.total for r in layers), rel=1e-12)
    assert topo["power_w"] == pytest.approx(topo["energy_pj"] * 1e-12 / topo["time_s"])
    assert topo["area_mm2"] == df["area_mm2"].iloc[0]   # the same Arch


def test_results_are_stored_as_they_finish_and_a_rerun_computes_only_the_missing(tmp_path):
    first = sweep(_spec(), out=tmp_path, scheduler="synchronous")
    store = ResultStore(tmp_path)
    files = sorted(store.points.glob("*.json"))
    assert len(files) == len(store) == 8
    record = json.loads(files[0].read_text())
    assert set(record) == {"workload", "arch", *METRICS, "error"}
    assert pd.read_parquet(tmp_path / "results.parquet").equals(first)
    csv = pd.read_csv(tmp_path / "results.csv")
    assert list(csv["cycles"].fillna(-1)) == list(first["cycles"].fillna(-1))
    files[0].unlink()
    files[1].write_text(files[1].read_text()[:10])   # cut short by a crash: recomputed
    again = sweep(_spec(), out=tmp_path, scheduler="synchronous")
    assert again.attrs == {"computed": 2, "reused": 6}
    assert again.equals(first)
    # another Arch or other compiler options are other keys
    more = sweep(_spec(options={"prefetch": False}), out=tmp_path, scheduler="synchronous")
    assert more.attrs == {"computed": 4, "reused": 4}   # the gemm rows do not take compiler options


def test_ctrl_c_keeps_what_finished(tmp_path, monkeypatch):
    calls = itertools.count()
    real = Gemm.run

    def run(self, arch):
        if next(calls) == 2:
            raise KeyboardInterrupt
        return real(self, arch)

    monkeypatch.setattr(Gemm, "run", run)
    spec = {"arch": "mid32", "grid": {"dram.latency_ns": [50, 100, 150, 200]}, "workloads": [GEMM]}
    with pytest.raises(KeyboardInterrupt):
        sweep(spec, out=tmp_path, scheduler="synchronous")
    assert len(ResultStore(tmp_path)) == 2 and not (tmp_path / "results.csv").exists()
    df = sweep(spec, out=tmp_path, scheduler="synchronous")
    assert df.attrs == {"computed": 2, "reused": 2} and df["error"].isna().all()


def test_one_failing_point_never_stops_the_sweep(monkeypatch):
    def run(self, arch):
        if arch.dram.latency_ns == 100:
            raise ZeroDivisionError("a bug")
        return real(self, arch)

    real = Gemm.run
    monkeypatch.setattr(Gemm, "run", run)
    df = sweep({"arch": "mid32", "grid": {"dram.latency_ns": [50, 100, 150]}, "workloads": [GEMM]},
               scheduler="synchronous")
    assert list(df["error"].fillna("")) == ["", "ZeroDivisionError: a bug", ""]
    assert df["cycles"].notna().sum() == 2


# ------------------------------------------------------------------------------------------------ compile sharing
def _attributes(path: Path) -> set[str]:
    return {n.attr for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Attribute)}


def test_the_compiler_never_reads_the_compile_free_fields():
    # statically: no module of the compiler, nor the cost model it prices tilings with, nor the unit conversions
    # they read, reaches these sections or fields (queues.depth is only reachable through .queues)
    sources = [*sorted((ROOT / "compiler").rglob("*.py")), ROOT / "isa" / "cost.py", ROOT / "isa" / "speeds.py"]
    names = set().union(*map(_attributes, sources))
    reach = {"queues": "queues", "dma": "channels", "energy": "energy"}
    assert all(reach[sec] not in names for sec, _ in COMPILE_FREE_FIELDS), sorted(names & set(reach.values()))
    assert "to_dict" not in names and "to_toml" not in names
    # dynamically: other values of those fields give the same program
    from compiler.compile import compile_model
    from npusim.app.driver import load_model

    graph = load_model(resnet18(image=32, width=8, classes=10))
    base = load_arch("edge16")
    other = base.with_overrides(["queues.depth=2", "dma.channels=1", "energy.table=45nm", "energy.dram=hbm2"])
    assert (base.energy.table, base.energy.dram) != ("45nm", "hbm2")
    assert compile_view(base) == compile_view(other) != compile_view(base.with_overrides(["dram.latency_ns=7"]))
    assert compile_view(base) != compile_view(base.with_overrides(["clock.ghz=3.5"]))   # the clock times DRAM
    a, b = compile_model(graph, base), compile_model(graph, other)
    assert a.program.instrs == b.program.instrs and a.program.sems == b.program.sems


def test_points_that_differ_only_in_compile_free_fields_compile_once_per_worker():
    wl._compiled.cache_clear()
    df = sweep({"arch": "mid32", "grid": {"dma.channels": [1, 2, 4], "queues.depth": [4, 8]},
                "workloads": [TINY]}, scheduler="synchronous")
    info = wl._compiled.cache_info()
    assert (info.misses, info.hits) == (1, 5)   # one compile for the six points
    # the channels and queue depth change the simulation, not the program
    arch = load_arch("mid32", ["dma.channels=1", "queues.depth=4"])
    alone = run_model(resnet18(image=32, width=8, classes=10), arch, timing_only=True)[1]
    assert df[(df["dma.channels"] == 1) & (df["queues.depth"] == 4)]["cycles"].item() == alone.cycles


def test_points_run_grouped_by_compile_so_a_small_cache_still_compiles_each_program_once():
    wl._compiled.cache_clear()
    # energy.table varies slowest: in row order every program would be evicted (cache of 4) before its second use
    sizes = [131072, 262144, 524288, 1048576, 2097152]
    df = sweep({"arch": "mid32", "grid": {"energy.table": ["7nm", "45nm"], "spm.size": sizes},
                "workloads": [{"zoo": "bert_layer", "args": {"seq": 8, "hidden": 32, "heads": 2, "ffn": 64}}]},
               scheduler="synchronous")
    assert wl._compiled.cache_info().maxsize < len(sizes)
    assert (wl._compiled.cache_info().misses, wl._compiled.cache_info().hits) == (5, 5)
    assert list(df["spm.size"]) == sizes * 2 and df["error"].isna().all()   # rows still in spec order
    assert list(df["cycles"][:5]) == list(df["cycles"][5:])


def test_evaluate_reports_a_worker_side_error():
    record = evaluate(Gemm("g", 64, 64, 64, "f32"), load_arch("mid32", ["matrix.dtypes=i8"]))
    assert record["cycles"] is None and "f32" in record["error"]


# ------------------------------------------------------------------------------------------------ Pareto
def _brute(values: np.ndarray) -> np.ndarray:
    """Not dominated by any row (<= on all, < on one), and the first of equal rows."""
    n = len(values)
    return np.array([not any(((values[j] <= values[i]).all() and (values[j] < values[i]).any()) or
                              (j < i and (values[j] == values[i]).all()) for j in range(n)) for i in range(n)])


@pytest.mark.parametrize("dims", [2, 3])
def test_pareto_mask_equals_brute_force(dims):
    rng = np.random.default_rng(dims)
    for _ in range(30):
        values = rng.integers(0, 6, (int(rng.integers(1, 40)), dims)).astype(float)   # many ties
        assert (pareto_mask(values) == _brute(values)).all()


def test_pareto_per_workload_skips_errors_and_sorts():
    df = pd.DataFrame({"workload": ["a", "a", "a", "b", "b", "a"], "x": [1, 2, 3, 5, 1, np.nan],
                       "y": [5, 2, 3, 1, 9, 0], "error": [None, None, None, None, None, "no fit"]})
    front = pareto(df, ["x", "y"])
    assert list(front.index) == [0, 1, 4, 3]   # a: (1,5) (2,2); (3,3) dominated; b: both; the error row left out
    whole = pareto(df, ["x", "y"], by=None)
    assert list(whole.index) == [0, 1, 3]   # over the whole table b's (1, 9) is beaten by a's (1, 5)
    with pytest.raises(Exception, match="it has no energy"):
        pareto(df, ["x", "energy"])


def test_pareto_plots_draw_the_front(tmp_path):
    from matplotlib.figure import Figure

    from npusim.app.sweep import plot_pareto, plot_pareto_3d
    from npusim.report.plots import PlotError

    df = pd.DataFrame({"workload": ["w"] * 5, "matrix.rows": [8, 16, 32, 8, 16], "cycles": [9, 5, 2, 10, 6],
                       "dram_bytes": [1, 2, 3, 3, 1], "macs": [7] * 5, "error": [None] * 5})
    fig = Figure()
    drawn = plot_pareto(df, fig.add_subplot(1, 2, 1), "cycles", "dram_bytes")
    assert list(drawn.front.index) == [2, 1, 4]   # (2, 3) (5, 2) (6, 1); (9, 1) and (10, 3) are beaten
    assert drawn.key == {1: "rows=32", 2: "rows=16", 3: "rows=16"}
    assert drawn.artists[-1].get_title().get_text() == "1: rows=32\n2: rows=16\n3: rows=16"   # the legend's key
    ax3 = fig.add_subplot(1, 2, 2, projection="3d")
    d3 = plot_pareto_3d(df, ax3, "cycles", "dram_bytes", "matrix.rows")
    assert sorted(d3.front.index) == [0, 1, 2, 4]
    with pytest.raises(PlotError, match="3-D axes"):
        plot_pareto_3d(df, fig.add_subplot(1, 2, 1), "cycles", "dram_bytes", "matrix.rows")
    with pytest.raises(PlotError, match="one workload"):
        plot_pareto(pd.concat([df, df.assign(workload="v")]), fig.add_subplot(1, 2, 1), "cycles", "dram_bytes")
    fig.savefig(tmp_path / "p.png")


def test_the_spec_of_the_docs_example_loads():
    spec = load_spec(ROOT / "examples" / "sweep_resnet18.toml")
    assert len(spec.points) >= 4 and spec.workloads[0].name.startswith("resnet18")


def test_rows_name_the_memory_limit_that_binds_each_point():
    """The memory roof columns are the run report's: at 16 GB/s the bus binds mid32 (64 requests in flight carry
    more), at 128 GB/s the requests in flight do, and the roof is then below the bus (issue 24, finding 1)."""
    from npusim.sim.stats import memory_roof

    df = sweep({"arch": "mid32", "grid": {"dram.gb_per_s": [16, 128]}, "workloads": [GEMM]}, scheduler="synchronous")
    assert list(df["memory_bound_by"]) == ["dram.gb_per_s", "dma.outstanding"]
    for _, row in df.iterrows():
        roof = memory_roof(load_arch("mid32", [f"dram.gb_per_s={row['dram.gb_per_s']:g}"]))
        assert row["memory_roof_gb_per_s"] == pytest.approx(roof["gb_per_s"])
        assert row["memory_roof_gb_per_s"] <= row["dram.gb_per_s"]
    assert df["memory_roof_gb_per_s"][1] < 128 and df["cycles"][1] < df["cycles"][0]


def test_pareto_axes_carry_one_si_unit_each_and_no_offset_text():
    from npusim.app.sweep.pareto_plot import scaled_axis

    assert scaled_axis("time_s", [3.5e-5, 2.0e-5]) == (pytest.approx(1e6), "time (µs)")
    assert scaled_axis("energy_pj", [3.8e7, 4.6e7]) == (pytest.approx(1e-6), "energy (µJ)")   # 38 µJ
    assert scaled_axis("power_w", [0.5]) == (pytest.approx(1e3), "power (mW)")
    assert scaled_axis("area_mm2", [1.2]) == (1.0, "area_mm2 (mm²)")                     # no SI prefix for mm²
    assert scaled_axis("cycles", [5e6]) == (1.0, "cycles (cycles)")
