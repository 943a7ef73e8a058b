"""Pareto fronts of a sweep table: the rows no other row beats on every one of two or more metrics (all minimised)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from isa import NpuSimError


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


def pareto(df, metrics: Sequence[str], by: str | None = "workload"):
    """The rows of sweep table ``df`` on the Pareto front of ``metrics`` (two or more columns, all minimised),
    computed within each value of column ``by`` (None: over the whole table); the groups in the order they first
    appear, each sorted by the metrics. Rows with an error or a missing metric are left out."""
    metrics = list(metrics)
    missing = [m for m in metrics if m not in df.columns]
    if len(metrics) < 2 or missing:
        raise NpuSimError(f"pareto needs two or more metric columns of the table ({', '.join(map(str, df.columns))})"
                          + (f"; it has no {', '.join(missing)}" if missing else ""))
    ok = df.dropna(subset=metrics)
    if "error" in ok.columns:
        ok = ok[ok["error"].isna()]
    groups = [ok] if by is None else [g for _, g in ok.groupby(by, sort=False)]
    kept = [g[pareto_mask(g[metrics].to_numpy(float))].sort_values(metrics, kind="stable") for g in groups if len(g)]
    if not kept:
        return ok.iloc[:0]
    import pandas as pd

    return pd.concat(kept)
