"""isa.cost.program_estimate, the compiler's price of a whole program, against the simulator and by hand."""

import pytest

from compiler.kernels.common.target import Target
from compiler.kernels.conv2d import ConvShape, conv2d, search_conv_tiling
from isa import DmaCopy, DType, Halt, MatMul, Program, ProgramConfig, Queue, Region, SemDecl, SemOp, Space, View
from isa.arch import load_arch, presets_by_size
from isa.cost import instr_cost, instr_costs, program_estimate
from npusim import simulate


@pytest.mark.parametrize("preset", presets_by_size())
@pytest.mark.parametrize("cs", [ConvShape(1, 64, 56, 56, 64, 3, 3, 1, 1), ConvShape(1, 256, 14, 14, 1024, 1, 1),
                                ConvShape(1, 3, 64, 64, 32, 7, 7, 2, 3), ConvShape(1, 128, 28, 28, 128, 3, 3, 2, 1)])
def test_estimate_tracks_the_simulation_of_searched_convs(preset, cs):
    # the search ranks tilings by this number: it must stay within 10% of the simulated cycles (measured: 0.997 to
    # 1.099 over these 12 programs)
    arch = load_arch(preset)
    target = Target.of(arch)
    p = conv2d(cs, DType.F32, target, search_conv_tiling(cs, DType.F32, target))
    sim = simulate(p, arch, timing_only=True).cycles
    assert abs(program_estimate(p, arch) - sim) <= 0.1 * sim


def test_estimate_of_one_load_compute_store_chain_is_their_sum():
    # nothing overlaps a single step: the head (the load), the busiest queue (any one instruction) and the tail (the
    # store after the last matrix instruction) add up to the chain, less the busiest one counted in both
    arch = load_arch("edge16")
    a = View(Space.SPM, 0, DType.I8, (16, 1))
    ld = DmaCopy(queue=Queue.DMA_LD, shape=(16, 16), dst=a, src=View(Space.DRAM, 0, DType.I8, (16, 1), "A"),
                 signals=(SemOp("full"),))
    mm = MatMul(shape=(1,), m=16, k=16, n=16, zero=True, acc=View(Space.ACC, 0, DType.I32, (0,)), acc_row=64,
                a=View(Space.SPM, 0, DType.I8, (0,)), a_row=16, b=View(Space.SPM, 256, DType.I8, (0,)),
                waits=(SemOp("full"),), signals=(SemOp("done"),))
    st = DmaCopy(queue=Queue.DMA_ST, shape=(16, 16), dst=View(Space.DRAM, 0, DType.I32, (64, 4), "C"),
                 src=View(Space.ACC, 0, DType.I32, (64, 4)), waits=(SemOp("done"),))
    p = Program(ProgramConfig(16, 16, arch.spm.size, arch.acc.size), (Region("A", 0, 256), Region("C", 1, 1024)),
                (SemDecl("full", 0), SemDecl("done", 0)), (ld, mm, st, Halt()))
    cl, cm, cs = (instr_cost(i, arch).cycles for i in (ld, mm, st))
    assert program_estimate(p, arch) == max(cl, cm, cs) + cl + cs
    assert simulate(p, arch, timing_only=True).cycles == cl + cm + cs


def test_leading_constants_counts_the_weight_and_bias_loads_before_the_first_input():
    # conv2d starts with the bias load, then the first weight chunk ahead of the first input window: those two (and
    # nothing after the input) are what cross-layer prefetch hides
    from compiler.kernels.conv2d import Epilogue
    from compiler.link.linker import leading_constants
    arch = load_arch("dc128")
    cs = ConvShape(1, 256, 14, 14, 256, 3, 3, 1, 1)
    p = conv2d(cs, DType.F32, Target.of(arch), epilogue=Epilogue(bias=True, act="relu"))
    first_x = next(k for k, i in enumerate(p.instrs) if isinstance(i, DmaCopy) and i.src.region == "X")
    assert [i.src.region for i in p.instrs[:first_x]] == ["Bias", "Wt"]
    bind = {"Bias": ("W", 0), "Wt": ("W", 4096), "X": ("ACT", 0)}
    assert leading_constants(p, arch, bind) == sum(instr_cost(i, arch).cycles for i in p.instrs[:first_x])
    assert leading_constants(p, arch, {"X": ("ACT", 0)}) == 0   # not bound to W: not constants


@pytest.mark.parametrize("cs", [ConvShape(1, 1024, 14, 14, 256, 1, 1), ConvShape(1, 512, 7, 7, 512, 3, 3, 1, 1)])
def test_search_with_hidden_constants_minimizes_the_estimate_without_them(cs):
    # under prefetch the leading weight loads overlap the previous layer: the search prices without them, so its
    # pick is no worse than the default pick by that measure (and the default pick no worse by the full estimate)
    from compiler.kernels.common.search import CONSTANTS
    from compiler.kernels.conv2d import Epilogue
    from compiler.link.linker import leading_constants
    arch = load_arch("dc128")
    ep = Epilogue(bias=True, act="relu")

    def costs(t):
        p = conv2d(cs, DType.F32, Target.of(arch), t, ep)
        est = program_estimate(p, arch)
        return est, est - leading_constants(p, arch, CONSTANTS)

    target = Target.of(arch)
    full, hidden = search_conv_tiling(cs, DType.F32, target, ep), search_conv_tiling(cs, DType.F32, target, ep, True)
    # with the weights free up front, more output-channel blocks per tile read each input window fewer times
    assert hidden.tnb > full.tnb
    assert costs(hidden)[1] < costs(full)[1]
    assert costs(full)[0] <= costs(hidden)[0]


def _formula(instrs, arch):
    """program_estimate as a formula over the whole list (the oracle of the running sum): busiest unit or bus, plus
    the loads before the first compute instruction, plus the stores (and, after a matrix instruction, the vector
    work) after the last matrix instruction, or the stores after the last compute instruction when there is none."""
    from isa.units import UNIT_OF, Role

    costs = instr_costs(instrs, arch)
    roles = [None if i.queue is Queue.CTRL else UNIT_OF[i.queue].role for i in instrs]
    busy: dict = {}
    for i, c, r in zip(instrs, costs, roles):
        if r is not None:
            busy[i.unit_key] = busy.get(i.unit_key, 0) + c.cycles   # (per unit: queue and ordinal)
    top = max(max(busy.values(), default=0), sum(c.dram_window for c in costs))
    compute = [k for k, r in enumerate(roles) if r is not None and r.is_compute]
    if not compute:
        return top
    head = sum(c.cycles for c, r in zip(costs[:compute[0]], roles) if r is Role.DMA_LOAD)
    last = max((k for k in compute if roles[k] is Role.MATRIX), default=compute[-1])
    tail = sum(costs[k].cycles for k in range(last + 1, len(instrs)) if roles[k] is Role.DMA_STORE
               or roles[k] is Role.VECTOR and roles[last] is Role.MATRIX)
    return top + head + tail


def test_running_estimate_of_groups_and_repeats_equals_the_formula_of_the_program_they_make():
    # ProgramEstimate summed in groups (some added as parts priced before, some repeated) gives program_estimate's
    # formula of the instructions written out; its hidden run is the program's leading constant loads
    import random

    from compiler.kernels.conv2d import Epilogue
    from compiler.kernels.gemm import tiled_gemm
    from compiler.link.linker import is_constant_load, leading_constants
    from isa.cost import ProgramEstimate

    arch = load_arch("edge16")
    target = Target.of(arch)
    programs = [conv2d(ConvShape(1, 16, 12, 12, 32, 3, 3, 1, 1), DType.F32, target,
                       epilogue=Epilogue(bias=True, act="relu")),
                tiled_gemm(40, 70, 50, DType.I8, target),
                tiled_gemm(64, 48, 32, DType.F32, target, epilogue=Epilogue(bias=True, act="gelu_tanh"))]
    rng = random.Random(0)
    tried = 0
    for prog in programs:
        instrs = list(prog.instrs)
        assert program_estimate(prog, arch) == _formula(instrs, arch)
        for _ in range(40):
            a = rng.randrange(len(instrs))
            b = min(len(instrs), a + rng.randrange(1, 40))
            r = rng.randrange(1, 5)
            whole = instrs[:a] + instrs[a:b] * r + instrs[b:]
            est = ProgramEstimate(arch, hidden=is_constant_load)
            k = 0
            while k < a:   # the part before the repeated group in random pieces, some priced apart first
                j = min(a, k + rng.randrange(1, 30))
                est.add_parts(est.price(instrs[k:j])) if rng.random() < 0.5 else est.add(instrs[k:j])
                k = j
            est.add(instrs[a:b], r)
            est.add(instrs[b:])
            assert est.cycles == _formula(whole, arch), (a, b, r)
            assert est.hidden == leading_constants(Program(prog.config, prog.regions, prog.sems, tuple(whole)),
                                                   arch)
            tried += 1
    assert tried == 120
