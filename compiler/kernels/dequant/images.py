"""The DRAM image of a dequantizing GEMM's constant weight (region Q), in tile order (``[n tile][k tile]``), each tile
what one load copies into its SPM slot as it is: the codes, then the per-block scales, then the zero-point image of
the scheme when it reads one (:mod:`compiler.kernels.dequant.plan`), each part starting on a 64-byte boundary."""

from __future__ import annotations

import numpy as np

from compiler.kernels.dequant.format import DequantTiling, WeightFormat


def _tiles(a: np.ndarray, K: int, N: int, t: DequantTiling, rows_per: int) -> np.ndarray:
    """``a`` ([K/rows_per, N], padded with zeros) cut into tiles ``[n tile][k tile][tk/rows_per][tn]``."""
    kt, nt = -(-K // t.tk), -(-N // t.tn)
    pad = np.zeros((kt * t.tk // rows_per, nt * t.tn), a.dtype)
    pad[:a.shape[0], :a.shape[1]] = a
    return np.ascontiguousarray(pad.reshape(kt, t.tk // rows_per, nt, t.tn).transpose(2, 0, 1, 3))


def pack_codes(codes: np.ndarray, fmt: WeightFormat, t: DequantTiling, cols: int) -> np.ndarray:
    """The codes part, ``[tiles][tile bytes]``: the ``K x N`` codes (integers; fp8 as their raw bytes) plus the
    format's offset, tiles of ``[nb][tk][cols]`` bytes (``cols`` the array's), or for 4-bit codes
    ``[nb][tk][cols / 2]`` with columns j (low nibble) and j + cols/2 (high nibble) of a column block in byte j.
    Padding (beyond K or N) is code 0."""
    K, N = codes.shape
    tiles = _tiles((codes.astype(np.int64) + fmt.offset) & 0xFF, K, N, t, 1).astype(np.uint8)
    nt, kt, tk, tn = tiles.shape
    blocks = tiles.reshape(nt, kt, tk, tn // cols, cols).transpose(0, 1, 3, 2, 4)   # [nt][kt][nb][tk][cols]
    if fmt.nibbles:
        blocks = (blocks[..., :cols // 2] & 0x0F) | ((blocks[..., cols // 2:] & 0x0F) << 4)
    return np.ascontiguousarray(blocks, np.uint8).reshape(nt * kt, -1)


def pack_blocks(values: np.ndarray, K: int, fmt: WeightFormat, t: DequantTiling, cols: int) -> np.ndarray:
    """A per-block part, ``[tiles][nb * nblk * cols]`` f32: per-block values ``[ceil(K/block), N]`` (``[1, N]`` per
    column) as ``[nb][nblk][cols]`` per tile, one row per block of the tile (per column: one per tile) and column
    block (so that a column block's rows are the k x n operand of an ``mxu.mm``)."""
    values = np.asarray(values, np.float32)
    if not fmt.block:
        tiles = _tiles(np.repeat(values, -(-K // t.tk), axis=0), K, values.shape[1], t, t.tk)
    else:
        tiles = _tiles(values, K, values.shape[1], t, fmt.block)
    nt, kt, nblk, tn = tiles.shape
    blocks = tiles.reshape(nt, kt, nblk, tn // cols, cols).transpose(0, 1, 3, 2, 4)
    return np.ascontiguousarray(blocks).reshape(nt * kt, -1)


def pack_weights(codes: np.ndarray, scales: np.ndarray, zero: np.ndarray | None, fmt: WeightFormat,
                 t: DequantTiling, cols: int) -> np.ndarray:
    """Region Q (uint8): per tile its codes (:func:`pack_codes`), scales and, when not None, zero-point image
    (:func:`pack_blocks`; :func:`zero_rows`), each part padded to 64 bytes."""
    K = codes.shape[0]
    parts = [pack_codes(codes, fmt, t, cols)] + [pack_blocks(v, K, fmt, t, cols).view(np.uint8)
                                                for v in (scales, zero) if v is not None]
    pad = [np.pad(a, ((0, 0), (0, -a.shape[1] % 64))) for a in parts]
    return np.ascontiguousarray(np.concatenate(pad, axis=1)).ravel()


def zero_rows(fmt: WeightFormat, scheme: str, scales: np.ndarray, zero_points: np.ndarray | None) -> np.ndarray | None:
    """The f32 rows ``[blocks, N]`` of region Z for per-block zero points (None otherwise: a uniform zero point is
    an immediate): the stored codes' zero points (``vector`` scheme), or ``-zp * scale`` (``array`` scheme: the
    factor of ``rowsum(A_blk)``)."""
    if not fmt.per_block_zp:
        return None
    zp = np.asarray(zero_points, np.float32) + np.float32(fmt.offset)
    return zp if scheme == "vector" else np.ascontiguousarray(-zp * np.asarray(scales, np.float32), np.float32)
