"""npusim next to ZigZag on ResNet-18 with ZigZag's tpu_like accelerator (docs/energy.md#cross-check-zigzag).

Simulates the zoo's int8 ResNet-18 on examples/zigzag/tpu_like.arch.toml (priced with tpu_like's own per-action
energies), then reprices the same run with the bundled tables. ZigZag's numbers are cited data: its test
(tests/main/test_origin/test_tpu_like.py) and, per memory level, a run of ZigZag 3.8.5 from source on the same inputs.

    python bench/zigzag_compare.py
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from isa.arch import load_arch
from isa.energy import run_energy
from npusim.app.driver import run_model
from npusim.app.zoo import MODELS

ROOT = Path(__file__).resolve().parent.parent
# ZigZag 3.8.5 (KULeuven-MICAS/zigzag 3d12a96e), resnet18.onnx on tpu_like.yaml / tpu_like mapping: pJ, cycles, bytes
ZIGZAG = {"energy_pj": 1_871_436_380.66, "cycles": 3_703_960.5, "mac_pj": 72.56e6, "pe_registers_pj": 173.4e6 + 79.53e6,
          "sram_pj": 123.1e6, "dram_pj": 1_422.8e6, "dram_read_bytes": 13_598_656, "dram_write_bytes": 2_484_712}
COUNTED = ("QLinearConv", "QLinearMatMul")   # what ZigZag evaluates: Conv, Gemm, MatMul (other nodes cost 0)


def main() -> None:
    arch = load_arch(ROOT / "examples" / "zigzag" / "tpu_like.arch.toml")
    _, result, _, report = run_model(MODELS["resnet18_int8"](), arch, timing_only=True)
    mine = [lr for lr in report["layers"] if lr["op"] in COUNTED]

    def kinds(layers):
        out: dict[str, float] = {}
        for lr in layers:
            for k, v in lr["energy_by_kind_pj"].items():
                out[k] = out.get(k, 0.0) + v
        return out

    every, counted = kinds(report["layers"]), kinds(mine)
    rows = [("cycles", f"{ZIGZAG['cycles']:,.1f}", f"{report['cycles']:,}",
             f"{sum(lr['cycles'] for lr in mine):,} (sum of their windows)"),
            ("energy, pJ", f"{ZIGZAG['energy_pj']:.4g}", f"{sum(every.values()):.4g}", f"{sum(counted.values()):.4g}"),
            ("  MAC", f"{ZIGZAG['mac_pj']:.4g}", f"{every['mac']:.4g}", f"{counted['mac']:.4g}"),
            ("  PE registers (weights, partial sums)", f"{ZIGZAG['pe_registers_pj']:.4g}", "-", "-"),
            ("  SRAM (sram_2MB / SPM)", f"{ZIGZAG['sram_pj']:.4g}", f"{every['spm_read'] + every['spm_write']:.4g}",
             f"{counted['spm_read'] + counted['spm_write']:.4g}"),
            ("  accumulator (ACC)", "-", f"{every['acc_read'] + every['acc_write']:.4g}",
             f"{counted['acc_read'] + counted['acc_write']:.4g}"),
            ("  DRAM", f"{ZIGZAG['dram_pj']:.4g}", f"{every['dram_read'] + every['dram_write']:.4g}",
             f"{counted['dram_read'] + counted['dram_write']:.4g}"),
            ("DRAM bytes read + written", f"{ZIGZAG['dram_read_bytes'] + ZIGZAG['dram_write_bytes']:,}",
             f"{report['dram']['bytes_read'] + report['dram']['bytes_written']:,}",
             f"{sum(lr['dram_bytes'] for lr in mine):,}")]
    head = ("", "ZigZag", "npusim, all layers", "npusim, conv + FC layers")
    width = [max(len(r[i]) for r in (head, *rows)) for i in range(4)]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(head, width)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in width) + "|")
    for r in rows:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(r, width)) + " |")
    print(f"\nthe same run priced by the bundled tables (same {report['cycles']:,} cycles, no re-simulation):")
    for table, dram in (("45nm", "lpddr4"), ("7nm", "lpddr4"), ("7nm", "hbm2")):
        priced = dataclasses.replace(arch, energy=dataclasses.replace(arch.energy, table=table, dram=dram))
        e = run_energy(result.program, result.costs, priced, result.cycles).to_dict()
        print(f"  {table} {dram}: {e['total_pj']:.4g} pJ ({e['static_pj'] / e['total_pj']:.1%} static), "
              f"{e['average_power_w']:.3g} W at 1 GHz")


if __name__ == "__main__":
    main()
