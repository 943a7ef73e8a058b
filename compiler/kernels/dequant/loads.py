"""The DMA instructions of a dequantizing GEMM: A tiles (row-major, or block-diagonal for the ``array`` scheme's
shared folds, :mod:`compiler.kernels.dequant.plan`), weight tiles (codes, scales, zero-point images) and C tiles."""

from __future__ import annotations

from compiler.kernels.dequant.plan import DequantPlan
from isa import DmaCopy, DmaFill, DType, Queue, Region, Space, View

F32, U8, I32 = DType.F32, DType.U8, DType.I32


def a_rows(p: DequantPlan, ab: int, m0: int, k0: int, tm: int, tk: int, tkq: int, pitch: int) -> list:
    """A ``[tm][tk]`` at ``ab`` (rows ``pitch`` elements apart), then zeros to ``tkq`` columns."""
    K = p.K
    out = [DmaCopy(queue=Queue.DMA_LD, shape=(tm, tk), dst=View(Space.SPM, ab, F32, (pitch * 4, 4)),
                   src=View(Space.DRAM, (m0 * K + k0) * 4, F32, (K * 4, 4), "A"))]
    return out + _zeros(ab + tk * 4, (tm, tkq - tk), (pitch * 4, 4))


def _zeros(base: int, shape: tuple[int, ...], strides: tuple[int, ...]) -> list:
    """A fill of f32 zeros over ``shape`` at SPM ``base`` (none when the shape is empty)."""
    if not all(shape):
        return []
    return [DmaFill(queue=Queue.DMA_LD, shape=shape, dst=View(Space.SPM, base, F32, strides), value=0.0)]


def a_diagonal(p: DequantPlan, ab: int, m0: int, k0: int, tm: int, tk: int) -> list:
    """A as ``[kb][j][T][rows]`` at ``ab``: row (kb, j, m) holds A[m, kb*rows + j*bs : ... + bs] at columns
    ``j*bs ...`` and zeros elsewhere (written once, :func:`zero_slots`), for the ``ceil(tk / rows)`` folds of a tile
    of ``tk`` columns: whole folds, then the whole blocks of the last fold, its partial block and zeros after it
    and in the blocks past ``tk``."""
    r, bs, g, T, K = p.target.rows, p.bs, p.g, p.t.tm, p.K
    fold, blk = g * T * r * 4, T * r * 4 + bs * 4                  # bytes from one fold / diagonal block to the next
    src = (m0 * K + k0) * 4
    full, rest = divmod(tk, bs)
    kbf, jf = divmod(full, g)
    out = []
    if kbf:
        out.append(DmaCopy(queue=Queue.DMA_LD, shape=(kbf, g, tm, bs), dst=View(Space.SPM, ab, F32,
                                                                               (fold, blk, r * 4, 4)),
                           src=View(Space.DRAM, src, F32, (r * 4, bs * 4, K * 4, 4), "A")))
    if not (jf or rest):
        return out
    at, src = ab + kbf * fold, src + kbf * r * 4
    if jf:
        out.append(DmaCopy(queue=Queue.DMA_LD, shape=(jf, tm, bs), dst=View(Space.SPM, at, F32, (blk, r * 4, 4)),
                           src=View(Space.DRAM, src, F32, (bs * 4, K * 4, 4), "A")))
    if rest:
        out.append(DmaCopy(queue=Queue.DMA_LD, shape=(tm, rest), dst=View(Space.SPM, at + jf * blk, F32,
                                                                         (r * 4, 4)),
                           src=View(Space.DRAM, src + jf * bs * 4, F32, (K * 4, 4), "A")))
        out += _zeros(at + jf * blk + rest * 4, (tm, bs - rest), (r * 4, 4))
    j0 = jf + bool(rest)
    return out + _zeros(at + j0 * blk, (g - j0, tm, bs), (blk, r * 4, 4))


def zero_slots(p: DequantPlan) -> list:
    """Zeros over the A slots (the off-diagonal of block-diagonal A tiles), in rows of 64 bytes."""
    out, at, rows = [], p.base["a"], p.depth["a"] * p.slots["a"] // 64
    while rows:
        n = min(rows, 0xFFFF)
        out.append(DmaFill(queue=Queue.DMA_LD, shape=(n, 16), dst=View(Space.SPM, at, I32, (64, 4)), value=0))
        at, rows = at + n * 64, rows - n
    return out


def weights(p: DequantPlan, tile: int, wb: int, queue: Queue = Queue.DMA_LD) -> list:
    """Weight tile ``tile`` of region Q (codes, scales, zero points: :func:`compiler.kernels.dequant.images
    .pack_weights`) into the slot at ``wb`` as it is: one contiguous copy of rows of 64 bytes (more when a tile has
    over 65535 rows)."""
    out, at, rows = [], 0, p.w_bytes // 64
    while rows:
        n = min(rows, 0xFFFF)
        out.append(DmaCopy(queue=queue, shape=(n, 64), dst=View(Space.SPM, wb + at, U8, (64, 1)),
                           src=View(Space.DRAM, tile * p.w_bytes + at, U8, (64, 1), "Q")))
        at, rows = at + n * 64, rows - n
    return out


def c_store(p: DequantPlan, cb: int, m0: int, n0: int, tm: int, tn: int) -> list:
    """The ``[tm][tn]`` C tile at SPM ``cb`` (rows ``t.tn`` apart) to region C."""
    N = p.N
    return [DmaCopy(queue=Queue.DMA_ST, shape=(tm, tn), dst=View(Space.DRAM, (m0 * N + n0) * 4, F32, (N * 4, 4), "C"),
                    src=View(Space.SPM, cb, F32, (p.t.tn * 4, 4)))]


def dram_regions(p: DequantPlan) -> tuple[Region, ...]:
    """Regions A (f32 ``M x K``), Q (the weight tiles) and C (f32 ``M x N``)."""
    return (Region("A", 0, p.M * p.K * 4), Region("Q", 1, p.n_tiles * p.k_tiles * p.w_bytes),
            Region("C", 3, p.M * p.N * 4))
