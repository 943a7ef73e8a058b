"""Trace writing speed: ResNet-50 (timing only) simulated, then its Chrome trace written, per Arch.

    python bench/trace_speed.py [--arch edge16 --arch dc128] [--model resnet50]

Prints a table: instructions, simulate seconds (``npusim.simulate``'s wall time), trace-write seconds, events, file
MB. Goal (the trace issue): writing the trace takes less time than the simulation.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from isa.arch import load_arch
from npusim.app.driver import run_model
from npusim.app.zoo import MODELS
from npusim.report.trace import write_trace


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", action="append", help="preset (repeatable; default edge16 and dc128)")
    ap.add_argument("--model", default="resnet50", choices=sorted(MODELS))
    args = ap.parse_args()
    print(f"{'model':<10} {'arch':<8} {'instructions':>12} {'simulate s':>10} {'trace s':>8} {'ratio':>6} "
          f"{'events':>9} {'MB':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.arch or ["edge16", "dc128"]:
            compiled, result, _, _ = run_model(MODELS[args.model](), load_arch(name), timing_only=True)
            t0 = time.perf_counter()
            info = write_trace(result, Path(tmp) / "trace.json", compiled.layers)
            wall = time.perf_counter() - t0
            print(f"{args.model:<10} {name:<8} {len(compiled.program.instrs):>12,} {result.wall_seconds:>10.2f} "
                  f"{wall:>8.2f} {wall / result.wall_seconds:>6.2f} {info.events:>9,} {info.bytes / 1e6:>7.1f}")


if __name__ == "__main__":
    main()
