"""Grouped convolutions against the dense one of the same shape: simulated cycles (timing only, fp32) with one group
per array tile (``gpack=1``, what the compiler did before group packing) and with the search's choice (several groups
per array tile, block-diagonal weights: :attr:`compiler.kernels.conv2d.ConvTiling.gpack`).

    python bench/grouped_conv.py [--presets edge16 mid32 dc128] [--dtype f32]

Shapes: ResNeXt-50 32x4d's 3x3 grouped convs (32 groups of 4 and 8 channels, stages 1 and 2) and a few groups of 64
channels. Goal (issue 13): a grouped conv must not cost 5x the dense conv of the same shape.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from compiler.kernels.common.target import Target
from compiler.kernels.conv2d import ConvShape, conv2d, search_conv_tiling
from isa import DType
from isa.arch import load_arch, presets_by_size
from npusim import simulate

SHAPES = {
    "resnext 32x4 56x56": ConvShape(1, 128, 56, 56, 128, 3, 3, 1, 1, groups=32),
    "resnext 32x8 28x28": ConvShape(1, 256, 28, 28, 256, 3, 3, 1, 1, groups=32),
    "resnext 32x8 28x28 s2": ConvShape(1, 256, 56, 56, 256, 3, 3, 2, 1, groups=32),
    "2 groups of 64 28x28": ConvShape(1, 128, 28, 28, 128, 3, 3, 1, 1, groups=2),
    "4 groups of 64 14x14": ConvShape(1, 256, 14, 14, 256, 3, 3, 1, 1, groups=4),
}


def cycles(cs: ConvShape, dtype: DType, arch, group_packing: bool = True) -> tuple[int, int]:
    """(simulated cycles, groups per array tile) of ``cs`` as the search tiles it."""
    target = Target.of(arch)
    t = search_conv_tiling(cs, dtype, target, group_packing=group_packing)
    return simulate(conv2d(cs, dtype, target, t), arch, timing_only=True).cycles, t.gpack


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", nargs="+", default=list(presets_by_size()))
    ap.add_argument("--dtype", default="f32")
    args = ap.parse_args()
    dtype = DType.from_text(args.dtype)
    print(f"{'preset':8} {'shape':24} {'dense':>10} {'gpack=1':>10} {'x dense':>8} {'packed':>10} {'gpack':>5} "
          f"{'x dense':>8} {'speedup':>7}")
    for name in args.presets:
        arch = load_arch(name)
        for label, cs in SHAPES.items():
            dense, _ = cycles(replace(cs, groups=1), dtype, arch)
            before, _ = cycles(cs, dtype, arch, group_packing=False)
            after, gpack = cycles(cs, dtype, arch)
            print(f"{name:8} {label:24} {dense:>10,} {before:>10,} {before / dense:>8.2f} {after:>10,} {gpack:>5} "
                  f"{after / dense:>8.2f} {before / after:>7.2f}", flush=True)


if __name__ == "__main__":
    main()
