"""Host-assisted points (issue 24, finding 3): work on the host CPU costs energy, priced by hand from the technology
tables here, and Pareto fronts leave such points out unless asked to mark them (API, command line, plots)."""

from __future__ import annotations

import pandas as pd
import pytest
from onnx import TensorProto, helper

from isa import HostCall
from isa.arch import load_arch
from npusim.app.cli import energy_lines, main
from npusim.app.driver import run_model
from npusim.app.sweep import pareto, plot_pareto, plot_pareto_3d, sweep

# The tables' host prices, written out by hand (isa/techtables/*.toml [host]) and their DRAM pJ/bit (lpddr4 8):
HOST = {"45nm": (70.0, 2.5), "7nm": (70 * 0.042, 2.5 * 0.042)}   # pJ per operation, pJ per byte
DRAM_PJ_PER_BYTE = 8 * 8.0
TINY = {"zoo": "resnet18", "args": {"image": 32, "width": 8, "classes": 10}}


def _relu_sin():
    """x (1x8x8x8 f32) -> Relu (the NPU) -> Sin (unknown to the compiler: the host CPU) -> y."""
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["a"], name="relu"),
                           helper.make_node("Sin", ["a"], ["y"], name="sin")], "relu_sin",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8, 8])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("table", ["45nm", "7nm"])
def test_finding3_host_energy_counted_and_front_excludes_host_points(table, tmp_path):
    # Sin on 1x8x8x8 f32: the host reads and writes 2048 B and does one operation per element read or written
    ops, nbytes = 512 + 512, 2048 + 2048
    pj_op, pj_byte = HOST[table]
    arch = load_arch("edge16", [f"energy.table={table}", "energy.dram=lpddr4"])
    compiled, result, _, report = run_model(_relu_sin(), arch, timing_only=True)
    (pc,) = [pc for pc, i in enumerate(compiled.program.instrs) if isinstance(i, HostCall)]
    want = ops * pj_op + nbytes * pj_byte
    assert report["energy"]["by_kind_pj"]["host"] == pytest.approx(want)
    assert report["energy"]["by_part_pj"]["host"] == {"dynamic_pj": pytest.approx(want), "static_pj": 0.0}
    # the call's own energy: the host's work and its DRAM traffic at the table's DRAM pJ/bit
    call = {k: v for k, v in result.energy.by_kind(slice(pc, pc + 1)).items() if v}
    assert call == pytest.approx({"host": want, "dram_read": 2048 * DRAM_PJ_PER_BYTE,
                                  "dram_write": 2048 * DRAM_PJ_PER_BYTE})
    assert report["units"]["host"]["energy_pj"] == pytest.approx(want + 4096 * DRAM_PJ_PER_BYTE)
    (sin,) = [lr for lr in report["layers"] if lr["name"] == "sin"]
    assert sin["energy_by_kind_pj"]["host"] == pytest.approx(want)
    assert "host " in energy_lines(report)[0]   # the summary's split names the host however small its share

    # a sweep: 256 B of SPM send layers of a small ResNet-18 to the host (no tiling fits, even on a block of the
    # array); that point has the smallest area, so it would be on the time/area front, but the front leaves it out
    # unless asked to mark it
    df = sweep({"arch": "mid32", "grid": {"spm.size": [256, 65536]}, "workloads": [TINY]}, scheduler="synchronous")
    hosted, npu = df.iloc[0], df.iloc[1]
    assert hosted["host_ops"] > 0 and npu["host_ops"] == 0 and hosted["area_mm2"] < npu["area_mm2"]
    assert hosted["host_energy_pj"] > 0 and npu["host_energy_pj"] == 0
    front = pareto(df, ["time_s", "area_mm2"])
    assert list(front.index) == [1] and front.attrs["host_excluded"] == 1
    marked = pareto(df, ["time_s", "area_mm2"], host="mark")
    assert list(marked.index) == [1, 0] and list(marked["host_assisted"]) == [False, True]
    with pytest.raises(Exception, match="host must be one of exclude, mark"):
        pareto(df, ["time_s", "area_mm2"], host="include")

    from matplotlib.figure import Figure

    fig = Figure()
    drawn = plot_pareto(df, fig.add_subplot(1, 2, 1), "time_s", "area_mm2")
    assert list(drawn.front.index) == [1] and drawn.key == {1: "size=64 KiB"}
    labels = [a.get_label() for a in drawn.artists]
    assert "1 host-assisted (left out of the front)" in labels
    # the axis takes the prefix that fits the longest time, the host point's 3.6 ms (the NPU point's is 33 µs)
    assert 1e-3 <= df["time_s"].max() < 1e-2 and df["time_s"].min() < 1e-4
    assert (fig.axes[0].get_xlabel(), fig.axes[0].get_ylabel()) == ("time (ms)", "area_mm2 (mm²)")
    d3 = plot_pareto_3d(df, fig.add_subplot(1, 2, 2, projection="3d"), "time_s", "area_mm2", "energy_pj",
                        host="mark")
    assert "1 host-assisted (marked)" in [a.get_label() for a in d3.artists]


def test_sweep_command_says_how_many_host_points_it_left_out(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.toml").write_text('arch = "mid32"\n[grid]\n"spm.size" = [256, 65536]\n[[workloads]]\n'
                                     'zoo = "resnet18"\nargs = { image = 32, width = 8, classes = 10 }\n')
    assert main(["sweep", "s.toml", "-o", "out", "--scheduler", "synchronous", "--pareto", "time_s,area_mm2",
                 "--plot", "f.png"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == ("Pareto front of time_s, area_mm2 (minimised), per workload: 1 rows; 1 point left out because "
                        "it ran nodes on the host CPU (host_ops > 0: the host's time and energy, not the NPU's; "
                        "--host-points mark keeps them, marked)")
    assert main(["sweep", "s.toml", "-o", "out", "--scheduler", "synchronous", "--pareto", "time_s,area_mm2",
                 "--host-points", "mark"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].endswith("per workload: 2 rows; 1 of them ran nodes on the host CPU (host_assisted)")
    assert lines[2].split()[-1] == "host_assisted" and lines[4].split()[-1] == "True"
    df = pd.read_parquet(tmp_path / "out" / "results.parquet")
    assert list(df["host_ops"] > 0) == [True, False]
