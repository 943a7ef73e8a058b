"""Reference cycle counts from SCALE-Sim v3 for npusim's systolic-array timing (see docs/scalesim-notes.md).

Run with SCALE-Sim's own virtual environment, never npusim's:

    python3 -m venv .venv-scalesim && .venv-scalesim/bin/pip install scalesim==3.0.0 'numpy<2.4'
    .venv-scalesim/bin/python bench/scalesim_reference.py [--jobs 2]  # -> tests/data/scalesim_reference.csv
    .venv-scalesim/bin/python bench/scalesim_reference.py --resnet    # -> tests/data/scalesim_resnet18_32x32_ws.csv
    python3 bench/scalesim_reference.py --check   # any Python: the closed form below reproduces both CSVs

GEMM cases are simulated one by one with SCALE-Sim's Python API in GEMM mode (topology row `name, M, N, K,`) from
a generated config: CALC bandwidth mode (SRAM reads never stall) and 16 MiB per SRAM (the OFMAP buffer never fills),
so memory adds no stall cycles. `--resnet` runs SCALE-Sim's unchanged ResNet-18 conv topology (32x32, WS).
"""

from __future__ import annotations

import argparse
import csv
import math
import multiprocessing
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests/data/scalesim_reference.csv"
RESNET_OUT = ROOT / "tests/data/scalesim_resnet18_32x32_ws.csv"
RESNET_TOPO = Path("/work/shared/data/scalesim/Resnet18.csv")
RESNET_LAYOUT = Path("/work/shared/data/scalesim/layout_resnet18.csv")
SRAM_KB = 16384
DATAFLOWS = ("ws", "os", "is")

CONFIG = """[general]
run_name = run
[architecture_presets]
ArrayHeight = {rows}
ArrayWidth = {cols}
IfmapSramSzkB = {kb}
FilterSramSzkB = {kb}
OfmapSramSzkB = {kb}
IfmapOffset = 0
FilterOffset = 10000000
OfmapOffset = 20000000
Dataflow = {df}
ReadRequestBuffer = 32
WriteRequestBuffer = 32
[layout]
IfmapCustomLayout = False
FilterCustomLayout = False
IfmapSRAMBankBandwidth = 10
IfmapSRAMBankNum = 10
IfmapSRAMBankPort = 2
FilterSRAMBankBandwidth = 10
FilterSRAMBankNum = 10
FilterSRAMBankPort = 2
[sparsity]
SparsitySupport = false
SparseRep = ellpack_block
OptimizedMapping = false
BlockSize = 8
RandomNumberGeneratorSeed = 40
[run_presets]
InterfaceBandwidth = CALC
UseRamulatorTrace = False
"""


def conv_gemm(h: int, w: int, r: int, s: int, c: int, f: int, stride: int) -> tuple[int, int, int]:
    """GEMM view (M, N, K) of a SCALE-Sim conv row: no padding, out = ceil((H - R + S) / S)."""
    return math.ceil((h - r + stride) / stride) * math.ceil((w - s + stride) / stride), f, r * s * c


# Conv1, Conv2_1a, Conv3_1a and Conv3_s of /work/shared/data/scalesim/Resnet18.csv.
SHAPES = {
    "tiny_1x1x1": (1, 1, 1), "tiny_2x3x5": (2, 3, 5), "ragged_17x33x65": (17, 33, 65),
    "ragged_100x70x90": (100, 70, 90), "gemv_1x512x512": (1, 512, 512), "gemv_512x1x512": (512, 1, 512),
    "square_64": (64, 64, 64), "square_256": (256, 256, 256), "attn_qkv_128x768x768": (128, 768, 768),
    "mlp_up_128x3072x768": (128, 3072, 768), "mlp_up_32x768x192": (32, 768, 192),
    "resnet18_conv1": conv_gemm(224, 224, 7, 7, 3, 64, 2), "resnet18_conv2_1a": conv_gemm(56, 56, 3, 3, 64, 64, 1),
    "resnet18_conv3_1a": conv_gemm(56, 56, 3, 3, 64, 128, 2), "resnet18_conv3_s": conv_gemm(56, 56, 1, 1, 64, 128, 2),
}
# (shape, array rows, array cols, dataflows): every dataflow x array pair appears; slow pairs stay small.
CASES = [
    ("tiny_1x1x1", 4, 4, DATAFLOWS), ("tiny_1x1x1", 128, 128, DATAFLOWS),
    ("tiny_2x3x5", 4, 4, DATAFLOWS),
    ("ragged_17x33x65", 8, 8, DATAFLOWS), ("ragged_17x33x65", 16, 16, DATAFLOWS),
    ("ragged_17x33x65", 8, 32, DATAFLOWS), ("ragged_17x33x65", 32, 8, DATAFLOWS),
    ("ragged_17x33x65", 16, 64, DATAFLOWS),
    ("ragged_100x70x90", 4, 4, DATAFLOWS), ("ragged_100x70x90", 32, 32, DATAFLOWS),
    ("ragged_100x70x90", 16, 64, DATAFLOWS), ("ragged_100x70x90", 128, 128, DATAFLOWS),
    ("gemv_1x512x512", 16, 16, DATAFLOWS), ("gemv_1x512x512", 128, 128, DATAFLOWS),
    ("gemv_512x1x512", 32, 32, DATAFLOWS), ("gemv_512x1x512", 8, 32, DATAFLOWS),
    ("square_64", 4, 4, DATAFLOWS), ("square_64", 8, 8, DATAFLOWS), ("square_64", 32, 8, DATAFLOWS),
    ("square_256", 16, 16, DATAFLOWS), ("square_256", 32, 32, DATAFLOWS), ("square_256", 16, 64, DATAFLOWS),
    ("square_256", 128, 128, DATAFLOWS),
    ("attn_qkv_128x768x768", 32, 32, DATAFLOWS), ("attn_qkv_128x768x768", 128, 128, DATAFLOWS),
    ("mlp_up_128x3072x768", 128, 128, DATAFLOWS), ("mlp_up_32x768x192", 8, 32, DATAFLOWS),
    ("mlp_up_32x768x192", 32, 8, DATAFLOWS),
    ("resnet18_conv1", 128, 128, DATAFLOWS), ("resnet18_conv2_1a", 128, 128, DATAFLOWS),
    ("resnet18_conv2_1a", 16, 64, ("ws",)), ("resnet18_conv3_1a", 32, 32, DATAFLOWS),
    ("resnet18_conv3_s", 16, 16, DATAFLOWS), ("resnet18_conv3_s", 8, 32, ("ws", "is")),
]
COLUMNS = ["name", "M", "N", "K", "rows", "cols", "dataflow", "scalesim_total_cycles", "scalesim_stall_cycles",
           "scalesim_compute_util_pct", "wall_seconds"]


def scalesim_formula(m: int, n: int, k: int, rows: int, cols: int, dataflow: str) -> int:
    """SCALE-Sim 3.0.0 "Total Cycles" with no memory stalls (derivation in docs/scalesim-notes.md)."""
    s_row, s_col, t = {"ws": (k, n, m), "os": (m, n, k), "is": (k, m, n)}[dataflow]
    folds = math.ceil(s_row / rows) * math.ceil(s_col / cols)
    preload = 0 if dataflow == "os" else rows
    return folds * (preload + rows + cols + t - 2) - 1


def write_config(d: Path, rows: int, cols: int, dataflow: str) -> Path:
    (d / "scale.cfg").write_text(CONFIG.format(rows=rows, cols=cols, kb=SRAM_KB, df=dataflow))
    return d / "scale.cfg"


def run_gemm(case: tuple[str, int, int, str]) -> dict:
    from scalesim.scale_sim import scalesim

    name, rows, cols, dataflow = case
    m, n, k = SHAPES[name]
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        (d / "gemm.csv").write_text(f"Layer, M, N, K,\n{name}, {m}, {n}, {k},\n")
        (d / "layout.csv").write_text("Layer name,\n")  # required file; unused without custom layouts
        t0 = time.perf_counter()
        sim = scalesim(save_disk_space=True, verbose=False, config=str(write_config(d, rows, cols, dataflow)),
                       topology=str(d / "gemm.csv"), layout=str(d / "layout.csv"), input_type_gemm=True)
        sim.run_scale(top_path=str(d))
        _, total, stalls, _, _, compute_util = sim.runner.single_layer_sim_object_list[0].get_compute_report_items()
        wall = time.perf_counter() - t0
    return dict(name=name, M=m, N=n, K=k, rows=rows, cols=cols, dataflow=dataflow, scalesim_total_cycles=total,
                scalesim_stall_cycles=stalls, scalesim_compute_util_pct=f"{compute_util:.4f}",
                wall_seconds=f"{wall:.2f}")


def run_resnet() -> None:
    """ResNet-18 conv topology, 32x32 WS, one SCALE-Sim run; per-layer wall time by timing each layer's run()."""
    from scalesim.scale_sim import scalesim
    from scalesim.single_layer_sim import single_layer_sim

    walls: dict[int, float] = {}
    layer_run = single_layer_sim.run

    def timed_run(self):
        t0 = time.perf_counter()
        layer_run(self)
        walls[self.layer_id] = time.perf_counter() - t0

    single_layer_sim.run = timed_run
    with tempfile.TemporaryDirectory() as tmp:
        sim = scalesim(save_disk_space=True, verbose=False, config=str(write_config(Path(tmp), 32, 32, "ws")),
                       topology=str(RESNET_TOPO), layout=str(RESNET_LAYOUT), input_type_gemm=False)
        sim.run_scale(top_path=tmp)
    topo, rows = sim.topo, []
    for i, layer in enumerate(sim.runner.single_layer_sim_object_list):
        _, total, stalls, *_ = layer.get_compute_report_items()
        oh, ow = topo.get_layer_ofmap_dims(i)
        rows.append(dict(layer=topo.get_layer_name(i), M=oh * ow, N=topo.get_layer_num_filters(i),
                         K=topo.get_layer_window_size(i), scalesim_total_cycles=total, scalesim_stall_cycles=stalls,
                         wall_seconds=f"{walls[i]:.2f}"))
    write_csv(RESNET_OUT, rows)
    print(f"{len(rows)} layers, {sum(r['scalesim_total_cycles'] for r in rows):,} total cycles, "
          f"{sum(walls.values()):.1f} s -> {RESNET_OUT.relative_to(ROOT)}")


def write_csv(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def check() -> int:
    """Compare both CSVs with scalesim_formula; print and count mismatches."""
    bad = 0
    for path in (OUT, RESNET_OUT):
        rows = list(csv.DictReader(path.open()))
        for r in rows:
            m, n, k = int(r["M"]), int(r["N"]), int(r["K"])
            shape = (int(r.get("rows", 32)), int(r.get("cols", 32)), r.get("dataflow", "ws"))
            want, got = scalesim_formula(m, n, k, *shape), int(r["scalesim_total_cycles"])
            if want != got or int(r["scalesim_stall_cycles"]):
                bad += 1
                print(f"MISMATCH {path.name}: {r} formula={want}")
        print(f"{path.relative_to(ROOT)}: {len(rows)} rows, {len(rows) - bad} match the formula")
    return bad


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2, help="worker processes for the GEMM cases")
    ap.add_argument("--resnet", action="store_true", help="run the ResNet-18 32x32 WS topology instead")
    ap.add_argument("--check", action="store_true", help="only check the CSVs against the closed form")
    args = ap.parse_args()
    if args.check:
        raise SystemExit(1 if check() else 0)
    if args.resnet:
        return run_resnet()
    cases = [(name, r, c, df) for name, r, c, dfs in CASES for df in dfs]
    t0 = time.perf_counter()
    ctx = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(args.jobs, mp_context=ctx) as pool:
        rows = []
        for row in pool.map(run_gemm, cases):
            rows.append(row)
            print(f"{row['name']:>22} {row['rows']:>3}x{row['cols']:<3} {row['dataflow']} "
                  f"{row['scalesim_total_cycles']:>9} cycles {row['wall_seconds']:>7} s", flush=True)
    write_csv(OUT, rows)
    print(f"{len(rows)} cases, {sum(float(r['wall_seconds']) for r in rows):.1f} s of SCALE-Sim, "
          f"{time.perf_counter() - t0:.1f} s wall -> {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
