"""Speed of the cost model's stream formulas (isa.cost: SRAM bank conflicts, DRAM bursts and row misses), cold.

    python bench/cost_speed.py [--quick]

Three tables, every measurement with the cost caches cleared first: compiling zoo models (the tiling searches call
the cost model for every candidate), costing every instruction of the compiled programs once, and microseconds per
call of ``bank_cycles`` / ``dram_window`` on typical and on large operands. Only public API, so the same script
measures an older checkout (``PYTHONPATH=<checkout> python bench/cost_speed.py`` from outside the source tree).
"""

from __future__ import annotations

import argparse
import time

from compiler.compile import compile_model
from isa import DType, Space, View
from isa.arch import load_arch
from isa.cost import bank_cycles, clear_caches, dram_window, instr_cost
from npusim.app.driver import load_model
from npusim.app.zoo import MODELS

COMPILES = [("bert_layer", "edge16"), ("bert_layer", "mid32"), ("bert_layer", "dc128"), ("resnet18", "dc128"),
            ("resnet18", "mid32")]
SRAM = [  # (name, shape, strides, dtype, beat elements or None for a DMA's memory line)
    ("tile 64x128 i8, DMA", (64, 128), (128, 1), DType.I8, None),
    ("tile 64x128 i8, 16 lanes", (64, 128), (128, 1), DType.I8, 16),
    ("column 256 of f32, pitch 516", (256,), (516,), DType.F32, 16),
    ("im2col 8x8x3x3x16", (8, 8, 3, 3, 16), (1152, 16, 1152, 16, 1), DType.I8, 32),
    ("large: 4 MiB contiguous", (4096, 1024), (1024, 1), DType.I8, None),
    ("large: 2**22 x stride 3", (4096, 1024), (3072, 3), DType.I8, 16),
    ("large: broadcast 65535 x 256", (65535, 256), (0, 1), DType.I8, 16),
]
DRAM = [
    ("weights 256x256 i8", (256, 256), (256, 1), DType.I8),
    ("A tile 64 rows of 128, pitch 4096", (64, 128), (4096, 1), DType.I8),
    ("NHWC window 16x16x64 f16", (16, 16, 64), (57344, 512, 2), DType.F16),
    ("large: 16 MiB contiguous", (16384, 1024), (1024, 1), DType.I8),
    ("large: 2**20 rows of 16, pitch 4160", (1024, 1024, 16), (4259840, 4160, 1), DType.I8),
]


def _seconds(f, repeat: int = 1) -> float:
    best = float("inf")
    for _ in range(repeat):
        clear_caches()
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="skip the compile table")
    args = ap.parse_args()
    programs = {}
    print(f"{'compile (cold cost caches)':34} {'instructions':>12} {'compile s':>10} {'cost all s':>11}")
    for model, preset in COMPILES[: 2 if args.quick else None]:
        arch, graph = load_arch(preset), load_model(MODELS[model]())
        clear_caches()
        t0 = time.perf_counter()
        program = compile_model(graph, arch).program
        compile_s = time.perf_counter() - t0
        programs[model, preset] = program
        cost_s = _seconds(lambda: [instr_cost(i, arch) for i in program.instrs], 3)   # noqa: B023
        print(f"{model + ' on ' + preset:34} {len(program.instrs):>12,} {compile_s:>10.2f} {cost_s:>11.3f}")
    edge, mid = load_arch("edge16"), load_arch("mid32")
    print(f"\n{'SRAM operand (edge16 SPM)':34} {'us/call':>10} {'cycles':>12}")
    for name, shape, strides, dt, beat in SRAM:
        view = View(Space.SPM, 0x40, dt, strides)
        beat = beat or edge.spm.banks * edge.spm.bank_width // dt.size
        n = 1 if name.startswith("large") else 50
        s = _seconds(lambda: [bank_cycles(view, shape, edge.spm, beat) for _ in range(1)], n)  # noqa: B023
        print(f"{name:34} {s * 1e6:>10.0f} {bank_cycles(view, shape, edge.spm, beat)[0]:>12,}")
    print(f"\n{'DRAM operand (mid32, rowbuffer)':34} {'us/call':>10} {'cycles':>12}")
    for name, shape, strides, dt in DRAM:
        view = View(Space.DRAM, 0x80, dt, strides, "A")
        n = 1 if name.startswith("large") else 50
        s = _seconds(lambda: dram_window(view, shape, mid), n)  # noqa: B023
        print(f"{name:34} {s * 1e6:>10.0f} {dram_window(view, shape, mid).cycles:>12,}")


if __name__ == "__main__":
    main()
