"""Value-kernel speed: element operations per CPU second of each instruction kind, the rates behind the run-time
estimate of :mod:`npusim.sim.limits` (its ``RATES``).

    python bench/value_speed.py [--seconds 1.0] [--repeats 3] [--models [MODEL.onnx ...]]

For every kind below, a mid32 program repeats one instruction of a shape the compiler emits (a 256-row f32 conv tile,
a 64 x 1024 weight load, a tiny fuzzed tile, ...) and is simulated twice, with values and timing-only; the kernels'
rate is the instruction's element operations (as :func:`npusim.sim.limits.program_work` counts them) over the
difference of the two CPU times (``time.process_time``: the machine is shared; best of ``--repeats``). The last
column is what the estimate assumes for the kind (``RATES``): a rate at or below the measured one means the estimate
errs on the slow side. Run ``npusim warm`` first: numba's compiles are not the kernels' speed.

A second table puts the estimate beside whole models on mid32 with values (default: onnx's light VGG-19 and
ResNet-50, which ship with the onnx wheel; ``--models`` names others, ``--models`` alone skips them): the estimated
seconds against the CPU seconds of the simulation (the faster of two runs, numba's first calls excluded).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import onnx

from isa.arch import load_arch
from isa.asm import parse_program
from npusim import simulate
from npusim.sim.limits import INSTRUCTION_SECONDS, RATES, program_work, rate_kind

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
CONFIG = ".config rows=32 cols=32 spm=1048576 acc=262144\n.region X r0 4194304\n.region Y r1 4194304\n"

CASES: dict[str, str] = {
    "dma.ld f32 64x1024 contiguous": "dma.ld shape[64,1024] dst=spm:0x0<f32>{4096,4} src=dram:X+0x0<f32>{4096,4}",
    "dma.ld f32 32x32x8 strided (im2col rows)":
        "dma.ld shape[32,32,8] dst=spm:0x0<f32>{1024,32,4} src=dram:X+0x0<f32>{8192,64,8}",
    "dma.ld i8 256x64 contiguous": "dma.ld shape[256,64] dst=spm:0x0<i8>{64,1} src=dram:X+0x0<i8>{64,1}",
    "dma.st f32 256x32 from acc": "dma.st shape[256,32] dst=dram:Y+0x0<f32>{128,4} src=acc:0x0<f32>{128,4}",
    "dma.ld f32 64x1024 padded": "dma.ld shape[64,1024] dst=spm:0x0<f32>{4096,4} src=dram:X+0x0<f32>{4088,4} "
                                 "pad{1:1/1} fill=0",
    "dma.ld.fill f32 64x1024": "dma.ld.fill shape[64,1024] dst=spm:0x0<f32>{4096,4} value=0",
    "mxu.mm f32 m=256 k=32 n=32 x8": "mxu.mm.z shape[8] m=256 k=32 n=32 acc=acc:0x0<f32>{0} acc.row=128 "
                                     "a=spm:0x0<f32>{128} a.row=1024 b=spm:0x40000<f32>{4096}",
    "mxu.mm i8 m=256 k=32 n=32 x8": "mxu.mm.z shape[8] m=256 k=32 n=32 acc=acc:0x0<i32>{0} acc.row=128 "
                                    "a=spm:0x0<i8>{32} a.row=256 b=spm:0x40000<i8>{1024}",
    "mxu.mm f32 m=1 k=32 n=32 x64 (GEMV)": "mxu.mm.z shape[64] m=1 k=32 n=32 acc=acc:0x0<f32>{0} acc.row=128 "
                                           "a=spm:0x0<f32>{128} a.row=128 b=spm:0x40000<f32>{4096}",
    "mxu.mm i8 m=6 k=8 n=16 x512 (tiny tiles)": "mxu.mm.z shape[512] m=6 k=8 n=16 acc=acc:0x0<i32>{0} acc.row=64 "
                                                "a=spm:0x0<i8>{0} a.row=8 b=spm:0x200<i8>{0}",
    "vpu.add f32 256x256": "vpu.add shape[256,256] dst=spm:0x0<f32>{1024,4} src0=spm:0x40000<f32>{1024,4} "
                           "src1=spm:0x80000<f32>{1024,4}",
    "vpu.add f32 256x256 act=relu": "vpu.add shape[256,256] dst=spm:0x0<f32>{1024,4} "
                                    "src0=spm:0x40000<f32>{1024,4} src1=spm:0x80000<f32>{0,4} act=relu",
    "vpu.mul.sum.z f32 64x16x16 reduce": "vpu.mul.sum.z shape[64,16,16] dst=spm:0x0<f32>{4,0,0} "
                                     "src0=spm:0x40000<f32>{1024,64,4} src1=spm:0x80000<f32>{1024,64,4}",
    "vpu.act.exp f32 256x256": "vpu.act.exp shape[256,256] dst=spm:0x0<f32>{1024,4} src=spm:0x40000<f32>{1024,4}",
    "vpu.act.gelu f32 256x256": "vpu.act.gelu shape[256,256] dst=spm:0x0<f32>{1024,4} src=spm:0x40000<f32>{1024,4}",
    "vpu.red.sum.z f32 256x256 rows": "vpu.red.sum.z shape[256,256] dst=spm:0x0<f32>{4,0} "
                                      "src=spm:0x40000<f32>{1024,4}",
    "vpu.cvt f32->i8 256x256": "vpu.cvt shape[256,256] dst=spm:0x0<i8>{256,1} src=spm:0x40000<f32>{1024,4} "
                               "scale=0.5 zp_in=0 zp_out=0",
    "vpu.rq i32->i8 256x64": "vpu.rq shape[256,64] dst=spm:0x0<i8>{64,1} src=acc:0x0<i32>{256,4} "
                             "prm=spm:0x40000<i32>{0,12} zp=0 lo=-128 hi=127",
    "vpu.gather f32 1024 rows of 64": "vpu.gather shape[1024] row=64 rows=256 dst=spm:0x0<f32>{256,4} "
                                      "table=spm:0x40000<f32>{256} idx=spm:0xc0000<i32>{0} fill=0",
    "vpu.add f32 1 element (per instruction)": "vpu.add shape[1] dst=spm:0x0<f32>{4} src0=spm:0x40000<f32>{4} "
                                                "src1=spm:0x80000<f32>{4}",
}


def measure(line: str, arch, seconds: float, repeats: int) -> tuple[int, int, float, float]:
    """(instructions, element operations, CPU s with values, CPU s timing-only) of a program repeating ``line``
    about enough times for ``seconds`` of values."""
    def run(program, timing_only: bool) -> float:
        best = float("inf")
        for _ in range(repeats):
            t0 = time.process_time()
            simulate(program, arch, timing_only=timing_only, limits=None)
            best = min(best, time.process_time() - t0)
        return best

    n = 4
    while True:
        program = parse_program(CONFIG + f"{line}\n" * n + "halt\n")
        t = run(program, False)
        if t >= seconds / 4 or n >= 200_000:
            return n, program_work(program, arch).elements, t, run(program, True)
        n *= 4


def model_rows(paths: list[str]) -> None:
    """Print estimate against measurement for each model (compiled once, simulated twice with values)."""
    from compiler.compile import compile_model
    from npusim.app.driver import host_functions, load_model, random_inputs

    arch = load_arch("mid32")
    print(f"\n{'model':28} {'instrs':>7} {'element ops':>16} {'estimate s':>10} {'measured s':>10}  estimate/measured")
    for path in paths:
        compiled = compile_model(load_model(path), arch)
        inputs = random_inputs(compiled.graph)   # (token ids drawn within their vocabulary)
        dram = compiled.dram_inputs(inputs)
        work = program_work(compiled.program, arch)
        best = float("inf")
        for _ in range(2):
            t0 = time.process_time()
            simulate(compiled.program, arch, dram, host_functions=host_functions(compiled), limits=None)
            best = min(best, time.process_time() - t0)
        print(f"{Path(path).stem[:28]:28} {work.instructions:>7,} {work.elements:>16,} {work.seconds:>10.1f} "
              f"{best:>10.1f}  {work.seconds / best:.1f}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=1.0, help="CPU seconds to aim for per case with values")
    p.add_argument("--repeats", type=int, default=3, help="runs per mode, the fastest counts")
    p.add_argument("--models", nargs="*", default=[str(LIGHT / f"light_{m}.onnx") for m in ("vgg19", "resnet50")],
                   help="ONNX models for the estimate-against-measurement table (default: onnx's light VGG-19 "
                        "and ResNet-50)")
    args = p.parse_args(argv)
    arch = load_arch("mid32")
    simulate(parse_program(CONFIG + CASES["vpu.add f32 256x256"] + "\nhalt\n"), arch)   # numba's first calls
    print(f"{'instruction':42} {'kind':8} {'instrs':>7} {'element ops':>15} {'values s':>9} {'timing s':>9} "
          f"{'kernel ops/s':>13} {'s/instr':>9} {'RATES':>9}")
    for name, line in CASES.items():
        n, elements, tv, tt = measure(line, arch, args.seconds, args.repeats)
        kind = rate_kind(parse_program(CONFIG + line + "\n").instrs[0])
        rate = elements / max(tv - tt, 1e-9)
        print(f"{name:42} {kind:8} {n:>7,} {elements:>15,} {tv:>9.3f} {tt:>9.3f} {rate:>13.3g} {tv / n:>9.2e} "
              f"{RATES[kind]:>9.2g}")
    print(f"\nthe estimate: seconds = sum over kinds of element ops / RATES[kind] + instructions * "
          f"{INSTRUCTION_SECONDS:.1e}")
    if args.models:
        model_rows(args.models)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
