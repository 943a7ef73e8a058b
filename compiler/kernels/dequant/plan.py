"""One dequantizing GEMM's sizes and on-chip layout (:class:`DequantPlan`), for either scheme
(:mod:`compiler.kernels.dequant.format`).

Weight tiles are column-block-major in DRAM and in the SPM: ``[nb][tk][cols]`` (one byte per code; 4-bit codes two
a byte, ``[nb][tk][cols / 2]``, the byte at column j holding columns j and j + cols/2 of the block), which is the
weight-stationary layout ``[nb][kb][rows][cols]`` the matrix unit reads.

The ``array`` scheme feeds the array one K block at a time: with a block of at least ``rows`` codes (or per column)
each fold takes ``kq`` rows of one block (``kq`` = ``rows``, or the largest common divisor with the block); with a
block smaller than the array (``rows % block == 0``), ``g = rows / block`` blocks share a fold and A is laid out
block-diagonally, ``g`` rows per row of A, each holding one block's slice of it (zeros elsewhere), so the fold's ``g``
output rows are the ``g`` blocks' partial sums. Streaming ``g * tm`` rows instead of ``tm`` costs nothing while they
fit the fold's ``rows`` cycles (decode).
"""

from __future__ import annotations

import math

from compiler.errors import TilingError
from compiler.kernels.common.search import check_program_max
from compiler.kernels.common.target import Target
from compiler.kernels.dequant.format import DequantTiling, WeightFormat


def up(x: int, q: int) -> int:
    """``x`` rounded up to a multiple of ``q``."""
    return -(-x // q) * q


def fold_rows(fmt: WeightFormat, rows: int, scheme: str) -> tuple[int, int]:
    """(``kq``, ``g``): the k rows one fold takes and the K blocks it holds side by side (block-diagonal A)."""
    bs = fmt.block
    if scheme == "vector" or not bs or bs % rows == 0:
        return rows, 1
    if rows % bs == 0:
        return rows, rows // bs
    return math.gcd(bs, rows), 1


def k_quantum(fmt: WeightFormat, rows: int, scheme: str) -> int:
    """The least tk of a tiling: a multiple of the fold rows and of the block."""
    kq, _ = fold_rows(fmt, rows, scheme)
    return math.lcm(kq, fmt.block) if fmt.block else kq


def _check_target(fmt: WeightFormat, target: Target, t: DequantTiling) -> None:
    if target.dataflow != "ws":
        raise TilingError(f"the dequantizing GEMM runs under the ws dataflow only, not {target.dataflow}")
    if t.scheme not in fmt.schemes:
        raise TilingError(f"{fmt.kind} weights cannot take the {t.scheme} scheme (only {', '.join(fmt.schemes)})")
    need = ("f32", fmt.code_dtype.text) if t.scheme == "array" else ("f32",)
    lacking = [d for d in need if d not in target.arch.matrix.dtypes]
    if lacking:
        raise TilingError(f"the {t.scheme} scheme needs matrix.dtypes to hold {', '.join(lacking)}")
    if fmt.nibbles and target.cols % 2:
        raise TilingError("4-bit weights pair the columns of an array block: matrix.cols must be even")


class DequantPlan:
    """Sizes (elements), DRAM tile bytes and SPM/ACC slot bases (bytes) of one dequantizing GEMM; TilingError when
    ``t`` does not fit ``target``."""

    def __init__(self, M: int, N: int, K: int, fmt: WeightFormat, target: Target, t: DequantTiling) -> None:
        _check_target(fmt, target, t)
        r, c = target.rows, target.cols
        self.kq, self.g = fold_rows(fmt, r, t.scheme)
        if t.tk % k_quantum(fmt, r, t.scheme) or t.tn % c:
            raise TilingError(f"tiling {t}: tk must be a multiple of {k_quantum(fmt, r, t.scheme)}, tn of {c}")
        self.M, self.N, self.K, self.fmt, self.target, self.t = M, N, K, fmt, target, t
        self.array = t.scheme == "array"
        self.nbm = t.tn // c
        self.bs = fmt.block or t.tk                          # one scale row per bs k rows of a tile
        self.nblk = t.tk // self.bs
        self.m_tiles, self.k_tiles, self.n_tiles = -(-M // t.tm), -(-K // t.tk), -(-N // t.tn)
        check_program_max(self.m_tiles * self.n_tiles * self.k_tiles, t, f"a {M}x{N}x{K} dequantizing GEMM")
        self.q_bytes = t.tk * t.tn // fmt.codes_per_byte
        self.s_bytes = self.nblk * t.tn * 4
        self.has_z = fmt.per_block_zp   # (an image of zero points, or for the array scheme of -zp * scale)
        self.w_bytes = up(self.q_bytes, 64) + up(self.s_bytes, 64) * (1 + self.has_z)   # a tile of region Q
        self.whole_a, self.a_cols = False, t.tk
        self._layout()

    def _layout(self) -> None:
        """Place the rings (``name``: base, slot bytes, depth); the array scheme keeps all of an m tile's A when it
        fits (one load per m tile instead of one per step and n tile; one slot when there is one m tile), else one
        A tile per step."""
        t, target = self.t, self.target
        for whole in ((True, False) if self.array and self.k_tiles > 1 else (False,)):
            self.whole_a = whole
            self.a_cols = self.k_tiles * t.tk if whole else t.tk       # A's columns in a slot (its row pitch)
            rings, acc, rows = self._rings()
            bases, at = {}, 0
            for name, size, depth in rings:
                bases[name], at = at, at + depth * size
            if at <= target.spm and 2 * acc <= target.acc and rows <= target.max_rows:
                break
        else:
            raise TilingError(f"tiling {t} needs {at} B of SPM, {2 * acc} B of ACC and {rows} rows")
        self.acc_slot, self.base = acc, bases
        self.slots = {name: size for name, size, _ in rings}
        self.depth = {name: depth for name, _, depth in rings}

    def _rings(self) -> tuple[list[tuple[str, int, int]], int, int]:
        """(rings as (name, slot bytes, depth), ACC slot bytes, rows an ``mxu.mm`` streams)."""
        t, g = self.t, self.g
        a = ("a", up(g * t.tm * self.a_cols * 4, 64), 1 if self.whole_a and self.m_tiles == 1 else 2)
        if self.array:   # weight tiles in four slots, two per DMA queue (steps alternate between the queues)
            zt = self.fmt.zero_term   # (row sums [tm][blocks of A], and an ACC tile for the zero point's term)
            rs = up(t.tm * self.rs_pitch, 64) if zt else 0
            return ([a, ("q", self.w_bytes, 4), ("u", up(t.tk * t.tn, 64) if self.fmt.nibbles else 0, 2),
                     ("rs", rs, 2), ("c", up(t.tm * t.tn * 4, 64), 2)], (self.nblk + zt) * t.tm * t.tn * 4, g * t.tm)
        return ([a, ("q", self.w_bytes, 2), ("b", up(t.tk * t.tn * 4, 64), 2),
                 ("u", up(t.tk * t.tn, 64) if self.fmt.nibbles else 0, 1)], t.tm * t.tn * 4, t.tm)

    @property
    def rs_pitch(self) -> int:
        """Bytes of one row of A's block row sums (``[tm][blocks]``: every block of an A slot)."""
        return self.a_cols // self.bs * 4

    def slot(self, ring: str, i: int) -> int:
        """Byte address of slot ``i`` (modulo the ring's depth) of ring ``ring``."""
        return self.base[ring] + (i % self.depth[ring]) * self.slots[ring]
