"""The driver: the only place (with the CLI) that joins the compiler and the simulator."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.gemm import gemm_inputs, gemm_reference, gemm_tolerance, tiled_gemm
from isa import DType
from isa.arch import Arch
from isa.dtypes import to_compute

from .simulator import SimResult, region_array, simulate


@dataclass
class Validation:
    """How a simulated result compares with the reference: max absolute/relative error and whether it is in bound."""

    max_abs_error: float
    max_rel_error: float
    ok: bool
    rule: str

    def to_dict(self) -> dict:
        return {"max_abs_error": self.max_abs_error, "max_rel_error": self.max_rel_error, "ok": self.ok,
                "rule": self.rule}


def run_gemm(M: int, N: int, K: int, dtype: DType, arch: Arch, *, timing_only: bool = False,
             seed: int = 0) -> tuple[SimResult, Validation | None]:
    """Compile ``C = A @ B`` for ``arch``, simulate it on seeded random inputs and check C against numpy."""
    program = tiled_gemm(M, N, K, dtype, arch.matrix.rows, arch.matrix.cols, arch.spm.size, arch.acc.size,
                         max_rows=arch.matrix.max_rows)
    inputs = None if timing_only else gemm_inputs(M, N, K, dtype, seed)
    result = simulate(program, arch, inputs, timing_only=timing_only)
    if timing_only:
        return result, None
    got = region_array(result, "C", DType.F32 if dtype.is_float else DType.I32, (M, N)).astype(np.float64)
    want = gemm_reference(inputs, dtype).astype(np.float64)
    err = np.abs(got - want)
    rel = float((err / np.maximum(np.abs(want), 1e-30)).max())
    if dtype.is_float:
        a, b = to_compute(inputs["A"], dtype).astype(np.float64), to_compute(inputs["B"], dtype).astype(np.float64)
        ok = bool((err <= gemm_tolerance(K, dtype, np.abs(a) @ np.abs(b))).all())
        rule = "|err| <= (K+1) * eps32 * (|A| @ |B|)"
    else:
        ok, rule = bool((err == 0).all()), "exact"
    return result, Validation(float(err.max()), rel, ok, rule)
