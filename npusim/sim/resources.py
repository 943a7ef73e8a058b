"""Shared hardware resources, modelled by reservation: a request costs an event only when it has to wait."""

from __future__ import annotations


class PortPool:
    """``n`` identical ports (SRAM ports, DMA channels); each is held from acquisition until a known end cycle."""

    def __init__(self, name: str, n: int):
        self.name = name
        self.free_at = [0] * n
        self.earliest = 0   # min(free_at): the cycle the earliest-free port frees

    def hold(self, end: int) -> None:
        """Hold a port until cycle ``end``: the earliest-free one (the caller has seen that one is free now; which
        of several free ports it takes changes nothing later, as all are free from now on)."""
        free = self.free_at
        if len(free) == 1:
            free[0] = self.earliest = end
            return
        free[free.index(self.earliest)] = end
        self.earliest = min(free)

    def next_free(self) -> int:
        """Cycle at which the earliest busy port frees (a retry time)."""
        return self.earliest


class DramBus:
    """The DRAM data bus shared by the DMA channels: windows are granted first come, first served, back to back."""

    def __init__(self) -> None:
        self.free_at = 0

    def reserve(self, earliest: int, window: int) -> int:
        """Grant ``window`` cycles starting no earlier than ``earliest``; return the start cycle."""
        start = max(earliest, self.free_at)
        self.free_at = start + window
        return start
