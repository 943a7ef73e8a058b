"""npusim vs SCALE-Sim on SCALE-Sim's own ResNet-18 topology, 32x32 weight-stationary: same cycles, wall time.

    python bench/scalesim_compare.py [--topology ../shared/data/scalesim/Resnet18.csv] [--repeat 5]

SCALE-Sim's cycles and wall seconds come from tests/data/scalesim_resnet18_32x32_ws.csv, measured on this kind of
machine (2 cores) by bench/scalesim_reference.py --resnet in SCALE-Sim's own venv. npusim runs the same 21 layers in
one process: with SCALE-Sim's accounting (ideal memory, no fold overlap) to compare cycles, and with the full memory
system (DMA, DRAM, SRAM banks) for what it costs to simulate more.
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

from isa import cost
from isa.arch import load_arch
from npusim.app.driver import run_topology
from npusim.app.topology import read_topology

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", default=str(ROOT.parent / "shared" / "data" / "scalesim" / "Resnet18.csv"))
    ap.add_argument("--repeat", type=int, default=5, help="npusim runs to take the best wall time of")
    args = ap.parse_args()
    ref = list(csv.DictReader(open(ROOT / "tests" / "data" / "scalesim_resnet18_32x32_ws.csv")))
    ss_cycles = sum(int(r["scalesim_total_cycles"]) for r in ref)
    ss_wall = sum(float(r["wall_seconds"]) for r in ref)
    layers = read_topology(args.topology)
    base = ["matrix.rows=32", "matrix.cols=32", "matrix.dataflow=ws"]
    runs = {"npusim, SCALE-Sim accounting": (load_arch("mid32", base + ["matrix.fold_overlap=false"]), True),
            "npusim, full memory system": (load_arch("mid32", base), False)}
    print(f"ResNet-18 ({len(layers)} layers), 32x32 weight-stationary")
    print(f"{'simulator':32} {'cycles':>12} {'matrix busy':>12} {'wall s':>9} {'speed-up':>9}")
    print(f"{'SCALE-Sim 3.0.0 (measured)':32} {ss_cycles:>12,} {ss_cycles:>12,} {ss_wall:>9.1f} {'1x':>9}")
    for name, (arch, ideal) in runs.items():
        best, report = float("inf"), None
        for _ in range(args.repeat):
            cost.clear_caches()  # measure cold: no cost memoised from an earlier run
            t0 = time.perf_counter()
            report = run_topology(layers, arch, ideal_memory=ideal)
            best = min(best, time.perf_counter() - t0)
        busy = sum(x["units"]["matrix"]["busy_cycles"] for x in report["layers"])
        print(f"{name:32} {report['cycles']:>12,} {busy:>12,} {best:>9.3f} {ss_wall / best:>8,.0f}x")
    print("(npusim counts cycles, SCALE-Sim reports the last cycle's 0-based index: +1 per layer, +21 in all)")


if __name__ == "__main__":
    main()
