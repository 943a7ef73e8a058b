"""The perception-operator bench (docs/perception.md#benchmark): ConvTranspose by phase splitting against input swelling
(:mod:`.convt`), Resize/GridSample as Sample2D + depthwise weighting against the host fallback (:mod:`.sample`),
the fused multi-scale deformable attention against the unfused graph (:mod:`.msda`).

:func:`bench_rows` gives every row in one schema (:data:`COLUMNS`) for ``bench/seed_ops.py`` and
``notebooks/04_perception_operators.ipynb``. Like :mod:`npusim.app.driver`, this package joins compiler and simulator.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from isa.arch import presets_by_size
from npusim.app.seedbench import convt, msda, sample

COLUMNS = ("case", "op", "variant", "preset", "cycles", "useful_macs", "util", "dram_rd", "dram_wr", "spm_peak",
           "vector_busy", "gather_busy", "bank_conflict", "validated")
"""Cycles and bytes; ``util`` = useful MACs / (cycles * array PEs) where MACs are the op's work (ConvTranspose),
else None; ``validated``: ``exact`` (bit for bit), ``tol`` (within the float check), ``-`` (timing only)."""


def _convt_row(r: dict) -> dict:
    return {"op": "ConvTranspose", **r}


def bench_rows(size: str = "full", presets: Sequence[str] | None = None,
               progress: Callable[[dict], None] | None = None) -> list[dict]:
    """Every bench row in :data:`COLUMNS` order, on ``presets`` (default: every preset, the smallest array first).
    ``size="small"``: the cases small enough to simulate with values and check (the test suite's and the
    notebook's); ``"full"``: the full shapes, timing-only where large."""
    small, presets = size == "small", tuple(presets or presets_by_size())
    out: list[dict] = []

    def keep(r: dict) -> None:
        out.append({c: r.get(c) for c in COLUMNS})
        if progress:
            progress(out[-1])

    for r in convt.conv_transpose_rows(convt.SMALL_CASES if small else tuple(convt.CASES), presets):
        keep(_convt_row(r))
    sample.seed_sample_rows(sample.SMALL if small else sample.CASES, presets, values=small, progress=keep)
    msda.msda_rows(msda.SMALL if small else msda.CASES, presets, values=small, progress=keep)
    return out


__all__ = ["COLUMNS", "bench_rows", "convt", "msda", "sample"]
