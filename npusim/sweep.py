"""Architecture sweeps: compile and simulate one model on every point of a grid of Arch overrides, in parallel with
dask, and pick the Pareto-optimal points of performance against an area proxy."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Sequence

from isa import NpuSimError
from isa.arch import Arch

SRAM_BYTES_PER_MAC = 4096
"""Area proxy exchange rate: one fp32 multiply-accumulator of the array is taken to cost as much silicon as this many
bytes of SRAM (a rough figure; pass ``sram_bytes_per_mac`` to :func:`sweep` to use another)."""


def grid_points(grid: dict[str, Sequence]) -> list[list[str]]:
    """Every combination of ``grid`` (override key -> values) as ``--set``-style override lists, first key slowest.

    A key naming several fields separated by commas (``"matrix.rows,matrix.cols"``) sets each of them to the value.
    """
    keys = list(grid)
    return [[f"{k}={v}" for key, v in zip(keys, values) for k in key.split(",")]
            for values in itertools.product(*(grid[k] for k in keys))]


def run_point(model, base_arch: Arch, overrides: list[str], timing_only: bool = True,
              sram_bytes_per_mac: float = SRAM_BYTES_PER_MAC, **options) -> dict:
    """One sweep point: ``model`` compiled and simulated on ``base_arch`` with ``overrides``.

    Returns ``overrides``, ``cycles``, ``time_us``, ``matrix_utilization`` (the model's MACs over the array's
    peak), ``macs`` (array MACs = rows * cols),
    ``sram_bytes`` (spm.size + acc.size), ``area`` (MAC equivalents: macs + sram_bytes / sram_bytes_per_mac) and
    ``error`` (None, or why this Arch cannot run the model; then the performance fields are None).
    """
    from .driver import run_model

    out = {"overrides": list(overrides), "cycles": None, "time_us": None, "matrix_utilization": None,
           "macs": None, "sram_bytes": None, "area": None, "error": None}
    try:
        arch = base_arch.with_overrides(list(overrides))
        macs, sram = arch.peak_macs_per_cycle, arch.spm.size + arch.acc.size
        out |= {"macs": macs, "sram_bytes": sram, "area": macs + sram / sram_bytes_per_mac}
        _, result, _, report = run_model(model, arch, timing_only=timing_only, **options)
    except NpuSimError as e:
        return out | {"error": f"{type(e).__name__}: {e}"}
    return out | {"cycles": result.cycles, "time_us": result.microseconds,
                  "matrix_utilization": report["matrix_utilization"]}


def sweep(model, base_arch: Arch, grid: dict[str, Sequence], *, timing_only: bool = True,
          scheduler: str = "threads", workers: int | None = None, progress: bool | None = None,
          sram_bytes_per_mac: float = SRAM_BYTES_PER_MAC, **options) -> list[dict]:
    """Run ``model`` (ONNX path, ModelProto or Graph) on every point of ``grid`` (see :func:`grid_points`) and
    return one :func:`run_point` dict per point, in grid order.

    The points run in parallel as dask delayed tasks on the ``scheduler`` ("processes", "threads" or
    "synchronous"). Measured on 2 cores, ResNet-50 at 224: 4 points in 11.8 s with threads, 22.1 s with processes
    (spawning workers and pickling the model per task cost more than the GIL does).
    A point whose Arch cannot hold or run the model comes back with ``error`` set; the sweep goes on. progress: a
    dask progress bar on stderr (default: when stderr is a terminal). ``options`` go to :func:`npusim.driver.run_model`.
    """
    import dask

    if scheduler not in ("processes", "threads", "synchronous"):
        raise NpuSimError(f"scheduler must be processes, threads or synchronous, not {scheduler!r}")
    shared = dask.delayed(model, traverse=False)
    tasks = [dask.delayed(run_point, pure=True)(shared, base_arch, point, timing_only, sram_bytes_per_mac, **options)
             for point in grid_points(grid)]
    kwargs = {"scheduler": scheduler} | ({"num_workers": workers} if workers else {})
    if progress if progress is not None else sys.stderr.isatty():
        from dask.diagnostics import ProgressBar

        with ProgressBar(out=sys.stderr):
            return list(dask.compute(*tasks, **kwargs))
    return list(dask.compute(*tasks, **kwargs))


def pareto(points: list[dict], x: str, y: str) -> list[dict]:
    """The points no other point beats on both ``x`` and ``y`` (both minimised, e.g. area and cycles), sorted by
    ``x``; points with an error or a missing value are left out. Of equal points, the first is kept."""
    ok = sorted((p for p in points if p.get(x) is not None and p.get(y) is not None), key=lambda p: (p[x], p[y]))
    front: list[dict] = []
    for p in ok:
        if not front or p[y] < front[-1][y]:
            front.append(p)
    return front


def table(points: list[dict], keys: Sequence[str] = ("cycles", "time_us", "matrix_utilization", "area")) -> str:
    """A fixed-width text table of sweep points: their overrides, then ``keys`` (errors shown in place)."""
    rows = [[" ".join(p["overrides"])] + (["error: " + p["error"]] if p.get("error") else
                                          [_fmt(p.get(k)) for k in keys]) for p in points]
    head = ["overrides", *keys]
    sized = [head] + [r for r, p in zip(rows, points) if not p.get("error")]   # an error runs past the columns
    width = [max(len(r[i]) for r in (sized if i else [head, *rows])) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, width)).rstrip() for r in [head, *rows])


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)


def plot_pareto(points: list[dict], ax, x: str = "area", y: str = "time_us", label: str = "overrides"):
    """Scatter of sweep ``points`` (``y`` against ``x``) on a matplotlib ``ax``, the Pareto front (:func:`pareto`)
    drawn as a line and its points annotated with their overrides; returns the front."""
    ok = [p for p in points if p.get(x) is not None and p.get(y) is not None]
    front = pareto(ok, x, y)
    ax.scatter([p[x] for p in ok], [p[y] for p in ok], s=18, color="0.6", label="sweep points")
    ax.plot([p[x] for p in front], [p[y] for p in front], "o-", color="C3", label="Pareto front")
    for p in front:
        ax.annotate(" ".join(o.split(".")[-1] for o in p[label]), (p[x], p[y]), fontsize=7, xytext=(4, 4),
                    textcoords="offset points")
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.legend(fontsize=8)
    return front
