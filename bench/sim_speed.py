"""Simulator speed: simulated instructions and cycles per wall second, timing-only and with values.

    python bench/sim_speed.py [--size 416] [--arch edge16]

Runs a tiled int8 GEMM split into 16x16x16 tiles (about 3 instructions per tile step, so --size 416 gives
~53,000 instructions) and prints a table. Goal (issue 2): >= 50,000 instructions/s timing-only on 2 cores.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from compiler.gemm import GemmTiling, tiled_gemm
from compiler.target import Target
from isa import DType
from isa.arch import load_arch
from npusim import simulate


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=416, help="M = N = K (elements)")
    ap.add_argument("--arch", default="edge16")
    args = ap.parse_args()
    arch = load_arch(args.arch)
    n, r = args.size, arch.matrix.rows
    t0 = time.perf_counter()
    program = tiled_gemm(n, n, n, DType.I8, Target.of(arch), GemmTiling(tm=r, tn=arch.matrix.cols, tk=r))
    build = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    inputs = {"A": rng.integers(-128, 128, (n, n), dtype=np.int8), "B": rng.integers(-128, 128, (n, n), dtype=np.int8)}
    simulate(program, arch, inputs)  # warm the numba cache and cost caches out of the measurement
    print(f"program: {len(program.instrs):,} instructions (GEMM {n}^3 int8, 16x16x16 tiles, built in {build:.2f} s)")
    print(f"{'mode':<12} {'instructions':>12} {'cycles':>14} {'wall s':>8} {'instr/s':>10} {'cycles/s':>12}")
    for mode, kwargs in (("timing-only", {"timing_only": True}), ("values", {})):
        t0 = time.perf_counter()
        res = simulate(program, arch, None if kwargs else inputs, **kwargs)
        wall = time.perf_counter() - t0
        print(f"{mode:<12} {len(program.instrs):>12,} {res.cycles:>14,} {wall:>8.2f} "
              f"{len(program.instrs) / wall:>10,.0f} {res.cycles / wall:>12,.0f}")


if __name__ == "__main__":
    main()
