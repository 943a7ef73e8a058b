"""Hypothesis strategies that build random *valid* isa objects: views, instructions of every kind, whole Programs.

Every instruction obeys its class's rules (dtype pairings, reductions, pads, clamp bounds, sync slots) and only names
regions and semaphores of the program it is drawn for. Floats are finite or infinite, never NaN (NaN != NaN).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

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
from isa.arch import load_arch
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
mm_kn = st.one_of(st.integers(1, 255), st.integers(256, MAX_EXTENT))   # (k, n above 255 use the high bytes)
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
    kind = draw(st.sampled_from(("int", "float", "weight-only")))
    if kind == "int":
        ta, tb, tacc = draw(st.sampled_from(MXU_INT)), draw(st.sampled_from(MXU_INT)), DType.I32
    else:   # float x float of one type, or float x i8/u8 codes
        ta, tacc = draw(st.sampled_from(MXU_FLOAT)), DType.F32
        tb = ta if kind == "float" else draw(st.sampled_from(MXU_INT))
    return MatMul(shape=shape, m=draw(st.integers(1, MAX_EXTENT)), k=draw(mm_kn),
                  n=draw(mm_kn), acc=draw(views(nd, (Space.ACC,), (tacc,))), acc_row=draw(I32),
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


# ------------------------------------------------------------------------------------------------ runnable programs
SMALL = 256
"""Bytes of the SPM, the ACC and the DRAM region ``D`` of :func:`runnable_programs`: small, so operands collide."""
SMALL_CONFIG = ProgramConfig(rows=4, cols=4, spm=SMALL, acc=SMALL)
STRIDE_STEPS = (1, 1, 2, 3, 4, -1, -2, 0)


def _fit(draw, space: Space, dtype: DType, shape: Sequence[int], extra: Sequence[tuple[int, int]] = (),
         zero_ok: bool = True) -> View:
    """A view of ``dtype`` in ``space`` (DRAM: region ``D``) over ``shape`` + ``extra`` inside SMALL bytes, aligned."""
    es = dtype.size
    steps = STRIDE_STEPS if zero_ok else STRIDE_STEPS[:-1]
    strides = [draw(st.sampled_from(steps)) * es for _ in shape]
    span = lambda ss: sum((e - 1) * s for e, s in (*zip(shape, ss), *extra) if s > 0) - \
        sum((e - 1) * s for e, s in (*zip(shape, ss), *extra) if s < 0) + es
    if span(strides) > SMALL:   # fall back to row-major, or to a stride of 0 under extra dimensions (mxu.mm)
        strides, step = [0] * len(shape), es
        for i in reversed(range(len(shape))):
            strides[i], step = (0, step) if extra else (step, step * shape[i])
    neg = -sum((e - 1) * s for e, s in (*zip(shape, strides), *extra) if s < 0)
    top = SMALL - span(strides) + neg
    base = es * draw(st.integers(-(-neg // es), top // es))
    return View(space, base, dtype, tuple(strides), "D" if space is Space.DRAM else None)


@st.composite
def _small_instr(draw) -> Instr:
    """One memory instruction over SMALL-byte memories (integer types, extents <= 4, up to 3 dimensions)."""
    kind = draw(st.sampled_from(("copy", "copy", "fill", "mm", "binary", "unary", "host")))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=1, max_size=3)))
    ints = (DType.I8, DType.I16, DType.I32)
    if kind in ("copy", "fill"):
        queue = draw(st.sampled_from((Queue.DMA_LD, Queue.DMA_ST)))
        dtype = draw(st.sampled_from(ints))
        dst = _fit(draw, draw(st.sampled_from(tuple(Space))), dtype, shape)
        if kind == "fill":
            return DmaFill(queue=queue, shape=shape, dst=dst, value=draw(st.integers(-100, 100)))
        d = draw(st.integers(0, len(shape) - 1))
        pad = (Pad(d, lo := draw(st.integers(0, shape[d])), draw(st.integers(0, shape[d] - lo))),) \
            if draw(st.booleans()) else ()
        src_shape = tuple(e - sum(p.lo + p.hi for p in pad if p.dim == i) for i, e in enumerate(shape))
        src = _fit(draw, draw(st.sampled_from(tuple(Space))), dtype, tuple(max(e, 1) for e in src_shape))
        return DmaCopy(queue=queue, shape=shape, dst=dst, src=src, pad=pad, fill=draw(st.integers(-5, 5)))
    if kind == "mm":
        shape = shape[:2]
        m, k, n = (draw(st.integers(1, 4)) for _ in range(3))
        acc_row = 4 * draw(st.sampled_from((n, n, 1, 2 * n)))
        a_row = draw(st.sampled_from((k, 2 * k, 1)))
        return MatMul(shape=shape, m=m, k=k, n=n, acc_row=acc_row, a_row=a_row, zero=draw(st.booleans()),
                      acc=_fit(draw, Space.ACC, DType.I32, shape, ((m, acc_row), (n, 4))),
                      a=_fit(draw, Space.SPM, DType.I8, shape, ((m, a_row), (k, 1))),
                      b=_fit(draw, Space.SPM, DType.I8, shape, ((k * n, 1),)))
    if kind == "host":
        return HostCall(fn="h", rd=SMALL, wr=SMALL, ops=draw(st.integers(0, 1000)))
    space = lambda: draw(st.sampled_from(VPU_SPACES))
    reduce = draw(st.sampled_from((Reduce.NONE, Reduce.NONE, Reduce.SUM, Reduce.MAX)))
    dst = _fit(draw, space(), draw(st.sampled_from(ints)), shape, zero_ok=reduce is not Reduce.NONE)
    src = _fit(draw, space(), draw(st.sampled_from(ints)), shape)
    zero = reduce is not Reduce.NONE and draw(st.booleans())
    if kind == "unary":
        return VecUnary(fn=draw(st.sampled_from((Act.MOV, Act.RELU, Act.NEG))), shape=shape, dst=dst, src=src,
                        reduce=reduce, zero=zero)
    return VecBinary(op=draw(st.sampled_from((BinOp.ADD, BinOp.MAX, BinOp.MUL, BinOp.XOR))), shape=shape, dst=dst,
                     src0=src, src1=_fit(draw, space(), draw(st.sampled_from(ints)), shape), reduce=reduce, zero=zero)


@st.composite
def runnable_programs(draw, max_instrs: int = 10, ordered_waits: bool = True) -> Program:
    """A program that passes the verifier over SMALL-byte SPM, ACC and DRAM region ``D`` (plus ``SPM_OUT`` and
    ``ACC_OUT``, written by an epilogue after a barrier that copies the SPM and ACC there, so the final state of every
    memory is in the outputs). Its instructions carry random waits and signals on up to four semaphores, each between
    a random pair of queues, balanced at the end. ``ordered_waits``: a wait is only drawn when program order has
    signalled enough for it (then the program cannot deadlock, and runs serially); else waits are drawn freely and
    balanced by signals at the end (the program may deadlock). Host calls name the host function ``h``."""
    sems = []
    for i in range(draw(st.integers(0, 4))):
        prod, cons = draw(st.lists(st.sampled_from(UNIT_QUEUES), min_size=2, max_size=2, unique=True))
        sems.append((SemDecl(f"s{i}", draw(st.integers(0, 2))), prod, cons))
    count = {d.name: d.init for d, _, _ in sems}
    instrs: list[Instr] = []
    for _ in range(draw(st.integers(1, max_instrs))):
        if draw(st.integers(0, 9)) == 0:
            instrs.append(Barrier())
            continue
        ins = draw(_small_instr()) if draw(st.integers(0, 5)) else Sync(on=draw(st.sampled_from(UNIT_QUEUES)))
        waits, signals = [], []
        for d, prod, cons in sems:
            if cons is ins.queue and draw(st.booleans()):
                c = draw(st.integers(1, 2))
                if not ordered_waits or count[d.name] >= c:
                    waits.append(SemOp(d.name, c))
                    count[d.name] -= c
            if prod is ins.queue and draw(st.booleans()):   # (a queue is one end of each of <= 4 semaphores)
                c = draw(st.integers(1, 2))
                signals.append(SemOp(d.name, c))
                count[d.name] += c
        instrs.append(replace(ins, waits=tuple(waits), signals=tuple(signals)))
    for d, prod, cons in sems:   # balance: signal what is missing, take what is left over
        if count[d.name] < d.init:
            instrs.append(Sync(on=prod, signals=(SemOp(d.name, d.init - count[d.name]),)))
        elif count[d.name] > d.init:
            instrs.append(Sync(on=cons, waits=(SemOp(d.name, count[d.name] - d.init),)))
    whole = lambda space, region=None: View(space, 0, DType.I8, (1,), region)
    instrs += [Barrier(),
               DmaCopy(queue=Queue.DMA_ST, shape=(SMALL,), dst=whole(Space.DRAM, "SPM_OUT"), src=whole(Space.SPM)),
               DmaCopy(queue=Queue.DMA_ST, shape=(SMALL,), dst=whole(Space.DRAM, "ACC_OUT"), src=whole(Space.ACC)),
               Halt()]
    regions = tuple(Region(name, i, SMALL) for i, name in enumerate(("D", "SPM_OUT", "ACC_OUT")))
    return Program(SMALL_CONFIG, regions, tuple(d for d, _, _ in sems), tuple(instrs))


# synchronised programs as assembly text (the simulator's timing tests) ----------------------------------------
HEAD = ".config rows=16 cols=16 spm=262144 acc=65536\n.region X r0 4096\n.region Y r1 4096\n"
LOAD = "dma.ld shape[16,64] dst=spm:0x0<i8>{64,1} src=dram:X+0x0<i8>{256,1}"
ADD = "vpu.add shape[16,64] dst=spm:0x1000<i8>{64,1} src0=spm:0x0<i8>{64,1} imm=3"
STORE = "dma.st shape[8,128] dst=dram:Y+0x800<i8>{128,1} src=spm:0x1000<i8>{128,1}"
BODIES = {   # queue -> instructions without semaphore operations (operands in X, Y, SPM, ACC)
    "dma.ld": [LOAD, "dma.ld shape[32,48] dst=spm:0x0<i8>{48,1} src=dram:X+0x0<i8>{112,1}", "dma.ld.sync"],
    "dma.st": [STORE, "dma.st.fill shape[32] dst=dram:Y+0x100<i32>{4} value=-7", "dma.st.sync"],
    "mxu": ["mxu.mm.z shape[2,3] m=32 k=16 n=16 acc=acc:0x0<i32>{2048,0} acc.row=64 a=spm:0x0<i8>{0,16} a.row=48 "
            "b=spm:0xc00<i8>{768,256}", "mxu.sync"],
    "vpu": [ADD, "vpu.act.exp shape[16,64] dst=spm:0x4000<f32>{256,4} src=spm:0x2000<f16>{128,2}", "vpu.sync"],
    "host": ["host.call fn=post rd=1024 wr=64 ops=4096", "host.sync"],
}


@st.composite
def synced_programs(draw):
    """A program of random unit instructions and barriers, with semaphores whose waits and signals balance (it may
    deadlock or overflow at run time), and an Arch with few ports, channels and queue slots."""
    queues = list(BODIES)
    lines = [[q, draw(st.sampled_from(BODIES[q])), [], []] for q in draw(st.lists(st.sampled_from(queues), min_size=1,
                                                                                  max_size=30))]
    for _ in range(draw(st.integers(0, 3))):
        lines.insert(draw(st.integers(0, len(lines))), ["ctrl", "barrier", [], []])
    sems = []
    for s in range(draw(st.integers(0, 4))):
        name = f"s{s}"
        p, c = draw(st.lists(st.sampled_from(queues), min_size=2, max_size=2, unique=True))
        sems.append(f".sem {name} {draw(st.integers(0, 2))}\n")
        for _ in range(draw(st.integers(1, 4))):
            n = draw(st.sampled_from((1, 1, 2, 3, 100)))
            for q, role in ((p, 3), (c, 2)):
                k = draw(st.integers(0, len(lines)))
                cands = [i for i, line in enumerate(lines) if line[0] == q and len(line[2]) + len(line[3]) < 4
                         and name not in [o for o, _ in line[role]]]
                if cands and draw(st.booleans()):
                    lines[draw(st.sampled_from(cands))][role].append((name, n))
                else:
                    lines.insert(k, [q, f"{q}.sync", [], []])
                    lines[k][role].append((name, n))

    def ops(kind, items):
        return f" {kind}(" + ", ".join(f"{o}*{n}" for o, n in items) + ")" if items else ""

    text = HEAD + "".join(sems) + "".join(f"{b}{ops('wait', w)}{ops('signal', s)}\n" for _, b, w, s in lines)
    overrides = [f"spm.ports={draw(st.integers(1, 2))}", f"acc.ports={draw(st.integers(1, 2))}",
                 f"dma.channels={draw(st.integers(1, 2))}", f"queues.depth={draw(st.sampled_from((1, 2, 8)))}"]
    max_cycles = draw(st.integers(0, 3000)) if draw(st.integers(0, 3)) == 0 else None
    return text + "halt\n", load_arch("edge16", overrides), max_cycles
