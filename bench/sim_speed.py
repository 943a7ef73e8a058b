"""Simulator speed: simulated instructions and cycles per CPU second, timing-only and with values.

    python bench/sim_speed.py [--size 416] [--arch edge16]

Runs a tiled int8 GEMM split into 16x16x16 tiles (about 3 instructions per tile step, so --size 416 gives
~53,000 instructions) and prints a table. Goal (issue 15): >= 100,000 instructions/s timing-only on 2 cores. Seconds
are CPU seconds of this process (``time.process_time``: the machine is shared), and the same run measures a bare SimPy
loop (one timeout event per instruction, four processes: the ceiling of any SimPy model with one event per
instruction) so the ratio to it can be compared across machines.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import simpy

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
    bare = bare_simpy(len(program.instrs))
    print(f"{'mode':<12} {'instructions':>12} {'cycles':>14} {'cpu s':>8} {'instr/s':>10} {'cycles/s':>12} "
          f"{'of bare SimPy':>13}")
    for mode, kwargs in (("timing-only", {"timing_only": True}), ("values", {})):
        t0 = time.process_time()
        res = simulate(program, arch, None if kwargs else inputs, **kwargs)
        cpu = time.process_time() - t0
        rate = len(program.instrs) / cpu
        print(f"{mode:<12} {len(program.instrs):>12,} {res.cycles:>14,} {cpu:>8.2f} "
              f"{rate:>10,.0f} {res.cycles / cpu:>12,.0f} {rate / bare:>13.2f}")
    print(f"bare SimPy loop: {bare:,.0f} events per CPU second")


if __name__ == "__main__":
    main()
