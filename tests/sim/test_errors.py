"""Bad input gets a specific error whose message says what and where; nothing hangs."""

import dataclasses

import pytest

from isa import (
    ArchError,
    DeadlockError,
    DmaCopy,
    DType,
    Halt,
    HostCall,
    Program,
    ProgramConfig,
    Queue,
    Region,
    SemDecl,
    SemOp,
    SimulationError,
    Space,
    Sync,
    VerifyError,
    View,
)
from isa.arch import Arch, load_arch, presets_by_size
from npusim import simulate

CFG = ProgramConfig(rows=16, cols=16, spm=262144, acc=65536)
EDGE = load_arch("edge16")


def cross_wait_program(depth_pad: int = 0) -> Program:
    sems = (SemDecl("mxu_done", 0), SemDecl("vpu_done", 0))
    instrs = [Sync(on=Queue.MXU, waits=(SemOp("vpu_done"),), signals=(SemOp("mxu_done"),)),
              Sync(on=Queue.VPU, waits=(SemOp("mxu_done"),), signals=(SemOp("vpu_done"),))]
    return Program(CFG, (), sems, tuple(instrs) + (Halt(),))


def test_deadlock_names_blocked_queues_and_cycle():
    with pytest.raises(DeadlockError) as err:
        simulate(cross_wait_program(), EDGE, timing_only=True)
    msg = str(err.value)
    assert msg.startswith("deadlock at cycle 0: ")
    assert "mxu blocked at pc 0 `mxu.sync wait(vpu_done) signal(mxu_done)` waiting on vpu_done (have 0, need 1)" in msg
    assert "vpu blocked at pc 1 `vpu.sync wait(mxu_done) signal(vpu_done)` waiting on mxu_done (have 0, need 1)" in msg
    assert "wait-for cycle: mxu -> vpu -> mxu" in msg


def test_static_scan_warns_about_the_same_program():
    from isa.verify import verify

    (warning,) = verify(cross_wait_program()).warnings
    assert warning.startswith("pc 0 `mxu.sync wait(vpu_done) signal(mxu_done)` waits for vpu_done*1 but only 0")


def test_deadlock_behind_a_full_queue_reports_the_dispatcher():
    # dma.ld waits for a token that only a later vpu instruction gives, behind more dma.ld work than the queue
    # holds: the dispatcher blocks on the full dma.ld queue before it can dispatch the vpu signal.
    arch = EDGE.with_overrides(["queues.depth=1"])
    load = DmaCopy(queue=Queue.DMA_LD, shape=(16,), dst=View(Space.SPM, 0, DType.I8, (1,)),
                   src=View(Space.DRAM, 0, DType.I8, (1,), "A"))
    instrs = (dataclasses.replace(load, waits=(SemOp("go"),)), load, load,
              Sync(on=Queue.VPU, signals=(SemOp("go"),)), Halt())
    p = Program(CFG, (Region("A", 0, 64),), (SemDecl("go", 0),), instrs)
    with pytest.raises(DeadlockError, match=r"dma\.ld blocked at pc 0 .* waiting on go \(have 0, need 1\); "
                                            r"dispatcher blocked at pc 2: queue dma\.ld full \(1/1\)"):
        simulate(p, arch, timing_only=True)
    # with a deeper queue the same program runs: the scan's warning was conservative
    assert simulate(p, EDGE, timing_only=True).cycles > 0


def test_out_of_range_address():
    load = DmaCopy(queue=Queue.DMA_LD, shape=(17, 256), dst=View(Space.SPM, 0, DType.I8, (256, 1)),
                   src=View(Space.DRAM, 0, DType.I8, (256, 1), "A"))
    p = Program(CFG, (Region("A", 0, 4096),), (), (load, Halt()))
    with pytest.raises(VerifyError, match=r"^pc 0 `dma\.ld shape\[17,256\] .*`: operand src touches bytes "
                                          r"\[0x0, 0x1100\) outside the 4096-byte region A$"):
        simulate(p, EDGE)


def test_host_function_must_write_regions_in_place():
    """The kernels trust verified bounds, so a host function that swaps a region's array for another is refused."""
    load = DmaCopy(queue=Queue.DMA_LD, shape=(16,), dst=View(Space.SPM, 0, DType.I8, (1,)),
                   src=View(Space.DRAM, 0, DType.I8, (1,), "A"), waits=(SemOp("done"),))
    p = Program(CFG, (Region("A", 0, 4096),), (SemDecl("done", 0),),
                (HostCall(fn="f", signals=(SemOp("done"),)), load, Halt()))

    def shrink(dram):
        dram["A"] = dram["A"][:8]

    def fill(dram):
        dram["A"][:] = 7

    with pytest.raises(SimulationError, match=r"^pc 0 `host.call fn=f .*`: host function 'f' replaced the DRAM "
                                              r"regions' arrays; it must write into them in place$"):
        simulate(p, EDGE, host_functions={"f": shrink})
    assert (simulate(p, EDGE, host_functions={"f": fill}).outputs["A"] == 7).all()


def test_spm_overflow_against_config():
    load = DmaCopy(queue=Queue.DMA_LD, shape=(16,), dst=View(Space.SPM, 262140, DType.I8, (1,)),
                   src=View(Space.DRAM, 0, DType.I8, (1,), "A"))
    p = Program(CFG, (Region("A", 0, 4096),), (), (load, Halt()))
    with pytest.raises(VerifyError, match=r"operand dst touches bytes \[0x3fffc, 0x4000c\) outside the "
                                          r"262144-byte SPM"):
        simulate(p, EDGE)


def test_unbalanced_semaphore():
    p = Program(CFG, (), (SemDecl("full", 0),), (Sync(on=Queue.MXU, signals=(SemOp("full"),)), Halt()))
    with pytest.raises(VerifyError, match=r"^semaphore full is unbalanced: it starts at 0 and the program's waits "
                                          r"and signals leave it at 1$"):
        simulate(p, EDGE)


def test_two_producer_queues():
    p = Program(CFG, (), (SemDecl("s", 0),), (
        Sync(on=Queue.MXU, signals=(SemOp("s"),)), Sync(on=Queue.DMA_LD, signals=(SemOp("s"),)),
        Sync(on=Queue.VPU, waits=(SemOp("s", 2),)), Halt()))
    with pytest.raises(VerifyError, match=r"semaphore s is signalled by mxu and by dma\.ld; each semaphore has one "
                                          r"producer queue and one consumer queue"):
        simulate(p, EDGE)


def test_program_too_big_for_arch():
    p = Program(ProgramConfig(rows=32, cols=32, spm=1 << 20, acc=1 << 18), (), (), (Halt(),))
    with pytest.raises(VerifyError, match=r"needs matrix\.rows >= 32 \(\.config\) but arch edge16 has 16"):
        simulate(p, EDGE)


@pytest.mark.parametrize("override,message", [
    ("matrix.rows=0", "matrix.rows must be an integer in [1, 2**16 - 1] (the k and n of mxu.mm hold 1-65535), not 0"),
    ("matrix.dataflow=rs", "matrix.dataflow must be one of 'ws', 'os', 'is', not 'rs'"),
    ("spm.banks=6", "spm.banks must be an integer in [1, 1024] and a power of two, not 6"),
    ("dram.gb_per_s=-1", "dram.gb_per_s must be a number in [0.1, 1e+06] (at least 0.001 bytes per cycle at the "
                         "fastest clock), not -1.0"),
    ("dram.gb_per_sec=8", "unknown Arch field 'dram.gb_per_sec'; did you mean 'dram.gb_per_s'?"),
    ("dram.latency_ns=fast", "dram.latency_ns must be a number, not 'fast'"),
    ("matrix.fold_overlap=maybe", "matrix.fold_overlap must be true or false, not 'maybe'"),
    ("spm.size=1000", "spm.size must be a multiple of banks * bank_width = 128, not 1000"),
    ("rows=4", "override must look like section.field=value, not 'rows=4'"),
])
def test_bad_arch_field(override, message):
    with pytest.raises(ArchError) as err:
        EDGE.with_overrides([override])
    assert str(err.value) == message


def test_bad_arch_toml(tmp_path):
    with pytest.raises(ArchError, match=r"^bad\.toml: unknown Arch field 'matrix\.colls'; did you mean "
                                        r"'matrix\.cols'\?$"):
        Arch.from_toml("[matrix]\ncolls = 4\n", "bad.toml")
    with pytest.raises(ArchError, match=r"^--arch must be a preset \(dc128, edge16, mid32\) or a TOML file"):
        load_arch(str(tmp_path / "missing.toml"))


@pytest.mark.parametrize("preset", presets_by_size())
def test_presets_round_trip_through_toml(preset):
    arch = load_arch(preset)
    assert Arch.from_toml(arch.to_toml()) == arch
    assert arch.with_overrides(["matrix.rows=8"]).matrix.rows == 8


def test_cycle_cap_stops_a_long_run():
    from compiler.kernels.common.target import Target
    from compiler.kernels.gemm import tiled_gemm
    from isa import SimulationError

    p = tiled_gemm(64, 64, 64, DType.I8, Target.of(EDGE))
    with pytest.raises(SimulationError, match=r"^the cycle cap of 100 was reached with \d+ instructions in flight "
                                             r"\(the dispatcher is at pc \d+ of \d+\); raise max_cycles"):
        simulate(p, EDGE, timing_only=True, max_cycles=100)
