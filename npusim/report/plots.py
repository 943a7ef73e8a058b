"""Plots of a JSON report (docs/report.md): Gantt timeline, utilization over time, per-layer time split, roofline,
per-layer energy.

Every function draws from the report dict alone on a matplotlib ``ax`` and returns a small dataclass with the numbers
it drew (and the artists), so tests can check them. :func:`render` makes a figure (no pyplot) and writes a PNG/SVG/PDF.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib import colormaps, ticker
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from isa.errors import NpuSimError
from isa.units import UNITS
from npusim.report.intervals import ROLE_ORDER, bucket_busy

KINDS = ("timeline", "util", "layers", "roofline", "energy")
DEFAULT_QUEUES = {u.name: u.mnemonic for u in UNITS}   # a report's unit -> its queue, for reports that do not say
ROLE_COLORS = {"compute": "#2ca02c", "memory_stall": "#ff7f0e", "host": "#9467bd", "sync_stall": "#b0b0b0"}
ROLE_LABELS = {"compute": "compute (matrix/vector busy)", "memory_stall": "memory stall (only DMA busy)",
               "host": "host (only host busy)", "sync_stall": "sync stall (nothing busy)"}
OTHER = "#808080"


class PlotError(NpuSimError, ValueError):
    """A report that lacks what a plot needs, or a bad plot option."""


# ------------------------------------------------------------------------------------------------ report access
_INT, _NUMBER, _TEXT, _TABLE = "an integer", "a number", "a string", "an object"
_ROWS = {"instructions": {"pc": _INT, "unit": _TEXT, "start": _INT, "end": _INT},
         "layers": {"name": _TEXT, "op": _TEXT, "cycles": _INT, "start": _INT, "end": _INT, "macs": _INT,
                    "dram_bytes": _INT, "time_split": _TABLE}}


def _is(v: Any, want: str) -> bool:
    if want == _TEXT:
        return isinstance(v, str)
    if want == _TABLE:
        return isinstance(v, dict)
    ok = isinstance(v, int) if want == _INT else isinstance(v, int | float)
    return ok and not isinstance(v, bool)


def check_report(report: Any) -> None:
    """Raise PlotError naming the first field of ``report`` that is not what npusim's JSON reports hold there
    (fields the plots read: cycles, units, instructions[], layers[], the Arch's matrix, dram and clock)."""
    def bad(where: str, want: str, v: Any) -> None:
        raise PlotError(f"the report's {where} must be {want}, not {str(v)[:60]!r}: is it a report of `npusim run "
                        f"--json` or `npusim simulate --json`?")

    if not isinstance(report, dict):
        raise PlotError(f"a report must be a JSON object (what `npusim run --json` or `simulate --json` writes), not "
                        f"a {type(report).__name__}")
    if "cycles" in report and not (_is(report["cycles"], _INT) and report["cycles"] >= 0):
        bad("cycles", "an integer >= 0", report["cycles"])
    units = report.get("units", {})
    if not isinstance(units, dict) or not all(isinstance(u, dict) for u in units.values()):
        bad("units", "an object of objects, one per unit", units)
    for key, fields in _ROWS.items():
        rows = report.get(key, [])
        if not isinstance(rows, list):
            bad(key, "a list", rows)
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                bad(f"{key}[{i}]", "an object", row)
            for name, want in fields.items():
                if name in row and not _is(row[name], want):
                    bad(f"{key}[{i}].{name}", want, row[name])
            pcs = row.get("pcs", [0, 0])
            if not (isinstance(pcs, list) and len(pcs) == 2 and all(_is(x, _INT) for x in pcs)):
                bad(f"{key}[{i}].pcs", "two integers", pcs)
    arch = report.get("arch", {})
    for sec, name, want in (("matrix", "rows", _INT), ("matrix", "cols", _INT), ("dram", "gb_per_s", _NUMBER),
                            ("clock", "ghz", _NUMBER)):
        if not isinstance(arch, dict) or not isinstance(arch.get(sec, {}), dict):
            bad(f"arch.{sec}", "an object", arch)
        if name in arch.get(sec, {}) and not _is(arch[sec][name], want):
            bad(f"arch.{sec}.{name}", want, arch[sec][name])
def _need(report: dict, key: str, what: str, how: str) -> Any:
    if not report.get(key):
        raise PlotError(f"the {what} plot needs the report's {key!r}, which this report lacks; {how}")
    return report[key]


def _instructions(report: dict, what: str) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Units present in the report (its order) and the instructions' unit index, pc, start and end (cycles)."""
    rows = _need(report, "instructions", what, "write the report with `npusim run --json` or `npusim simulate --json`")
    units = list(report["units"])
    index = {report["units"][u].get("queue", DEFAULT_QUEUES.get(u, u)): i for i, u in enumerate(units)}
    try:
        unit = np.array([index[r["unit"]] for r in rows], np.int64)
    except KeyError as e:
        raise PlotError(f"instructions[] name queue {e.args[0]!r}, which no entry of the report's units has") from None
    pc, start, end = (np.array([r[k] for r in rows], np.int64) for k in ("pc", "start", "end"))
    return units, unit, pc, start, end


def _layers(report: dict, what: str, *fields: str) -> list[dict]:
    layers = _need(report, "layers", what, "write the report with `npusim run MODEL --json`")
    missing = [f for f in fields if f not in layers[0]]
    if missing:
        raise PlotError(f"the {what} plot needs layers[].{', layers[].'.join(missing)}, which this report lacks; "
                        f"rerun `npusim run --json` with this version of npusim")
    return layers


def _layer_of(report: dict, pc: np.ndarray) -> np.ndarray:
    """Index of the layer each pc belongs to (``layers[].pcs``), or -1 (no layers, or between layers)."""
    layers = report.get("layers") or []
    if not layers or "pcs" not in layers[0]:
        return np.full(pc.shape, -1)
    lo, hi = np.array([lr["pcs"] for lr in layers], np.int64).T
    k = np.searchsorted(lo, pc, side="right") - 1
    return np.where((k >= 0) & (pc < hi[np.maximum(k, 0)]), k, -1)


def _cycle_axis(ax: Axes, report: dict) -> None:
    """x in cycles (engineering notation) below, microseconds at the report's clock above. Of axes stacked with a
    shared x (``plt.subplots(2, 1, sharex=True)``), only the lowest gets the cycles label and only the highest the
    microseconds axis, so that no label sits between two panels over the next one's."""
    ax.xaxis.set_major_formatter(ticker.EngFormatter(sep=""))
    y0 = ax.get_position().y0
    stacked = [a.get_position().y0 for a in ax.get_shared_x_axes().get_siblings(ax) if a is not ax]
    if not any(y < y0 for y in stacked):
        ax.set_xlabel("time (cycles)")
    ghz = report.get("arch", {}).get("clock", {}).get("ghz")
    if ghz and not any(y > y0 for y in stacked):
        top = ax.secondary_xaxis("top", functions=(lambda c: c / (ghz * 1e3), lambda us: us * ghz * 1e3))
        top.set_xlabel(f"time (µs at {ghz:g} GHz)")


def _palette(n: int) -> list:
    cmap = colormaps["tab20"]
    return [cmap(i % cmap.N) for i in range(n)]


# ------------------------------------------------------------------------------------------------ timeline
@dataclass
class Timeline:
    """What :func:`plot_timeline` drew: one row per unit (top to bottom), bars per unit, the window (cycles)."""

    units: list[str]
    bars: dict[str, int]
    window: tuple[int, int]
    legend: list[str]
    artists: list = field(default_factory=list)


def plot_timeline(report: dict, ax: Axes, window: tuple[int, int] | None = None, color_by: str = "layer",
                  legend: int = 12) -> Timeline:
    """Gantt chart: a row per unit, a bar per instruction from its start to its end cycle, coloured by layer (the
    ``legend`` longest layers are named) or by op (by unit when the report has no layers). ``window = (c0, c1)``
    shows only cycles ``[c0, c1)``."""
    if color_by not in ("layer", "op"):
        raise PlotError(f"color_by must be 'layer' or 'op', not {color_by!r}")
    units, unit, pc, start, end = _instructions(report, "timeline")
    c0, c1 = window if window is not None else (0, max(int(report["cycles"]), 1))
    if not 0 <= c0 < c1:
        raise PlotError(f"the window must be two cycles 0 <= C0 < C1, not {c0}:{c1}")
    keep = (end >= c0) & (start <= c1)
    unit, pc, start, end = unit[keep], pc[keep], start[keep], end[keep]
    layer = _layer_of(report, pc)
    layers = report.get("layers") or []
    present = np.unique(layer[layer >= 0])
    if color_by == "layer":
        keys, colors, group = [lr["name"] for lr in layers], _palette(len(layers)), layer
        longest = present[np.argsort([-layers[k]["cycles"] for k in present], kind="stable")]
        shown = sorted(longest[:legend].tolist())
    else:
        keys = sorted({lr["op"] for lr in layers}, key=lambda op: -sum(lr["cycles"] for lr in layers if lr["op"] == op))
        colors = [colormaps["tab10"](i % 10) for i in range(len(keys))]
        op_index = np.array([keys.index(lr["op"]) for lr in layers], np.int64)
        group = np.where(layer >= 0, op_index[np.maximum(layer, 0)] if layers else -1, -1)
        shown = sorted({int(op_index[k]) for k in present})
    face = np.array(colors + [OTHER], dtype=object)[np.where(group >= 0, group, len(colors))]
    if not layers:   # a `simulate` report: no layers to colour by, so one colour per unit
        face = np.array([colormaps["tab10"](i % 10) for i in range(len(units))], dtype=object)[unit]
    n = len(units)
    artists, bars = [], {}
    for i, name in enumerate(units):
        mine = unit == i
        bars[name] = int(mine.sum())
        if bars[name]:
            xr = np.column_stack([start[mine], end[mine] - start[mine]])
            edges = {"edgecolor": "white", "linewidth": 0.5} if bars[name] <= 300 else {"linewidth": 0}
            artists.append(ax.broken_barh(xr, (n - 1 - i - 0.4, 0.8), facecolors=list(face[mine]), **edges))
    ax.set_yticks(range(n), units[::-1])
    ax.set_ylim(-0.6, n - 0.4)
    ax.set_xlim(c0, c1)
    _cycle_axis(ax, report)
    ax.grid(axis="x", alpha=0.3)
    names = [keys[k] for k in shown]
    if names:
        handles = [Patch(color=colors[k], label=keys[k]) for k in shown]
        title = f"{color_by} ({len(shown)} longest of {len(present)})" if len(shown) < len(present) else color_by
        ax.legend(handles=handles, title=title, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small",
                  frameon=False)
    return Timeline(units, bars, (c0, c1), names, artists)


# ------------------------------------------------------------------------------------------------ utilization
@dataclass
class Utilization:
    """Per unit: cycles it had an instruction in flight in each bucket ``[edges[j], edges[j+1])`` and that fraction."""

    edges: np.ndarray
    busy: dict[str, np.ndarray]
    fraction: dict[str, np.ndarray]
    artists: list = field(default_factory=list)


def plot_utilization(report: dict, ax: Axes, buckets: int = 100) -> Utilization:
    """Busy fraction of each unit over time in ``buckets`` equal time buckets (busy = an instruction in flight,
    from its start to its end cycle, so it includes the stalls inside an instruction: DRAM bandwidth and latency,
    bank conflicts)."""
    if buckets < 1:
        raise PlotError(f"buckets must be >= 1, not {buckets}")
    units, unit, _, start, end = _instructions(report, "utilization")
    edges = np.linspace(0, max(int(report["cycles"]), 1), buckets + 1)
    width = np.diff(edges)
    busy = {u: bucket_busy(start[unit == i], end[unit == i], edges) for i, u in enumerate(units)}
    fraction = {u: b / width for u, b in busy.items()}
    artists = [ax.stairs(100 * f, edges, label=u, linewidth=1.5) for u, f in fraction.items()]
    ax.set_ylim(0, 105)
    ax.set_xlim(edges[0], edges[-1])
    ax.set_ylabel(f"instruction in flight\n(% of each {width[0]:,.0f}-cycle bucket)")
    _cycle_axis(ax, report)
    ax.grid(alpha=0.3)
    ax.legend(title="unit", loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small", frameon=False)
    return Utilization(edges, busy, fraction, artists)


# ------------------------------------------------------------------------------------------------ layers
@dataclass
class LayerSplit:
    """Per layer (program order): its cycles split into compute, memory stall, host and sync stall."""

    names: list[str]
    cycles: np.ndarray
    parts: dict[str, np.ndarray]
    artists: list = field(default_factory=list)


def plot_layers(report: dict, ax: Axes) -> LayerSplit:
    """Horizontal stacked bars, one per layer top to bottom: what its cycles were spent on (``layers[].time_split``,
    docs/report.md). Parts that are 0 in every layer (no host unit, say) are not drawn."""
    layers = _layers(report, "layers", "time_split")
    names = [lr["name"] for lr in layers]
    parts = {role: np.array([lr["time_split"].get(role, 0) for lr in layers], np.int64) for role in ROLE_ORDER}
    y = np.arange(len(layers))
    left = np.zeros(len(layers), np.int64)
    artists = []
    for role in ROLE_ORDER:
        if not parts[role].any():
            continue
        artists.append(ax.barh(y, parts[role], left=left, color=ROLE_COLORS[role], label=ROLE_LABELS[role],
                               height=0.8))
        left = left + parts[role]
    ax.set_yticks(y, [f"{n}  ({lr['op']})" for n, lr in zip(names, layers)], fontsize="small")
    ax.set_ylim(len(layers) - 0.5, -0.5)
    ax.set_xlim(0, max(int(left.max(initial=0)), 1) * 1.02)
    ax.xaxis.set_major_formatter(ticker.EngFormatter(sep=""))
    ax.set_xlabel("cycles")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small", frameon=False)
    return LayerSplit(names, np.array([lr["cycles"] for lr in layers], np.int64), parts, artists)


# ------------------------------------------------------------------------------------------------ roofline
@dataclass
class Roofline:
    """Per layer with MACs and DRAM traffic: intensity (MACs/byte) and attained MACs/cycle; the roof's limits: peak
    MACs/cycle, the DRAM bus's and the DMA's requests in flight's bytes/cycle (``memory_roof``), which memory roof
    binds, and the roof (the lower one's bytes/cycle)."""

    names: list[str]
    ops: list[str]
    intensity: np.ndarray
    attained: np.ndarray
    peak: float
    bandwidth: float
    dma: float
    binds: str
    skipped: list[str]
    roof: float = 0.0
    artists: list = field(default_factory=list)


def _memory_roof(report: dict) -> dict:
    """The report's ``memory_roof``, or for a report written before it had the roofs in GB/s, computed from its
    ``arch``."""
    if "dram_bus" in report.get("memory_roof", {}):
        return report["memory_roof"]
    from isa.arch import Arch
    from npusim.sim.stats import memory_roof

    return memory_roof(Arch.from_dict(report["arch"], "the report's arch"))


def _roof_labels(roof: dict) -> tuple[str, str]:
    """Legend labels of the DRAM bus's and the requests in flight's roofs, the binding one saying so."""
    bus, dma, binds = roof["dram_bus"], roof["dma"], roof["binds"]
    mark = {"dram.gb_per_s": ("binds: ", ""), "dma.outstanding": ("", "binds: "), "both": ("binds: ", "binds: ")}
    bus_mark, dma_mark = mark[binds]
    return (f"{bus_mark}DRAM bus (dram.gb_per_s)\n{bus['gb_per_s']:.3g} GB/s = {bus['bytes_per_cycle']:.3g} B/cycle",
            f"{dma_mark}DMA in flight (dma.outstanding)\n{dma['outstanding']} x {dma['burst_bytes']} B per "
            f"{dma['round_trip_ns']:.3g} ns = {dma['gb_per_s']:.3g} GB/s = {dma['bytes_per_cycle']:.3g} B/cycle")


def plot_roofline(report: dict, ax: Axes) -> Roofline:
    """Log-log roofline: x = MACs per DRAM byte, y = MACs per cycle. Two memory roofs: the DRAM bus
    (``min(rows * cols, intensity * dram.gb_per_s / clock.ghz)``) and what the DMA's ``dma.outstanding`` requests in
    flight carry (``memory_roof.dma``); the one that binds (``memory_roof.binds``) is drawn solid and labelled so,
    the other dashed. One point per layer, coloured by op. Layers without MACs or without DRAM traffic have no place
    on it (they are listed in ``skipped``)."""
    layers = _layers(report, "roofline", "dram_bytes")
    arch = _need(report, "arch", "roofline", "write the report with `npusim run MODEL --json`")
    roof = _memory_roof(report)
    peak = float(arch["matrix"]["rows"] * arch["matrix"]["cols"] * arch.get("units", {}).get("matrix", 1))
    bandwidth, dma, least = roof["dram_bus"]["bytes_per_cycle"], roof["dma"]["bytes_per_cycle"], \
        roof["bytes_per_cycle"]
    on = [lr for lr in layers if lr["macs"] > 0 and lr["dram_bytes"] > 0 and lr["cycles"] > 0]
    skipped = [lr["name"] for lr in layers if lr not in on]
    intensity = np.array([lr["macs"] / lr["dram_bytes"] for lr in on])
    attained = np.array([lr["macs"] / lr["cycles"] for lr in on])
    ops = [lr["op"] for lr in on]
    cycles = np.array([lr["cycles"] for lr in on], np.float64)
    area = 16 + 300 * cycles / cycles.max(initial=1)
    ridge = peak / least
    lo = min([peak / max(bandwidth, dma) / 10, *intensity]) / 2
    hi = max([ridge * 10, *intensity]) * 2
    x = np.geomspace(lo, hi, 200)
    binds = roof["binds"]
    style = {True: {"linestyle": "-", "linewidth": 2.2, "alpha": 1.0},
             False: {"linestyle": "--", "linewidth": 1.2, "alpha": 0.8}}
    bus_label, dma_label = _roof_labels(roof)
    artists = [ax.plot(x, np.minimum(peak, x * bandwidth), color="k", label=bus_label,
                       **style[binds != "dma.outstanding"])[0],
               ax.plot(x, np.minimum(peak, x * dma), color="C3", label=dma_label,
                       **style[binds != "dram.gb_per_s"])[0]]
    for i, op in enumerate(sorted(set(ops))):
        mine = np.array([o == op for o in ops])
        artists.append(ax.scatter(intensity[mine], attained[mine], s=area[mine], color=colormaps["tab10"](i % 10),
                                  label=op, edgecolors="k", linewidths=0.4, zorder=3))
    ax.axvline(ridge, color="k", linestyle=":", linewidth=0.8)
    ax.text(ridge * 1.08, 0.02, f"ridge: {ridge:.3g} MACs/B\n(peak {peak:g} MACs/cycle)",
            transform=ax.get_xaxis_transform(), fontsize="small")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(min([peak / 30, *(attained / 3)]), peak * 2)
    ax.set_xlabel("arithmetic intensity (MACs per DRAM byte)")
    ax.set_ylabel("attained (MACs per cycle)")
    ax.grid(which="both", alpha=0.25)
    leg = ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", title_fontsize="small",
                    title="memory roofs; points: layers by op,\narea ~ cycles")   # beside the axes: off the data
    for handle in leg.legend_handles[2:]:
        handle.set_sizes([36])
    if skipped:
        ax.text(0.01, 0.99, f"not shown: {len(skipped)} layers without MACs or DRAM traffic", transform=ax.transAxes,
                va="top", fontsize="small")
    return Roofline([lr["name"] for lr in on], ops, intensity, attained, peak, bandwidth, dma, binds, skipped,
                    least, artists)


# ------------------------------------------------------------------------------------------------ energy
ENERGY_KINDS = ("mac", "vector", "spm_read", "spm_write", "acc_read", "acc_write", "dram_read", "dram_write", "dma",
                "host", "leakage")   # isa.energy.KINDS and the static kind; the report's layers[].energy_by_kind_pj


@dataclass
class EnergySplit:
    """Per layer (program order): its energy (pJ) split by action kind (``layers[].energy_by_kind_pj``)."""

    names: list[str]
    total: np.ndarray
    parts: dict[str, np.ndarray]
    artists: list = field(default_factory=list)


def plot_energy(report: dict, ax: Axes) -> EnergySplit:
    """Horizontal stacked bars, one per layer top to bottom: its energy by action kind (dynamic kinds and its share
    of the leakage), in µJ. Kinds that are 0 in every layer are not drawn."""
    layers = _layers(report, "energy", "energy_by_kind_pj")
    names = [lr["name"] for lr in layers]
    kinds = list(dict.fromkeys([*ENERGY_KINDS, *layers[0]["energy_by_kind_pj"]]))
    parts = {k: np.array([lr["energy_by_kind_pj"].get(k, 0.0) for lr in layers]) for k in kinds}
    y = np.arange(len(layers))
    left = np.zeros(len(layers))
    dynamic = [k for k in kinds if k != "leakage"]   # ten dynamic kinds, ten colours; leakage light and hatched
    colors = {k: colormaps["tab10"](i % 10) for i, k in enumerate(dynamic)} | {"leakage": "0.88"}
    artists = []
    for k in kinds:
        if not parts[k].any():
            continue
        artists.append(ax.barh(y, parts[k] / 1e6, left=left / 1e6, color=colors[k], label=k, height=0.8,
                               **({"hatch": "///", "edgecolor": "0.55", "linewidth": 0} if k == "leakage" else {})))
        left = left + parts[k]
    ax.set_yticks(y, [f"{n}  ({lr['op']})" for n, lr in zip(names, layers)], fontsize="small")
    ax.set_ylim(len(layers) - 0.5, -0.5)
    ax.set_xlim(0, max(float(left.max(initial=0)) / 1e6, 1e-9) * 1.02)
    ax.set_xlabel("energy (µJ)")
    ax.grid(axis="x", alpha=0.3)
    e = report.get("energy", {})
    title = f"{e.get('table', '')} {e.get('dram_type', '')}".strip()
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize="small", frameon=False, title=title or None)
    return EnergySplit(names, np.array([lr.get("energy_pj", 0.0) for lr in layers]), parts, artists)


# ------------------------------------------------------------------------------------------------ files
def check_image_path(path: str | Path) -> None:
    """PlotError unless ``path``'s suffix names an image format matplotlib writes (.png, .svg, .pdf, ...)."""
    fmt = Path(path).suffix.lstrip(".").lower()
    formats = FigureCanvasAgg.get_supported_filetypes()
    if fmt not in formats:
        raise PlotError(f"cannot write a plot to {path}: the file name must end in one of "
                        f"{', '.join('.' + f for f in sorted(formats))}")


def render(report: dict, kind: str, path: str | Path, *, title: str = "", window: tuple[int, int] | None = None,
           color_by: str = "layer", buckets: int = 100):
    """Draw plot ``kind`` (one of KINDS) of ``report`` on a new figure sized for it and write it to ``path`` (the
    suffix picks the format: .png, .svg, .pdf). Returns what the plot function returned."""
    check_report(report)
    if kind not in KINDS:
        raise PlotError(f"the plot kind must be one of {', '.join(KINDS)}, not {kind!r}")
    check_image_path(path)
    n_layers = len(report.get("layers") or [])
    n_units = len(report.get("units") or {})
    size = {"timeline": (14, 1.6 + 0.55 * n_units), "util": (14, 4.5), "layers": (12, 1.5 + 0.22 * n_layers),
            "roofline": (11, 6), "energy": (12, 1.5 + 0.22 * n_layers)}[kind]
    fig = Figure(figsize=size, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    if kind == "timeline":
        drawn = plot_timeline(report, ax, window=window, color_by=color_by)
    elif kind == "util":
        drawn = plot_utilization(report, ax, buckets=buckets)
    elif kind == "layers":
        drawn = plot_layers(report, ax)
    elif kind == "energy":
        drawn = plot_energy(report, ax)
    else:
        drawn = plot_roofline(report, ax)
    what = {"timeline": "timeline", "util": "instructions in flight per unit", "layers": "where each layer's cycles go",
            "roofline": "roofline per layer", "energy": "energy per layer by action"}[kind]
    arch = report.get("arch", {}).get("name", "")
    if kind == "timeline" and window is not None:
        what += f" of cycles {window[0]:,} to {window[1]:,}"
    cycles = _need(report, "cycles", kind, "write the report with `npusim run --json` or `npusim simulate --json`")
    ax.set_title(f"{title + ': ' if title else ''}{what} on {arch} ({cycles:,} cycles)", loc="left", wrap=True)
    fig.savefig(path, dpi=110)
    return drawn

