"""Compile + simulate time of zoo models, CPU seconds, each run in a fresh process (cold searches, no disk cache).

    python bench/model_speed.py [--before DIR] [--rows resnet50/mid32/timing-only,...] [--repeat N]

Goals (issue 15), CPU seconds of importing the ONNX model, compiling it and simulating it (interpreter start-up and
module imports excluded): ResNet-50 timing-only <= 3 s on every preset and <= 10 s with values; ResNet-18 on mid32
<= 1 s timing-only. ``--before DIR`` runs the same measurement on another checkout of npusim (``git worktree add DIR
REV`` or ``git archive REV | tar -x -C DIR``) in the same run, so both columns see the same machine load: this machine
is shared, so CPU time (user + sys of the child process) is what the table compares; wall time is printed beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from isa.arch import presets_by_size

ROOT = Path(__file__).resolve().parent.parent
GOALS = {("resnet50", "timing-only"): 3.0, ("resnet50", "values"): 10.0, ("resnet18", "timing-only"): 1.0}
ROWS = [("resnet50", p, "timing-only") for p in presets_by_size()] + \
       [("resnet50", p, "values") for p in presets_by_size()] + [("resnet18", "mid32", "timing-only")]

# The measurement, run as `python -c CHILD model arch mode` in the checkout measured: it uses only APIs that older
# checkouts have too (load_model, compile_model, simulate; at the module paths before and after the phase folders),
# and never the disk compile cache.
CHILD = r"""
import json, sys, time
import numpy as np
try:
    from compiler.compile import compile_model
    from npusim.app.zoo import MODELS
    from npusim.app.driver import host_functions, load_model
except ImportError:   # a checkout from before the phase folders
    from compiler.model import compile_model
    from compiler.zoo import MODELS
    from npusim.driver import host_functions, load_model
from isa.arch import load_arch
from npusim import simulate
model, arch_name, mode = sys.argv[1:4]
arch, proto = load_arch(arch_name), MODELS[model]()
values = mode == "values"
if mode == "warm":   # compile the numba kernels once (their disk cache), outside any measurement
    g = load_model(MODELS["resnet18"]()); c = compile_model(g, load_arch("dc128"))
    x = {n: np.zeros(g.tensor(n).shape, g.tensor(n).dtype) for n in g.inputs}
    simulate(c.program, load_arch("dc128"), c.dram_inputs(x), host_functions=host_functions(c))
    sys.exit()
c0, w0 = time.process_time(), time.perf_counter()
graph = load_model(proto)
compiled = compile_model(graph, arch)
c1, w1 = time.process_time(), time.perf_counter()
rng = np.random.default_rng(0)
inputs = {n: rng.standard_normal(graph.tensor(n).shape).astype(graph.tensor(n).dtype) for n in graph.inputs}
result = simulate(compiled.program, arch, compiled.dram_inputs(inputs) if values else None, timing_only=not values,
                  host_functions=host_functions(compiled) if values else None)
c2, w2 = time.process_time(), time.perf_counter()
print(json.dumps({"compile": c1 - c0, "simulate": c2 - c1, "cpu": c2 - c0, "wall": w2 - w0, "cycles": result.cycles,
                  "instrs": len(compiled.program.instrs)}))
"""


def measure(tree: Path, model: str, arch: str, mode: str) -> dict:
    """Run CHILD in a fresh interpreter in checkout ``tree``; its JSON line plus the child's whole CPU time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = dict(os.environ, PYTHONPATH=str(tree))
    out = subprocess.run([sys.executable, "-c", CHILD, model, arch, mode], cwd=tree, env=env, capture_output=True,
                         text=True)
    if out.returncode:
        raise SystemExit(f"{tree}: {model} {arch} {mode} failed:\n{out.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    row = json.loads(out.stdout.strip().splitlines()[-1]) if mode != "warm" else {}
    row["process_cpu"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, help="another npusim checkout to measure in the same run (the baseline)")
    ap.add_argument("--rows", help="comma-separated model/arch/mode rows (default: the goals' seven rows)")
    ap.add_argument("--repeat", type=int, default=1, help="runs per row and checkout; the table shows the fastest")
    ap.add_argument("--json", type=Path, help="also write the measurements here")
    args = ap.parse_args()
    rows = [tuple(r.split("/")) for r in args.rows.split(",")] if args.rows else ROWS
    trees = {"now": ROOT} | ({"before": args.before.resolve()} if args.before else {})
    for tree in trees.values():
        measure(tree, "resnet18", "dc128", "warm")
    load = os.getloadavg()[0]
    results = {}
    for model, arch, mode in rows:
        for name, tree in trees.items():
            runs = [measure(tree, model, arch, mode) for _ in range(args.repeat)]
            results[f"{model}/{arch}/{mode}/{name}"] = min(runs, key=lambda r: r["cpu"])
    print(f"CPU seconds (user + sys) of ONNX import + compile + simulate in a fresh process, fastest of {args.repeat}; "
          f"machine load {load:.1f} at the start (2 cores, shared)")
    head = f"{'model':9} {'arch':7} {'mode':12}"
    if args.before:
        head += f" {'before cpu':>10} {'wall':>7}"
    print(head + f" {'now cpu':>8} {'compile':>8} {'simulate':>9} {'wall':>7} {'goal':>6} {'cycles':>12}")
    for model, arch, mode in rows:
        now = results[f"{model}/{arch}/{mode}/now"]
        line = f"{model:9} {arch:7} {mode:12}"
        if args.before:
            old = results[f"{model}/{arch}/{mode}/before"]
            line += f" {old['cpu']:>10.2f} {old['wall']:>7.2f}"
            if old["cycles"] != now["cycles"]:
                line += f" (cycles before {old['cycles']:,})"
        goal = GOALS.get((model, mode))
        mark = "" if goal is None else " ok" if now["cpu"] <= goal else " MISS"
        print(line + f" {now['cpu']:>8.2f} {now['compile']:>8.2f} {now['simulate']:>9.2f} {now['wall']:>7.2f} "
                     f"{goal or float('nan'):>6.1f} {now['cycles']:>12,}{mark}")
    if args.json:
        args.json.write_text(json.dumps({"load": load, "time": time.time(), "results": results}, indent=1))


if __name__ == "__main__":
    main()
