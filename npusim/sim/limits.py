"""What a run may cost before it starts: instructions, element operations, memory and cycles are estimated from the
program (or, for ``npusim gemm``/``conv``, from the layer) and a run above a limit is refused with the numbers."""

from __future__ import annotations

import math
from dataclasses import dataclass

from isa import DmaCopy, DmaFill, Gather, LimitError, MatMul, Program, VecBinary, VecConvert, VecRequant, VecUnary
from isa.arch import Arch

ACC_UPDATE = 32
"""Element operations an accumulator update costs besides its MACs (reading and writing the accumulator element):
a matmul of many tiny tiles is slow for its MACs."""
CYCLE_MAX = 1 << 62
"""Cycle counts live in int64 arrays: a run that could reach 2**62 cycles is refused whatever the limits."""


@dataclass(frozen=True)
class Limits:
    """The most a run may need: ``instructions`` in the program, element operations of the value kernels
    (``elements``: elements moved or computed; for the matrix unit its MACs plus :data:`ACC_UPDATE` per accumulator
    element it updates) and bytes of device memory (``memory``: SPM, ACC and every DRAM region), both only when values
    are computed. ``None`` for a field lifts it. The defaults allow about a minute of simulation (ResNet-50 with
    values needs 6e9 element operations)."""

    instructions: int | None = 2_000_000
    elements: int | None = 1 << 34
    memory: int | None = 4 << 30

    def check(self, what: str, instructions: int, elements: int, memory: int, timing_only: bool,
              hint: str = "--no-limits (Python: limits=None)") -> None:
        """Raise LimitError if an estimate is above its limit (elements and memory count only with values)."""
        over = [(name, need, have) for name, need, have in (
            ("instructions", instructions, self.instructions),
            ("element operations", 0 if timing_only else elements, self.elements),
            ("bytes of memory", 0 if timing_only else memory, self.memory)) if have is not None and need > have]
        if over:
            said = "; ".join(f"{need:,} {name} (limit {have:,})" for name, need, have in over)
            extra = "" if timing_only or over[0][0] == "instructions" else ", or run timing-only"
            raise LimitError(f"{what} would need {said}; lift the limits with {hint}{extra}")


LIMITS = Limits()
"""The defaults: about a minute of simulation (timing-only runs go at some 50,000 instructions a second), 4 GiB."""


def program_work(program: Program, arch: Arch) -> tuple[int, int, int]:
    """(instructions, element operations, bytes of device memory) of simulating ``program`` with values."""
    elements = 0
    for i in program.instrs:
        if isinstance(i, MatMul):
            elements += i.macs + ACC_UPDATE * math.prod(i.shape) * i.m * i.n
        elif isinstance(i, DmaCopy | DmaFill | VecBinary | VecUnary | VecConvert | VecRequant):
            elements += math.prod(i.shape)
        elif isinstance(i, Gather):
            elements += i.points * i.row
    memory = arch.spm.size + arch.acc.size + sum(r.size for r in program.regions)
    return len(program.instrs), elements, memory


def check_cycles(costs, where: str = "the program") -> None:
    """Raise LimitError if the run could exceed :data:`CYCLE_MAX` cycles (every instruction and DRAM window one
    after the other bounds it)."""
    bound = sum(c.cycles + c.dram_window for c in costs)
    if bound >= CYCLE_MAX:
        raise LimitError(f"{where} could run for up to {bound:,} cycles, more than the simulator counts (2**62); "
                         f"split its largest instructions")
