"""Sweep throughput: points per minute of a ResNet-18 sweep on 2 cores, the old threads path against the
dask.distributed LocalCluster of :func:`npusim.app.sweep.sweep`.

    python bench/sweep_speed.py [--arch mid32] [--points 4] [--image 224] [--workers 2]

Three sweeps of ``--points`` points each, every one in a fresh results directory (nothing reused):

* threads: what ``npusim.app.sweep.sweep`` did before (dask delayed ``run_model`` calls on the threaded scheduler of one
  process), points that each compile differently (``dram.gb_per_s`` values);
* local: the same points as tasks on a LocalCluster of ``--workers`` single-threaded processes;
* local, shared compile: points that differ only in fields the compiler never reads (``dma.channels``,
  ``queues.depth``), so each worker compiles once (``npusim.app.sweep.COMPILE_FREE_FIELDS``).

Besides wall time, the table gives CPU seconds per point (this process and the workers, user + system): on a machine
shared with other jobs, wall time says how loaded it was; CPU time says what a point costs. Issue 16's goal, 1,000
ResNet-18 points in <= 10 minutes on 2 cores (100 points/min), depends on compile speed (issue 15): compiling
ResNet-18 for mid32 takes about 1.05 CPU s, simulating it timing-only 0.12 s (docs/sweep.md has the measured table).
Run with NPUSIM_NO_CACHE=1 so that the compile cache of an earlier run does not hide the compiles.
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time

import dask

from isa.arch import load_arch
from npusim.app.driver import run_model
from npusim.app.sweep import sweep
from npusim.app.zoo import resnet18


def _threads(proto, arch_name: str, points: list[list[str]], workers: int) -> list[int]:
    """The pre-distributed sweep: run_model per point as dask delayed tasks on local threads."""
    base = load_arch(arch_name)
    tasks = [dask.delayed(lambda p: run_model(proto, base.with_overrides(p), timing_only=True)[1].cycles)(p)
             for p in points]
    return list(dask.compute(*tasks, scheduler="threads", num_workers=workers))


def _local(model: dict, arch_name: str, grid: dict, workers: int) -> list[int]:
    with tempfile.TemporaryDirectory() as out:
        df = sweep({"arch": arch_name, "grid": grid, "workloads": [model]}, out=out, workers=workers,
                   progress=False)
    assert df["error"].isna().all(), df["error"].dropna().tolist()
    return df["cycles"].tolist()


def _cpu_seconds() -> float:
    """User + system CPU seconds of this process and of its children that have exited (the LocalCluster's workers,
    once it is closed)."""
    return sum(u.ru_utime + u.ru_stime for u in (resource.getrusage(resource.RUSAGE_SELF),
                                                   resource.getrusage(resource.RUSAGE_CHILDREN)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="mid32")
    ap.add_argument("--points", type=int, default=4)
    ap.add_argument("--image", type=int, default=224, help="ResNet-18 input size (224: the real model)")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    n = args.points
    model = {"zoo": "resnet18", "args": {"image": args.image}}
    distinct = {"dram.gb_per_s": [round(9.6 * (k + 1), 1) for k in range(n)]}
    shared = {"queues.depth": [k + 1 for k in range(n)]}
    rows = []
    for name, run in (
            ("threads (old path), distinct compiles",
             lambda: _threads(resnet18(image=args.image), args.arch,
                              [[f"dram.gb_per_s={v:g}"] for v in distinct["dram.gb_per_s"]], args.workers)),
            ("LocalCluster, distinct compiles", lambda: _local(model, args.arch, distinct, args.workers)),
            ("LocalCluster, shared compile (queues.depth)", lambda: _local(model, args.arch, shared, args.workers))):
        t0, c0 = time.perf_counter(), _cpu_seconds()
        cycles = run()
        wall, cpu = time.perf_counter() - t0, _cpu_seconds() - c0
        rows.append((name, wall, cpu, n / wall * 60, cycles))
        print(f"  {name}: {wall:.1f} s, {cpu:.1f} CPU s", flush=True)
    assert rows[0][4] == rows[1][4], "the two paths disagree on the cycles"
    print(f"\nResNet-18 ({args.image}x{args.image}) on {args.arch}, {n} points, {args.workers} workers; load average "
          f"{os.getloadavg()[2]:.1f} over the last 15 min on {os.cpu_count()} cores (other jobs slow every path)")
    print(f"{'path':42} {'wall s':>8} {'CPU s/point':>12} {'points/min':>11} {'1,000 points':>13}")
    for name, wall, cpu, ppm, _ in rows:
        print(f"{name:42} {wall:>8.1f} {cpu / n:>12.1f} {ppm:>11.2f} {1000 / ppm:>10.0f} min")


if __name__ == "__main__":
    main()
