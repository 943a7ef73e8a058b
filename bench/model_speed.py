"""Wall time to compile and simulate a zoo model, timing-only and with values.

    python bench/model_speed.py [--model resnet50] [--arch dc128]

Goals (issue 3): ResNet-50 under 20 s timing-only and under 60 s with values on a 2-core machine.
"""

from __future__ import annotations

import argparse
import time

from compiler.model import compile_model
from compiler.zoo import MODELS
from isa.arch import load_arch
from npusim.driver import load_model, run_model


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--arch", default="dc128")
    args = ap.parse_args()
    arch, proto = load_arch(args.arch), MODELS[args.model]()
    t0 = time.perf_counter()
    compiled = compile_model(load_model(proto), arch)
    compile_s = time.perf_counter() - t0
    print(f"{args.model} on {arch.name}: {len(compiled.layers)} layers, {len(compiled.program.instrs):,} "
          f"instructions, compiled in {compile_s:.1f} s")
    print(f"{'mode':12} {'wall s (compile + simulate)':>28} {'cycles':>14}")
    for mode, timing_only in (("timing-only", True), ("values", False)):
        t0 = time.perf_counter()
        _, result, _, _ = run_model(proto, arch, timing_only=timing_only)
        print(f"{mode:12} {time.perf_counter() - t0:>28.1f} {result.cycles:>14,}")


if __name__ == "__main__":
    main()
