"""The one exception hierarchy of npusim.

Every error a user can cause (bad assembly, bad program, bad config, bad inputs, a deadlock) is a subclass of
:class:`NpuSimError`. Messages follow "<thing> must be <constraint>, not <value>" and say where (line, pc, field).
The CLI prints ``str(err)`` as one line and exits non-zero.
"""

from __future__ import annotations


class NpuSimError(Exception):
    """Base of every error npusim raises on bad input."""


class IsaError(NpuSimError, ValueError):
    """An instruction or operand violates the ISA's rules."""


class AsmSyntaxError(IsaError):
    """Assembly text that does not parse; carries the 1-based line and column."""

    def __init__(self, message: str, line: int, col: int, source: str = "<asm>"):
        self.line, self.col, self.source = line, col, source
        super().__init__(f"{source}:{line}:{col}: {message}")


class EncodingError(IsaError):
    """A binary program that cannot be decoded, or a value that does not fit its field."""


class VerifyError(IsaError):
    """A program that fails static verification (bounds, alignment, semaphores, deadlock freedom)."""


class ArchError(NpuSimError, ValueError):
    """A bad hardware description: unknown field, wrong type or out-of-range value."""


class SimulationError(NpuSimError, RuntimeError):
    """The simulation cannot continue (out-of-range access at run time, bad inputs, cycle cap)."""


class InputError(SimulationError, ValueError):
    """Run inputs that do not match what the program (its DRAM regions) or the model (its inputs) expects."""


class LimitError(SimulationError):
    """A run that would need more instructions, time (its expected run time with values), memory or cycles than the
    limits allow; the message gives the estimate, the limit and how to lift it."""


class DeadlockError(SimulationError):
    """Instructions are pending but no event can ever fire: the units wait on each other."""
