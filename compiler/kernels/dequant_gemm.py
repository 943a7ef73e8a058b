"""``C = A @ dequant(Q)``: a GEMM whose constant weight stays quantized in DRAM (packed int4/uint4, int8/uint8, or
fp8 E4M3 bytes; f32 scales per column or per block along K, optional zero points) and is applied tile by tile on
chip, by one of two schemes (:mod:`compiler.kernels.dequant.format`): the ``array`` scheme feeds the matrix unit one
byte per code and scales its per-block partial sums on the vector unit (LLM decode: the DRAM bus and the array's
weight loading bound it); the ``vector`` scheme dequantizes each weight tile to f32 on the vector unit (its work per
weight does not grow with M: prefill; fp8). The tiling search prices both through the programs they emit.

Parts: :mod:`~compiler.kernels.dequant.format` (formats, tilings, schemes), :mod:`~compiler.kernels.dequant.plan`
(sizes and SPM/ACC layout), :mod:`~compiler.kernels.dequant.images` (the DRAM images of codes, scales and zero
points), :mod:`~compiler.kernels.dequant.loads` (DMA), :mod:`~compiler.kernels.dequant.unpack` (the vector unit's
work on weight tiles), :mod:`~compiler.kernels.dequant.array_scheme`, :mod:`~compiler.kernels.dequant.vector_scheme`.

The ISA has no 4-bit element type and needs none: DRAM holds the packed bytes as ``u8`` and the vector unit's
integer ops unpack them, each instruction priced by :mod:`isa.cost` like any other. Dataflow ws only (every
preset)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import ClassVar

from compiler.errors import TilingError
from compiler.kernels.common.search import Ranking, SearchRule, TilingSearch
from compiler.kernels.common.target import Target
from compiler.kernels.dequant.array_scheme import array_program, array_step
from compiler.kernels.dequant.format import FORMATS, SCHEMES, DequantTiling, WeightFormat
from compiler.kernels.dequant.images import pack_weights, zero_rows
from compiler.kernels.dequant.plan import DequantPlan, k_quantum, up
from compiler.kernels.dequant.vector_scheme import vector_program, vector_step
from isa import Program, Queue
from isa.cost import instr_costs, program_estimate

__all__ = ["FORMATS", "SCHEMES", "DequantSearch", "DequantTiling", "WeightFormat", "candidates", "dequant_gemm",
           "floor_cycles",
           "pack_weights", "search_dequant_tiling", "zero_rows"]


def dequant_gemm(M: int, N: int, K: int, fmt: WeightFormat, target: Target, t: DequantTiling) -> Program:
    """The program; regions A (f32 ``M x K``), Q (the weight tiles: codes, scales and the scheme's zero-point image,
    :func:`pack_weights` with :func:`zero_rows`) and C (f32 ``M x N``). TilingError when ``t`` does not fit."""
    p = DequantPlan(M, N, K, fmt, target, t)
    return array_program(p) if p.array else vector_program(p)


def candidates(M: int, N: int, K: int, fmt: WeightFormat, target: Target) -> list[DequantTiling]:
    """Tilings to price, for each scheme the format takes: the largest tm (halved, then quartered, while none fits),
    tn from one to 32 array widths, tk from the whole (padded) K down to one k quantum
    (:func:`compiler.kernels.dequant.plan.k_quantum`)."""
    c, out = target.cols, []
    tns = sorted({min(up(N, c), c * f) for f in (1, 2, 4, 8, 16, 32)}, reverse=True)
    tm = min(M, target.max_rows)
    for scheme in fmt.schemes:
        quantum = k_quantum(fmt, target.rows, scheme)
        tks = sorted({min(up(K, quantum), quantum * f) for f in (1, 2, 4, 8, 16, 32)}, reverse=True)
        for tm_ in dict.fromkeys((tm, max(1, tm // 2), max(1, tm // 4))):
            fits = []
            for tn in tns:
                for tk in tks:
                    t = DequantTiling(tm_, tn, tk, scheme)
                    try:
                        DequantPlan(M, N, K, fmt, target, t)
                    except TilingError:
                        continue
                    fits.append(t)
            if fits:
                out += fits
                break
    return out


def floor_cycles(M: int, N: int, K: int, fmt: WeightFormat, target: Target, t: DequantTiling) -> int:
    """A lower bound of :func:`isa.cost.program_estimate` of the program of tiling ``t`` without building it: the
    matrix unit, the vector unit or the DRAM bus over its whole-tile steps, one step priced by
    :func:`isa.cost.instr_floor` and repeated (cycles; 0 when no step is a whole tile). (The DMA queues' own busy
    cycles are left out: steps alternate between them.)"""
    p = DequantPlan(M, N, K, fmt, target, t)
    step = array_step(p) if p.array else vector_step(p)
    busy = {Queue.MXU: 0, Queue.VPU: 0, None: 0}
    for instr, c in zip(step, instr_costs(step, target.arch, floor=True)):
        busy[None] += c.dram_window
        if instr.queue in busy:
            busy[instr.queue] += c.cycles
    return max(busy.values()) * (M // t.tm) * (N // t.tn) * (K // t.tk)


@dataclass(frozen=True)
class DequantSearch(TilingSearch[DequantTiling]):
    """The tiling search of a dequantizing GEMM (:mod:`compiler.kernels.common.search`): every candidate of
    :func:`candidates` (both schemes) is kept, in candidate order, with :func:`floor_cycles` as its lower bound;
    candidates are priced (:func:`isa.cost.program_estimate` of the program) least bound first until the bound of
    the next cannot beat the best price: the least price wins, the first of equal ones."""

    M: int
    N: int
    K: int
    fmt: WeightFormat
    target: Target
    rule: ClassVar[SearchRule] = SearchRule(priced=1 << 16)

    def rank(self, ranking: Ranking[DequantTiling]) -> None:
        cands = candidates(self.M, self.N, self.K, self.fmt, self.target)
        if not cands:
            raise TilingError(f"no dequantizing GEMM tiling fits {self.M}x{self.N}x{self.K} ({self.fmt.kind}, block "
                              f"{self.fmt.block})")
        for i, t in enumerate(cands):
            ranking.offer(i, t)

    @property
    def floors(self) -> tuple:
        return (lambda t, bound: floor_cycles(self.M, self.N, self.K, self.fmt, self.target, t),)

    def price(self, candidate: DequantTiling, bound: float | None) -> int:
        return program_estimate(dequant_gemm(self.M, self.N, self.K, self.fmt, self.target, candidate),
                                self.target.arch)


@lru_cache(maxsize=256)
def search_dequant_tiling(M: int, N: int, K: int, fmt: WeightFormat, target: Target) -> DequantTiling:
    """The candidate whose program :func:`isa.cost.program_estimate` prices fastest, the first on a tie
    (:class:`DequantSearch`: most candidates are never built, their lower bound above the best price); TilingError
    when none fits. Kept per shape (a model repeats its layers' shapes), as
    :func:`compiler.kernels.gemm.search_tiling` is."""
    return DequantSearch(M, N, K, fmt, target).choose()
