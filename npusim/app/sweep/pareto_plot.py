"""Plots of a sweep table (:func:`npusim.app.sweep.sweep`): a Pareto front of two metrics, or three on a 3-D axes.

Like :mod:`npusim.report.plots`, each function draws on a matplotlib ``ax`` it is given and returns what it drew; this
module imports no matplotlib itself, so ``import npusim.app.sweep`` stays light.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from npusim.app.sweep.pareto import pareto
from npusim.app.sweep.run import METRICS

if TYPE_CHECKING:
    from matplotlib.axes import Axes


@dataclass
class ParetoPlot:
    """What :func:`plot_pareto` / :func:`plot_pareto_3d` drew: the front's rows of the sweep table, the metrics."""

    front: Any
    metrics: list[str]
    artists: list = field(default_factory=list)


def _sweep_rows(df, metrics: list[str], what: str):
    """``df``'s rows without an error, after checking it is one workload's sweep table with these metrics."""
    from npusim.report.plots import PlotError  # here: importing it loads matplotlib, which a sweep alone never needs

    if "workload" in df.columns and df["workload"].nunique() > 1:
        raise PlotError(f"the {what} plot draws one workload's points; select one, e.g. df[df.workload == "
                        f"{df['workload'].iloc[0]!r}]")
    front = pareto(df, metrics, by=None)
    ok = df.dropna(subset=metrics)
    return ok[ok["error"].isna()] if "error" in ok.columns else ok, front


def _point_label(row, columns: list[str]) -> str:
    return " ".join(f"{c.split('.')[-1]}={row[c]:g}" if isinstance(row[c], float) else f"{c.split('.')[-1]}={row[c]}"
                    for c in columns)


def _override_columns(df, metrics: list[str]) -> list[str]:
    """The override columns that vary in ``df`` (the ones worth naming a point by)."""
    return [c for c in df.columns if c not in ("workload", "error", *METRICS, *metrics) and df[c].nunique() > 1]


def plot_pareto(df, ax: Axes, x: str, y: str, annotate: bool = True) -> ParetoPlot:
    """A sweep table's points, ``y`` against ``x`` (grey), and their Pareto front (both minimised; red line, each
    front point labelled with its override columns). ``df``: one workload's rows of :func:`npusim.app.sweep.sweep`."""
    ok, front = _sweep_rows(df, [x, y], "pareto")
    artists = [ax.scatter(ok[x], ok[y], s=16, color="0.65", label=f"{len(ok)} points"),
               ax.plot(front[x], front[y], "o-", color="C3", markersize=5, drawstyle="steps-post",
                       label=f"Pareto front ({len(front)})")[0]]
    if annotate:
        cols = _override_columns(df, [x, y])
        for _, row in front.iterrows():
            artists.append(ax.annotate(_point_label(row, cols), (row[x], row[y]), fontsize=7, xytext=(4, 4),
                                       textcoords="offset points"))
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.legend(fontsize="small")
    ax.grid(alpha=0.25)
    return ParetoPlot(front, [x, y], artists)


def plot_pareto_3d(df, ax, x: str, y: str, z: str) -> ParetoPlot:
    """The 3-D Pareto front of ``x``, ``y``, ``z`` (all minimised) on a 3-D ``ax``
    (``fig.add_subplot(projection="3d")``): every point grey, the front's points red."""
    if getattr(ax, "name", "") != "3d":
        from npusim.report.plots import PlotError

        raise PlotError("the 3-D Pareto plot needs a 3-D axes: fig.add_subplot(projection='3d')")
    ok, front = _sweep_rows(df, [x, y, z], "3-D pareto")
    rest = ok.drop(index=front.index)
    artists = [ax.scatter(rest[x], rest[y], rest[z], s=12, color="0.65", label=f"{len(rest)} dominated points"),
               ax.scatter(front[x], front[y], front[z], s=30, color="C3", edgecolors="k", linewidths=0.4,
                          label=f"Pareto front ({len(front)})")]
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.set_zlabel(z)
    ax.legend(fontsize="small")
    return ParetoPlot(front, [x, y, z], artists)
