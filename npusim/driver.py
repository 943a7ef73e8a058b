"""The driver: the only place (with the CLI) that joins the compiler and the simulator."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from compiler.conv import ConvShape, conv2d, conv_inputs, conv_reference
from compiler.gemm import ACC_TYPE, GemmTiling, gemm_inputs, gemm_reference, gemm_tolerance, slot_bytes, tiled_gemm
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


def ideal_memory_arch(M: int, N: int, K: int, dtype: DType, arch: Arch) -> Arch:
    """``arch`` with SRAMs large enough for the whole GEMM in one tile and ``matrix.max_rows >= M``.

    This is SCALE-Sim's ideal-memory setting: every operand is on chip, so each fold streams the whole M (ws), K (os)
    or N (is) and the matrix unit's cycles can be compared with SCALE-Sim's.
    """
    a, b, acc = slot_bytes(GemmTiling(M, N, K), dtype, arch.matrix.rows, arch.matrix.cols, arch.matrix.dataflow)

    def line(mem, need: int) -> int:
        q = mem.banks * mem.bank_width
        return max(mem.size, -(-need // q) * q)

    return arch.with_overrides([f"spm.size={line(arch.spm, 2 * (a + b))}", f"acc.size={line(arch.acc, 2 * acc)}",
                                f"matrix.max_rows={max(M, arch.matrix.max_rows)}"])


def run_gemm(M: int, N: int, K: int, dtype: DType, arch: Arch, *, timing_only: bool = False,
             ideal_memory: bool = False, seed: int = 0) -> tuple[SimResult, Validation | None]:
    """Compile ``C = A @ B`` for ``arch``, simulate it on seeded random inputs and check C against numpy.

    ideal_memory: the whole GEMM is one tile in SRAMs sized to hold it, and data movement is free (see
    :func:`ideal_memory_arch`); the matrix unit's busy cycles then follow SCALE-Sim's accounting.
    """
    tiling = None
    if ideal_memory:
        arch, tiling = ideal_memory_arch(M, N, K, dtype, arch), GemmTiling(M, N, K)
    program = tiled_gemm(M, N, K, dtype, arch.matrix.rows, arch.matrix.cols, arch.spm.size, arch.acc.size, tiling,
                         arch.matrix.max_rows, arch.matrix.dataflow)
    inputs = None if timing_only else gemm_inputs(M, N, K, dtype, seed)
    result = simulate(program, arch, inputs, timing_only=timing_only, ideal_memory=ideal_memory)
    if timing_only:
        return result, None
    got = region_array(result, "C", DType.F32 if dtype.is_float else DType.I32, (M, N))
    bound = None
    if dtype.is_float:
        a, b = to_compute(inputs["A"], dtype).astype(np.float64), to_compute(inputs["B"], dtype).astype(np.float64)
        bound = gemm_tolerance(K, dtype, np.abs(a) @ np.abs(b))
    return result, _validate(got, gemm_reference(inputs, dtype), bound)


def _validate(got: np.ndarray, want: np.ndarray, bound: np.ndarray | None) -> Validation:
    """Exact comparison (``bound`` None) or elementwise ``|got - want| <= bound``."""
    got, want = got.astype(np.float64), want.astype(np.float64)
    err = np.abs(got - want)
    rel = float((err / np.maximum(np.abs(want), 1e-30)).max()) if err.size else 0.0
    if bound is None:
        return Validation(float(err.max(initial=0)), rel, bool((err == 0).all()), "exact")
    return Validation(float(err.max(initial=0)), rel, bool((err <= bound).all()),
                      "|err| <= (K+1) * eps32 * sum|products| (fp32 accumulation of K products)")


def run_conv(cs: ConvShape, dtype: DType, arch: Arch, *, timing_only: bool = False, ideal_memory: bool = False,
             seed: int = 0) -> tuple[SimResult, Validation | None]:
    """Compile one convolution for ``arch``, simulate it on seeded random inputs and check Y against numpy."""
    r, c = arch.matrix.rows, arch.matrix.cols
    program = conv2d(cs, dtype, r, c, arch.spm.size, arch.acc.size, max_rows=arch.matrix.max_rows)
    inputs, x, w = conv_inputs(cs, dtype, r, c, seed)
    result = simulate(program, arch, None if timing_only else inputs, timing_only=timing_only,
                      ideal_memory=ideal_memory)
    if timing_only:
        return result, None
    got = region_array(result, "Y", ACC_TYPE[dtype], (cs.N, cs.OH, cs.OW, cs.K)).transpose(0, 3, 1, 2)
    xs, ws = to_compute(x, dtype), to_compute(w, dtype)
    want = conv_reference(xs, ws, cs)
    bound = None
    if dtype.is_float:
        bound = (cs.Cg * cs.R * cs.S + 1) * np.finfo(np.float32).eps * conv_reference(np.abs(xs), np.abs(ws), cs)
    return result, _validate(got, want, bound)


def run_topology(layers, arch: Arch, *, dtype: DType = DType.I8, ideal_memory: bool = False,
                 progress=None) -> dict:
    """Simulate every layer's GEMM view (timing only) in one process; per-layer and total cycles.

    Returns the JSON-ready report: ``cycles`` (sum over layers), ``layers[]`` with ``name, M, N, K, cycles, macs,
    units`` and ``wall_seconds``.
    """
    import time

    t0 = time.perf_counter()
    out = []
    for layer in layers:
        res, _ = run_gemm(layer.M, layer.N, layer.K, dtype, arch, timing_only=True, ideal_memory=ideal_memory)
        out.append({"name": layer.name, "M": layer.M, "N": layer.N, "K": layer.K, "cycles": res.cycles,
                    "macs": res.macs, "matrix_utilization": res.matrix_utilization,
                    "units": {u.name: u.to_dict(res.cycles) for u in res.units}})
        if progress is not None:
            progress(out[-1])
    return {"cycles": sum(x["cycles"] for x in out), "layers": out, "arch": arch.to_dict(),
            "ideal_memory": ideal_memory, "wall_seconds": time.perf_counter() - t0}
