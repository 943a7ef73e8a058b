"""``npusim sweep``: the table, the files, the Pareto front and its plot, one-line errors, Ctrl-C."""

from __future__ import annotations

import itertools

import pandas as pd
import pytest

from npusim.app.cli import main
from npusim.app.sweep import Gemm, pareto

SPEC = """
arch = "mid32"
output = "out"
[grid]
"matrix.rows,matrix.cols" = [8, 16]
"dram.latency_ns" = [50, 200]
[[workloads]]
gemm = { M = 64, N = 96, K = 64 }
[[workloads]]
gemm = { M = 32, N = 32, K = 256 }
name = "deep"
"""


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_sweep_prints_the_front_and_writes_csv_parquet_and_the_plot(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.toml").write_text(SPEC)
    code, out, err = run(capsys, "sweep", "s.toml", "--scheduler", "synchronous", "--pareto", "cycles,matrix.rows",
                         "--plot", "front.png")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == ("8 rows (4 Arch points x 2 workloads): 8 computed, 0 reused from out, 0 with an error -> "
                        "out/results.csv, out/results.parquet")
    df = pd.read_parquet(tmp_path / "out" / "results.parquet")
    front = pareto(df, ["cycles", "matrix.rows"])
    assert lines[1] == f"Pareto front of cycles, matrix.rows (minimised), per workload: {len(front)} rows"
    assert lines[2].split() == list(df.columns)
    assert len(lines) == 3 + len(front) + 1 and lines[-1] == "wrote front.png"
    assert (tmp_path / "front.png").stat().st_size > 10000
    csv = pd.read_csv(tmp_path / "out" / "results.csv")
    assert list(csv["cycles"]) == list(df["cycles"]) and list(csv["workload"]) == list(df["workload"])
    # a rerun computes nothing; -o puts the results elsewhere
    code, out, _ = run(capsys, "sweep", "s.toml", "--scheduler", "synchronous")
    assert "0 computed, 8 reused from out" in out and out.count("\n") == 1 + 1 + 8
    code, out, _ = run(capsys, "sweep", "s.toml", "--scheduler", "synchronous", "-o", "elsewhere", "--rows", "3")
    assert "8 computed" in out and (tmp_path / "elsewhere" / "results.csv").exists()


@pytest.mark.parametrize("spec, argv, message", [
    ('arch = "mid32"\n[[workloads]]\nzoo = "resnet19"\n', (), "unknown zoo model 'resnet19'"),
    ('[grid]\n"matrix.rows" = [8, "x"]\n[[workloads]]\ngemm = [8, 8, 8]\n', (), "matrix.rows must be an integer"),
    ('[[workloads]]\ngemm = [8, 8, 8]\n', ("--scheduler", "local:4"), "scheduler must be 'local', 'synchronous' or"),
    ('[[workloads]]\ngemm = [8, 8, 8]\n', ("--plot", "x.png"), "--plot draws the Pareto front"),
    ('[[workloads]]\ngemm = [8, 8, 8]\n', ("--scheduler", "synchronous", "--pareto", "cycles,energy"),
     "it has no energy"),
])
def test_bad_specs_and_options_are_one_line_errors(tmp_path, capsys, spec, argv, message):
    (tmp_path / "s.toml").write_text(spec)
    code, out, err = run(capsys, "sweep", str(tmp_path / "s.toml"), "-o", str(tmp_path / "o"), *argv)
    assert code == 1 and err.startswith("npusim: error: ") and message in err and err.count("\n") == 1


def test_ctrl_c_says_what_is_kept(tmp_path, capsys, monkeypatch):
    calls, real = itertools.count(), Gemm.run
    monkeypatch.setattr(Gemm, "run", lambda self, arch: (_ for _ in ()).throw(KeyboardInterrupt)
                        if next(calls) == 3 else real(self, arch))
    (tmp_path / "s.toml").write_text(SPEC)
    monkeypatch.chdir(tmp_path)   # the spec's output is relative to where npusim runs
    code, out, err = run(capsys, "sweep", str(tmp_path / "s.toml"), "--scheduler", "synchronous")
    assert code == 130
    assert err == ("npusim: interrupted; 3 finished points are stored in out: run the same command "
                   "again to compute only the rest\n")
    assert (tmp_path / "out").is_dir()


def test_finding5_sweep_results_go_where_npusim_runs_not_next_to_the_spec(tmp_path, capsys, monkeypatch):
    """`npusim sweep examples/x.toml` wrote into the source checkout beside the spec; results belong in the current
    directory: the spec's `output` is relative to it, and without one it is `SPEC-sweep/` there."""
    specs, work = tmp_path / "checkout" / "examples", tmp_path / "work"
    specs.mkdir(parents=True)
    work.mkdir()
    (specs / "s.toml").write_text(SPEC)                                   # output = "out"
    (specs / "bare.toml").write_text(SPEC.replace('output = "out"\n', ""))
    monkeypatch.chdir(work)
    for name in ("s.toml", "bare.toml"):
        code, out, err = run(capsys, "sweep", str(specs / name), "--scheduler", "synchronous")
        assert code == 0, err
    assert (work / "out" / "results.csv").exists() and (work / "bare-sweep" / "results.csv").exists()
    assert sorted(p.name for p in specs.iterdir()) == ["bare.toml", "s.toml"]   # nothing written beside the specs
