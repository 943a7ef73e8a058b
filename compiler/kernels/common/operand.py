"""One product ``C[m][n] (+)= A[m][k] @ B[k][n]`` on the matrix unit with the result row-major in the accumulators (one
row every ``acc_row`` bytes), for any dataflow: :class:`BOperand` says how a ``B`` tile of at most ``k_max x n_max``
elements lies in an SPM slot, loads it from a row-major DRAM matrix and emits the ``mxu.mm`` instructions.

The layouts are the GEMM's (:mod:`compiler.kernels.gemm`), sized by the tile rather than by whole array tiles:

- ws: B in blocks ``[nb][kb][k][n]`` of ``kblk x nblk`` (``min(rows, k_max) x min(cols, n_max)``); ``mxu.mm`` loops
  ``[nb, kb]`` and streams the m rows of A;
- os: B as rows ``[nb][k][nblk]``; ``mxu.mm`` with k = 1 loops ``[nb, q < k]`` into the same rows;
- is: B transposed per row block ``[kb][n][pitch]``; ``mxu.mm`` with n = 1 loops ``[kb, j < n]`` over one A block.

A is ``m`` rows of ``k`` contiguous elements, ``a_row`` bytes apart (the ISA's A operand). Ragged edges are runs of
their own (:func:`~compiler.kernels.common.blocks.equal_blocks`), so any k and n up to the maxima work. A tile may be
loaded narrower than the products read it (``width``), its other columns set once by :meth:`BOperand.fill_column`
(a column of ones makes the product's last column the rows' sums).
"""

from __future__ import annotations

from dataclasses import dataclass

from compiler.kernels.common.blocks import equal_blocks
from compiler.kernels.gemm import is_pitch
from isa import DmaCopy, DmaFill, DType, MatMul, Queue, Space, View

F32 = DType.F32


@dataclass(frozen=True)
class BOperand:
    """Where a B tile of at most ``k_max x n_max`` f32 elements lies in its SPM slot under ``dataflow`` on a
    ``rows x cols`` array (``bank_width``: the SPM's, for the ``is`` column pitch)."""

    dataflow: str
    rows: int
    cols: int
    k_max: int
    n_max: int
    bank_width: int

    @property
    def kblk(self) -> int:
        return min(self.rows, self.k_max)

    @property
    def nblk(self) -> int:
        return min(self.cols, self.n_max)

    @property
    def pitch(self) -> int:
        """``is``: bytes between two B columns (one row block of the array)."""
        return is_pitch(self.kblk, F32.size, self.bank_width)

    @property
    def slot_bytes(self) -> int:
        """Bytes of one SPM slot holding a tile."""
        nb, kb = -(-self.n_max // self.cols), -(-self.k_max // self.rows)
        if self.dataflow == "ws":
            return nb * kb * self.kblk * self.nblk * F32.size
        if self.dataflow == "os":
            return nb * self.k_max * self.nblk * F32.size
        return kb * self.n_max * self.pitch

    def loads(self, base: int, region: str, offset: int, row: int, k: int, n: int,
              width: int | None = None) -> list[DmaCopy]:
        """The DMAs of a ``k x n`` tile of the row-major DRAM matrix at ``region + offset`` (``row`` bytes between
        its rows) into the slot at SPM byte ``base``, laid out as the products of a tile ``width`` columns wide read
        it (default ``n``; columns from ``n`` on are left as they are)."""
        es, r, c = F32.size, self.rows, self.cols
        out = []
        if self.dataflow == "ws":
            kbm, blk = -(-self.k_max // r), self.kblk * self.nblk * es
            for nb0, nbc, pitch, nn in _loaded_runs(width or n, n, c):
                for kb0, kbc, kk in equal_blocks(k, r):   # (row by row: long DRAM runs)
                    out.append(DmaCopy(queue=Queue.DMA_LD, shape=(kbc, kk, nbc, nn),
                                       dst=View(Space.SPM, base + (nb0 * kbm + kb0) * blk, F32,
                                                (blk, pitch * es, kbm * blk, es)),
                                       src=View(Space.DRAM, offset + kb0 * r * row + nb0 * c * es, F32,
                                                (r * row, row, c * es, es), region)))
        elif self.dataflow == "os":
            per = self.k_max * self.nblk * es
            for nb0, nbc, nn in equal_blocks(n, c):
                out.append(DmaCopy(queue=Queue.DMA_LD, shape=(k, nbc, nn),
                                   dst=View(Space.SPM, base + nb0 * per, F32, (self.nblk * es, per, es)),
                                   src=View(Space.DRAM, offset + nb0 * c * es, F32, (row, c * es, es), region)))
        else:
            per, p = self.n_max * self.pitch, self.pitch
            for kb0, kbc, kk in equal_blocks(k, r):
                out.append(DmaCopy(queue=Queue.DMA_LD, shape=(kbc, kk, n),
                                   dst=View(Space.SPM, base + kb0 * per, F32, (per, es, p)),
                                   src=View(Space.DRAM, offset + kb0 * r * row, F32, (r * row, row, es), region)))
        return out

    def fill_column(self, base: int, j: int, value: float) -> list[DmaFill]:
        """``dma.ld.fill`` of column ``j`` of the slot at SPM byte ``base`` (all ``k_max`` rows) with ``value``, as
        the products of a tile ``n_max`` columns wide read it."""
        es, r, c = F32.size, self.rows, self.cols
        kbm = -(-self.k_max // r)
        if self.dataflow == "ws":
            blk, nb = self.kblk * self.nblk * es, j // c
            pitch = min(c, self.n_max - nb * c)
            dst = View(Space.SPM, base + nb * kbm * blk + (j % c) * es, F32, (blk, pitch * es))
            return [DmaFill(queue=Queue.DMA_LD, shape=(kbm, self.kblk), dst=dst, value=value)]
        if self.dataflow == "os":
            per = self.k_max * self.nblk * es
            dst = View(Space.SPM, base + (j // c) * per + (j % c) * es, F32, (self.nblk * es,))
            return [DmaFill(queue=Queue.DMA_LD, shape=(self.k_max,), dst=dst, value=value)]
        dst = View(Space.SPM, base + j * self.pitch, F32, (self.n_max * self.pitch, es))
        return [DmaFill(queue=Queue.DMA_LD, shape=(kbm, self.kblk), dst=dst, value=value)]

    def matmuls(self, acc: int, acc_row: int, a: int, a_row: int, b: int, m: int, k: int, n: int,
                zero: bool) -> list[MatMul]:
        """``C (+)= A @ B`` for an ``m x k`` A at SPM byte ``a`` (``a_row`` bytes between rows) and the ``k x n``
        tile in the slot at ``b``, into C at ACC byte ``acc`` (``acc_row`` bytes between rows); ``zero``: C starts
        at zero."""
        es, r, c = F32.size, self.rows, self.cols
        out = []
        if self.dataflow == "ws":
            kbm, blk = -(-self.k_max // r), self.kblk * self.nblk * es
            for nb0, nbc, nn in equal_blocks(n, c):
                for kb0, kbc, kk in equal_blocks(k, r):
                    out.append(MatMul(shape=(nbc, kbc), m=m, k=kk, n=nn, zero=zero and kb0 == 0,
                                      acc=View(Space.ACC, acc + nb0 * c * 4, F32, (c * 4, 0)), acc_row=acc_row,
                                      a=View(Space.SPM, a + kb0 * r * es, F32, (0, r * es)), a_row=a_row,
                                      b=View(Space.SPM, b + (nb0 * kbm + kb0) * blk, F32, (kbm * blk, blk))))
        elif self.dataflow == "os":
            per = self.k_max * self.nblk * es
            for nb0, nbc, nn in equal_blocks(n, c):
                out.append(MatMul(shape=(nbc, k), m=m, k=1, n=nn, zero=zero,
                                  acc=View(Space.ACC, acc + nb0 * c * 4, F32, (c * 4, 0)), acc_row=acc_row,
                                  a=View(Space.SPM, a, F32, (0, es)), a_row=a_row,
                                  b=View(Space.SPM, b + nb0 * per, F32, (per, self.nblk * es))))
        else:
            per, p = self.n_max * self.pitch, self.pitch
            for kb0, kbc, kk in equal_blocks(k, r):
                out.append(MatMul(shape=(kbc, n), m=m, k=kk, n=1, zero=zero and kb0 == 0,
                                  acc=View(Space.ACC, acc, F32, (0, 4)), acc_row=acc_row,
                                  a=View(Space.SPM, a + kb0 * r * es, F32, (r * es, 0)), a_row=a_row,
                                  b=View(Space.SPM, b + kb0 * per, F32, (per, p))))
        return out


def _loaded_runs(width: int, n: int, c: int) -> list[tuple[int, int, int, int]]:
    """(first block, blocks, row pitch, columns loaded) of the column blocks of a ws tile ``width`` columns wide of
    which the first ``n`` are loaded: the runs of :func:`equal_blocks`, a block whose loaded part is narrower than
    its pitch on its own, blocks with nothing loaded left out."""
    out = []
    for nb0, nbc, pitch in equal_blocks(width, c):
        full = max(0, min(nbc, (n - nb0 * c) // pitch))   # blocks of the run loaded whole
        if full:
            out.append((nb0, full, pitch, pitch))
        if full < nbc and n - (nb0 + full) * c > 0:
            out.append((nb0 + full, 1, pitch, n - (nb0 + full) * c))
    return out
