"""Wall time to compile and simulate a zoo model, timing-only and with values.

    python bench/model_speed.py [--model resnet50] [--arch dc128]

Goals (issue 3): ResNet-50 under 20 s timing-only and under 60 s with values on a 2-core machine.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time

from compiler.model import compile_model
from compiler.zoo import MODELS
from isa.arch import load_arch
from npusim.driver import load_model, run_model


def _one(model: str, arch_name: str, timing_only: bool) -> None:
    """Compile and simulate once in this (fresh) process and print ``seconds cycles``."""
    arch, proto = load_arch(arch_name), MODELS[model]()
    t0 = time.perf_counter()
    _, result, _, _ = run_model(proto, arch, timing_only=timing_only)
    print(time.perf_counter() - t0, result.cycles)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--arch", default="dc128")
    ap.add_argument("--one", choices=["timing-only", "values"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        return _one(args.model, args.arch, args.one == "timing-only")
    arch, proto = load_arch(args.arch), MODELS[args.model]()
    t0 = time.perf_counter()
    compiled = compile_model(load_model(proto), arch)
    compile_s = time.perf_counter() - t0
    print(f"{args.model} on {arch.name}: {len(compiled.layers)} layers, {len(compiled.program.instrs):,} "
          f"instructions, compiled in {compile_s:.1f} s")
    print(f"{'mode':12} {'wall s (compile + simulate, fresh process)':>44} {'cycles':>14}")
    for mode in ("timing-only", "values"):   # each in a new process: no tiling search or cost cache is warm
        out = subprocess.run([sys.executable, __file__, "--model", args.model, "--arch", args.arch, "--one", mode],
                             capture_output=True, text=True, check=True).stdout.split()
        print(f"{mode:12} {float(out[-2]):>44.1f} {int(out[-1]):>14,}")


if __name__ == "__main__":
    main()
