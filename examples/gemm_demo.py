"""The tiled GEMM on every preset in int8 and fp16: cycles, overlap and a check of every value against numpy."""

from __future__ import annotations

import numpy as np

from compiler.kernels.common.target import Target
from compiler.kernels.gemm import gemm_inputs, gemm_reference, gemm_tolerance, tiled_gemm
from isa import DType
from isa.arch import load_arch, preset_names
from isa.dtypes import to_compute
from npusim import simulate
from npusim.sim.simulator import region_array


def main(M: int = 200, N: int = 160, K: int = 300) -> None:
    print(f"C[{M}x{N}] = A[{M}x{K}] @ B[{K}x{N}], double-buffered tiles; 'serial' runs one instruction at a time")
    print(f"{'arch':8} {'dtype':5} {'instrs':>6} {'cycles':>9} {'serial':>9} {'overlap':>7} {'MAC util':>8} "
          f"{'max |err|':>9}  check")
    for name in preset_names():
        arch = load_arch(name)
        for dtype in (DType.I8, DType.F16):
            program = tiled_gemm(M, N, K, dtype, Target.of(arch))
            inputs = gemm_inputs(M, N, K, dtype)
            res = simulate(program, arch, inputs)
            ser = simulate(program, arch, inputs, serial=True)
            got = region_array(res, "C", DType.I32 if dtype is DType.I8 else DType.F32, (M, N))
            want = gemm_reference(inputs, dtype)
            same = np.array_equal(got, region_array(ser, "C", DType.F32 if dtype.is_float else DType.I32, (M, N)))
            err = np.abs(got.astype(np.float64) - want)
            if dtype.is_float:
                a, b = to_compute(inputs["A"], dtype), to_compute(inputs["B"], dtype)
                ok = bool((err <= gemm_tolerance(K, dtype, np.abs(a) @ np.abs(b))).all())
            else:
                ok = bool((err == 0).all())
            print(f"{name:8} {dtype.text:5} {len(program.instrs):>6} {res.cycles:>9,} {ser.cycles:>9,} "
                  f"{ser.cycles / res.cycles:>6.2f}x {res.mac_utilization(M * N * K):>8.1%} {err.max():>9.3g}  "
                  f"{'ok' if ok and same else 'MISMATCH'}{'' if same else ' (serial differs)'}")


if __name__ == "__main__":
    main()
