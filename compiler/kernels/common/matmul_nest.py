"""A loop nest of ``mxu.mm`` instructions: one matrix instruction loops over at most four dimensions, so a longer
loop is split into one instruction per point of its outer dimensions (the direct and transposed convolutions)."""

from __future__ import annotations

import math
from functools import cached_property
from typing import NamedTuple

from isa import DType, MatMul, Space, View
from isa.cost import matmul_cost_key

Dim = tuple[int, int, int, int]
"""One loop dimension: extent, then the byte strides of the accumulator, A and B operands."""


class MatMulNest(NamedTuple):
    """The ``mxu.mm`` instructions looping over ``dims`` (outermost first; made by :meth:`of`) from accumulator byte
    ``acc_base`` (ACC, in ``acc_type``) and A and B operands at SPM bytes ``a_base`` and ``b_base`` (in ``dtype``),
    the dims' strides added per point, each an ``m x k`` by ``k x n`` product (``acc_row``, ``a_row``: bytes between
    rows; ``zero``: start the accumulators at zero): one instruction per point of the dims beyond the innermost four.
    Every instruction of a nest costs the same (:func:`isa.cost.mxu_cost` reads no base): :meth:`first` times
    :attr:`count`."""

    dims: tuple[Dim, ...]
    acc_base: int
    a_base: int
    b_base: int
    acc_type: DType
    dtype: DType
    m: int
    k: int
    n: int
    zero: bool
    acc_row: int
    a_row: int

    @classmethod
    def of(cls, dims: tuple[Dim, ...], *fields) -> MatMulNest:
        """The nest over ``dims`` with their unit dimensions dropped (all but the innermost, if all are), then the
        other fields in order."""
        return cls(tuple(d for d in dims if d[0] > 1) or (dims[-1],), *fields)

    @property
    def count(self) -> int:
        """Instructions in the nest: the points of the dims split off."""
        return math.prod(d[0] for d in self.dims[:-4])

    @property
    def cost_key(self) -> tuple:
        """The :func:`isa.cost.instr_costs` memo key of every instruction of the nest
        (:func:`isa.cost.matmul_cost_key`), from its fields: a search looks their cost up without building them."""
        extents, acc, a, b = zip(*self.dims[-4:])
        return matmul_cost_key(extents, self.m, self.k, self.n, acc, a, b, self.dtype.size, self.zero)

    def first(self) -> MatMul:
        """The nest's first instruction (at the bases)."""
        return self._matmul(self.dims[-4:], self.acc_base, self.a_base, self.b_base)

    def instrs(self) -> list[MatMul]:
        """Every instruction of the nest, in loop order."""
        out: list[MatMul] = []
        self._split(out, self.dims, self.acc_base, self.a_base, self.b_base)
        return out

    def _split(self, out: list, dims: tuple[Dim, ...], acc: int, a: int, b: int) -> None:
        if len(dims) > 4:
            (e, sc, sa, sb), rest = dims[0], dims[1:]
            for i in range(e):
                self._split(out, rest, acc + i * sc, a + i * sa, b + i * sb)
            return
        out.append(self._matmul(dims, acc, a, b))

    def _matmul(self, dims: tuple[Dim, ...], acc: int, a: int, b: int) -> MatMul:
        extents, sc, sa, sb = zip(*dims)
        return MatMul(shape=extents, acc=View(Space.ACC, acc, self.acc_type, sc),
                      a=View(Space.SPM, a, self.dtype, sa), b=View(Space.SPM, b, self.dtype, sb),
                      m=self.m, k=self.k, n=self.n, zero=self.zero, acc_row=self.acc_row, a_row=self.a_row)


class MatMulNests(tuple):
    """The loop nests of one run of matrix work, in order (a tuple of :class:`MatMulNest`)."""

    @cached_property
    def instrs(self) -> list[MatMul]:
        """All their instructions, in order."""
        return [mm for nest in self for mm in nest.instrs()]
