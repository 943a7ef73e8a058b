"""What the decoder-op fusions save, timing-only on every preset: RMSNorm fused into one pass against the seven nodes
exporters write, and a Llama decoder layer (the dynamo exporter's form, tests/e2e/decoder_layer.py) with
``repeat_kv`` computed on the unrepeated heads against the repeat materialised (the pass ``fuse_repeat_kv`` skipped).

    python bench/decoder_ops.py [--presets edge16,mid32,dc128] [--quick]

Prints one markdown table per measurement: cycles and DRAM bytes of each variant and their ratio."""

from __future__ import annotations

import argparse
import time

from compiler.compile import compile_model
from compiler.frontend.onnx_import import import_onnx
from compiler.passes import run_passes
from isa.arch import load_arch
from npusim.sim.simulator import simulate
from tests.e2e.decoder_layer import Dims, decoder_layer
from tests.e2e.test_decoder_norms import _written_out

LLAMA_1B = Dims(hidden=2048, heads=32, kv_heads=8, head=64, ffn=8192, vocab=256, max_pos=1024)
"""llama-3.2-1b's layer sizes (a small vocabulary: the embedding reads one row per token whatever its size)."""
SMALL = Dims(hidden=512, heads=8, kv_heads=2, head=64, ffn=1536, vocab=256, max_pos=1024)


def _run(graph, arch) -> tuple[int, int, int]:
    """(cycles, DRAM bytes moved, layers) of ``graph`` compiled as it is (no further fusion) on ``arch``."""
    compiled = compile_model(graph, arch, fuse=False)
    r = simulate(compiled.program, arch, None, timing_only=True, limits=None)
    return r.cycles, r.dram_bytes_read + r.dram_bytes_written, len(compiled.layers)


def _row(label: str, preset: str, a: tuple[int, int, int], b: tuple[int, int, int]) -> str:
    return (f"| {label} | {preset} | {a[0]:,} | {a[1]:,} | {a[2]} | {b[0]:,} | {b[1]:,} | {b[2]} | "
            f"{a[0] / b[0]:.2f}x |")


def rms_rows(presets: list[str], hidden: int) -> list[str]:
    rows = []
    for seq in (128, 1):
        m = _written_out("reciprocal", 18)
        for vi in (m.graph.input[0], m.graph.output[0]):
            vi.type.tensor_type.shape.dim[1].dim_value, vi.type.tensor_type.shape.dim[2].dim_value = seq, hidden
            vi.type.tensor_type.shape.dim[0].dim_value = 1
        w = next(i for i in m.graph.initializer if i.name == "w")
        w.dims[:] = [hidden]
        w.raw_data = b"\0\0\x80\x3f" * hidden
        graph = import_onnx(m)
        for p in presets:
            arch = load_arch(p)
            rows.append(_row(f"RMSNorm 1x{seq}x{hidden}", p, _run(run_passes(graph, skip=("fuse_rmsnorm",)), arch),
                             _run(run_passes(graph), arch)))
    return rows


def repeat_kv_rows(presets: list[str], d: Dims) -> list[str]:
    rows = []
    for seq, past in ((128, 0), (1, 511)):
        graph = import_onnx(decoder_layer(1, seq, past, d=d))
        for p in presets:
            arch = load_arch(p)
            rows.append(_row(f"layer seq {seq} past {past}", p, _run(run_passes(graph, skip=("fuse_repeat_kv",)),
                                                                      arch), _run(run_passes(graph), arch)))
    return rows


HEADER = ("| case | preset | cycles before | DRAM bytes before | layers | cycles after | DRAM bytes after | layers | "
          "speedup |\n|---|---|--:|--:|--:|--:|--:|--:|--:|")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", default="edge16,mid32,dc128")
    ap.add_argument("--quick", action="store_true", help="a 512-wide layer instead of llama-3.2-1b's")
    args = ap.parse_args(argv)
    presets = args.presets.split(",")
    d = SMALL if args.quick else LLAMA_1B
    t0 = time.perf_counter()
    print("RMSNorm: the seven written-out nodes (before) against the fused RMSNormalization (after)\n")
    print("\n".join([HEADER, *rms_rows(presets, d.hidden)]))
    print(f"\nDecoder layer {d}: repeat_kv materialised (before) against computed on the kv heads (after)\n")
    print("\n".join([HEADER, *repeat_kv_rows(presets, d)]))
    print(f"\n{time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
