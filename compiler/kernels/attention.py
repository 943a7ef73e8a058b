"""Fused attention, flash style: ``O = softmax(scale * Q @ K + mask) @ V`` per head without the ``[Lq x Lk]`` scores
ever leaving the chip (the ``FusedAttention`` node of :mod:`compiler.passes.fuse_attention`).

Per head ``h`` (the leading dims flattened) and tile of ``tq`` query rows, the key tiles of ``tk`` keys are walked
in order (:func:`blocks`), skipping those the mask kills entirely (:mod:`compiler.kernels.attention_mask`: the tiles
above a causal diagonal). One block (a query tile, a key tile):

1. matrix unit: ``S = Q_tile @ K_tile`` into an accumulator buffer (Q pre-scaled once per query tile on the vector
   unit: ``Q * scale``, or ``Q / c`` for a Div; exact when the scale is a power of two);
2. vector unit, online softmax: ``S += mask`` (a partial block), the running row maximum ``m_new = max(m_old,
   rowmax(S))``, ``P = exp(S - m_new)`` into the SPM, ``l_blk = rowsum(P)``, ``alpha = exp(m_old - m_new)``,
   ``l = l * alpha + l_blk`` and the output accumulators ``O *= alpha`` (the first block of a tile just sets them);
3. matrix unit: ``O += P @ V_tile`` (the first block of a tile starts O at zero).

After a tile's last block ``O *= 1 / l`` in the accumulators and O is stored. The row maximum starts at
``-FLT_MAX`` when there is a mask, so a block whose rows are all ``-inf`` gives weights 0, not NaN.

Pipelining: the blocks are one stream over all heads and tiles; loads run two blocks ahead (Q ring 2, K ring 2,
V ring 3, streamed mask blocks ring 3), the matrix unit computes the next block's scores while the vector unit works
on this one's (score and P buffers ring 2), and a tile's normalisation and store come after the next tile's first
block. With ``resident`` tilings a head's key and value tiles are loaded once, at first use, into one of two head
buffers and kept for all its query tiles. The mask's distinct partial blocks are loaded once when they fit the SPM,
else each with its block.

Its ring semaphores are ``*_free``, not ``*_empty``: ``compile_model(buffers=1)`` makes the other layers' rings one
deep, but this program's order (loads and the next scores ahead of a block's softmax) needs its rings' depths.

Regions: ``Q [nq, Lq, d]``, ``K [nk, d, Lk]`` (keys transposed), ``V [nv, Lk, dv]``, ``O [n, Lq, dv]`` (f32,
row-major; head ``h`` reads ``Q[q_of[h]]``, ``K[k_of[h]]``, ``V[v_of[h]]``, broadcasting the leading dims) and
``Mk``, the mask's distinct partial blocks (:class:`~compiler.kernels.attention_mask.MaskBlocks`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from compiler.errors import CompileError, TilingError
from compiler.kernels.attention_mask import DEAD, ZERO, MaskBlocks, MaskInfo
from compiler.kernels.common.operand import BOperand
from compiler.kernels.common.pipeline import synced, with_sync
from compiler.kernels.common.search import under_program_max
from compiler.kernels.common.sink import EstimateSink, PriceMemo, ProgramSink, Sink
from compiler.kernels.common.target import Target
from isa import (
    Act,
    BinOp,
    DmaCopy,
    DType,
    Halt,
    Program,
    Queue,
    Reduce,
    Region,
    SemDecl,
    Space,
    VecBinary,
    VecUnary,
    View,
)
from isa.view import MAX_EXTENT

F32 = DType.F32
ES = 4
FLT_LOWEST = float(np.finfo(np.float32).min)
LOOKAHEAD = 2
"""Blocks the loads run ahead of the block whose scores the matrix unit computes next."""
RINGS = {"k": 2, "v": 3, "m": 3}
"""Ring slots of streamed key tiles, value tiles and mask blocks (what :data:`LOOKAHEAD` needs)."""
RESIDENT_TILES = 100
"""Key tiles per head at most for resident key and value tiles (their load semaphore counts stay below 255)."""
STATE_COLS = 6
"""Per-row f32 columns of a tile's softmax state: two row maxima (old and new, alternating), l, the block's sum,
alpha and 1/l."""


@dataclass(frozen=True)
class AttentionSpec:
    """One fused attention: ``n = len(q_of)`` heads, ``lq`` query rows, ``lk`` keys, ``d`` (query/key) and ``dv``
    (value) features; head ``h`` reads Q block ``q_of[h]``, K block ``k_of[h]`` and V block ``v_of[h]``; the scores
    are ``Q @ K * scale`` (``divide``: ``Q @ K / scale``)."""

    lq: int
    lk: int
    d: int
    dv: int
    q_of: tuple[int, ...]
    k_of: tuple[int, ...]
    v_of: tuple[int, ...]
    scale: float = 1.0
    divide: bool = False

    @property
    def n(self) -> int:
        return len(self.q_of)

    def check(self) -> str | None:
        """Why the fused kernel cannot take these shapes, or None."""
        if min(self.lq, self.lk, self.d, self.dv) < 1:
            return "an empty dimension"
        if max(self.d, self.dv) > MAX_EXTENT:
            return f"head dims {self.d}, {self.dv} above {MAX_EXTENT}"
        return None


@dataclass(frozen=True)
class AttentionTiling:
    """``tq`` query rows and ``tk`` keys per block; ``resident``: a head's key and value tiles stay in the SPM for
    all its query tiles; ``ones``: the value tiles get a column of ones, so the context product's last column is the
    rows' sums of P (the running sum ``l`` rides in the output accumulators: no vector pass sums P)."""

    tq: int
    tk: int
    resident: bool = False
    ones: bool = False

    def width(self, dv: int) -> int:
        """Columns of the context product and the output accumulators: ``dv``, and the sums with ``ones``."""
        return dv + self.ones


def _up(n: int, a: int) -> int:
    return -(-n // a) * a


class Layout(NamedTuple):
    """SPM and ACC byte offsets of every buffer of one tiling (each aligned to its memory's bank row)."""

    kop: BOperand
    vop: BOperand
    q: tuple[int, int]
    k: tuple[int, ...]        # streaming: the ring's slots; resident: two head buffers (each n_kt slots)
    v: tuple[int, ...]
    kslot: int                # bytes per key tile (resident: the stride between a head buffer's tiles)
    vslot: int
    p: tuple[int, int]
    mask: tuple[int, ...]     # streamed: the ring's slots; a resident table: its one base
    table: bool               # the mask's partial blocks are loaded once
    state: tuple[int, int]    # the softmax state columns of even and odd tiles (each column a bank row apart)
    state_step: int
    s: tuple[int, int]        # ACC
    o: tuple[int, int]        # ACC
    spm: int                  # SPM bytes used
    acc: int                  # ACC bytes used


def layout(spec: AttentionSpec, target: Target, t: AttentionTiling, table_bytes: int | None,
           partial: bool) -> Layout | None:
    """Where tiling ``t`` keeps everything on ``target``, or None when it does not fit. ``partial``: the mask has
    partial blocks; ``table_bytes``: their distinct entries' bytes (None: not known yet, reserve the streaming
    ring)."""
    line, acc_line = target.bank_row, target.arch.acc.banks * target.arch.acc.bank_width
    kop = BOperand(target.dataflow, target.rows, target.cols, spec.d, t.tk, target.bank_width)
    vop = BOperand(target.dataflow, target.rows, target.cols, t.tk, t.width(spec.dv), target.bank_width)
    at = 0

    def take(nbytes: int, count: int = 1) -> tuple[int, ...]:
        nonlocal at
        step = _up(nbytes, line)
        out = tuple(at + i * step for i in range(count))
        at += count * step
        return out

    n_kt = -(-spec.lk // t.tk)
    q, p = take(t.tq * spec.d * ES, 2), take(t.tq * t.tk * ES, 2)
    state = take(STATE_COLS * _up(t.tq * ES, line), 2)
    kslot, vslot = _up(kop.slot_bytes, line), _up(vop.slot_bytes, line)
    k = take(n_kt * kslot, 2) if t.resident else take(kslot, RINGS["k"])
    v = take(n_kt * vslot, 2) if t.resident else take(vslot, RINGS["v"])
    mask, table = (), False
    if partial:
        if table_bytes is not None and at + table_bytes <= target.spm:
            mask, table = take(table_bytes), True
        else:
            mask = take(t.tq * t.tk * ES, RINGS["m"])
    s = (0, _up(t.tq * t.tk * ES, acc_line))
    o0 = 2 * s[1]
    o = (o0, o0 + _up(t.tq * t.width(spec.dv) * ES, acc_line))
    acc = o[1] + _up(t.tq * t.width(spec.dv) * ES, acc_line)
    if at > target.spm or acc > target.acc:
        return None
    return Layout(kop, vop, q, k, v, kslot, vslot, p, mask, table, state, _up(t.tq * ES, line), s, o, at, acc)


class Block(NamedTuple):
    """One (query tile, key tile) of a head, in program order (:func:`blocks`)."""

    t: int        # its index in the stream
    h: int
    r0: int       # first query row, rows
    r: int
    k0: int       # first key, keys
    c: int
    kt: int
    tile: int     # index of its query tile in the stream (per head and query tile)
    j: int        # its index among its tile's blocks
    first: bool   # first block of its tile
    last: bool    # last block of its tile
    mask: int     # ZERO or the index of its partial mask block (MaskBlocks.kinds)
    load_k: bool  # its key tile is loaded for it (always, unless resident and loaded before)
    load_v: bool
    free_k: bool  # its score product releases the key slot (streaming; resident: the head's last)
    free_v: bool
    head_first: bool   # (resident) the first load of its head, which waits for the head buffer
    k_base: int   # SPM bytes of its key tile, value tile and mask entries (``r x c``, dense)
    v_base: int
    m_base: int


def blocks(spec: AttentionSpec, t: AttentionTiling, lay: Layout, mask: MaskBlocks | None,
           mask_of: tuple[int, ...] | None) -> list[Block]:
    """Every block that is not dead, head by head, query tile by query tile, key tiles in order."""
    out: list[Block] = []
    tile = nk = nv = nm = 0
    for h in range(spec.n):
        seen: set[int] = set()
        first_of_head = len(out)
        for qt, r0 in enumerate(range(0, spec.lq, t.tq)):
            row: list[Block] = []
            for kt, k0 in enumerate(range(0, spec.lk, t.tk)):
                kind = ZERO if mask is None else int(mask.kinds[mask_of[h], qt, kt])
                if kind == DEAD:
                    continue
                mb = 0
                if kind >= 0:
                    mb = lay.mask[0] + mask.offsets[kind] * ES if lay.table else lay.mask[nm % RINGS["m"]]
                    nm += 1
                new = not t.resident or kt not in seen
                seen.add(kt)
                if t.resident:
                    kb, vb = lay.k[h % 2] + kt * lay.kslot, lay.v[h % 2] + kt * lay.vslot
                else:
                    kb, vb = lay.k[nk % RINGS["k"]], lay.v[nv % RINGS["v"]]
                    nk, nv = nk + 1, nv + 1
                row.append(Block(len(out) + len(row), h, r0, min(t.tq, spec.lq - r0), k0, min(t.tk, spec.lk - k0),
                                 kt, tile, len(row), not row, False, kind, new, new, not t.resident,
                                 not t.resident, False, kb, vb, mb))
            if not row:
                raise CompileError(f"query rows {r0}.. of head {h} have no key tile (a mask row with no entry)")
            row[-1] = row[-1]._replace(last=True)
            out += row
            tile += 1
        if t.resident:
            out[first_of_head] = out[first_of_head]._replace(head_first=True)
            out[-1] = out[-1]._replace(free_k=True, free_v=True)
    return out


@dataclass(frozen=True)
class Plan:
    """Everything :func:`emit` needs: the spec, target, tiling, layout, the mask's blocks and the block stream."""

    spec: AttentionSpec
    target: Target
    t: AttentionTiling
    lay: Layout
    mask: MaskBlocks | None
    mask_of: tuple[int, ...] | None
    stream: tuple[Block, ...]
    first_partial: int   # the first block with a partial mask block (-1: none)


def plan(spec: AttentionSpec, target: Target, t: AttentionTiling, mask: MaskInfo | None) -> Plan:
    """The :class:`Plan` of tiling ``t``; TilingError when it does not fit the target."""
    why = spec.check()
    if why:
        raise CompileError(f"fused attention: {why}")
    mb = mask.blocks(t.tq, t.tk) if mask is not None else None
    partial = mb is not None and bool(mb.table.size)
    lay = layout(spec, target, t, mb.table.size * ES if partial else None, partial)
    if lay is None or t.tq > target.max_rows:
        raise TilingError(f"fused attention tiles of {t.tq} queries x {t.tk} keys do not fit {target.spm} B of SPM "
                          f"and {target.acc} B of ACC")
    stream = blocks(spec, t, lay, mb, mask.of if mask is not None else None)
    if t.resident and (-(-spec.lk // t.tk) > RESIDENT_TILES or min(_per_head(stream)) < 2):
        raise TilingError(f"resident key tiles need at most {RESIDENT_TILES} key tiles and 2 blocks per head")
    if not under_program_max(4 * len(stream)):
        raise TilingError(f"fused attention tiling {t} takes {len(stream):,} blocks")
    first = next((b.t for b in stream if b.mask >= 0), -1)
    return Plan(spec, target, t, lay, mb, mask.of if mask is not None else None, tuple(stream), first)


def _per_head(stream: list[Block]) -> list[int]:
    counts: dict[int, int] = {}
    for b in stream:
        counts[b.h] = counts.get(b.h, 0) + 1
    return list(counts.values())


# --------------------------------------------------------------------------------------------------- instruction groups
def _col(addr: int) -> View:
    """A per-row f32 column broadcast along the row."""
    return View(Space.SPM, addr, F32, (ES, 0))


def _vec(addr: int) -> View:
    return View(Space.SPM, addr, F32, (ES,))


def _state(p: Plan, b: Block) -> tuple[int, int, int, int, int, int]:
    """SPM bytes of the block's tile's (m_old, m_new, l, l_blk, alpha, 1/l) columns."""
    base, step = p.lay.state[b.tile % 2], p.lay.state_step
    m = (base + ((b.j + 1) % 2) * step, base + (b.j % 2) * step)
    return m + tuple(base + i * step for i in range(2, STATE_COLS))


def _loads(p: Plan, b: Block, sync: bool) -> list:
    """The block's loads: its tile's Q (first block), key and value tiles, a streamed mask block."""
    s, lay, out = p.spec, p.lay, []
    if b.first:
        q = DmaCopy(queue=Queue.DMA_LD, shape=(b.r, s.d), dst=View(Space.SPM, lay.q[b.tile % 2], F32, (s.d * ES, ES)),
                    src=View(Space.DRAM, (s.q_of[b.h] * s.lq + b.r0) * s.d * ES, F32, (s.d * ES, ES), "Q"))
        out += synced([q], ("q_free",), ("q_full",)) if sync else [q]
    if b.load_k:
        ks = lay.kop.loads(b.k_base, "K", (s.k_of[b.h] * s.d * s.lk + b.k0) * ES, s.lk * ES, s.d, b.c)
        wait = ("k_free",) if not p.t.resident or b.head_first else ()
        out += synced(ks, wait, ("k_full",)) if sync else ks
    if b.load_v:
        vs = lay.vop.loads(b.v_base, "V", (s.v_of[b.h] * s.lk + b.k0) * s.dv * ES, s.dv * ES, b.c, s.dv,
                           p.t.width(s.dv))
        wait = ("v_free",) if not p.t.resident or b.head_first else ()
        out += synced(vs, wait, ("v_full",)) if sync else vs
    if b.mask >= 0 and not lay.table:
        n = p.mask.shapes[b.mask][0] * p.mask.shapes[b.mask][1]
        m = DmaCopy(queue=Queue.DMA_LD, shape=(n,), dst=View(Space.SPM, b.m_base, F32, (ES,)),
                    src=View(Space.DRAM, p.mask.offsets[b.mask] * ES, F32, (ES,), "Mk"))
        out += synced([m], ("m_free",), ("m_full",)) if sync else [m]
    return out


def _table_loads(p: Plan) -> list:
    """The resident mask table, in copies of at most 32,768 elements, the last signalling ``mask_ready``."""
    n, chunk, out = p.mask.table.size, 1 << 15, []
    for i in range(0, n, chunk):
        k = min(chunk, n - i)
        out.append(DmaCopy(queue=Queue.DMA_LD, shape=(k,), dst=View(Space.SPM, p.lay.mask[0] + i * ES, F32, (ES,)),
                           src=View(Space.DRAM, i * ES, F32, (ES,), "Mk")))
    out[-1] = with_sync(out[-1], signals=("mask_ready",))
    return out


def _ones(p: Plan) -> list:
    """Column ``dv`` of every value slot set to 1 (the loads never write it)."""
    lay, n_kt = p.lay, -(-p.spec.lk // p.t.tk)
    slots = [base + kt * lay.vslot for base in lay.v for kt in range(n_kt)] if p.t.resident else list(lay.v)
    return [f for base in slots for f in lay.vop.fill_column(base, p.spec.dv, 1.0)]


def _scale(p: Plan, b: Block, sync: bool) -> list:
    """The tile's Q times the scale (or divided by it), in place."""
    s, q = p.spec, View(Space.SPM, p.lay.q[b.tile % 2], F32, (p.spec.d * ES, ES))
    op = BinOp.DIV if s.divide else BinOp.MUL
    ins = [VecBinary(op=op, shape=(b.r, s.d), dst=q, src0=q, imm=s.scale)]
    return synced(ins, ("q_full",), ("q_ready",)) if sync else ins


def scaled(spec: AttentionSpec) -> bool:
    """Whether Q is scaled on the vector unit (a scale other than multiplying by 1)."""
    return spec.divide or spec.scale != 1.0


def _scores(p: Plan, b: Block, sync: bool) -> list:
    """``S = Q @ K`` of the block into its score buffer."""
    s, lay, tk = p.spec, p.lay, p.t.tk
    mms = lay.kop.matmuls(lay.s[b.t % 2], tk * ES, lay.q[b.tile % 2], s.d * ES, b.k_base, b.r, s.d, b.c, True)
    if not sync:
        return mms
    waits = (("q_ready" if scaled(s) else "q_full",) if b.first else ()) + (("k_full",) if b.load_k else ())
    signals = ("s_full",) + (("k_free",) if b.free_k else ()) + (("q_free",) if b.last else ())
    return synced(mms, waits + ("s_free",), signals)


def _softmax(p: Plan, b: Block, sync: bool) -> list:
    """The vector unit's online softmax of the block (see the module docstring)."""
    tk, w, ones = p.t.tk, p.t.width(p.spec.dv), p.t.ones
    m_old, m_new, total, lb, alpha, _ = _state(p, b)
    r, c = b.r, b.c
    sv = View(Space.ACC, p.lay.s[b.t % 2], F32, (tk * ES, ES))
    pv = View(Space.SPM, p.lay.p[b.t % 2], F32, (tk * ES, ES))
    head: list = []
    if b.mask >= 0:
        mv = View(Space.SPM, b.m_base, F32, (c * ES, ES))
        head.append(VecBinary(op=BinOp.ADD, shape=(r, c), dst=sv, src0=sv, src1=mv))
    if b.first:
        head.append(VecUnary(fn=Act.MOV, reduce=Reduce.MAX, zero=True, shape=(r, c), dst=_col(m_new), src=sv))
        if p.mask is not None:
            head.append(VecBinary(op=BinOp.MAX, shape=(r,), dst=_vec(m_new), src0=_vec(m_new), imm=FLT_LOWEST))
    else:
        head += [VecUnary(fn=Act.MOV, shape=(r,), dst=_vec(m_new), src=_vec(m_old)),
                 VecUnary(fn=Act.MOV, reduce=Reduce.MAX, shape=(r, c), dst=_col(m_new), src=sv)]
    sub = VecBinary(op=BinOp.SUB, shape=(r, c), dst=pv, src0=sv, src1=_col(m_new))
    tail = [VecUnary(fn=Act.EXP, shape=(r, c), dst=pv, src=pv)]
    if not ones:   # (else the context product sums P in its last column)
        tail.append(VecUnary(fn=Act.MOV, reduce=Reduce.SUM, zero=True, shape=(r, c),
                             dst=_col(total if b.first else lb), src=pv))
    rescale: list = []
    if not b.first:
        tail += [VecBinary(op=BinOp.SUB, shape=(r,), dst=_vec(alpha), src0=_vec(m_old), src1=_vec(m_new)),
                 VecUnary(fn=Act.EXP, shape=(r,), dst=_vec(alpha), src=_vec(alpha))]
        if not ones:
            tail += [VecBinary(op=BinOp.MUL, shape=(r,), dst=_vec(total), src0=_vec(total), src1=_vec(alpha)),
                     VecBinary(op=BinOp.ADD, shape=(r,), dst=_vec(total), src0=_vec(total), src1=_vec(lb))]
        ov = View(Space.ACC, p.lay.o[b.tile % 2], F32, (w * ES, ES))
        rescale = [VecBinary(op=BinOp.MUL, shape=(r, w), dst=ov, src0=ov, src1=_col(alpha))]
    if not sync:
        return head + [sub] + tail + rescale
    streamed = b.mask >= 0 and not p.lay.table
    ready = ("mask_ready",) if b.mask >= 0 and p.lay.table and b.t == p.first_partial else ()
    waits = ("s_full",) + (("m_full",) if streamed else ()) + ready
    out = [with_sync(head[0], waits=waits)] + head[1:]
    if streamed:
        out[0] = with_sync(out[0], signals=("m_free",))
    out.append(with_sync(sub, signals=("s_free",)))
    out += tail
    if rescale:
        out.append(with_sync(rescale[0], waits=("pv_done",)))
    out[-1] = with_sync(out[-1], signals=("p_full",))
    return out


def _context(p: Plan, b: Block, sync: bool) -> list:
    """``O += P @ V`` of the block (the tile's first starts O at zero)."""
    s, lay, tk = p.spec, p.lay, p.t.tk
    w = p.t.width(s.dv)
    mms = lay.vop.matmuls(lay.o[b.tile % 2], w * ES, lay.p[b.t % 2], tk * ES, b.v_base, b.r, b.c, w, b.first)
    if not sync:
        return mms
    waits = ("p_full",) + (("v_full",) if b.load_v else ()) + (("o_free",) if b.first else ())
    return synced(mms, waits, ("pv_done",) + (("v_free",) if b.free_v else ()))


def _finish(p: Plan, b: Block, sync: bool) -> list:
    """The tile of block ``b`` (its last) normalised, ``O *= 1/l``, and stored."""
    s, (_, _, total, _, _, inv) = p.spec, _state(p, b)
    w, base = p.t.width(s.dv), p.lay.o[b.tile % 2]
    ov = View(Space.ACC, base, F32, (w * ES, ES))
    sums = View(Space.ACC, base + s.dv * ES, F32, (w * ES,)) if p.t.ones else _vec(total)
    ins = [VecUnary(fn=Act.RECIP, shape=(b.r,), dst=_vec(inv), src=sums),
           VecBinary(op=BinOp.MUL, shape=(b.r, s.dv), dst=ov, src0=ov, src1=_col(inv))]
    st = DmaCopy(queue=Queue.DMA_ST, shape=(b.r, s.dv), src=ov,
                 dst=View(Space.DRAM, (b.h * s.lq + b.r0) * s.dv * ES, F32, (s.dv * ES, ES), "O"))
    if not sync:
        return ins + [st]
    return [with_sync(ins[0], waits=("pv_done",)), with_sync(ins[1], signals=("o_full",)),
            with_sync(st, waits=("o_full",), signals=("o_free",))]


# ------------------------------------------------------------------------------------------------------- the emitter
class _Keys:
    """Memo keys of the groups (what their costs read: shapes, flags, DRAM offsets modulo ``dram``; every SRAM base
    is a multiple of its bank row), with the tiling (the keys are shared by a search's candidates)."""

    def __init__(self, p: Plan, dram: int) -> None:
        self.p, self.dram, self.t = p, dram, (p.t, p.lay.table)
        self.bank = p.target.bank_width

    def loads(self, b: Block) -> Hashable:
        s, d = self.p.spec, self.dram
        # (each a tuple or None: an offset of 0 must not equal False)
        q = ((s.q_of[b.h] * s.lq + b.r0) * s.d * ES % d,) if b.first else None
        k = ((s.k_of[b.h] * s.d * s.lk + b.k0) * ES % d, b.head_first) if b.load_k else None
        v = ((s.v_of[b.h] * s.lk + b.k0) * s.dv * ES % d, b.head_first) if b.load_v else None
        m = (self.p.mask.offsets[b.mask] * ES % d, self.p.mask.shapes[b.mask]) \
            if b.mask >= 0 and not self.p.lay.table else None
        return ("ld", b.r, b.c, q, k, v, m) + self.t

    def block(self, what: str, b: Block) -> Hashable:
        return (what, b.r, b.c, b.first, (b.m_base % self.bank,) if b.mask >= 0 else None) + self.t

    def finish(self, b: Block) -> Hashable:
        s = self.p.spec
        return ("fin", b.r, (b.h * s.lq + b.r0) * s.dv * ES % self.dram) + self.t


def emit(p: Plan, sink: Sink) -> None:
    """The program's instructions, in program order, into ``sink`` (see the module docstring for the order: the
    first block's loads and scores, then loads two blocks ahead, the next block's scores before this block's
    softmax, a tile's finish after the next tile's first softmax). An estimating sink prices each group once per key
    and stops at its bound."""
    sync, stream = sink.semaphores, p.stream
    keys = _Keys(p, sink.dram_modulus) if sink.pricing else None

    def group(kind: str, build: Callable, b: Block) -> None:
        key = None
        if keys is not None:
            key = keys.loads(b) if kind == "ld" else keys.finish(b) if kind == "fin" else keys.block(kind, b)
        sink.group(key, build, p, b, sync)

    if p.t.ones:
        sink.group(None if keys is None else ("ones",) + keys.t, _ones, p)
    if p.lay.table:
        sink.group(None if keys is None else ("table", p.mask.table.size) + keys.t, _table_loads, p)
    group("ld", _loads, stream[0])
    if scaled(p.spec):
        group("scale", _scale, stream[0])
    group("s", _scores, stream[0])
    for b in stream[1:LOOKAHEAD]:   # (after the first product: it waits for the first block's loads alone)
        group("ld", _loads, b)
    pending = None
    for t, b in enumerate(stream):
        if t + LOOKAHEAD < len(stream):
            group("ld", _loads, stream[t + LOOKAHEAD])
        if t + 1 < len(stream):
            nxt = stream[t + 1]
            if nxt.first and scaled(p.spec):
                group("scale", _scale, nxt)
            group("s", _scores, nxt)
        group("sm", _softmax, b)
        if pending is not None:
            group("fin", _finish, pending)
            pending = None
        group("pv", _context, b)
        if b.last:
            pending = b
        if sink.check():
            return
    group("fin", _finish, pending)
    sink.extend([Halt()])


SEMS = ("q_full", "q_ready", "q_free", "k_full", "k_free", "v_full", "v_free", "m_full", "m_free", "mask_ready",
        "s_full", "s_free", "p_full", "pv_done", "o_full", "o_free")


def _sems(p: Plan) -> tuple[SemDecl, ...]:
    init = {"q_free": 2, "k_free": 2, "v_free": 2 if p.t.resident else RINGS["v"], "m_free": RINGS["m"],
            "s_free": 2, "o_free": 2}
    used = {"q_full", "q_free", "k_full", "k_free", "v_full", "v_free", "s_full", "s_free", "p_full", "pv_done",
            "o_full", "o_free"}
    used |= {"q_ready"} if scaled(p.spec) else set()
    if p.mask is not None and p.mask.table.size:
        used |= {"mask_ready"} if p.lay.table else {"m_full", "m_free"}
    return tuple(SemDecl(n, init.get(n, 0)) for n in SEMS if n in used)


def regions(spec: AttentionSpec, mask: MaskBlocks | None) -> tuple[Region, ...]:
    """The program's DRAM regions (see the module docstring)."""
    nq, nk, nv = max(spec.q_of) + 1, max(spec.k_of) + 1, max(spec.v_of) + 1
    out = [Region("Q", 0, nq * spec.lq * spec.d * ES), Region("K", 1, nk * spec.d * spec.lk * ES),
           Region("V", 2, nv * spec.lk * spec.dv * ES), Region("O", 3, spec.n * spec.lq * spec.dv * ES)]
    if mask is not None and mask.table.size:
        out.append(Region("Mk", 4, mask.table.size * ES))
    return tuple(out)


def attention_program(spec: AttentionSpec, target: Target, tiling: AttentionTiling,
                      mask: MaskInfo | None = None) -> Program:
    """The fused attention program for ``tiling`` (regions: :func:`regions`; bind ``Mk`` to
    :func:`mask_table`)."""
    p = plan(spec, target, tiling, mask)
    sink = ProgramSink()
    emit(p, sink)
    return Program(target.config, regions(spec, p.mask), _sems(p), tuple(sink.instrs))


def mask_table(mask: MaskInfo | None, tiling: AttentionTiling) -> np.ndarray | None:
    """Region ``Mk``'s contents for ``tiling`` (None without partial mask blocks)."""
    if mask is None:
        return None
    table = mask.blocks(tiling.tq, tiling.tk).table
    return table if table.size else None


def attention_estimate(spec: AttentionSpec, target: Target, tiling: AttentionTiling, mask: MaskInfo | None = None,
                       memo: PriceMemo | None = None, bound: float | None = None) -> int:
    """:func:`isa.cost.program_estimate` of :func:`attention_program` without building it (cycles); with ``bound``,
    some value at least ``bound`` once the estimate is known to reach it."""
    p = plan(spec, target, tiling, mask)
    sink = EstimateSink(target.arch, memo, ("attention", tiling), bound=bound)
    emit(p, sink)
    return int(bound) if sink.stopped else sink.estimate.cycles


def reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, spec: AttentionSpec,
              mask: MaskInfo | None = None) -> np.ndarray:
    """numpy's ``softmax(Q @ K * scale + mask) @ V`` per head, in float64 (``[n, Lq, dv]``) from the regions'
    contents ``q [nq, Lq, d]``, ``k [nk, d, Lk]``, ``v [nv, Lk, dv]``."""
    out = np.zeros((spec.n, spec.lq, spec.dv))
    for h in range(spec.n):
        s = q[spec.q_of[h]].astype(np.float64) @ k[spec.k_of[h]].astype(np.float64)
        s = s / spec.scale if spec.divide else s * spec.scale
        if mask is not None:
            s = s + mask.values[mask.of[h]]
        e = np.exp(s - s.max(axis=1, keepdims=True))
        out[h] = (e / e.sum(axis=1, keepdims=True)) @ v[spec.v_of[h]].astype(np.float64)
    return out

