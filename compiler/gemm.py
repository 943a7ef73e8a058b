"""A hand-scheduled, double-buffered tiled GEMM: ``C[M,N] = A[M,K] @ B[K,N]``, the first lowering of the compiler.

DRAM: A and B row-major in their operand dtype, C row-major in the accumulator type (i32 for i8/u8, f32 for floats).
SPM: two A slots ``[tm][tk]`` and two B slots of pre-blocked array tiles ``[nb][kb][k][n]``. ACC: two tiles
``[nb][tm][cols]``. Four semaphores make DMA, the matrix unit and the store overlap by construction:
``ab_full``/``ab_empty`` (dma.ld <-> mxu, ring of 2) and ``acc_full``/``acc_empty`` (mxu <-> dma.st, ring of 2).
Ragged edges get their own instructions with smaller k / n / m, so any M, N, K works.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from isa import DmaCopy, DType, Halt, MatMul, Program, ProgramConfig, Queue, Region, SemDecl, SemOp, Space, View
from isa.dtypes import INT_RANGE, f32_to_bf16, to_compute

ACC_TYPE = {DType.I8: DType.I32, DType.U8: DType.I32, DType.F16: DType.F32, DType.BF16: DType.F32,
            DType.F32: DType.F32}


@dataclass(frozen=True)
class GemmTiling:
    """Tile sizes in elements: tm rows of A per tile, tk reduction depth, tn output columns."""

    tm: int
    tn: int
    tk: int


def choose_tiling(M: int, N: int, K: int, dtype: DType, rows: int, cols: int, spm: int, acc: int,
                  max_rows: int = 256) -> GemmTiling:
    """The largest tiles that fit two A/B slots in half the SPM and two accumulator tiles in the ACC."""
    es = dtype.size

    def up(x: int, q: int) -> int:
        return -(-x // q) * q

    tm = min(M, max_rows)
    tn = min(up(N, cols), cols * max(1, (acc // 2) // (tm * cols * 4)))
    while 2 * tm * up(tn, cols) * 4 > acc and tm > 1:
        tm = max(1, tm // 2)
    tk = up(K, rows)
    while tk > rows and 2 * (tm * tk + up(tk, rows) * up(tn, cols)) * es > spm // 2:
        tk -= rows
    if 2 * (tm * tk + up(tk, rows) * up(tn, cols)) * es > spm:
        tn = cols
    return GemmTiling(tm, min(tn, up(N, cols)), min(tk, up(K, rows)))


def _groups(total: int, block: int) -> list[tuple[int, int, int]]:
    """(first block index, count, size) runs of equal-sized blocks covering ``total``: full blocks, then the rest."""
    full, rest = divmod(total, block)
    return ([(0, full, block)] if full else []) + ([(full, 1, rest)] if rest else [])


def tiled_gemm(M: int, N: int, K: int, dtype: DType, rows: int, cols: int, spm: int, acc: int,
               tiling: GemmTiling | None = None, max_rows: int = 256) -> Program:
    """The program for ``C = A @ B`` on a ``rows x cols`` array with ``spm``/``acc`` bytes of SRAM."""
    t = tiling or choose_tiling(M, N, K, dtype, rows, cols, spm, acc, max_rows)
    es, at = dtype.size, ACC_TYPE[dtype]
    kb_max, nb_max = -(-t.tk // rows), -(-t.tn // cols)
    a_slot, b_slot = t.tm * t.tk * es, nb_max * kb_max * rows * cols * es
    acc_slot = nb_max * t.tm * cols * 4
    if 2 * (a_slot + b_slot) > spm or 2 * acc_slot > acc:
        raise ValueError(f"tiling {t} needs {2 * (a_slot + b_slot)} B of SPM and {2 * acc_slot} B of ACC")

    def a_buf(s):
        return s * a_slot

    def b_buf(s):
        return 2 * a_slot + s * b_slot

    prog: list = []
    ab, accs = 0, 0  # ring slot counters
    for m0 in range(0, M, t.tm):
        tm = min(t.tm, M - m0)
        for n0 in range(0, N, t.tn):
            tn = min(t.tn, N - n0)
            ngroups = _groups(tn, cols)
            k_tiles = list(range(0, K, t.tk))
            acc_base = (accs % 2) * acc_slot
            for ki, k0 in enumerate(k_tiles):
                tk = min(t.tk, K - k0)
                kgroups = _groups(tk, rows)
                slot = ab % 2
                # loads: A tile, then B blocked into array tiles (one copy per run of equal-sized blocks)
                loads = [DmaCopy(queue=Queue.DMA_LD, shape=(tm, tk),
                                 dst=View(Space.SPM, a_buf(slot), dtype, (tk * es, es)),
                                 src=View(Space.DRAM, (m0 * K + k0) * es, dtype, (K * es, es), "A"))]
                for nb0, nbc, n in ngroups:
                    for kb0, kbc, k in kgroups:
                        dst = View(Space.SPM, b_buf(slot) + (nb0 * kb_max + kb0) * rows * cols * es, dtype,
                                   (kb_max * rows * cols * es, rows * cols * es, n * es, es))
                        src = View(Space.DRAM, ((k0 + kb0 * rows) * N + n0 + nb0 * cols) * es, dtype,
                                   (cols * es, rows * N * es, N * es, es), "B")
                        loads.append(DmaCopy(queue=Queue.DMA_LD, shape=(nbc, kbc, k, n), dst=dst, src=src))
                loads[0] = _with(loads[0], waits=(SemOp("ab_empty"),))
                loads[-1] = _with(loads[-1], signals=(SemOp("ab_full"),))
                prog += loads
                # matmuls: loops [nb, kb], kb reduces (acc stride 0)
                mms = []
                for nb0, nbc, n in ngroups:
                    for kb0, kbc, k in kgroups:
                        mms.append(MatMul(
                            shape=(nbc, kbc), m=tm, k=k, n=n, zero=(ki == 0 and kb0 == 0),
                            acc=View(Space.ACC, acc_base + nb0 * t.tm * cols * 4, at, (t.tm * cols * 4, 0)),
                            acc_row=cols * 4,
                            a=View(Space.SPM, a_buf(slot) + kb0 * rows * es, dtype, (0, rows * es)), a_row=tk * es,
                            b=View(Space.SPM, b_buf(slot) + (nb0 * kb_max + kb0) * rows * cols * es, dtype,
                                   (kb_max * rows * cols * es, rows * cols * es))))
                first_waits = (SemOp("ab_full"),) + ((SemOp("acc_empty"),) if ki == 0 else ())
                last_sigs = (SemOp("ab_empty"),) + ((SemOp("acc_full"),) if ki == len(k_tiles) - 1 else ())
                mms[0] = _with(mms[0], waits=first_waits)
                mms[-1] = _with(mms[-1], signals=last_sigs)
                prog += mms
                ab += 1
            stores = [DmaCopy(queue=Queue.DMA_ST, shape=(nbc, tm, n),
                              dst=View(Space.DRAM, (m0 * N + n0 + nb0 * cols) * 4, at, (cols * 4, N * 4, 4), "C"),
                              src=View(Space.ACC, acc_base + nb0 * t.tm * cols * 4, at,
                                       (t.tm * cols * 4, cols * 4, 4)))
                      for nb0, nbc, n in ngroups]
            stores[0] = _with(stores[0], waits=(SemOp("acc_full"),))
            stores[-1] = _with(stores[-1], signals=(SemOp("acc_empty"),))
            prog += stores
            accs += 1
    prog.append(Halt())
    return Program(
        config=ProgramConfig(rows=rows, cols=cols, spm=spm, acc=acc),
        regions=(Region("A", 0, M * K * es), Region("B", 1, K * N * es), Region("C", 2, M * N * 4)),
        sems=(SemDecl("ab_full", 0), SemDecl("ab_empty", 2), SemDecl("acc_full", 0), SemDecl("acc_empty", 2)),
        instrs=tuple(prog))


def _with(instr, waits=None, signals=None):
    """``instr`` with extra waits/signals appended (the first/last instruction of a group carries the sync)."""
    import dataclasses

    return dataclasses.replace(instr, waits=instr.waits + (waits or ()), signals=instr.signals + (signals or ()))


def gemm_inputs(M: int, N: int, K: int, dtype: DType, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded random A (M x K) and B (K x N) in ``dtype``'s storage type, keyed by DRAM region name."""
    rng = np.random.default_rng(seed)
    if not dtype.is_float:
        lo, hi = INT_RANGE[dtype]
        return {"A": rng.integers(lo, hi + 1, (M, K)).astype(dtype.storage),
                "B": rng.integers(lo, hi + 1, (K, N)).astype(dtype.storage)}
    a, b = rng.standard_normal((M, K), np.float32), rng.standard_normal((K, N), np.float32)
    if dtype is DType.BF16:
        return {"A": f32_to_bf16(a), "B": f32_to_bf16(b)}
    return {"A": a.astype(dtype.storage), "B": b.astype(dtype.storage)}


def gemm_reference(inputs: dict[str, np.ndarray], dtype: DType) -> np.ndarray:
    """numpy's C = A @ B: exact int64 for integer operands (as int32), float64 then float32 for float operands."""
    a, b = to_compute(inputs["A"], dtype), to_compute(inputs["B"], dtype)
    if dtype.is_float:
        return (a.astype(np.float64) @ b.astype(np.float64)).astype(np.float32)
    return (a @ b).astype(np.int32)


def gemm_tolerance(K: int, dtype: DType, c_abs: np.ndarray) -> np.ndarray:
    """Elementwise bound on |npusim - reference| implied by fp32 accumulation of K products: K * eps32 * sum|a b|.

    ``c_abs`` is ``|A| @ |B|`` (the sum of absolute products); the products of f16/bf16/f32 inputs are exact in f32
    for f16/bf16 and rounded once for f32, and each of the K sequential additions rounds once.
    """
    return (K + 1) * np.finfo(np.float32).eps * c_abs
