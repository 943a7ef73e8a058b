"""The LLM plot of a sweep table (``npusim plot RESULTS.csv --kind llm``): decode throughput against batch and time
per output token against context, one line per Arch point and weight format (docs/llm.md).

Like :mod:`npusim.app.sweep.pareto_plot` it draws on the axes it is given and returns what it drew, and imports no
matplotlib itself; :func:`render_llm` makes the figure and writes the file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from npusim.app.sweep.pareto_plot import override_columns, point_label

if TYPE_CHECKING:
    from matplotlib.axes import Axes

LLM_KIND = "llm"
"""The ``npusim plot --kind`` of this plot."""
NEEDS = ("workload", "llm", "prompt", "batch", "weights", "tokens_per_s", "tpot_s")
"""The sweep table's columns the plot reads."""
MARKERS = ("o", "s", "^", "D", "v")
STYLES = ("-", "--", ":", "-.")


@dataclass
class LlmPlot:
    """What :func:`plot_llm` drew: per line (its legend label), the batch sizes and tokens/s of the left panel (at
    prompt ``prompt``) and the prompt lengths and TPOT in ms of the right one (at batch ``batch``); ``left_out``:
    the LLM rows with an error (workload names), which it could not draw."""

    throughput: dict[str, tuple[list[int], list[float]]]
    latency: dict[str, tuple[list[int], list[float]]]
    prompt: int
    batch: int
    left_out: list[str] = field(default_factory=list)
    artists: list = field(default_factory=list)


def _plot_error(message: str) -> Exception:
    from npusim.report.plots import PlotError  # here: importing it loads matplotlib

    return PlotError(message)


def llm_rows(df):
    """The rows of sweep table ``df`` the plot draws: LLM rows without an error that decoded (``generate`` > 1);
    PlotError if it lacks a column the plot reads or has no such row."""
    missing = [c for c in NEEDS if c not in df.columns]
    if missing:
        raise _plot_error(f"the llm plot needs a sweep table's columns {', '.join(NEEDS)}; this one lacks "
                          f"{', '.join(missing)}: is it a results.csv or results.parquet of `npusim sweep`?")
    ok = df["llm"].notna() & df["tokens_per_s"].notna()
    if "error" in df.columns:
        ok &= df["error"].isna() | (df["error"] == "")
    if not ok.any():
        raise _plot_error("the llm plot needs rows of llm workloads that decode (generate > 1) without an error; "
                          "this table has none: sweep [[workloads]] llm = \"...\" (docs/sweep.md)")
    rows = df[ok].copy()
    rows["prompt"], rows["batch"] = rows["prompt"].astype(int), rows["batch"].astype(int)
    return rows


def _most_covered(rows, fixed: str, varied: str, prefer_largest: bool) -> int:
    """The value of column ``fixed`` at which the most distinct ``varied`` values were swept (ties: the largest
    value when ``prefer_largest``, else the smallest)."""
    counts = rows.groupby(fixed)[varied].nunique()
    best = counts[counts == counts.max()].index
    return int(max(best) if prefer_largest else min(best))


def _line_keys(rows) -> tuple[list[str], list[Any]]:
    """The columns that tell lines apart (varying Arch overrides and other columns a caller added, the model when
    several) and each row's point label."""
    cols = override_columns(rows, list(NEEDS))
    if rows["llm"].nunique() > 1:
        cols.insert(0, "llm")
    labels = [point_label(r, [c for c in cols if c != "llm"]) for _, r in rows.iterrows()]
    if "llm" in cols:
        labels = [f"{m} {label}".strip() for m, label in zip(rows["llm"], labels)]
    return cols, labels


def plot_llm(df, ax_batch: Axes, ax_context: Axes) -> LlmPlot:
    """Two panels of sweep table ``df``'s LLM rows: decode tokens/s of the batch against the batch size (at one
    prompt length: the one swept over the most batch sizes, the largest on a tie) on ``ax_batch``, and TPOT (ms)
    against the prompt length, the context decoding starts from (at the batch swept over the most prompts, the
    smallest on a tie), on ``ax_context``. One line per Arch point (the override columns that vary; the model when
    the table has several) and weight format: a colour per point, a line style and marker per format; the legend
    sits right of ``ax_context``, off the data, and says how many LLM rows with an error it left out."""
    rows = llm_rows(df)
    _, labels = _line_keys(rows)
    rows["_point"] = labels
    points = list(dict.fromkeys(labels))
    formats = list(dict.fromkeys(rows["weights"]))
    prompt = _most_covered(rows, "prompt", "batch", prefer_largest=True)
    batch = _most_covered(rows, "batch", "prompt", prefer_largest=False)
    failed = df[df["llm"].notna() & df["error"].notna() & (df["error"] != "")] if "error" in df.columns else df[:0]
    drawn = LlmPlot({}, {}, prompt, batch, list(failed["workload"]))
    for (point, fmt), line in rows.groupby(["_point", "weights"], sort=False):
        label = f"{point}, {fmt}" if point else fmt
        style = {"color": f"C{points.index(point) % 10}", "marker": MARKERS[formats.index(fmt) % len(MARKERS)],
                 "linestyle": STYLES[formats.index(fmt) % len(STYLES)], "label": label}
        at = line[line["prompt"] == prompt].sort_values("batch")
        if len(at):
            drawn.throughput[label] = (at["batch"].tolist(), at["tokens_per_s"].tolist())
            drawn.artists += ax_batch.plot(at["batch"], at["tokens_per_s"], **style)
        at = line[line["batch"] == batch].sort_values("prompt")
        if len(at):
            drawn.latency[label] = (at["prompt"].tolist(), (at["tpot_s"] * 1e3).tolist())
            drawn.artists += ax_context.plot(at["prompt"], at["tpot_s"] * 1e3, **style)
    _axes(ax_batch, sorted(set(rows.loc[rows["prompt"] == prompt, "batch"])), "batch (sequences decoded together)",
          "decode throughput (tokens/s, whole batch)", f"tokens/s against batch, prompt {prompt} tokens")
    _axes(ax_context, sorted(set(rows.loc[rows["batch"] == batch, "prompt"])), "context: prompt length (tokens)",
          "time per output token (ms)", f"TPOT against context, batch {batch}")
    handles, names = _legend_entries(ax_batch, ax_context)
    title = "Arch point, weights"
    if drawn.left_out:   # said beside the plot: a missing point is not a point that was never swept
        n = len(drawn.left_out)
        title += f"\n({n} row{'s' if n > 1 else ''} with an error\nleft out: see the table)"
    drawn.artists.append(ax_context.legend(handles, names, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                                           fontsize="small", frameon=False, title=title))
    return drawn


def _axes(ax: Axes, ticks: list[int], xlabel: str, ylabel: str, title: str) -> None:
    """x ticks at the swept values (a log2 axis when they span 4x or more), y from 0 (thousands separated)."""
    from matplotlib.ticker import StrMethodFormatter

    if len(ticks) > 1 and ticks[-1] >= 4 * ticks[0]:
        ax.set_xscale("log", base=2)
    ax.set_xticks(ticks, [f"{t:,}" for t in ticks])
    ax.minorticks_off()
    ax.set_ylim(0, ax.dataLim.y1 * 1.08)   # room above the highest marker
    if ax.get_ylim()[1] >= 1000:
        ax.yaxis.set_major_formatter(StrMethodFormatter("{x:,.0f}"))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, loc="left", fontsize="medium")
    ax.grid(alpha=0.3)


def _legend_entries(*axes: Axes) -> tuple[list, list[str]]:
    """Each line's handle once, whichever panel drew it."""
    seen: dict[str, Any] = {}
    for ax in axes:
        for handle, name in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(name, handle)
    return list(seen.values()), list(seen)


def read_table(path: str | Path):
    """A sweep's ``results.csv`` or ``results.parquet`` as a DataFrame; PlotError for any other file name."""
    import pandas as pd

    suffix = Path(path).suffix.lower()
    if suffix not in (".csv", ".parquet"):
        raise _plot_error(f"the llm plot reads a sweep table, results.csv or results.parquet of `npusim sweep`, not "
                          f"{path}")
    return pd.read_csv(path) if suffix == ".csv" else pd.read_parquet(path)


def render_llm(df, path: str | Path, title: str = "") -> LlmPlot:
    """:func:`plot_llm` of ``df`` on a new figure, written to ``path`` (the suffix picks the format)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from npusim.report.plots import check_image_path

    check_image_path(path)
    fig = Figure(figsize=(13, 4.6), layout="constrained")
    FigureCanvasAgg(fig)
    ax_batch, ax_context = fig.subplots(1, 2)
    drawn = plot_llm(df, ax_batch, ax_context)
    models = ", ".join(dict.fromkeys(llm_rows(df)["llm"]))
    fig.suptitle(f"{title + ': ' if title else ''}{models} decode", x=0.01, ha="left")
    fig.savefig(path, dpi=110)
    return drawn
