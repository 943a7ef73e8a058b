"""Weight-only quantized GEMV/GEMM (LLM decode): simulated cycles of ``y = x @ W`` with W kept quantized in DRAM,
beside the two bounds that can hold it: the DRAM bound, (weight bytes + scale bytes) / DRAM bytes per cycle, and
the array-load bound, K * N / cols cycles (a weight-stationary array takes one R x C weight fold per R cycles at
most, so ``cols`` weights per cycle, whatever M <= rows).

    python bench/dequant_gemv.py [--presets edge16 mid32 dc128] [--m 1 16] [--shapes 2048x2048 ...]
                                 [--formats f32 int8 int4-b32 int4-b128 fp8] [--json out.json] [--before old.json]

Each case is an ONNX model of one MatMul by a constant weight (f32), or by ``DequantizeLinear`` of one (int8: per
column, axis=1; int4: ``block_size`` along K; fp8 E4M3: per column), compiled and simulated timing-only through
:func:`npusim.app.driver.run_model`, so it runs on any checkout (``PYTHONPATH=<tree>``) to compare kernels; a
format a checkout cannot fuse runs partly on the host, and the table says so (``host``). ``x bound`` is the cycles
over the larger of the two bounds. ``--before`` adds the cycles of the same cases from the ``--json`` of another
checkout's run (bench/results/dequant_gemv.md: main before the array scheme).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import ml_dtypes
import numpy as np
from onnx import TensorProto, helper, numpy_helper

from isa.arch import load_arch
from npusim.app.driver import run_model

FORMATS = {"f32": (4.0, 0), "int8": (1.0, 0), "int4-b32": (0.5, 32), "int4-b128": (0.5, 128), "fp8": (1.0, 0)}
"""format -> (DRAM bytes per weight, block size along K; 0: one f32 scale per column, none for f32)."""


def model(M: int, K: int, N: int, fmt: str, seed: int = 0):
    """The ONNX model ``y = x @ W`` (opset 21) with W [K, N] in format ``fmt``."""
    rng = np.random.default_rng(seed)
    block = FORMATS[fmt][1]
    nodes, inits, w = [], [], "w"
    if fmt == "f32":
        inits.append(numpy_helper.from_array((rng.standard_normal((K, N)) * 0.02).astype(np.float32), "w"))
    else:
        if fmt == "fp8":
            q = (rng.standard_normal((K, N)) * 4).astype(ml_dtypes.float8_e4m3fn)
        elif fmt == "int8":
            q = rng.integers(-128, 128, (K, N)).astype(np.int8)
        else:
            q = rng.integers(-8, 8, (K, N)).astype(ml_dtypes.int4)
        rows = -(-K // block) if block else 1
        scale = (rng.random((rows, N)) * 0.01 + 0.001).astype(np.float32)
        inits += [numpy_helper.from_array(q, "wq"),
                  numpy_helper.from_array(scale if block else scale.reshape(N), "s")]
        attrs = {"axis": 0, "block_size": block} if block else {"axis": 1}
        nodes.append(helper.make_node("DequantizeLinear", ["wq", "s"], ["w"], **attrs))
    nodes.append(helper.make_node("MatMul", ["x", w], ["y"]))
    graph = helper.make_graph(nodes, "gemv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (M, K))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, (M, N))], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def bounds(M: int, K: int, N: int, fmt: str, arch) -> tuple[float, float]:
    """(DRAM bound, array-load bound) in cycles: weight and scale bytes over DRAM bytes per cycle; K * N / cols
    weight loads, times ceil(M / rows) when M exceeds the rows a fold streams in the time it loads."""
    per, block = FORMATS[fmt]
    scales = 0 if fmt == "f32" else N * (-(-K // block) if block else 1) * 4
    dram = (K * N * per + scales) / (arch.dram.gb_per_s / arch.clock.ghz)
    r, c = arch.matrix.rows, arch.matrix.cols
    array = -(-K // r) * -(-N // c) * max(r, M)
    return dram, float(array)


def run_case(M: int, K: int, N: int, fmt: str, preset: str) -> dict:
    arch = load_arch(preset)
    t0 = time.perf_counter()
    _, result, _, report = run_model(model(M, K, N, fmt), arch, {"x": np.ones((M, K), np.float32)},
                                     timing_only=True, cache=False, limits=None)
    dram, array = bounds(M, K, N, fmt, arch)
    return {"preset": preset, "M": M, "K": K, "N": N, "format": fmt, "cycles": int(result.cycles),
            "dram_bound": round(dram), "array_bound": round(array), "x_bound": result.cycles / max(dram, array),
            "host": [h["op"] for h in report["host_ops"]], "weight_bytes": report["weight_bytes"],
            "seconds": round(time.perf_counter() - t0, 1)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", nargs="+", default=["edge16", "mid32", "dc128"])
    ap.add_argument("--m", nargs="+", type=int, default=[1, 16])
    ap.add_argument("--shapes", nargs="+", default=["2048x2048", "2048x8192", "8192x2048"], help="KxN")
    ap.add_argument("--formats", nargs="+", default=list(FORMATS), choices=list(FORMATS))
    ap.add_argument("--json", help="write the rows to this file")
    ap.add_argument("--before", help="a --json of another checkout: its cycles beside these")
    args = ap.parse_args()
    before = {}
    if args.before:
        with open(args.before) as f:
            before = {(r["preset"], r["M"], r["K"], r["N"], r["format"]): r for r in json.load(f)}
    rows = []
    extra = " before | before x |" if before else ""
    print(f"| preset | M | K x N | format | cycles | DRAM bound | array bound | x bound |{extra} note |")
    print("|---|---|---|---|---:|---:|---:|---:|" + "---:|---:|" * bool(before) + "---|")
    for preset in args.presets:
        for M in args.m:
            for shape in args.shapes:
                K, N = map(int, shape.split("x"))
                for fmt in args.formats:
                    r = run_case(M, K, N, fmt, preset)
                    rows.append(r)
                    old = before.get((preset, M, K, N, fmt))
                    cells = f" {old['cycles']:,} | {old['x_bound']:.2f} |" if old else " |  |" if before else ""
                    note = "; ".join(f"{w}host: {', '.join(x['host'])}" for w, x in (("", r), ("before: ", old))
                                     if x and x["host"])
                    print(f"| {preset} | {M} | {K}x{N} | {fmt} | {r['cycles']:,} | {r['dram_bound']:,} | "
                          f"{r['array_bound']:,} | {r['x_bound']:.2f} |{cells} {note} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    print(f"({sum(r['seconds'] for r in rows):.0f} s)", file=sys.stderr)


if __name__ == "__main__":
    main()
