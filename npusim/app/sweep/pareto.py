"""Pareto fronts of a sweep table: the rows no other row beats on every one of two or more metrics (all minimised).

A point whose workload ran nodes on the host CPU (``host_ops > 0``: a layer no tiling of that Arch fits) measures the
host, not the NPU, so by default it is left out of the front (``host="exclude"``); ``host="mark"`` keeps it and adds a
``host_assisted`` column to the front. The front's ``attrs["host_excluded"]`` says how many points were left out.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from isa import NpuSimError

HOST_POINTS = ("exclude", "mark")
"""What a front does with points that ran nodes on the host CPU: leave them out, or keep them and mark them."""


def pareto_mask(values: np.ndarray) -> np.ndarray:
    """Per row of ``values`` (rows x metrics): True if no other row is <= on every metric and < on one. Of equal
    rows, only the first is kept."""
    n = len(values)
    order = np.lexsort(values.T[::-1])   # by the first metric, then the next...
    keep = np.zeros(n, bool)
    front = np.empty((0, values.shape[1]))
    for i in order:
        v = values[i]
        if not (front <= v).all(axis=1).any():   # sorted: no later row can dominate an earlier one
            keep[i] = True
            front = np.vstack([front, v])
    return keep


def host_assisted(df):
    """Per row of sweep table ``df``: True where the workload ran nodes on the host CPU (``host_ops > 0``; all False
    when the table has no ``host_ops`` column)."""
    import pandas as pd

    if "host_ops" not in df.columns:
        return pd.Series(False, index=df.index)
    return pd.to_numeric(df["host_ops"], errors="coerce").fillna(0).gt(0)


def runnable(df, metrics: Sequence[str]):
    """The rows of ``df`` without an error and with every one of ``metrics``."""
    ok = df.dropna(subset=list(metrics))
    return ok[ok["error"].isna()] if "error" in ok.columns else ok


def pareto(df, metrics: Sequence[str], by: str | None = "workload", host: str = "exclude"):
    """The rows of sweep table ``df`` on the Pareto front of ``metrics`` (two or more columns, all minimised),
    computed within each value of column ``by`` (None: over the whole table); the groups in the order they first
    appear, each sorted by the metrics. Rows with an error or a missing metric are left out.

    host: ``"exclude"`` (default) leaves out the points that ran nodes on the host CPU (``host_ops > 0``), ``"mark"``
    keeps them and adds a boolean column ``host_assisted``. ``attrs["host_excluded"]`` of the result: how many points
    were left out for it."""
    metrics = list(metrics)
    if host not in HOST_POINTS:
        raise NpuSimError(f"host must be one of {', '.join(HOST_POINTS)} (what the front does with points that ran "
                          f"nodes on the host CPU), not {host!r}")
    missing = [m for m in metrics if m not in df.columns]
    if len(metrics) < 2 or missing:
        raise NpuSimError(f"pareto needs two or more metric columns of the table ({', '.join(map(str, df.columns))})"
                          + (f"; it has no {', '.join(missing)}" if missing else ""))
    ok = runnable(df, metrics)
    assisted = host_assisted(ok)
    excluded = int(assisted.sum()) if host == "exclude" else 0
    if host == "exclude":
        ok = ok[~assisted]
    else:
        ok = ok.assign(host_assisted=assisted)
    groups = [ok] if by is None else [g for _, g in ok.groupby(by, sort=False)]
    kept = [g[pareto_mask(g[metrics].to_numpy(float))].sort_values(metrics, kind="stable") for g in groups if len(g)]
    if kept:
        import pandas as pd

        front = pd.concat(kept)
    else:
        front = ok.iloc[:0]
    front.attrs = {"host": host, "host_excluded": excluded}
    return front
