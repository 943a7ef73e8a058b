"""Wall time of the race sanitizer (``isa.races.find_races``) on zoo models compiled for each preset.

    python bench/race_speed.py [--models resnet50] [--presets edge16 mid32 dc128]

Prints instructions, operand accesses, the largest live set (accesses kept for comparison at once, which keeps the
check linear), seconds for happens-before alone and for the whole check (verify + happens-before + races; wall and
CPU time of this process, which differ on a shared machine), and the races found (0 for every zoo program).
"""

from __future__ import annotations

import argparse
import time

import isa.races
from compiler.compile import compile_model
from isa.arch import load_arch, presets_by_size
from isa.races import accesses, find_races, happens_before
from npusim.app.driver import load_model
from npusim.app.zoo import MODELS


def _largest_live(program) -> int:
    """Run find_races once more, recording the largest live set of any memory."""
    most, add = 0, isa.races._Live.add

    def counting(self, *a):
        nonlocal most
        add(self, *a)
        most = max(most, self.n)

    isa.races._Live.add = counting
    try:
        find_races(program)
    finally:
        isa.races._Live.add = add
    return most


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["resnet50"], choices=list(MODELS))
    ap.add_argument("--presets", nargs="+", default=list(presets_by_size()))
    args = ap.parse_args()
    print(f"{'model':14} {'preset':7} {'instrs':>8} {'accesses':>9} {'live max':>9} {'hb s':>6} {'total s':>8} "
          f"{'cpu s':>6} {'races':>6}")
    for model in args.models:
        graph = load_model(MODELS[model]())
        for preset in args.presets:
            program = compile_model(graph, load_arch(preset)).program
            t0 = time.perf_counter()
            happens_before(program)
            t1, c1 = time.perf_counter(), time.process_time()
            races = find_races(program)
            t2, c2 = time.perf_counter(), time.process_time()
            n = sum(len(accesses(i, program)) for i in program.instrs)
            print(f"{model:14} {preset:7} {len(program.instrs):>8,} {n:>9,} {_largest_live(program):>9,} "
                  f"{t1 - t0:>6.2f} {t2 - t1:>8.2f} {c2 - c1:>6.2f} {len(races):>6}", flush=True)


if __name__ == "__main__":
    main()
