"""How close compiled programs come to the roofline: simulated cycles next to max(MACs / peak MACs per cycle,
compulsory DRAM bytes / DRAM bytes per cycle), for GEMM 1024^3 and for every ResNet-50 layer (fp32 model).

    python bench/compiler_quality.py [--presets edge16 mid32 dc128] [--layers]

Compulsory bytes: each input, weight and output tensor moved once. Goals (issue 3): GEMM 1024^3 within 10% of its
bound on every preset; ResNet-50 end to end within 25% of the sum of its layers' bounds.
"""

from __future__ import annotations

import argparse

from isa import DType
from isa.arch import load_arch, presets_by_size
from npusim.app.driver import run_gemm, run_model
from npusim.app.zoo import MODELS


def bound(macs: int, nbytes: int, arch) -> float:
    return max(macs / arch.peak_macs_per_cycle, nbytes / float(arch.dram_timing.bytes_per_cycle))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", nargs="+", default=list(presets_by_size()))
    ap.add_argument("--layers", action="store_true", help="print every ResNet-50 layer")
    args = ap.parse_args()
    print(f"{'preset':8} {'workload':24} {'cycles':>13} {'bound':>13} {'ratio':>6}")
    resnet = MODELS["resnet50"]()
    for name in args.presets:
        arch = load_arch(name)
        res, _ = run_gemm(1024, 1024, 1024, DType.I8, arch, timing_only=True)
        b = bound(1024**3, 1024 * 1024 * (1 + 1 + 4), arch)
        print(f"{name:8} {'GEMM 1024^3 int8':24} {res.cycles:>13,} {b:>13,.0f} {res.cycles / b:>6.2f}")
        compiled, result, _, report = run_model(resnet, arch, timing_only=True)
        graph = compiled.graph
        total_bound = 0.0
        for lr in report["layers"]:
            node = next((n for n in graph.nodes if n.name == lr["name"]), None)
            tensors = [graph.tensor(t) for t in (node.present_inputs + node.outputs)] if node else []
            b = bound(lr["macs"], sum(t.nbytes for t in tensors), arch)
            total_bound += b
            if args.layers:
                print(f"{'':8} {lr['name'][:24]:24} {lr['cycles']:>13,} {b:>13,.0f} {lr['cycles'] / max(b, 1):>6.2f}")
        print(f"{name:8} {'ResNet-50 fp32':24} {result.cycles:>13,} {total_bound:>13,.0f} "
              f"{result.cycles / total_bound:>6.2f}")


if __name__ == "__main__":
    main()
