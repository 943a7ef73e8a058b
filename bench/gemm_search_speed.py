"""What the GEMM tiling search costs of a compile: CPU seconds of ``compiler.kernels.gemm.search_tiling`` (every call,
cold caches) against the whole compile, per GEMM-heavy zoo model and preset, each in a fresh process.

    python bench/gemm_search_speed.py [--before DIR] [--models bert_layer,vit_block,...] [--json OUT]

``--before DIR``: the same measurement on another checkout (``git archive REV | tar -x -C DIR``) in the same run.
The table also gives :func:`isa.cost.program_estimate` of the compiled model (cycles), the cost model the search
minimises, so a change of chosen tilings shows in it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

from isa.arch import presets_by_size

ROOT = Path(__file__).resolve().parent.parent
MODELS = ("bert_layer", "vit_block", "resnet18", "resnet50", "resnet18_int8")

# run as `python -c CHILD model preset` in the checkout measured; it wraps search_tiling where the lowerings call it
CHILD = r"""
import json, sys, time
import compiler.kernels.gemm as gemm
import compiler.ops.matmul as lm, compiler.ops.quant as lq
from compiler.compile import compile_model
from npusim.app.zoo import MODELS
from isa.arch import load_arch
from isa.cost import program_estimate
from npusim.app.driver import load_model
model, preset = sys.argv[1:3]
spent, calls, inner = [0.0], [0], gemm.search_tiling

def timed(*a, **kw):
    c0 = time.process_time()
    try:
        return inner(*a, **kw)
    finally:
        spent[0] += time.process_time() - c0
        calls[0] += 1

lm.search_tiling = lq.search_tiling = timed
arch = load_arch(preset)
graph = load_model(MODELS[model]())
c0 = time.process_time()
compiled = compile_model(graph, arch)
c1 = time.process_time()
print(json.dumps({"compile": c1 - c0, "search": spent[0], "calls": calls[0],
                  "distinct": inner.cache_info().currsize, "estimate": program_estimate(compiled.program, arch)}))
"""


def measure(tree: Path, model: str, preset: str) -> dict:
    """CHILD's JSON line, run in a fresh interpreter in checkout ``tree``."""
    out = subprocess.run([sys.executable, "-c", CHILD, model, preset], cwd=tree, capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(tree), NPUSIM_NO_CACHE="1"))
    if out.returncode:
        raise SystemExit(f"{tree}: {model} {preset} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", type=Path, help="another npusim checkout to measure in the same run (the baseline)")
    ap.add_argument("--models", default=",".join(MODELS), help="comma-separated zoo models")
    ap.add_argument("--json", type=Path, help="also write the measurements here")
    args = ap.parse_args()
    trees = {"now": ROOT} | ({"before": args.before.resolve()} if args.before else {})
    print(f"CPU seconds of compile_model and of the GEMM searches in it (calls: search_tiling calls, distinct: "
          f"GEMMs searched); estimate: program_estimate of the model, cycles; machine load {os.getloadavg()[0]:.1f}")
    print(f"{'model':13} {'preset':7} {'tree':6} {'compile':>8} {'search':>7} {'share':>6} {'calls':>6} "
          f"{'distinct':>8} {'estimate':>12}")
    results = {}
    for model in args.models.split(","):
        for preset in presets_by_size():
            for name, tree in trees.items():
                r = results[f"{model}/{preset}/{name}"] = measure(tree, model, preset)
                print(f"{model:13} {preset:7} {name:6} {r['compile']:>8.2f} {r['search']:>7.3f} "
                      f"{r['search'] / r['compile']:>6.1%} {r['calls']:>6} {r['distinct']:>8} {r['estimate']:>12,}",
                      flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
