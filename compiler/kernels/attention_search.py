"""The tiling search of the fused attention (:mod:`compiler.kernels.attention`): query rows and keys per block, and
whether a head's key and value tiles stay in the SPM.

Every tiling of the menus (with and without resident key tiles and the column of ones) that fits the SPM and the
accumulators is ranked by a closed form
(:meth:`AttentionSearch.rank`: the busiest of the vector unit, the matrix unit and the DRAM bus over the blocks the
mask leaves, one block's work priced by :func:`isa.cost.instr_costs`), and the best :data:`PRICED` are priced
exactly: the program's emitter run into an estimating sink (:func:`~compiler.kernels.attention.attention_estimate`,
:func:`isa.cost.program_estimate` of the program by construction). The least price wins (the better rank on a tie).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from compiler.errors import TilingError
from compiler.kernels.attention import (
    ES,
    RESIDENT_TILES,
    AttentionSpec,
    AttentionTiling,
    attention_estimate,
    layout,
)
from compiler.kernels.attention_mask import DEAD, ZERO, MaskInfo
from compiler.kernels.common.search import Ranking, SearchRule, TilingSearch, under_program_max
from compiler.kernels.common.sink import PriceMemo
from compiler.kernels.common.target import Target
from isa import Act, BinOp, DType, Reduce, Space, VecBinary, VecUnary, View
from isa.cost import dma_stream_bandwidth, instr_costs

PRICED = 8
"""Candidates, the best by the closed-form rank, that the search prices exactly."""
ROW_MENU = (512, 384, 256, 192, 128, 96, 64, 48, 32, 16, 8, 4, 2, 1)
"""Query rows per tile offered (at most ``matrix.max_rows``; ``Lq`` itself when it is fewer)."""
KEY_MENU = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64)
"""Keys per tile offered, in array columns (and ``Lk`` itself; fewer than a column when nothing else fits)."""


@dataclass(frozen=True)
class AttentionSearch(TilingSearch[AttentionTiling]):
    """The search for ``spec`` with ``mask`` on ``target`` (see the module docstring)."""

    spec: AttentionSpec
    target: Target
    mask: MaskInfo | None = None
    memo: PriceMemo = field(default_factory=PriceMemo, compare=False)
    rule: ClassVar[SearchRule] = SearchRule(PRICED)

    def menus(self) -> tuple[list[int], list[int]]:
        """The query-row and key counts offered."""
        s, tg = self.spec, self.target
        rows = sorted({min(s.lq, v) for v in (tg.max_rows,) + ROW_MENU if v <= tg.max_rows}, reverse=True)
        keys = {min(s.lk, tg.cols * k) for k in KEY_MENU}
        keys |= {min(s.lk, max(1, tg.cols >> i)) for i in range(1, tg.cols.bit_length())}
        return rows, sorted(keys, reverse=True)

    def rank(self, ranking: Ranking[AttentionTiling]) -> None:
        rows, keys = self.menus()
        per = {}   # per-block costs, by block shape
        for tq in rows:
            for tk in keys:
                counts = self._counts(tq, tk)
                if counts is None:
                    continue
                for resident, ones in ((False, False), (False, True), (True, False), (True, True)):
                    t = AttentionTiling(tq, tk, resident, ones)
                    if layout(self.spec, self.target, t, None, counts[1] > 0) is None or \
                            (resident and not self._resident_ok(t, counts)):
                        continue
                    if (tq, tk, ones) not in per:
                        per[tq, tk, ones] = self._block_costs(t)
                    ranking.offer(self._rough(t, counts, per[tq, tk, ones]), t)
        if not ranking:
            raise TilingError(f"no fused attention tiling of {self.spec.lq} x {self.spec.lk} (d {self.spec.d}) fits "
                              f"{self.target.spm} B of SPM and {self.target.acc} B of ACC")

    def price(self, candidate: AttentionTiling, bound: float | None) -> float:
        return attention_estimate(self.spec, self.target, candidate, self.mask, self.memo, bound)

    def _counts(self, tq: int, tk: int) -> tuple[int, int, int] | None:
        """(blocks computed, partial mask blocks among them, fewest blocks of a head) of tiling ``tq x tk``, or None
        when the program would be too long or a head would compute nothing."""
        s = self.spec
        nq, nk = -(-s.lq // tq), -(-s.lk // tk)
        if not under_program_max(2 * s.n * nq * nk):   # (too long even if the mask killed half the blocks)
            return None
        if self.mask is None:
            total, partial, fewest = s.n * nq * nk, 0, nq * nk
        else:
            kinds = self.mask.kinds(tq, tk)
            live = (kinds != DEAD).sum(axis=(1, 2))
            part = ((kinds != DEAD) & (kinds != ZERO)).sum(axis=(1, 2))
            of = np.asarray(self.mask.of)
            total, partial, fewest = int(live[of].sum()), int(part[of].sum()), int(live.min())
        if not under_program_max(4 * total) or fewest == 0:
            return None
        return total, partial, fewest

    def _resident_ok(self, t: AttentionTiling, counts: tuple[int, int, int]) -> bool:
        """Whether resident key tiles are worth offering: a head has several query tiles, each with a block."""
        return self.spec.lq > t.tq and -(-self.spec.lk // t.tk) <= RESIDENT_TILES and counts[2] >= 2

    def _block_costs(self, t: AttentionTiling) -> tuple[int, int, int, int]:
        """(vector, matrix, mask add, key and value load cycles) of one whole block of tiling ``t``: its instructions
        priced."""
        s, tg, tq, tk, w = self.spec, self.target, t.tq, t.tk, t.width(self.spec.dv)
        lay = layout(s, tg.with_spm(1 << 40), t, None, False)
        sv, pv = View(Space.ACC, 0, DType.F32, (tk * ES, ES)), View(Space.SPM, 0, DType.F32, (tk * ES, ES))
        col, vec = View(Space.SPM, 0, DType.F32, (ES, 0)), View(Space.SPM, 0, DType.F32, (ES,))
        ov = View(Space.ACC, 0, DType.F32, (w * ES, ES))
        shape, one = (tq, tk), (tq,)
        vector = [VecUnary(fn=Act.MOV, shape=one, dst=vec, src=vec),
                  VecUnary(fn=Act.MOV, reduce=Reduce.MAX, shape=shape, dst=col, src=sv),
                  VecBinary(op=BinOp.SUB, shape=shape, dst=pv, src0=sv, src1=col),
                  VecUnary(fn=Act.EXP, shape=shape, dst=pv, src=pv),
                  VecBinary(op=BinOp.SUB, shape=one, dst=vec, src0=vec, src1=vec),
                  VecUnary(fn=Act.EXP, shape=one, dst=vec, src=vec),
                  VecBinary(op=BinOp.MUL, shape=(tq, w), dst=ov, src0=ov, src1=col)]
        if not t.ones:
            vector += [VecUnary(fn=Act.MOV, reduce=Reduce.SUM, zero=True, shape=shape, dst=col, src=pv),
                       VecBinary(op=BinOp.MUL, shape=one, dst=vec, src0=vec, src1=vec),
                       VecBinary(op=BinOp.ADD, shape=one, dst=vec, src0=vec, src1=vec)]
        add = [VecBinary(op=BinOp.ADD, shape=shape, dst=sv, src0=sv, src1=pv)]
        matrix = lay.kop.matmuls(0, tk * ES, 0, s.d * ES, 0, tq, s.d, tk, True) + \
            lay.vop.matmuls(0, w * ES, 0, tk * ES, 0, tq, tk, w, False)
        loads = lay.kop.loads(0, "K", 0, s.lk * ES, s.d, tk) + lay.vop.loads(0, "V", 0, s.dv * ES, tk, s.dv, w)
        costs = self.memo.costs[False]
        cycles = [sum(c.cycles for c in instr_costs(g, tg.arch, costs)) for g in (vector, matrix, add, loads)]
        return cycles[0], cycles[1], cycles[2], cycles[3]

    def _rough(self, t: AttentionTiling, counts: tuple[int, int, int], per: tuple[int, int, int, int]) -> tuple:
        """The closed-form rank of ``t``: (cycles, blocks): the busiest of the vector unit, the matrix unit, the
        load queue (key and value tiles, per block or per head's tiles) and the DRAM bus, plus one block's work."""
        s, (total, partial, _), (vec, mat, add, kv_load) = self.spec, counts, per
        kv = (s.d + s.dv) * ES
        loaded = s.n * -(-s.lk // t.tk) if t.resident else total
        dram = s.n * s.lq * (s.d + s.dv) * ES + loaded * t.tk * kv + partial * t.tq * t.tk * ES
        bus = dram / dma_stream_bandwidth(self.target.arch)
        busy = max(total * vec + partial * add, total * mat, loaded * kv_load, bus)
        return (busy + vec + mat + kv_load, total)


def search_attention(spec: AttentionSpec, target: Target, mask: MaskInfo | None = None) -> AttentionTiling:
    """The tiling of ``spec`` (with ``mask``) on ``target``: :class:`AttentionSearch`'s choice. TilingError when none
    fits."""
    return AttentionSearch(spec, target, mask).choose()
