"""A loop nest of ``mxu.mm`` instructions: one matrix instruction loops over at most four dimensions, so a longer
loop is split into one instruction per point of its outer dimensions (the direct and transposed convolutions)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from isa import MatMul, View

Dim = tuple[int, int, int, int]
"""One loop dimension: extent, then the byte strides of the accumulator, A and B operands."""


@dataclass(frozen=True)
class MatMulNest:
    """The ``mxu.mm`` instructions looping over ``dims`` (outermost first) from the bases of ``acc``, ``a`` and ``b``
    (their strides are the dims'), each an ``m x k`` by ``k x n`` product (``acc_row``, ``a_row``: bytes between
    rows; ``zero``: start the accumulators at zero): unit dimensions are dropped, then the outermost ones split off
    (one instruction per point) while more than four remain. Every instruction of a nest costs the same
    (:func:`isa.cost.mxu_cost` reads no base): :attr:`first` times :attr:`count`."""

    dims: tuple[Dim, ...]
    acc: View
    a: View
    b: View
    m: int
    k: int
    n: int
    zero: bool
    acc_row: int
    a_row: int

    @cached_property
    def kept(self) -> tuple[Dim, ...]:
        """The dims of extent above 1 (or the innermost one, if none is)."""
        return tuple(d for d in self.dims if d[0] > 1) or (self.dims[-1],)

    @property
    def count(self) -> int:
        """Instructions in the nest: the points of the dims split off."""
        return math.prod(d[0] for d in self.kept[:-4])

    @cached_property
    def first(self) -> MatMul:
        """The nest's first instruction (at the views' bases)."""
        return self._matmul(self.kept[-4:], self.acc.base, self.a.base, self.b.base)

    @cached_property
    def instrs(self) -> list[MatMul]:
        """Every instruction of the nest, in loop order."""
        out: list[MatMul] = []
        self._split(out, self.kept, self.acc.base, self.a.base, self.b.base)
        return out

    def _split(self, out: list, dims: tuple[Dim, ...], acc: int, a: int, b: int) -> None:
        if len(dims) > 4:
            (e, sc, sa, sb), rest = dims[0], dims[1:]
            for i in range(e):
                self._split(out, rest, acc + i * sc, a + i * sa, b + i * sb)
            return
        out.append(self._matmul(dims, acc, a, b))

    def _matmul(self, dims: tuple[Dim, ...], acc: int, a: int, b: int) -> MatMul:
        va, vb, vc = self.a, self.b, self.acc
        return MatMul(shape=tuple(d[0] for d in dims),
                      acc=View(vc.space, acc, vc.dtype, tuple(d[1] for d in dims), vc.region),
                      a=View(va.space, a, va.dtype, tuple(d[2] for d in dims), va.region),
                      b=View(vb.space, b, vb.dtype, tuple(d[3] for d in dims), vb.region),
                      m=self.m, k=self.k, n=self.n, zero=self.zero, acc_row=self.acc_row, a_row=self.a_row)
