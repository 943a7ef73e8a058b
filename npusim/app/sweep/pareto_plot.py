"""Plots of a sweep table (:func:`npusim.app.sweep.sweep`): a Pareto front of two metrics, or three on a 3-D axes.

Like :mod:`npusim.report.plots`, each function draws on a matplotlib ``ax`` it is given and returns what it drew; this
module imports no matplotlib itself, so ``import npusim.app.sweep`` stays light. Points that ran nodes on the host CPU
are drawn apart (an orange x) whether the front leaves them out (``host="exclude"``, the default) or marks them.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from isa.arch import SECTIONS, bytes_text
from npusim.app.sweep.pareto import host_assisted, pareto, runnable
from npusim.app.sweep.run import METRICS

if TYPE_CHECKING:
    from matplotlib.axes import Axes

HOST_STYLE = {"marker": "x", "color": "C1", "linewidths": 1.2, "zorder": 4}
"""How a host-assisted point is drawn, on the front or off it."""


@dataclass
class ParetoPlot:
    """What :func:`plot_pareto` / :func:`plot_pareto_3d` drew: the front's rows of the sweep table, the metrics, and
    the key of the numbered front points (number -> the point's overrides)."""

    front: Any
    metrics: list[str]
    artists: list = field(default_factory=list)
    key: dict[int, str] = field(default_factory=dict)


def column_unit(name: str) -> str:
    """The unit of sweep column ``name``: a metric's (:data:`METRICS`) or an Arch field's; "" if it has none."""
    if name in METRICS:
        return METRICS[name].unit
    sec, _, fname = name.partition(".")
    fields = {f.name: f for f in dataclasses.fields(SECTIONS[sec])} if sec in SECTIONS else {}
    return fields[fname].metadata.get("unit", "") if fname in fields else ""


def axis_label(name: str) -> str:
    """``name (unit)``, or ``name`` for a column without a unit."""
    unit = column_unit(name)
    return f"{name} ({unit})" if unit else name


SI_BASE = {"s": (1.0, "s"), "pJ": (1e-12, "J"), "W": (1.0, "W"), "J·s": (1.0, "J·s")}
"""Metric units drawn with an SI prefix: the unit -> (factor to the base unit, the base unit)."""
PREFIXES = {-15: "f", -12: "p", -9: "n", -6: "µ", -3: "m", 0: "", 3: "k", 6: "M", 9: "G"}


def scaled_axis(name: str, values) -> tuple[float, str]:
    """(factor, label) to draw column ``name``'s ``values`` in one SI-prefixed unit, e.g. ``time_s`` of 3.5e-5 s as
    35 with the label ``time (µs)`` and ``energy_pj`` of 3.8e7 pJ as 38 with ``energy (µJ)``: no offset text such as
    "1e-5" beside the axis. Columns without such a unit keep their values and :func:`axis_label`."""
    unit = column_unit(name)
    if unit not in SI_BASE:
        return 1.0, axis_label(name)
    to_base, base = SI_BASE[unit]
    top = max((abs(float(v)) * to_base for v in values), default=0.0)
    exp = min(max(math.floor(math.log10(top) / 3) * 3, -15), 9) if top > 0 else 0
    suffix = "_" + unit.lower().replace("·", "")
    short = name[: -len(suffix)] if name.lower().endswith(suffix) else name
    return to_base / 10.0 ** exp, f"{short} ({PREFIXES[exp]}{base})"


def _sweep_rows(df, metrics: list[str], what: str, host: str):
    """``df``'s rows without an error and the front, after checking it is one workload's sweep table."""
    from npusim.report.plots import PlotError  # here: importing it loads matplotlib, which a sweep alone never needs

    if "workload" in df.columns and df["workload"].nunique() > 1:
        raise PlotError(f"the {what} plot draws one workload's points; select one, e.g. df[df.workload == "
                        f"{df['workload'].iloc[0]!r}]")
    return runnable(df, metrics), pareto(df, metrics, by=None, host=host)


def point_label(row, columns: list[str]) -> str:
    """``rows=64 cols=64 size=256 KiB gb_per_s=19.2``: each column by its field name (``section.field`` where two
    sections share it), sizes in bytes in binary units."""
    fields = [c.rpartition(".")[2] for c in columns]
    parts = []
    for c, f in zip(columns, fields):
        v = row[c]
        text = bytes_text(int(v)) if column_unit(c) == "bytes" and float(v).is_integer() else \
            f"{v:g}" if isinstance(v, float) else str(v)
        parts.append(f"{f if fields.count(f) == 1 else c}={text}")
    return " ".join(parts)


def override_columns(df, metrics: list[str]) -> list[str]:
    """The override columns that vary in ``df`` (the ones worth naming a point by)."""
    return [c for c in df.columns if c not in ("workload", "error", "host_assisted", *METRICS, *metrics)
            and df[c].nunique() > 1]


def _host_label(count: int, host: str) -> str:
    return f"{count} host-assisted ({'left out of the front' if host == 'exclude' else 'marked'})"


def plot_pareto(df, ax: Axes, x: str, y: str, annotate: bool = True, host: str = "exclude") -> ParetoPlot:
    """A sweep table's points, ``y`` against ``x`` (grey), and their Pareto front (both minimised; a red staircase).
    Points that ran nodes on the host CPU are orange crosses; ``host`` (:func:`npusim.app.sweep.pareto`) says whether
    the front leaves them out or keeps them. With ``annotate``, each front point is numbered and the key (its override
    columns) is written beside the axes; the legend sits below them. ``df``: one workload's rows of
    :func:`npusim.app.sweep.sweep`."""
    ok, front = _sweep_rows(df, [x, y], "pareto", host)
    hosted = ok[host_assisted(ok)]
    plain = ok.drop(index=hosted.index)
    (fx, xlabel), (fy, ylabel) = scaled_axis(x, ok[x]), scaled_axis(y, ok[y])
    artists = [ax.scatter(plain[x] * fx, plain[y] * fy, s=16, color="0.65",
                          label=f"{len(plain)} points on the NPU alone"),
               ax.plot(front[x] * fx, front[y] * fy, "o-", color="C3", markersize=5, drawstyle="steps-post",
                       label=f"Pareto front ({len(front)})")[0]]
    if len(hosted):
        artists.append(ax.scatter(hosted[x] * fx, hosted[y] * fy, s=30, label=_host_label(len(hosted), host),
                                  **HOST_STYLE))
    key = {}
    if annotate:
        cols = override_columns(df, [x, y])
        for i, (_, row) in enumerate(front.iterrows(), 1):
            key[i] = point_label(row, cols)
            artists.append(ax.annotate(str(i), (row[x] * fx, row[y] * fy), fontsize=7, color="C3",
                                       xytext=(3, 3) if i % 2 else (-3, -3), textcoords="offset points",
                                       ha="left" if i % 2 else "right", va="bottom" if i % 2 else "top"))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    # below the axes, where constrained layout and a tight bbox make room: the legend, then the front's key
    legend = ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(0, -0.14), frameon=False, ncols=1,
                       title="\n".join(f"{i}: {label}" for i, label in key.items()) or None, alignment="left",
                       title_fontproperties={"size": 7, "family": "monospace"})
    artists.append(legend)
    ax.grid(alpha=0.25)
    return ParetoPlot(front, [x, y], artists, key)


def plot_pareto_3d(df, ax, x: str, y: str, z: str, host: str = "exclude") -> ParetoPlot:
    """The 3-D Pareto front of ``x``, ``y``, ``z`` (all minimised) on a 3-D ``ax``
    (``fig.add_subplot(projection="3d")``): every point grey, the front's points red, points that ran nodes on the
    host CPU orange crosses (left out of the front or marked on it, as ``host`` says)."""
    if getattr(ax, "name", "") != "3d":
        from npusim.report.plots import PlotError

        raise PlotError("the 3-D Pareto plot needs a 3-D axes: fig.add_subplot(projection='3d')")
    ok, front = _sweep_rows(df, [x, y, z], "3-D pareto", host)
    hosted = ok[host_assisted(ok)]
    rest = ok.drop(index=front.index.union(hosted.index))
    (fx, xl), (fy, yl), (fz, zl) = (scaled_axis(c, ok[c]) for c in (x, y, z))

    def at(rows):
        return rows[x] * fx, rows[y] * fy, rows[z] * fz
    artists = [ax.scatter(*at(rest), s=12, color="0.65", label=f"{len(rest)} dominated points"),
               ax.scatter(*at(front), s=30, color="C3", edgecolors="k", linewidths=0.4,
                          label=f"Pareto front ({len(front)})")]
    if len(hosted):
        artists.append(ax.scatter(*at(hosted), s=30, label=_host_label(len(hosted), host), **HOST_STYLE))
    ax.set_xlabel(xl)
    ax.set_ylabel(yl)
    ax.set_zlabel(zl)
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(0, -0.02), frameon=False)
    return ParetoPlot(front, [x, y, z], artists)
