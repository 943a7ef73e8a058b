"""The ``vector`` scheme's program: each weight tile is dequantized to f32 by the vector unit
(:func:`compiler.kernels.dequant.unpack.to_f32`) and multiplied on the matrix unit in f32, accumulating over the k
tiles in ACC; the stores read ACC.

The loop is m tiles, then n tiles, then k tiles; a step's weight tile is loaded and dequantized once per m tile
(once in all when ``M`` fits one tile). Rings of two: A, codes with their scales (and zero points), f32 weights and
ACC tiles, each a ``*_full`` / ``*_empty`` semaphore pair."""

from __future__ import annotations

from compiler.kernels.common.pipeline import synced
from compiler.kernels.dequant import loads
from compiler.kernels.dequant.plan import DequantPlan, up
from compiler.kernels.dequant.unpack import to_f32, unpack_nibbles
from compiler.kernels.gemm import GemmTiling, WsLayout
from isa import DType, Halt, Program, SemDecl

F32 = DType.F32
SEMS = (("a_full", 0), ("a_empty", 2), ("q_full", 0), ("q_empty", 2), ("b_full", 0), ("b_empty", 2),
        ("acc_full", 0), ("acc_empty", 2))


def _dequant(p: DequantPlan, qb: int, bb: int, tn: int) -> list:
    """The vector instructions turning the q slot at ``qb`` into the f32 B slot at ``bb`` (``tn`` columns, a multiple
    of the array columns: a ragged tile's extra columns have zero codes and scales, so zero weights), synced: from
    a full q slot and an empty B slot to an empty q slot and a full B slot."""
    ops = unpack_nibbles(p, qb, p.base["u"]) if p.fmt.nibbles else []
    return synced(ops + to_f32(p, qb, bb, tn // p.target.cols), ("q_full", "b_empty"), ("q_empty", "b_full"))


def _steps(p: DequantPlan):
    """Each step's instructions, in program order, as (whether the step is a whole tile and loads no A, its
    instructions). Steps that work alike share their dequantization and matrix instructions (the linker copies each
    object once)."""
    t, c, M, N, K = p.t, p.target.cols, p.M, p.N, p.K
    lay = WsLayout(4, F32, p.target.rows, c, N, GemmTiling(t.tm, t.tn, t.tk), t.tk // p.target.rows, p.nbm, 0)
    built: dict[tuple, list] = {}

    def once(key: tuple, build, *args) -> list:
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
        ab, qb, bb = p.slot("a", a_n - 1), p.slot("q", s), p.slot("b", s)
        acc = (tiles % 2) * p.acc_slot
        out = synced(loads.a_rows(p, ab, m0, k0, tm, tk, tk, tk), ("a_empty",), ("a_full",)) if new_a else []
        out += synced(loads.weights(p, ni * p.k_tiles + ki, qb), ("q_empty",), ("q_full",))
        out += once(("dq", qb, bb, tn), _dequant, p, qb, bb, up(tn, c))
        first, last = ki == 0, ki == p.k_tiles - 1
        waits = (("a_full",) if new_a else ()) + ("b_full",) + (("acc_empty",) if first else ())
        signals = (("a_empty",) if last_a else ()) + ("b_empty",) + (("acc_full",) if last else ())
        out += once(("mm", acc, ab, bb, tm, tk, tn, waits, signals), _matmuls, lay, acc, ab, bb, tm, tk,
                    up(tn, c), waits, signals)   # (ragged columns: zero weights)
        if last:
            out += synced(lay.stores(acc, m0, n0, tm, tn), ("acc_full",), ("acc_empty",))
            tiles += 1
        yield (tm, tn, tk) == (t.tm, t.tn, t.tk) and (not new_a or p.k_tiles > 1), out


def vector_program(p: DequantPlan) -> Program:
    """The program of plan ``p`` (``vector`` scheme); regions as :func:`compiler.kernels.dequant_gemm.dequant_gemm`
    says."""
    instrs = [i for _, step in _steps(p) for i in step]
    return Program(config=p.target.config, regions=loads.dram_regions(p), sems=tuple(SemDecl(n, v) for n, v in SEMS),
                   instrs=tuple(instrs) + (Halt(),))


def vector_step(p: DequantPlan) -> list:
    """The instructions of one whole-tile step that loads no A unless every step does (a search's lower bound of
    the program repeats it), or [] when there is none."""
    return next((step for typical, step in _steps(p) if typical), [])


def _matmuls(lay: WsLayout, acc: int, ab: int, bb: int, tm: int, tk: int, tn: int, waits: tuple[str, ...],
             signals: tuple[str, ...]) -> list:
    """A step's matrix work into the ACC tile at ``acc`` (zeroed first when ``waits`` takes an empty one), synced.
    (A's rows are ``tk`` apart: :func:`loads.a_rows` with the step's own ``tk`` as the pitch.)"""
    return synced(lay.matmuls(acc, ab, bb, tm, tk, tn, F32, "acc_empty" in waits), waits, signals)

