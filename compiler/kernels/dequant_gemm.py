"""``C = A @ dequant(Q)``: a GEMM whose constant weight stays quantized in DRAM (packed int4, or fp8 E4M3 bytes) and
is dequantized tile by tile in the scratchpad by the vector unit, just before the matrix unit reads it.

Weight formats (:class:`WeightFormat`):

- ``int4`` / ``uint4``: two 4-bit codes per byte, the earlier column in the low nibble (ONNX's int4 packing);
  per-block f32 scales along K (``block``) and optional per-block zero points. Unpacked by ``vpu.xor`` (int4 only:
  ``q ^ 8`` maps two's complement int4 onto 0..15, the offset subtracted again by the conversion), ``vpu.and`` (low
  nibble) and ``vpu.shr`` (high nibble) into one byte per code, then ``vpu.cvt`` to f32 minus the zero point (one
  value: ``zp_in``; per block: a ``vpu.sub`` of an f32 zero-point image), then ``vpu.mul`` by the block's scale.
  ``(q - zp) * scale`` is one f32 rounding, as onnxruntime computes it.
- ``fp8``: FLOAT8E4M3FN bytes, per-tensor or per-column scale: ``vpu.cvt`` i8 -> i32 (sign-extended), ``vpu.shl``
  20 and ``vpu.and 0x87FFFFFF`` put sign, exponent and mantissa into an f32 whose exponent is biased by 120 too
  little, ``vpu.mul 2**120`` rescales it exactly (subnormals included), then ``vpu.mul`` by the scale. NaN codes are
  refused by the caller (a weight has none).

The ISA has no 4-bit element type and needs none: DRAM holds the packed bytes as ``u8`` and the vector unit's
integer ops unpack them, each instruction priced by :mod:`isa.cost` like any other.

Dataflow ws only (every preset); the loop is m tiles, then n tiles, then k tiles; the weight tile of each step is
loaded and dequantized once per m tile (once in all when ``M`` fits one tile, as in decode)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from compiler.errors import TilingError
from compiler.kernels.common.pipeline import synced, with_sync
from compiler.kernels.common.search import check_program_max
from compiler.kernels.common.target import Target
from compiler.kernels.gemm import GemmTiling, WsLayout
from isa import BinOp, DmaCopy, DType, Halt, Program, Queue, Region, SemDecl, Space, VecBinary, VecConvert, View
from isa.cost import program_estimate

F32, U8, I8, I32 = DType.F32, DType.U8, DType.I8, DType.I32
FORMATS = ("int4", "uint4", "fp8")
FP8_RESCALE = float(2.0 ** 120)
"""2**(127 - 7): the f32 exponent bias less E4M3's."""


@dataclass(frozen=True)
class WeightFormat:
    """How the weight is quantized: ``kind`` (one of :data:`FORMATS`), the block size along K (elements; 0: one
    scale per column), and the zero point: ``zp`` one value for all, or ``per_block_zp`` (an f32 image)."""

    kind: str
    block: int
    zp: int = 0
    per_block_zp: bool = False

    @property
    def codes_per_byte(self) -> int:
        return 1 if self.kind == "fp8" else 2


@dataclass(frozen=True)
class DequantTiling:
    """Tile sizes (elements): ``tm`` rows of A, ``tn`` columns, ``tk`` reduction depth (a multiple of the array
    rows and of the block size)."""

    tm: int
    tn: int
    tk: int


def _up(x: int, q: int) -> int:
    return -(-x // q) * q


class _Plan:
    """One dequantizing GEMM's sizes and SPM layout (bytes)."""

    def __init__(self, M: int, N: int, K: int, fmt: WeightFormat, target: Target, t: DequantTiling) -> None:
        r, c = target.rows, target.cols
        if target.dataflow != "ws":
            raise TilingError(f"the dequantizing GEMM runs under the ws dataflow only, not {target.dataflow}")
        if t.tk % r or (fmt.block and t.tk % fmt.block) or t.tn % c:
            raise TilingError(f"tiling {t}: tk must be a multiple of {r} and of the block, tn of {c}")
        self.M, self.N, self.K, self.fmt, self.target, self.t = M, N, K, fmt, target, t
        self.nbm, self.kbm = t.tn // c, t.tk // r
        self.bs = fmt.block or t.tk                          # one scale row per bs k rows of a tile
        self.nblk = t.tk // self.bs
        self.k_tiles, self.n_tiles = -(-K // t.tk), -(-N // t.tn)
        check_program_max(-(-M // t.tm) * self.n_tiles * self.k_tiles, t, f"a {M}x{N}x{K} dequantizing GEMM")
        self.a_slot = _up(t.tm * t.tk * 4, 64)
        self.b_slot = _up(t.tk * t.tn * 4, 64)
        self.q_bytes = t.tk * t.tn // fmt.codes_per_byte
        self.s_bytes = self.nblk * t.tn * 4
        self.z_bytes = self.s_bytes if fmt.per_block_zp else 0
        self.q_slot = _up(self.q_bytes, 64) + _up(self.s_bytes, 64) + _up(self.z_bytes, 64)
        self.u_bytes = _up(t.tk * t.tn, 64) if fmt.kind != "fp8" else 0
        self.acc_slot = t.tm * t.tn * 4
        spm = 2 * (self.a_slot + self.b_slot + self.q_slot) + self.u_bytes
        if spm > target.spm or 2 * self.acc_slot > target.acc or t.tm > target.max_rows:
            raise TilingError(f"tiling {t} needs {spm} B of SPM and {2 * self.acc_slot} B of ACC")
        self.b0 = 2 * self.a_slot
        self.q0 = self.b0 + 2 * self.b_slot
        self.u0 = self.q0 + 2 * self.q_slot
        self.lay = WsLayout(4, F32, r, c, N, GemmTiling(t.tm, t.tn, t.tk), self.kbm, self.nbm, 0)


def _loads(p: _Plan, ni: int, ki: int, base: int) -> list:
    """dma.ld of tile (ni, ki)'s codes, scales (and zero points) into the q slot at ``base``."""
    t, tile = p.t, ni * p.k_tiles + ki
    c2 = t.tn // p.fmt.codes_per_byte
    out = [DmaCopy(queue=Queue.DMA_LD, shape=(t.tk, c2), dst=View(Space.SPM, base, U8, (c2, 1)),
                   src=View(Space.DRAM, tile * p.q_bytes, U8, (c2, 1), "Q"))]
    sb = base + _up(p.q_bytes, 64)
    out.append(DmaCopy(queue=Queue.DMA_LD, shape=(p.nblk, t.tn), dst=View(Space.SPM, sb, F32, (t.tn * 4, 4)),
                       src=View(Space.DRAM, tile * p.s_bytes, F32, (t.tn * 4, 4), "S")))
    if p.fmt.per_block_zp:
        zb = sb + _up(p.s_bytes, 64)
        out.append(DmaCopy(queue=Queue.DMA_LD, shape=(p.nblk, t.tn), dst=View(Space.SPM, zb, F32, (t.tn * 4, 4)),
                           src=View(Space.DRAM, tile * p.s_bytes, F32, (t.tn * 4, 4), "Z")))
    return out


def _blocked(p: _Plan, base: int, dtype: DType) -> View:
    """The column blocks of the B slot at ``base`` as ``[nb][nblk][bs][cols]`` (its ws layout ``[nb][kb][rows][cols]``
    is k-major rows)."""
    c, es = p.target.cols, dtype.size
    return View(Space.SPM, base, dtype, (p.kbm * p.target.rows * c * es, p.bs * c * es, c * es, es))


def _per_block(p: _Plan, base: int) -> View:
    """A ``[nblk][tn]`` f32 image at ``base`` broadcast over the block's rows, as ``[nb][nblk][bs][cols]``."""
    c, tn = p.target.cols, p.t.tn
    return View(Space.SPM, base, F32, (c * 4, tn * 4, 0, 4))


def _codes(p: _Plan, base: int, dtype: DType) -> View:
    """One byte per code, ``[tk][tn]`` at ``base``, as ``[nb][nblk][bs][cols]``."""
    c, tn = p.target.cols, p.t.tn
    return View(Space.SPM, base, dtype, (c, p.bs * tn, tn, 1))


def _to_f32(p: _Plan, qb: int, bb: int, nb: int) -> list:
    """The instructions that write the first ``nb`` column blocks of the f32 B slot at ``bb`` from the codes."""
    fmt, shape = p.fmt, (nb, p.nblk, p.bs, p.target.cols)
    sb = qb + _up(p.q_bytes, 64)
    scale = _per_block(p, sb)
    bf = _blocked(p, bb, F32)
    if fmt.kind == "fp8":
        bi = _blocked(p, bb, I32)
        return [VecConvert(shape=shape, dst=bi, src=_codes(p, qb, I8)),
                VecBinary(op=BinOp.SHL, shape=shape, dst=bi, src0=bi, imm=20),
                VecBinary(op=BinOp.AND, shape=shape, dst=bi, src0=bi, imm=0x87FFFFFF - 2**32),
                VecBinary(op=BinOp.MUL, shape=shape, dst=bf, src0=bf, imm=FP8_RESCALE),
                VecBinary(op=BinOp.MUL, shape=shape, dst=bf, src0=bf, src1=scale)]
    offset = 8 if fmt.kind == "int4" else 0
    ops = [VecConvert(shape=shape, dst=bf, src=_codes(p, p.u0, U8),
                      zp_in=offset + (0 if fmt.per_block_zp else fmt.zp))]
    if fmt.per_block_zp:
        ops.append(VecBinary(op=BinOp.SUB, shape=shape, dst=bf, src0=bf,
                             src1=_per_block(p, sb + _up(p.s_bytes, 64))))
    return ops + [VecBinary(op=BinOp.MUL, shape=shape, dst=bf, src0=bf, src1=scale)]


def _dequant(p: _Plan, qb: int, bb: int, tn: int) -> list:
    """The vector instructions turning the q slot at ``qb`` into the f32 B slot at ``bb`` (``tn`` columns, a multiple
    of the array columns: a ragged tile's extra columns have zero codes and scales, so zero weights), synced: from
    a full q slot and an empty B slot to an empty q slot and a full B slot."""
    t, ops = p.t, []
    if p.fmt.kind != "fp8":   # unpack the nibbles into one byte per code, [tk][tn] at u0
        half = t.tn // 2
        packed, pshape = View(Space.SPM, qb, U8, (half, 1)), (t.tk, half)
        if p.fmt.kind == "int4":   # two's complement nibbles -> q + 8 in 0..15 (XOR 8 on each nibble)
            ops.append(VecBinary(op=BinOp.XOR, shape=pshape, dst=packed, src0=packed, imm=0x88))
        ops += [VecBinary(op=BinOp.AND, shape=pshape, dst=View(Space.SPM, p.u0, U8, (t.tn, 2)), src0=packed,
                          imm=0x0F),
                VecBinary(op=BinOp.SHR, shape=pshape, dst=View(Space.SPM, p.u0 + 1, U8, (t.tn, 2)), src0=packed,
                          imm=4)]
    return synced(ops + _to_f32(p, qb, bb, tn // p.target.cols), ("q_full", "b_empty"),
                  ("q_empty", "b_full"))


def _matmuls(p: _Plan, acc: int, ab: int, bb: int, tm: int, tk: int, tn: int, waits: tuple[str, ...],
             signals: tuple[str, ...]) -> list:
    """A step's matrix work into the ACC tile at ``acc`` (zeroed first when ``waits`` takes an empty one), synced."""
    return synced(p.lay.matmuls(acc, ab, bb, tm, tk, tn, F32, "acc_empty" in waits), waits, signals)


def dequant_gemm(M: int, N: int, K: int, fmt: WeightFormat, target: Target, t: DequantTiling) -> Program:
    """The program; regions A (f32 ``M x K``), Q (codes, :func:`pack_codes`), S (scales, :func:`pack_blocks`), Z
    (zero points, when ``fmt.per_block_zp``), C (f32 ``M x N``). TilingError when ``t`` does not fit."""
    p = _Plan(M, N, K, fmt, target, t)
    c = target.cols
    instrs: list = []
    built: dict[tuple, list] = {}   # a step's dequantization and matrix work: few distinct runs, each built once

    def once(key: tuple, build, *args) -> list:   # (shared instructions: the linker copies each object once)
        got = built.get(key)
        if got is None:
            got = built[key] = build(*args)
        return got

    steps = [(m0, ni, ki) for m0 in range(0, M, t.tm) for ni in range(p.n_tiles) for ki in range(p.k_tiles)]
    a_n = tiles = 0
    for s, (m0, ni, ki) in enumerate(steps):
        tm, n0, k0 = min(t.tm, M - m0), ni * t.tn, ki * t.tk
        tn, tk = min(t.tn, N - n0), min(t.tk, K - k0)
        new_a = s == 0 or p.k_tiles > 1 or steps[s - 1][0] != m0
        nxt = steps[s + 1] if s + 1 < len(steps) else None
        last_a = nxt is None or p.k_tiles > 1 or nxt[0] != m0
        a_n += new_a
        ab, qb, bb = ((a_n - 1) % 2) * p.a_slot, p.q0 + (s % 2) * p.q_slot, p.b0 + (s % 2) * p.b_slot
        acc = (tiles % 2) * p.acc_slot
        if new_a:
            instrs.append(with_sync(DmaCopy(queue=Queue.DMA_LD, shape=(tm, tk),
                                            dst=View(Space.SPM, ab, F32, (tk * 4, 4)),
                                            src=View(Space.DRAM, (m0 * K + k0) * 4, F32, (K * 4, 4), "A")),
                                    waits=("a_empty",), signals=("a_full",)))
        instrs += synced(_loads(p, ni, ki, qb), ("q_empty",), ("q_full",))
        instrs += once(("dq", qb, bb, tn), _dequant, p, qb, bb, _up(tn, c))
        first, last = ki == 0, ki == p.k_tiles - 1
        waits = (("a_full",) if new_a else ()) + ("b_full",) + (("acc_empty",) if first else ())
        signals = (("a_empty",) if last_a else ()) + ("b_empty",) + (("acc_full",) if last else ())
        instrs += once(("mm", acc, ab, bb, tm, tk, tn, waits, signals), _matmuls, p, acc, ab, bb, tm, tk,
                       _up(tn, c), waits, signals)   # (ragged columns: zero weights)
        if last:
            instrs += synced(p.lay.stores(acc, m0, n0, tm, tn), ("acc_full",), ("acc_empty",))
            tiles += 1
    regions = (Region("A", 0, M * K * 4), Region("Q", 1, p.n_tiles * p.k_tiles * p.q_bytes),
               Region("S", 2, p.n_tiles * p.k_tiles * p.s_bytes), Region("C", 3, M * N * 4))
    regions += (Region("Z", 4, p.n_tiles * p.k_tiles * p.s_bytes),) if fmt.per_block_zp else ()
    sems = tuple(SemDecl(n, v) for n, v in (("a_full", 0), ("a_empty", 2), ("q_full", 0), ("q_empty", 2),
                                            ("b_full", 0), ("b_empty", 2), ("acc_full", 0), ("acc_empty", 2)))
    return Program(config=target.config, regions=regions, sems=sems, instrs=tuple(instrs) + (Halt(),))


def candidates(M: int, N: int, K: int, fmt: WeightFormat, target: Target) -> list[DequantTiling]:
    """Tilings to price: the largest tm, tn from one to eight array widths, tk from the whole (padded) K down to one
    step of the k quantum (the least multiple of the array rows and the block)."""
    r, c = target.rows, target.cols
    quantum = math.lcm(r, fmt.block) if fmt.block else r
    tm = min(M, target.max_rows)
    tks = sorted({min(_up(K, quantum), quantum * f) for f in (1, 2, 4, 8, 16, 32)}, reverse=True)
    tns = sorted({min(_up(N, c), c * f) for f in (1, 2, 4, 8)}, reverse=True)
    out = []
    for tm_ in (tm, max(1, tm // 2), max(1, tm // 4)):
        for tn in tns:
            for tk in tks:
                try:
                    _Plan(M, N, K, fmt, target, DequantTiling(tm_, tn, tk))
                except TilingError:
                    continue
                out.append(DequantTiling(tm_, tn, tk))
        if out:
            return out
    return out


@lru_cache(maxsize=256)
def search_dequant_tiling(M: int, N: int, K: int, fmt: WeightFormat, target: Target) -> DequantTiling:
    """The candidate whose program :func:`isa.cost.program_estimate` prices fastest (the first on a tie);
    TilingError when none fits. Each candidate's program is built, so a search takes seconds on an LLM's layers:
    kept per shape (a model repeats its layers' shapes), as :func:`compiler.kernels.gemm.search_tiling` is."""
    best = None
    for t in candidates(M, N, K, fmt, target):
        est = program_estimate(dequant_gemm(M, N, K, fmt, target, t), target.arch)
        if best is None or est < best[0]:
            best = (est, t)
    if best is None:
        raise TilingError(f"no dequantizing GEMM tiling fits {M}x{N}x{K} ({fmt.kind}, block {fmt.block})")
    return best[1]


def _tiles(a: np.ndarray, K: int, N: int, t: DequantTiling, rows_per: int) -> np.ndarray:
    """``a`` ([K/rows_per, N], padded with zeros) cut into tiles ``[n tile][k tile][tk/rows_per][tn]``."""
    kt, nt = -(-K // t.tk), -(-N // t.tn)
    pad = np.zeros((kt * t.tk // rows_per, nt * t.tn), a.dtype)
    pad[:a.shape[0], :a.shape[1]] = a
    return np.ascontiguousarray(pad.reshape(kt, t.tk // rows_per, nt, t.tn).transpose(2, 0, 1, 3))


def pack_codes(codes: np.ndarray, fmt: WeightFormat, t: DequantTiling) -> np.ndarray:
    """Region Q: the ``K x N`` codes (int4/uint4 values as integers, fp8 as their raw bytes) in tile order, two 4-bit
    codes per byte (the even column in the low nibble) or one fp8 byte each."""
    K, N = codes.shape
    tiles = _tiles(codes.astype(np.int64) & 0xFF, K, N, t, 1).astype(np.uint8)
    if fmt.kind == "fp8":
        return tiles.ravel()
    return ((tiles[..., 0::2] & 0x0F) | ((tiles[..., 1::2] & 0x0F) << 4)).astype(np.uint8).ravel()


def pack_blocks(values: np.ndarray, K: int, fmt: WeightFormat, t: DequantTiling) -> np.ndarray:
    """Region S or Z: per-block f32 values ``[ceil(K/block), N]`` (``[1, N]`` per column) as one row per block of
    each tile (per column: one per tile), in tile order."""
    values = np.asarray(values, np.float32)
    if not fmt.block:
        return _tiles(np.repeat(values, -(-K // t.tk), axis=0), K, values.shape[1], t, t.tk).ravel()
    return _tiles(values, K, values.shape[1], t, fmt.block).ravel()
