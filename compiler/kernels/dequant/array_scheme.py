"""The ``array`` scheme's program: the matrix unit multiplies f32 A by one byte per code (``mxu.mm`` f32 x i8/u8)
into one f32 partial sum per K block, ``P[nb][blk][m][cols]`` in ACC; the vector unit then adds the block's scale
times each sum into the C tile in the SPM, ``C += sum_blk P_blk * scale_blk`` (one ``vpu.mul.sum`` reducing over the
blocks), and, for a zero point, ``C += sum_blk rowsum(A_blk) * (-zp * scale_blk)`` (the row sums are one
``vpu.red.sum`` per A tile, times ``-zp`` when it is one value; per-block zero points come as an image of ``-zp *
scale`` beside the scales): a second ``vpu.mul.sum``, or, where that costs the vector unit more cycles than the array
(several rows of A, :func:`zero_term_on_array`), an f32 ``mxu.mm`` of the row sums by the scales and one addition.
4-bit codes are unpacked to bytes first (:func:`compiler.kernels.dequant.unpack.unpack_nibbles`); 8-bit codes go
from the DMA to the array as they are.

Per weight the vector unit does ``M / block`` multiply-adds (per column: ``M / tk``; twice with a zero point on the
vector unit) and, for 4-bit codes, 3/8 of an instruction element: the array and the DRAM bus, not a dequantization
of every weight, bound decode.

The loop is m tiles, then n tiles, then k tiles. Rings of two, each a ``*_full`` / ``*_empty`` pair: A (loaded by
the DMA; with a zero point, summed by the vector unit, ``a_ready``, before the array reads it), codes (to the vector
unit for 4-bit codes, else the array), unpacked codes (vector unit to array), scales (to the vector unit), partial
sums (array to vector unit) and C tiles (vector unit to the store DMA). The weight tiles of even steps load on the
``dma.ld`` queue, those of odd steps on ``dma.st`` (:data:`LANES`); each queue keeps two tiles in flight. In program
order the vector unit unpacks the next step's codes before it scales this step's sums, so that the array never waits
for the scaling, and a C store comes after the next step's loads, so that it does not hold them up in its queue."""

from __future__ import annotations

from typing import NamedTuple

from compiler.kernels.common.blocks import equal_blocks
from compiler.kernels.common.pipeline import synced
from compiler.kernels.dequant import loads
from compiler.kernels.dequant.plan import DequantPlan, up
from compiler.kernels.dequant.unpack import unpack_nibbles
from isa import Act, BinOp, DType, Halt, MatMul, Program, Queue, Reduce, SemDecl, Space, VecBinary, VecUnary, View
from isa.cost import instr_cost

F32 = DType.F32
LANES = (Queue.DMA_LD, Queue.DMA_ST)
"""The queues that load the weight tiles of even and odd steps: while one waits for its last data (a DMA's setup and
latency are not bus time), the other's transfer holds the bus."""


class Step(NamedTuple):
    """One step's instructions by role, each list synced: DMA loads, the vector unit's work ahead of the array
    (row sums, unpacking), the array's, the vector unit's after it (scaling), the C store."""

    loads: list
    prep: list
    matrix: list
    post: list
    store: list


class _At(NamedTuple):
    """Where one step works: the tile origin and extents (elements), the extents padded to the k quantum (``tkq``)
    and the blocks it covers (``nq``), its slots and operand bases (bytes: ``ab``/``rsb`` the A and row-sum slots,
    ``a``/``rs`` this step's part of them), the queue of its weight loads (``lane``) and its place in the loops."""

    m0: int
    n0: int
    k0: int
    tm: int
    tn: int
    tk: int
    tkq: int
    nq: int
    ab: int
    a: int
    rsb: int
    rs: int
    qb: int
    ub: int
    sb: int
    pb: int
    cb: int
    tile: int
    lane: int
    new_a: bool
    last_a: bool
    first: bool
    last: bool


def _a_loads(p: DequantPlan, w: _At) -> list:
    """The A of a step that starts one: all of the m tile's (``p.whole_a``) or the step's k tile, zero-padded."""
    k0, tk, tkq = (0, p.K, p.a_cols) if p.whole_a else (w.k0, w.tk, w.tkq)
    if p.g > 1:
        return loads.a_diagonal(p, w.ab, w.m0, k0, w.tm, tk)
    return loads.a_rows(p, w.ab, w.m0, k0, w.tm, tk, tkq, p.a_cols)


def _rowsums(p: DequantPlan, w: _At) -> list:
    """``rowsum(A_blk)`` of every block of the A just loaded into ``[T][blocks]`` at ``w.rsb``, times ``-zp`` for a
    uniform zero point (so that the scales themselves weight it: no image of ``-zp * scale`` in DRAM)."""
    r, bs, g, T, pitch = p.target.rows, p.bs, p.g, p.t.tm, p.rs_pitch
    cols = (up(p.K, r) if g > 1 else p.a_cols) if p.whole_a else w.tkq
    if g > 1:
        nb = cols // bs
        shape, dst = (cols // r, g, w.tm, bs), View(Space.SPM, w.rsb, F32, (g * 4, 4, pitch, 0))
        src = View(Space.SPM, w.ab, F32, (g * T * r * 4, T * r * 4 + bs * 4, r * 4, 4))
    else:
        nb = max(1, cols // bs)
        shape, dst = (nb, w.tm, cols // nb), View(Space.SPM, w.rsb, F32, (4, pitch, 0))
        src = View(Space.SPM, w.ab, F32, (cols // nb * 4, p.a_cols * 4, 4))
    out = [VecUnary(fn=Act.MOV, shape=shape, dst=dst, src=src, reduce=Reduce.SUM, zero=True)]
    if not p.fmt.per_block_zp:
        rs = View(Space.SPM, w.rsb, F32, (pitch, 4))
        out.append(VecBinary(op=BinOp.MUL, shape=(w.tm, nb), dst=rs, src0=rs, imm=float(-p.fmt.stored_zp)))
    return out


def _matmul(p: DequantPlan, w: _At) -> MatMul:
    """The step's partial sums: one ``mxu.mm`` over column blocks, blocks and folds (each ``.z``: a fresh sum)."""
    r, c, g, T, tk, kq = p.target.rows, p.target.cols, p.g, p.t.tm, p.t.tk, p.kq
    nbc, pitch = -(-w.tn // c), p.nblk * T * c * 4
    b = w.ub if p.fmt.nibbles else w.qb
    if g > 1:
        return MatMul(shape=(nbc, w.nq // g), m=g * T, k=r, n=c, zero=True,
                      acc=View(Space.ACC, w.pb, F32, (pitch, g * T * c * 4)), acc_row=c * 4,
                      a=View(Space.SPM, w.a, F32, (0, g * T * r * 4)), a_row=r * 4,
                      b=View(Space.SPM, b, p.fmt.code_dtype, (tk * c, r * c)))
    per = w.tkq // w.nq   # k rows of a block (per column: of the step)
    return MatMul(shape=(nbc, w.nq, per // kq), m=w.tm, k=kq, n=c, zero=True,
                  acc=View(Space.ACC, w.pb, F32, (pitch, T * c * 4, 0)), acc_row=c * 4,
                  a=View(Space.SPM, w.a, F32, (0, per * 4, kq * 4)), a_row=p.a_cols * 4,
                  b=View(Space.SPM, b, p.fmt.code_dtype, (tk * c, per * c, kq * c)))


def _zero_factor(p: DequantPlan, w: _At) -> int:
    """SPM byte address of what multiplies the row sums (``[nb][nblk][cols]``): ``-zp * scale`` (per-block zero
    points) or the scales (the row sums then carry ``-zp``)."""
    return w.sb + up(p.s_bytes, 64) if p.fmt.per_block_zp else w.sb


def _correction(p: DequantPlan, w: _At) -> list:
    """The zero point's term on the array: ``corr = rowsums @ factor`` per column block (f32 x f32, k = the step's
    blocks, at most ``rows`` a fold), into the ACC tile after the partial sums."""
    r, c, T, nblk = p.target.rows, p.target.cols, p.t.tm, p.nblk
    nbc, corr = -(-w.tn // c), w.pb + nblk * T * p.t.tn * 4
    b = _zero_factor(p, w)
    return [MatMul(shape=(nbc, runs), m=w.tm, k=k, n=c, zero=b0 == 0,
                   acc=View(Space.ACC, corr, F32, (T * c * 4, 0)), acc_row=c * 4,
                   a=View(Space.SPM, w.rs + b0 * r * 4, F32, (0, r * 4)), a_row=p.rs_pitch,
                   b=View(Space.SPM, b + b0 * r * c * 4, F32, (nblk * c * 4, r * c * 4)))
            for b0, runs, k in equal_blocks(w.nq, r)]


def _scale(p: DequantPlan, w: _At, zp_array: bool) -> list:
    """``C (+)= sum_blk P_blk * scale_blk`` (``.z`` on the first k tile), then the zero point's term: its sum over
    the blocks on the vector unit, or (``zp_array``) the array's :func:`_correction` added."""
    c, T, tn, nblk = p.target.cols, p.t.tm, p.t.tn, p.nblk
    nbc = -(-w.tn // c)
    shape, rows = (nbc, w.nq, w.tm, c), (nblk * c * 4, c * 4, 0, 4)   # [nb][blk][cols] broadcast over m
    dst = View(Space.SPM, w.cb, F32, (c * 4, 0, tn * 4, 4))
    ops = [VecBinary(op=BinOp.MUL, shape=shape, dst=dst, reduce=Reduce.SUM, zero=w.first,
                     src0=View(Space.ACC, w.pb, F32, (nblk * T * c * 4, T * c * 4, c * 4, 4)),
                     src1=View(Space.SPM, w.sb, F32, rows))]
    if not p.fmt.zero_term:
        return ops
    if zp_array:
        out = View(Space.SPM, w.cb, F32, (c * 4, tn * 4, 4))
        return ops + [VecBinary(op=BinOp.ADD, shape=(nbc, w.tm, c), dst=out, src0=out,
                                src1=View(Space.ACC, w.pb + nblk * T * tn * 4, F32, (T * c * 4, c * 4, 4)))]
    return ops + [VecBinary(op=BinOp.MUL, shape=shape, dst=dst, reduce=Reduce.SUM,
                            src0=View(Space.SPM, w.rs, F32, (0, 4, p.rs_pitch, 0)),
                            src1=View(Space.SPM, _zero_factor(p, w), F32, rows))]


def zero_term_on_array(p: DequantPlan, w: _At) -> bool:
    """Whether the zero point's term of a step like ``w`` costs the array fewer cycles (:func:`_correction` and
    the addition of its result) than it costs the vector unit to sum it over the blocks (:mod:`isa.cost`): at one
    row of A the vector unit's sum is short and the array is the bottleneck; with more rows it grows with them."""
    if not p.fmt.zero_term:
        return False
    arch = p.target.arch
    on_array = sum(instr_cost(i, arch).cycles for i in _correction(p, w) + _scale(p, w, True)[1:])
    return on_array < instr_cost(_scale(p, w, False)[1], arch).cycles


def _loads(p: DequantPlan, w: _At) -> list:
    """The step's DMA loads: A (when it starts a new one), codes, scales (and the zero point's image), synced."""
    out = synced(_a_loads(p, w), ("a_empty",), ("a_full",)) if w.new_a else []
    i = w.lane   # (codes and scales in one copy: freed by their consumers, the array and the vector unit)
    return out + synced(loads.weights(p, w.tile, w.qb, LANES[i]), (f"q{i}_empty", f"s{i}_empty"),
                        (f"q{i}_full", f"s{i}_full"))


def _compute(p: DequantPlan, w: _At, zp_array: bool) -> tuple[list, list, list]:
    """The step's (prep, matrix, post) instructions, synced (they depend on slots and extents, not on where the
    tile is)."""
    zt, nib, i = p.fmt.zero_term, p.fmt.nibbles, w.lane
    prep = synced(_rowsums(p, w), ("a_full",), ("a_ready",)) if zt and w.new_a else []
    if nib:
        prep += synced(unpack_nibbles(p, w.qb, w.ub), (f"q{i}_full", "u_empty"), (f"q{i}_empty", "u_full"))
    waits = ((("a_ready",) if zt else ("a_full",)) if w.new_a else ()) + (("u_full",) if nib else (f"q{i}_full",))
    signals = (("a_empty",) if w.last_a else ()) + (("u_empty",) if nib else (f"q{i}_empty",))
    mms = [_matmul(p, w)] + (_correction(p, w) if zp_array else [])
    matrix = synced(mms, waits + ("p_empty",), signals + ("p_full",))
    post = synced(_scale(p, w, zp_array), ("p_full", f"s{i}_full") + (("c_empty",) if w.first else ()),
                  ("p_empty", f"s{i}_empty") + (("c_full",) if w.last else ()))
    return prep, matrix, post


def _places(p: DequantPlan) -> list[_At]:
    t, M, N, K, r = p.t, p.M, p.N, p.K, p.target.rows
    quantum = r if p.g > 1 else (p.kq if not p.fmt.block else p.bs)
    steps = [(m0, ni, ki) for m0 in range(0, M, t.tm) for ni in range(p.n_tiles) for ki in range(p.k_tiles)]
    per_a = not p.whole_a and p.k_tiles > 1           # a new A every step
    out, a_n, tiles = [], 0, 0
    for s, (m0, ni, ki) in enumerate(steps):
        k0, tk = ki * t.tk, min(t.tk, K - ki * t.tk)
        tkq = up(tk, quantum)
        new_a = s == 0 or per_a or steps[s - 1][0] != m0
        last_a = s + 1 == len(steps) or per_a or steps[s + 1][0] != m0
        a_n += new_a
        ab, rsb = p.slot("a", a_n - 1), p.slot("rs", a_n - 1)
        a_off = (k0 // r * p.g * t.tm * r * 4 if p.g > 1 else k0 * 4) if p.whole_a else 0
        rs_off = k0 // (p.fmt.block or t.tk) * 4 if p.whole_a else 0
        out.append(_At(m0, ni * t.tn, k0, min(t.tm, M - m0), min(t.tn, N - ni * t.tn), tk, tkq,
                       tkq // p.bs if p.fmt.block else 1, ab, ab + a_off, rsb, rsb + rs_off, p.slot("q", s),
                       p.slot("u", s), p.slot("q", s) + up(p.q_bytes, 64), (s % 2) * p.acc_slot, p.slot("c", tiles),
                       ni * p.k_tiles + ki, s % 2, new_a, last_a, ki == 0, ki == p.k_tiles - 1))
        tiles += ki == p.k_tiles - 1
    return out


SEMS = (("a_full", 0), ("a_empty", 2), ("a_ready", 0), ("q0_full", 0), ("q0_empty", 2), ("q1_full", 0),
        ("q1_empty", 2), ("u_full", 0), ("u_empty", 2), ("s0_full", 0), ("s0_empty", 2), ("s1_full", 0),
        ("s1_empty", 2), ("p_full", 0), ("p_empty", 2), ("c_full", 0), ("c_empty", 2))


def array_program(p: DequantPlan) -> Program:
    """The program of plan ``p`` (``array`` scheme); regions as :func:`compiler.kernels.dequant_gemm.dequant_gemm`
    says. Steps that work alike share their instruction objects (the linker copies each object once)."""
    built: dict[_At, tuple[list, list, list]] = {}
    steps, places = [], _places(p)
    zp_array = zero_term_on_array(p, places[0])
    for w in places:
        key = w._replace(m0=0, n0=0, k0=0, tile=0)   # (the same slots and extents: the same compute instructions)
        compute = built.get(key)
        if compute is None:
            compute = built[key] = _compute(p, w, zp_array)
        store = synced(loads.c_store(p, w.cb, w.m0, w.n0, w.tm, w.tn), ("c_full",), ("c_empty",)) if w.last else []
        steps.append(Step(_loads(p, w), *compute, store))
    instrs = loads.zero_slots(p) if p.g > 1 else []
    instrs += steps[0].loads + steps[0].prep
    for s, st in enumerate(steps):   # a store after the next loads: a store waiting in its queue holds up loads
        nxt = steps[s + 1] if s + 1 < len(steps) else None
        instrs += (nxt.loads + nxt.prep if nxt else []) + (steps[s - 1].store if s else []) + st.matrix + st.post
    instrs += steps[-1].store
    used = {op.name for i in instrs for op in (*i.waits, *i.signals)}
    sems = tuple(SemDecl(n, v) for n, v in SEMS if n in used)
    return Program(config=p.target.config, regions=loads.dram_regions(p), sems=sems, instrs=tuple(instrs) + (Halt(),))


def array_step(p: DequantPlan) -> list:
    """The instructions of one whole-tile step that loads no A unless every step does (a search's lower bound of
    the program repeats it), or [] when there is none."""
    t, places = p.t, _places(p)
    per_a = not p.whole_a and p.k_tiles > 1
    w = next((w for w in places if (w.tm, w.tn, w.tk) == (t.tm, t.tn, t.tk) and (per_a or not w.new_a)), None)
    if w is None:
        return []
    prep, matrix, post = _compute(p, w, zero_term_on_array(p, places[0]))
    return _loads(p, w) + prep + matrix + post
