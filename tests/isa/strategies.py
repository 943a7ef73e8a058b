"""Hypothesis strategies that build random *valid* isa objects: views, instructions of every kind, whole Programs.

Every instruction obeys its class's rules (dtype pairings, reductions, pads, clamp bounds, sync slots) and only names
regions and semaphores of the program it is drawn for. Floats are finite or infinite, never NaN (NaN != NaN).
"""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import strategies as st

from isa import (
    INT_RANGE,
    UNIT_QUEUES,
    Act,
    Barrier,
    BinOp,
    DmaCopy,
    DmaFill,
    DType,
    Gather,
    Halt,
    HostCall,
    Instr,
    MatMul,
    Pad,
    Program,
    ProgramConfig,
    Queue,
    Reduce,
    Region,
    SemDecl,
    SemOp,
    Space,
    Sync,
    VecBinary,
    VecConvert,
    VecRequant,
    VecUnary,
    View,
)
from isa.instructions import (
    FLOAT_ONLY_ACTS,
    FLOAT_ONLY_BINOPS,
    FUSED_ACTS,
    GATHER_QUEUES,
    GATHER_TABLE_SPACES,
    INT_ONLY_BINOPS,
    MAX_GATHER_DIMS,
    MAX_PAD,
    MAX_SEM_COUNT,
    MAX_SYNC_SLOTS,
    MAX_TABLE_ROWS,
    MXU_FLOAT,
    MXU_INT,
)
from isa.program import MAX_REGIONS, SEM_MAX
from isa.view import MAX_DIMS, MAX_EXTENT, NAME_CHARS

INTS = tuple(d for d in DType if not d.is_float)
FLOATS = tuple(d for d in DType if d.is_float)
VPU_SPACES = (Space.SPM, Space.ACC)
U32 = st.integers(1, 2**32 - 1)
I32 = st.one_of(st.integers(-64, 64), st.integers(-(2**31), 2**31 - 1))
F32 = st.floats(width=32, allow_nan=False)

names = st.tuples(st.sampled_from(NAME_CHARS[:52] + "_"), st.text(NAME_CHARS, max_size=30)).map("".join)
"""Region/semaphore names: 1-31 letters, digits and '_', not starting with a digit."""
extents = st.one_of(st.integers(1, 8), st.integers(1, MAX_EXTENT))
bases = st.one_of(st.integers(0, 0x10000), st.integers(0, 2**32 - 1))


def shapes(max_dims: int = MAX_DIMS) -> st.SearchStrategy[tuple[int, ...]]:
    return st.lists(extents, min_size=1, max_size=max_dims).map(tuple)


def values(dtype: DType) -> st.SearchStrategy[int | float]:
    """An immediate a field typed ``dtype`` holds: any f32 (no NaN) for floats, the dtype's range for integers."""
    return F32 if dtype.is_float else st.integers(*INT_RANGE[dtype])


@st.composite
def views(draw, ndim: int, spaces: Sequence[Space] = VPU_SPACES, dtypes: Sequence[DType] = tuple(DType),
          regions: Sequence[Region] = (), reduce_ok: bool = True) -> View:
    """A view with ``ndim`` strides; DRAM only if ``regions``; no zero strides unless ``reduce_ok``."""
    space = draw(st.sampled_from([s for s in spaces if s is not Space.DRAM or regions]))
    strides = tuple(draw(st.lists(I32, min_size=ndim, max_size=ndim)))
    if not reduce_ok:
        strides = tuple(s or 1 for s in strides)
    region = draw(st.sampled_from(regions)).name if space is Space.DRAM else None
    return View(space, draw(bases), draw(st.sampled_from(dtypes)), strides, region)


@st.composite
def sem_ops(draw, sems: Sequence[SemDecl]) -> dict[str, tuple[SemOp, ...]]:
    """``waits``/``signals`` keyword arguments: distinct names per list, at most four operations in all."""
    if not sems:
        return {"waits": (), "signals": ()}
    pool = st.sampled_from([s.name for s in sems])
    count = st.one_of(st.just(1), st.integers(1, MAX_SEM_COUNT))
    waits = draw(st.lists(pool, unique=True, max_size=MAX_SYNC_SLOTS))
    signals = draw(st.lists(pool, unique=True, max_size=MAX_SYNC_SLOTS - len(waits)))
    return {"waits": tuple(SemOp(n, draw(count)) for n in waits),
            "signals": tuple(SemOp(n, draw(count)) for n in signals)}


def _reduction(draw) -> tuple[Reduce, bool]:
    reduce = draw(st.sampled_from(Reduce))
    return reduce, reduce is not Reduce.NONE and draw(st.booleans())


@st.composite
def dma_copies(draw, regions: Sequence[Region] = (), sems: Sequence[SemDecl] = ()) -> DmaCopy:
    shape = draw(shapes())
    nd, size = len(shape), draw(st.sampled_from((1, 2, 4)))
    same = [d for d in DType if d.size == size]
    spaces = tuple(Space)
    dst = draw(views(nd, spaces, same, regions))
    src = draw(views(nd, spaces, same, regions))
    pad = []
    for d in draw(st.lists(st.integers(0, nd - 1), unique=True, max_size=nd)):
        lo = draw(st.integers(0, min(MAX_PAD, shape[d])))
        pad.append(Pad(d, lo, draw(st.integers(0, min(MAX_PAD, shape[d] - lo)))))
    fill = draw(values(dst.dtype)) if pad or draw(st.booleans()) else 0
    return DmaCopy(queue=draw(st.sampled_from((Queue.DMA_LD, Queue.DMA_ST))), shape=shape, dst=dst, src=src,
                   pad=tuple(pad), fill=fill, **draw(sem_ops(sems)))


@st.composite
def dma_fills(draw, regions: Sequence[Region] = (), sems: Sequence[SemDecl] = ()) -> DmaFill:
    shape = draw(shapes())
    dst = draw(views(len(shape), tuple(Space), tuple(DType), regions))
    return DmaFill(queue=draw(st.sampled_from((Queue.DMA_LD, Queue.DMA_ST))), shape=shape, dst=dst,
                   value=draw(values(dst.dtype)), **draw(sem_ops(sems)))


@st.composite
def matmuls(draw, sems: Sequence[SemDecl] = ()) -> MatMul:
    shape = draw(shapes(4))
    nd = len(shape)
    if draw(st.booleans()):
        ta, tb, tacc = draw(st.sampled_from(MXU_INT)), draw(st.sampled_from(MXU_INT)), DType.I32
    else:
        ta = tb = draw(st.sampled_from(MXU_FLOAT))
        tacc = DType.F32
    return MatMul(shape=shape, m=draw(st.integers(1, MAX_EXTENT)), k=draw(st.integers(1, 255)),
                  n=draw(st.integers(1, 255)), acc=draw(views(nd, (Space.ACC,), (tacc,))), acc_row=draw(I32),
                  a=draw(views(nd, (Space.SPM,), (ta,))), a_row=draw(I32), b=draw(views(nd, (Space.SPM,), (tb,))),
                  zero=draw(st.booleans()), **draw(sem_ops(sems)))


@st.composite
def vec_binaries(draw, sems: Sequence[SemDecl] = ()) -> VecBinary:
    op = draw(st.sampled_from(BinOp))
    flt = op in FLOAT_ONLY_BINOPS or op not in INT_ONLY_BINOPS and draw(st.booleans())
    srcs = FLOATS if flt else INTS
    shape = draw(shapes())
    nd = len(shape)
    reduce, zero = _reduction(draw)
    src1 = draw(st.one_of(st.none(), views(nd, dtypes=srcs)))
    imm = draw(values(DType.F32 if flt else DType.I32)) if src1 is None or draw(st.booleans()) else 0
    act = draw(st.sampled_from((None, *sorted(FUSED_ACTS)))) if reduce is Reduce.NONE else None
    bound = values(DType.F32 if flt else DType.I32)
    lo, hi = sorted(draw(st.tuples(bound, bound))) if act is Act.CLAMP else (0, 0)
    return VecBinary(op=op, shape=shape, dst=draw(views(nd, reduce_ok=reduce is not Reduce.NONE)),
                     src0=draw(views(nd, dtypes=srcs)), src1=src1, imm=imm, reduce=reduce, zero=zero, act=act, lo=lo,
                     hi=hi, **draw(sem_ops(sems)))


@st.composite
def vec_unaries(draw, sems: Sequence[SemDecl] = ()) -> VecUnary:
    fn = draw(st.sampled_from(Act))
    flt = fn in FLOAT_ONLY_ACTS or draw(st.booleans())
    shape = draw(shapes())
    nd = len(shape)
    reduce, zero = _reduction(draw)
    bound = values(DType.F32 if flt else DType.I32)
    lo, hi = sorted(draw(st.one_of(st.just((0, 0)), st.tuples(bound, bound))))
    return VecUnary(fn=fn, shape=shape, dst=draw(views(nd, reduce_ok=reduce is not Reduce.NONE)),
                    src=draw(views(nd, dtypes=FLOATS if flt else INTS)), lo=lo, hi=hi, reduce=reduce, zero=zero,
                    **draw(sem_ops(sems)))


@st.composite
def vec_converts(draw, sems: Sequence[SemDecl] = ()) -> VecConvert:
    shape = draw(shapes())
    nd = len(shape)
    zp = st.integers(*INT_RANGE[DType.I16])
    return VecConvert(shape=shape, dst=draw(views(nd, reduce_ok=False)), src=draw(views(nd)), scale=draw(F32),
                      zp_in=draw(zp), zp_out=draw(zp), **draw(sem_ops(sems)))


@st.composite
def vec_requants(draw, sems: Sequence[SemDecl] = ()) -> VecRequant:
    shape = draw(shapes())
    nd = len(shape)
    dst = draw(views(nd, dtypes=INTS, reduce_ok=False))
    v = st.integers(*INT_RANGE[dst.dtype])
    lo, hi = sorted((draw(v), draw(v)))
    return VecRequant(shape=shape, dst=dst, src=draw(views(nd, dtypes=(DType.I32,))),
                      prm=draw(views(nd, dtypes=(DType.I32,))), zp=draw(v), lo=lo, hi=hi, **draw(sem_ops(sems)))


@st.composite
def gathers(draw, regions: Sequence[Region] = (), sems: Sequence[SemDecl] = ()) -> Gather:
    queue = draw(st.sampled_from(GATHER_QUEUES))
    shape = draw(shapes(MAX_GATHER_DIMS))
    nd, size = len(shape), draw(st.sampled_from((1, 2, 4)))
    same = [d for d in DType if d.size == size]
    dst = draw(views(nd + 1, dtypes=same))
    table = draw(views(1, GATHER_TABLE_SPACES[queue], same, regions))
    return Gather(queue=queue, shape=shape, row=draw(extents), rows=draw(st.one_of(st.integers(1, 64),
                                                                                    st.integers(1, MAX_TABLE_ROWS))),
                  dst=dst, table=table, idx=draw(views(nd, dtypes=(DType.I32,))), fill=draw(values(dst.dtype)),
                  **draw(sem_ops(sems)))


@st.composite
def syncs(draw, sems: Sequence[SemDecl] = ()) -> Sync:
    return Sync(on=draw(st.sampled_from(UNIT_QUEUES)), **draw(sem_ops(sems)))


@st.composite
def host_calls(draw, sems: Sequence[SemDecl] = ()) -> HostCall:
    n = st.one_of(st.integers(0, 4096), st.integers(0, 2**63 - 1))
    return HostCall(fn=draw(names), rd=draw(n), wr=draw(n), ops=draw(n), **draw(sem_ops(sems)))


def instructions(regions: Sequence[Region] = (), sems: Sequence[SemDecl] = ()) -> st.SearchStrategy[Instr]:
    """Any instruction kind, naming only the given regions and semaphores."""
    return st.one_of(dma_copies(regions, sems), dma_fills(regions, sems), matmuls(sems), vec_binaries(sems),
                     vec_unaries(sems), vec_converts(sems), vec_requants(sems), gathers(regions, sems),
                     host_calls(sems), syncs(sems),
                     st.just(Barrier()),
                     st.just(Halt()))


configs = st.builds(ProgramConfig, rows=U32, cols=U32, spm=U32, acc=U32)


@st.composite
def programs(draw, max_instrs: int = 8) -> Program:
    """A valid Program: random config, up to 4 regions and 6 semaphores, up to ``max_instrs`` instructions."""
    region_names = draw(st.lists(names, unique=True, max_size=4))
    indices = draw(st.lists(st.integers(0, MAX_REGIONS - 1), unique=True, min_size=len(region_names),
                            max_size=len(region_names)))
    regions = tuple(Region(n, i, draw(U32)) for n, i in zip(region_names, indices))
    sems = tuple(SemDecl(n, draw(st.integers(0, SEM_MAX))) for n in draw(st.lists(names, unique=True, max_size=6)))
    instrs = draw(st.lists(instructions(regions, sems), max_size=max_instrs))
    return Program(draw(configs), regions, sems, tuple(instrs))
