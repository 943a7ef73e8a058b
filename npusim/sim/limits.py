"""What a run may cost before it starts: instructions, the time its value kernels take, memory and cycles are
estimated from the program (or, for ``npusim gemm``/``conv``, from the layer) and a run above a limit is refused with
the numbers.

The time is estimated from the element operations of each kind of value kernel (elements moved or computed; for the
matrix unit its MACs plus :data:`ACC_UPDATE` per accumulator element it updates) at the rates ``bench/value_speed.py``
measures (:data:`RATES`, set so that whole models' estimates land at 1.0-1.5x their measured time; a program of only the
slowest shapes, padded copies and fills, can take up to 3x its estimate), plus
:data:`INSTRUCTION_SECONDS` per instruction. Memory is what the run allocates (SPM, ACC and every DRAM region), and the
limit is what this machine can hold."""

from __future__ import annotations

import math
import os
import resource
from dataclasses import dataclass, field

from isa import DmaCopy, DmaFill, Gather, LimitError, MatMul, Program, VecBinary, VecConvert, VecRequant, VecUnary
from isa.arch import Arch

ACC_UPDATE = 32
"""Element operations an accumulator update costs besides its MACs (reading and writing the accumulator element):
a matmul of many tiny tiles is slow for its MACs."""
CYCLE_MAX = 1 << 62
"""Cycle counts live in int64 arrays: a run that could reach 2**62 cycles is refused whatever the limits."""

RATES: dict[str, float] = {"dma": 3e8, "matmul": 1e10, "vector": 1e8, "gather": 8e7}
"""Element operations per CPU second of each kind of value kernel (:func:`rate_kind`), as ``bench/value_speed.py``
measured them (2026-11-28, this project's 2-core machine, numba warm; bench/results/value_speed.txt): DMA 1.0-1.9e9
for contiguous copies, 1.7e8 strided, 0.9-1.5e8 padded or filled; matmul 1.1-1.3e10 for 256-row tiles (MACs plus
accumulator updates), 8e9 for a GEMV; vector 1.0-1.5e8 (exp to add), 5.7e8 a cvt; gather 1.3e8. The rates are set
where whole models land: the estimate is 1.0-1.5x the measured simulation of VGG-19, ResNet-18/50, MobileNetV2,
FCN-ResNet50, a BERT layer, a ViT block, int8 ResNet-18 and the BEV model (the bench's second table), so it errs on
the slow side; a program of only the slowest shapes (padded copies, fills) can take up to 3x the estimate."""
INSTRUCTION_SECONDS = 2.5e-5
"""CPU seconds of one instruction with values besides its kernel's elements (the timing model's evaluation and the
kernel's call; bench/value_speed.py: 1.52e-5 for a one-element vpu.add)."""


def machine_memory() -> int:
    """Bytes this process can hold: the machine's physical memory, or the address-space limit if lower."""
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return physical if soft == resource.RLIM_INFINITY else min(physical, soft)


@dataclass(frozen=True)
class Work:
    """What simulating a program (or a layer) needs: ``instructions``, ``elements`` (element operations of the value
    kernels), ``seconds`` (their estimated CPU time with values, s) and ``memory`` (bytes of device memory)."""

    instructions: int
    elements: int
    seconds: float
    memory: int


def minutes(seconds: float) -> str:
    """A duration for a message: ``0.6 s``, ``45 s``, ``3.2 min``, ``2.5 h``, ``1,234 h``."""
    if seconds < 90:
        return f"{seconds:.1f} s" if seconds < 10 else f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{round(seconds / 60, 1):g} min"
    return f"{round(seconds / 3600, 1):g} h" if seconds < 360_000 else f"{seconds / 3600:,.0f} h"


@dataclass(frozen=True)
class Limits:
    """The most a run may need: ``instructions`` in the program, ``seconds`` of value kernels (the estimated CPU
    time of the run with values, :class:`Work`) and bytes of device memory (``memory``: SPM, ACC and every DRAM
    region; by default what this machine can hold, :func:`machine_memory` when the Limits are made), the last two
    only when values are computed.
    ``None`` for a field lifts it. The defaults refuse a run expected to take more than 10 minutes (VGG-19 with values
    on mid32: an estimated 5.4 s, 4.2 s measured: bench/results/value_speed.txt) or that this machine could not hold."""

    instructions: int | None = 2_000_000
    seconds: float | None = 600.0
    memory: int | None = field(default_factory=machine_memory)

    def check(self, what: str, work: Work, timing_only: bool, hint: str = "--no-limits (Python: limits=None)") -> None:
        """Raise LimitError if an estimate is above its limit (time and memory count only with values)."""
        over: list[tuple[str, str]] = []
        if self.instructions is not None and work.instructions > self.instructions:
            over.append(("instructions", f"{work.instructions:,} instructions (limit {self.instructions:,})"))
        if not timing_only and self.seconds is not None and work.seconds > self.seconds:
            over.append(("time", f"about {minutes(work.seconds)} of simulation with values (limit "
                                 f"{minutes(self.seconds)}: {work.elements:,} element operations at the "
                                 f"value kernels' measured rates)"))
        if not timing_only and self.memory is not None and work.memory > self.memory:
            mine = ": what this machine holds" if self.memory == machine_memory() else ""
            over.append(("memory", f"{work.memory:,} bytes of memory (limit {self.memory:,}{mine})"))
        if over:
            extra = "" if over[0][0] == "instructions" else ", or run timing-only"
            said = "; ".join(text for _, text in over)
            raise LimitError(f"{what} would need {said}; lift the limits with {hint}{extra}")


LIMITS = Limits()
"""The defaults: 2 M instructions, 10 minutes of value kernels, this machine's memory."""


def rate_kind(instr) -> str:
    """The kind of value kernel an instruction runs, a key of :data:`RATES` ("" for none)."""
    if isinstance(instr, MatMul):
        return "matmul"
    if isinstance(instr, DmaCopy | DmaFill):
        return "dma"
    if isinstance(instr, VecBinary | VecUnary | VecConvert | VecRequant):
        return "vector"
    return "gather" if isinstance(instr, Gather) else ""


def instr_elements(instr) -> int:
    """Element operations of one instruction's value kernel (0 for none)."""
    if isinstance(instr, MatMul):
        return instr.macs + ACC_UPDATE * math.prod(instr.shape) * instr.m * instr.n
    if isinstance(instr, DmaCopy | DmaFill | VecBinary | VecUnary | VecConvert | VecRequant):
        return math.prod(instr.shape)
    return instr.points * instr.row if isinstance(instr, Gather) else 0


def work_of(instructions: int, elements: dict[str, int], memory: int) -> Work:
    """A :class:`Work` from the element operations by kind (keys of :data:`RATES`)."""
    seconds = instructions * INSTRUCTION_SECONDS + sum(n / RATES[kind] for kind, n in elements.items())
    return Work(instructions, sum(elements.values()), seconds, memory)


def program_work(program: Program, arch: Arch) -> Work:
    """What simulating ``program`` with values needs (:class:`Work`)."""
    elements = dict.fromkeys(RATES, 0)
    for i in program.instrs:
        kind = rate_kind(i)
        if kind:
            elements[kind] += instr_elements(i)
    memory = arch.spm.size + arch.acc.size + sum(r.size for r in program.regions)
    return work_of(len(program.instrs), elements, memory)


def check_cycles(costs, where: str = "the program") -> None:
    """Raise LimitError if the run could exceed :data:`CYCLE_MAX` cycles (every instruction and DRAM window one
    after the other bounds it)."""
    bound = sum(c.cycles + c.dram_window for c in costs)
    if bound >= CYCLE_MAX:
        raise LimitError(f"{where} could run for up to {bound:,} cycles, more than the simulator counts (2**62); "
                         f"split its largest instructions")
