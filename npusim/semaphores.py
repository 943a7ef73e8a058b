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
                raise SimulationError(self.overflow(i))
        if self.waiters:
            self.wake()

    def overflow(self, i: int) -> str:
        """What went wrong when semaphore ``i`` exceeds SEM_MAX."""
        return (f"semaphore {self.names[i]} reaches {self.count[i]} > {SEM_MAX}: its producer ran ahead of its "
                f"consumer; bound it with an 'empty' semaphore the consumer signals")

    def wake(self) -> None:
        """Wake, in the order they blocked, the waiters whose needs are all available (taking them)."""
        count, woken = self.count, []
        for unit, (needs, wake) in self.waiters.items():
            for i, n in needs:
                if count[i] < n:
                    break
            else:
                for i, n in needs:
                    count[i] -= n
                woken.append(unit)
                wake()
        for unit in woken:
            del self.waiters[unit]

    def lacking(self, needs: tuple[tuple[int, int], ...]) -> list[tuple[str, int, int]]:
        """(name, have, need) of each semaphore that blocks ``needs``."""
        return [(self.names[i], self.count[i], n) for i, n in needs if self.count[i] < n]
