"""Simulator speed: simulated instructions and cycles per CPU second, timing-only and with values.

    python bench/sim_speed.py [--size 416] [--arch edge16] [--before DIR]

Runs a tiled int8 GEMM split into 16x16x16 tiles (about 3 instructions per tile step, so --size 416 gives ~53,000
instructions) and prints a table. Goal (issue 15): >= 100,000 instructions/s timing-only on 2 cores. Both modes run the
compiled evaluation of the timing model by default (``engine="auto"``; with values, the kernels are applied afterwards
in its retire order); the "SimPy engine" rows force the SimPy Engine it is tested equal to (``engine="simpy"``).
Seconds are CPU seconds of this process (``time.process_time``: the machine is shared), and the same run measures a
bare SimPy loop (one timeout event per instruction, four processes: the ceiling of any SimPy model with one event per
instruction) so the ratio to it can be compared across machines. ``--before DIR`` measures another checkout of npusim
(``git archive REV | tar -x -C DIR``) in a child process of the same run, for a before/after table.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import simpy

try:
    from compiler.kernels.common.target import Target
    from compiler.kernels.gemm import GemmTiling, tiled_gemm
except ImportError:   # (a checkout from before the phase folders, measured by --before)
    from compiler.gemm import GemmTiling, tiled_gemm
    from compiler.target import Target
from isa import DType
from isa.arch import load_arch
from npusim import simulate


def bare_simpy(n: int) -> float:
    """Events per CPU second of four SimPy processes that each yield ``n / 4`` one-cycle timeouts."""
    env = simpy.Environment()

    def unit(k: int):
        for _ in range(k):
            yield env.timeout(1)

    for _ in range(4):
        env.process(unit(n // 4))
    t0 = time.process_time()
    env.run()
    return 4 * (n // 4) / (time.process_time() - t0)


MODES = {"timing-only": {"timing_only": True}, "timing-only, SimPy engine": {"timing_only": True, "engine": "simpy"},
         "values": {}, "values, SimPy engine": {"engine": "simpy"}}


def measure(size: int, arch_name: str) -> dict:
    """Build the GEMM and return its instruction count, cycles and CPU seconds per mode (after a warm-up run)."""
    arch = load_arch(arch_name)
    n, r = size, arch.matrix.rows
    t0 = time.perf_counter()
    program = tiled_gemm(n, n, n, DType.I8, Target.of(arch), GemmTiling(tm=r, tn=arch.matrix.cols, tk=r))
    out = {"build": time.perf_counter() - t0, "instructions": len(program.instrs)}
    rng = np.random.default_rng(0)
    inputs = {"A": rng.integers(-128, 128, (n, n), dtype=np.int8), "B": rng.integers(-128, 128, (n, n), dtype=np.int8)}
    simulate(program, arch, inputs)  # warm the numba cache and cost caches out of the measurement
    simulate(program, arch, timing_only=True)
    engines = "engine" in inspect.signature(simulate).parameters   # (a checkout from before there were two)
    for mode, kwargs in MODES.items():
        if "engine" in kwargs and not engines:
            continue
        t0 = time.process_time()
        res = simulate(program, arch, None if "timing_only" in kwargs else inputs, **kwargs)
        out[mode] = {"cpu": time.process_time() - t0, "cycles": res.cycles}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=416, help="M = N = K (elements)")
    ap.add_argument("--arch", default="edge16")
    ap.add_argument("--before", type=Path, help="another npusim checkout to measure in the same run (the baseline)")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # (a child's measurement, as JSON)
    args = ap.parse_args()
    if args.json:
        print(json.dumps(measure(args.size, args.arch)))
        return
    runs = {}
    if args.before:   # this script, run in the other checkout's package tree
        env = dict(os.environ, PYTHONPATH=str(args.before.resolve()))
        out = subprocess.run([sys.executable, __file__, "--json", "--size", str(args.size), "--arch", args.arch],
                             cwd=args.before, env=env, capture_output=True, text=True)
        if out.returncode:
            raise SystemExit(f"{args.before}: {out.stderr[-2000:]}")
        runs["before"] = json.loads(out.stdout.strip().splitlines()[-1])
    runs["this tree" if args.before else ""] = m = measure(args.size, args.arch)
    print(f"program: {m['instructions']:,} instructions (GEMM {args.size}^3 int8, {args.arch} tiles, built in "
          f"{m['build']:.2f} s)")
    bare = bare_simpy(m["instructions"])
    print(f"{'mode':<36} {'instructions':>12} {'cycles':>14} {'cpu s':>8} {'instr/s':>10} {'cycles/s':>12} "
          f"{'of bare SimPy':>13}")
    for mode in MODES:
        for label, run in runs.items():
            if mode not in run:
                continue
            cpu, cycles = run[mode]["cpu"], run[mode]["cycles"]
            rate = run["instructions"] / cpu
            print(f"{(mode + ' ' + label).strip():<36} {run['instructions']:>12,} {cycles:>14,} {cpu:>8.2f} "
                  f"{rate:>10,.0f} {cycles / cpu:>12,.0f} {rate / bare:>13.2f}")
    print(f"bare SimPy loop: {bare:,.0f} events per CPU second")


if __name__ == "__main__":
    main()
