"""Write a double-buffered tiled GEMM program (assembly) and its inputs for one Arch.

    python examples/make_gemm.py --M 96 --N 80 --K 112 --tile 32 32 48 --dtype i8 --arch edge16 -o examples/gemm_int8

writes ``gemm_int8.s`` (run it with ``npusim simulate``), ``gemm_int8.npz`` (inputs A and B, keyed by DRAM region)
and ``gemm_int8.expected.npy`` (numpy's C = A @ B).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from compiler.kernels.common.target import Target
from compiler.kernels.gemm import GemmTiling, gemm_inputs, gemm_reference, tiled_gemm
from isa import DType
from isa.arch import load_arch
from isa.files import write_program


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--M", type=int, default=96)
    ap.add_argument("--N", type=int, default=80)
    ap.add_argument("--K", type=int, default=112)
    ap.add_argument("--dtype", default="i8", choices=[d.text for d in DType if d.text in ("i8", "u8", "f16", "bf16",
                                                                                           "f32")])
    ap.add_argument("--arch", default="edge16")
    ap.add_argument("--tile", type=int, nargs=3, metavar=("TM", "TN", "TK"),
                    help="tile sizes in elements (default: the largest that fit the SRAM)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-o", "--output", default="examples/gemm")
    args = ap.parse_args()
    arch, dtype = load_arch(args.arch), DType.from_text(args.dtype)
    program = tiled_gemm(args.M, args.N, args.K, dtype, Target.of(arch), GemmTiling(*args.tile) if args.tile else None)
    inputs = gemm_inputs(args.M, args.N, args.K, dtype, args.seed)
    out = Path(args.output)
    write_program(program, out.with_suffix(".s"))
    np.savez(out.with_suffix(".npz"), **inputs)
    np.save(out.with_suffix(".expected.npy"), gemm_reference(inputs, dtype))
    print(f"wrote {out.with_suffix('.s')} ({len(program.instrs)} instructions), {out.with_suffix('.npz')}, "
          f"{out.with_suffix('.expected.npy')}")


if __name__ == "__main__":
    main()
