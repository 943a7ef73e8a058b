"""Same programs, same cycles? A snapshot of what the compiler emits and what the simulator counts, to hold two
checkouts against each other across a restructuring.

    python bench/program_snapshot.py -o now.json [--tree DIR] [--cases zoo,corpus,nodes]
    python bench/program_snapshot.py --compare before.json now.json

For each case it records the compiled program's sha256 (of its canonical assembly), its instruction count and the
timing-only cycles with the per-unit busy cycles, or the one-line error a refused case gives:

- ``zoo``: every zoo model on every preset;
- ``corpus``: onnx's model corpus (model-zoo classics, PyTorch exports) on mid32 and edge16, host fallback on;
- ``nodes``: onnx's backend node tests of the ops the registry claims, on mid32, NPU only, with the pass/fail outcome
  against onnx's expected outputs.

``--tree DIR`` runs the snapshot in another checkout (``git worktree add DIR REV``): the child process imports only
what both the old and the new layout provide, trying the new module paths first. ``--compare`` prints every case
that differs and exits 1 if any does.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Run as `python -c CHILD cases` inside the checkout measured; prints one JSON object.
CHILD = r"""
import contextlib, hashlib, importlib, io, json, sys, warnings
import numpy as np

def first(*paths):
    for path in paths:
        mod, _, name = path.rpartition(".")
        try:
            return getattr(importlib.import_module(mod), name)
        except (ImportError, AttributeError):
            continue
    raise ImportError(paths)

load_arch = first("isa.arch.load_arch")
preset_names = first("isa.arch.preset_names")
format_program = first("isa.asm.format_program")
MODELS = first("npusim.app.zoo.MODELS", "compiler.zoo.MODELS")
driver = first("npusim.app.driver.load_model", "npusim.driver.load_model").__module__
driver = importlib.import_module(driver)
conformance = first("npusim.app.conformance.corpus", "npusim.conformance.corpus").__module__
conformance = importlib.import_module(conformance)
NpuSimError = first("isa.NpuSimError")

def program_row(program, result):
    text = format_program(program)
    row = {"sha256": hashlib.sha256(text.encode()).hexdigest(), "instrs": len(program.instrs)}
    if result is not None:
        row["cycles"] = int(result.cycles)
        row["busy"] = {u.name: int(u.busy) for u in result.units}
        row["stall"] = {u.name: {k: int(v) for k, v in u.stall.items() if v} for u in result.units}
    return row

def one_line(e):
    return f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"

def run_model(proto, arch):
    try:
        compiled, result, _, _ = driver.run_model(proto, arch, timing_only=True, limits=None)
    except NpuSimError as e:
        return {"error": one_line(e)}
    return program_row(compiled.program, result)

out = {}
cases = sys.argv[1].split(",")
if "zoo" in cases:
    for name, make in MODELS.items():
        for preset in preset_names():
            out[f"zoo/{name}/{preset}"] = run_model(make(), load_arch(preset))
if "corpus" in cases:
    for cm in conformance.corpus():
        model = cm.load()
        for preset in ("mid32", "edge16"):
            with contextlib.redirect_stderr(io.StringIO()):
                out[f"corpus/{cm.kind}/{cm.name}/{preset}"] = run_model(model, load_arch(preset))
if "nodes" in cases:
    from onnx.backend.test.runner import _normalize_tensor
    NpuBackend = conformance.NpuBackend
    arch = load_arch("mid32")
    for case in conformance.claimed_cases():
        row = {}
        try:
            rep = NpuBackend.prepare(case.model, arch=arch, fallback=False,
                                     constant_inputs=conformance.constant_inputs(case.model))
            inputs, refs = case.data_sets[0]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = rep.run([_normalize_tensor(x) for x in inputs])
            row = program_row(rep.compiled.program, rep.result)
            why = conformance._similar(list(got), [_normalize_tensor(r) for r in refs], case.rtol, case.atol)
            row["outcome"] = "fail: " + why if why else "pass"
        except NpuSimError as e:
            row["error"] = one_line(e)
        except Exception as e:
            row["crash"] = one_line(e)
        out[f"nodes/{case.name}"] = row
print(json.dumps(out, sort_keys=True))
"""


def snapshot(tree: Path, cases: str) -> dict:
    """Run CHILD in checkout ``tree`` (a fresh interpreter with only that tree on the path)."""
    env = dict(os.environ, PYTHONPATH=str(tree), NPUSIM_NO_CACHE="1")
    out = subprocess.run([sys.executable, "-c", CHILD, cases], cwd=tree, env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{tree}: snapshot failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def compare(before: dict, now: dict) -> list[str]:
    """One line per case that is new, gone or differs in any recorded field."""
    lines = []
    for key in sorted(before.keys() | now.keys()):
        a, b = before.get(key), now.get(key)
        if a == b:
            continue
        if a is None or b is None:
            lines.append(f"{key}: {'new' if a is None else 'gone'}")
            continue
        fields = sorted(f for f in a.keys() | b.keys() if a.get(f) != b.get(f))
        lines.append(f"{key}: " + "; ".join(f"{f} {a.get(f)!r} -> {b.get(f)!r}" for f in fields))
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", type=Path, help="write the snapshot here (JSON)")
    ap.add_argument("--tree", type=Path, default=ROOT, help="the checkout to snapshot (default: this one)")
    ap.add_argument("--cases", default="zoo,corpus,nodes", help="comma-separated: zoo, corpus, nodes")
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "NOW"), help="compare two snapshots")
    args = ap.parse_args()
    if args.compare:
        before, now = (json.loads(p.read_text()) for p in args.compare)
        lines = compare(before, now)
        print(f"{len(before)} cases before, {len(now)} now; differ: {len(lines) or 'none'}")
        for line in lines:
            print("  " + line)
        raise SystemExit(1 if lines else 0)
    if not args.output:
        ap.error("give -o FILE (or --compare BEFORE NOW)")
    t0 = time.perf_counter()
    snap = snapshot(args.tree.resolve(), args.cases)
    args.output.write_text(json.dumps(snap, indent=1, sort_keys=True))
    errors = sum("error" in r or "crash" in r for r in snap.values())
    print(f"{len(snap)} cases ({errors} refused) from {args.tree} in {time.perf_counter() - t0:.0f} s -> {args.output}")


if __name__ == "__main__":
    main()
