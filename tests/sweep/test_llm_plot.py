"""`npusim plot RESULTS --kind llm`: tokens/s against batch and TPOT against context, one line per Arch point and
weight format, from a sweep table."""

import itertools

import pandas as pd
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from npusim.app.cli import main
from npusim.app.sweep.llm_plot import plot_llm
from npusim.report.plots import PlotError


def table() -> pd.DataFrame:
    """A sweep table's columns: two array sizes x two formats x two prompts x three batches of one model, a GEMM row
    and an error row (which the plot leaves out). TPOT grows with the context and the batch."""
    rows = []
    for n, fmt, prompt, batch in itertools.product((16, 32), ("i4", "i8"), (128, 512), (1, 2, 4)):
        tpot = (1 + (fmt == "i8")) * (64 / n) * (1 + prompt / 1024) * (1 + batch / 8) * 1e-3
        rows.append({"workload": f"tiny-llama prompt={prompt} batch={batch} weights={fmt}", "matrix.rows": n,
                     "llm": "tiny-llama", "prompt": prompt, "batch": batch, "weights": fmt, "tpot_s": tpot,
                     "tokens_per_s": batch / tpot, "error": None})
    rows.append({"workload": "gemm 16x16x16 i8", "matrix.rows": 16, "error": None})
    rows.append({"workload": "tiny-llama prompt=9", "matrix.rows": 16, "llm": "tiny-llama", "prompt": 9, "batch": 1,
                 "weights": "i4", "error": "ValueError: no"})
    return pd.DataFrame(rows)


def draw(df):
    fig = Figure(figsize=(13, 4.6), layout="constrained")
    FigureCanvasAgg(fig)
    ax_batch, ax_context = fig.subplots(1, 2)
    drawn = plot_llm(df, ax_batch, ax_context)
    fig.canvas.draw()
    return fig, ax_batch, ax_context, drawn


def test_one_line_per_arch_point_and_format_with_units_and_the_legend_off_the_data():
    df = table()
    fig, ax_batch, ax_context, drawn = draw(df)
    labels = ["rows=16, i4", "rows=16, i8", "rows=32, i4", "rows=32, i8"]
    assert list(drawn.throughput) == list(drawn.latency) == labels
    assert (drawn.prompt, drawn.batch) == (512, 1)   # each prompt covers every batch: the largest; the smallest batch
    x, y = drawn.throughput["rows=32, i8"]
    want = df[(df["matrix.rows"] == 32) & (df["weights"] == "i8") & (df["prompt"] == 512)]
    assert x == [1, 2, 4] and y == pytest.approx(list(want["tokens_per_s"]))
    x, y = drawn.latency["rows=16, i4"]
    want = df[(df["matrix.rows"] == 16) & (df["weights"] == "i4") & (df["batch"] == 1) & df["error"].isna()]
    assert x == [128, 512] and y == pytest.approx(list(want["tpot_s"] * 1e3))
    assert len(ax_batch.get_lines()) == len(ax_context.get_lines()) == 4
    assert "tokens/s" in ax_batch.get_ylabel() and "batch" in ax_batch.get_xlabel()
    assert "(ms)" in ax_context.get_ylabel() and "(tokens)" in ax_context.get_xlabel()
    assert "prompt 512" in ax_batch.get_title(loc="left") and "batch 1" in ax_context.get_title(loc="left")
    legend = ax_context.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == labels
    assert drawn.left_out == ["tiny-llama prompt=9"] and "1 row with an error" in legend.get_title().get_text()
    box = legend.get_window_extent()
    for ax in (ax_batch, ax_context):   # beside the panels, not over their data
        assert not box.overlaps(ax.get_window_extent())
        ticks = [t.get_window_extent() for t in ax.get_xticklabels() if t.get_text()]
        assert not any(a.overlaps(b) for a, b in itertools.combinations(ticks, 2))


def test_lines_name_the_model_when_a_table_has_several():
    df = table()
    other = df[df["llm"].notna() & df["error"].isna()].assign(llm="tiny-gpt2")
    _, _, _, drawn = draw(pd.concat([df, other]))
    assert len(drawn.throughput) == 8 and "tiny-gpt2 rows=16, i4" in drawn.throughput


def test_tables_without_llm_rows_are_plot_errors():
    with pytest.raises(PlotError, match="lacks llm, prompt, batch, weights, tokens_per_s, tpot_s"):
        draw(pd.DataFrame({"workload": ["x"], "cycles": [3]}))
    df = table()
    with pytest.raises(PlotError, match="needs rows of llm workloads that decode"):
        draw(df[df["llm"].isna() | df["error"].notna()])


def test_cli_plots_a_results_csv_or_parquet(tmp_path, capsys):
    out = tmp_path / "r-sweep"
    out.mkdir()
    table().to_csv(out / "results.csv", index=False)
    table().to_parquet(out / "results.parquet", index=False)
    for name in ("results.csv", "results.parquet"):
        png = tmp_path / f"{name}.png"
        assert main(["plot", str(out / name), "--kind", "llm", "-o", str(png)]) == 0
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"wrote {png}" in capsys.readouterr().out
    assert main(["plot", str(out / "results.json"), "--kind", "llm", "-o", str(tmp_path / "x.png")]) == 1
    assert "reads a sweep table, results.csv or results.parquet" in capsys.readouterr().err
    assert main(["plot", str(out / "results.csv"), "--kind", "llm", "-o", str(tmp_path / "x.xyz")]) == 1
    assert "the file name must end in one of" in capsys.readouterr().err
