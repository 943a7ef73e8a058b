"""The perception-operator bench (docs/perception.md#benchmark): every case, variant and preset with cycles, useful
MACs, utilization, DRAM read and write, SPM peak, vector and gather busy, bank-conflict stalls and how it was validated;
then the gains the issue asks for (ConvTranspose: split against swelling; Sample2D: against the host fallback; the fused
deformable attention against the unfused graph).

    python bench/seed_ops.py                 # the full shapes, timing-only where large (about 10 min)
    python bench/seed_ops.py --size small    # the small cases, simulated with values and checked
    python bench/seed_ops.py --csv rows.csv  # the rows as CSV too
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pandas as pd  # noqa: E402
from tqdm import tqdm  # noqa: E402

from isa.arch import presets_by_size  # noqa: E402
from npusim.app import seedbench  # noqa: E402


def _gains(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (case, preset, variant against its baseline): cycles speed-up and DRAM bytes change."""
    base = {"ConvTranspose": "swell_dram", "Resize": "host", "GridSample": "host", "MSDeformAttn": "unfused"}
    rows = []
    for (case, preset), g in df.groupby(["case", "preset"], sort=False):
        ref = g[g.variant == base[g.op.iloc[0]]]
        if ref.empty:
            continue
        r = ref.iloc[0]
        for _, v in g[g.variant != r.variant].iterrows():
            moved = (v.dram_rd + v.dram_wr) / (r.dram_rd + r.dram_wr) - 1
            rows.append({"case": case, "preset": preset, "variant": v.variant, "against": r.variant,
                         "speedup": r.cycles / v.cycles, "dram_bytes": moved,
                         "util_gain": (v.util / r.util - 1) if r.util and v.util else None})
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=("small", "full"), default="full")
    ap.add_argument("--presets", nargs="+", default=list(presets_by_size()))
    ap.add_argument("--csv", type=Path, help="also write the rows to this CSV file")
    args = ap.parse_args(argv)
    t0, t1 = time.perf_counter(), time.process_time()
    with tqdm(desc="perception bench", unit="row", file=sys.stderr) as bar:
        rows = seedbench.bench_rows(args.size, tuple(args.presets), progress=lambda r: bar.update())
    df = pd.DataFrame(rows, columns=seedbench.COLUMNS)
    if args.csv:
        df.to_csv(args.csv, index=False)
    with pd.option_context("display.max_rows", None, "display.width", 200, "display.float_format", "{:.3f}".format):
        print(df.to_string(index=False))
        print()
        print(_gains(df).to_string(index=False))
    print(f"\n{len(df)} rows in {time.perf_counter() - t0:.0f} s wall, {time.process_time() - t1:.0f} s CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
