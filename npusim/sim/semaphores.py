"""Counting semaphores between unit queues: waits are acquired all-or-nothing at issue, signals land at retire."""

from __future__ import annotations

from collections.abc import Callable

from isa import SimulationError
from isa.program import SEM_MAX


class SemaphoreFile:
    """Semaphore counts and the (at most one per unit) blocked waiter."""

    def __init__(self, names: list[str], inits: list[int]):
        self.names = names
        self.count = list(inits)
        self.waiters: dict[int, tuple[tuple[tuple[int, int], ...], Callable[[], None]]] = {}

    def try_acquire(self, needs: tuple[tuple[int, int], ...]) -> bool:
        """Take every (index, n) in ``needs`` if all are available; else take nothing."""
        count = self.count
        for i, n in needs:
            if count[i] < n:
                return False
        for i, n in needs:
            count[i] -= n
        return True

    def block(self, unit: int, needs: tuple[tuple[int, int], ...], wake: Callable[[], None]) -> None:
        self.waiters[unit] = (needs, wake)

    def signal(self, gives: tuple[tuple[int, int], ...]) -> None:
        """Give every (index, n) in ``gives``, then wake the waiters that can now take all they need."""
        count = self.count
        for i, n in gives:
            count[i] += n
            if count[i] > SEM_MAX:
                raise SimulationError(f"semaphore {self.names[i]} reaches {count[i]} > {SEM_MAX}: its producer ran "
                                      f"ahead of its consumer; bound it with an 'empty' semaphore the consumer signals")
        if len(self.waiters) == 1:   # (the common case: one blocked unit)
            unit, (needs, wake) = next(iter(self.waiters.items()))
            if self.try_acquire(needs):
                del self.waiters[unit]
                wake()
        elif self.waiters:   # wake, in the order they blocked, those that can now take all they need
            woken = [unit for unit, (needs, _) in self.waiters.items() if self.try_acquire(needs)]
            for unit in woken:
                self.waiters.pop(unit)[1]()

    def lacking(self, needs: tuple[tuple[int, int], ...]) -> list[tuple[str, int, int]]:
        """(name, have, need) of each semaphore that blocks ``needs``."""
        return [(self.names[i], self.count[i], n) for i, n in needs if self.count[i] < n]
