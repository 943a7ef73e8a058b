"""Physical speeds converted to core cycles, exactly: the one place where GB/s, ns and ops/ns meet ``clock.ghz``.

The Arch gives DRAM and the host CPU in physical units (``dram.gb_per_s``, ``dram.latency_ns``, ``dram.row_miss_ns``,
``host.launch_ns``, ``host.gb_per_s``, ``host.gops``), so that raising the core clock makes the core faster but not
its memory. Every number is taken as the decimal the user wrote (``Fraction(repr(x))``: 38.4 is 192/5, not the
binary float nearest to it), and:

- bytes per core cycle = ``gb_per_s / ghz`` (1 GB = 1e9 B, so GB/s are bytes per ns);
- a latency of ``ns`` is ``ceil(ns * ghz)`` core cycles: the DRAM controller hands data to the core on a core clock
  edge, so a round trip is a whole number of cycles (rounded once, here, not per request);
- DRAM bus time is counted in *ticks*, ``1/T`` of a core cycle: ``T = A * dma.outstanding``, A the least integer
  that makes the bus time of one ``dram.access_bytes`` access (``access_bytes * ghz / gb_per_s`` cycles) a whole
  number of 1/A cycles, so that both a burst's bus time and the in-flight limit's issue interval (round trip /
  outstanding, Little's law) are whole ticks. A request's bytes round up to whole accesses. The cost model adds up a
  DMA's bursts in ticks and rounds its bus window up to whole core cycles once per instruction, so the bandwidth a
  stream attains moves smoothly, and never backwards, with ``dram.gb_per_s`` and ``dma.outstanding``.

An A above :data:`MAX_TICKS` (numbers with many decimal digits) is refused with an ArchError that says which fields to
round, and so is a round trip too long to count in ticks in 64 bits (:data:`MAX_ROUND_TRIP_TICKS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING

from isa.errors import ArchError

if TYPE_CHECKING:
    from isa.arch import Arch

MAX_TICKS = 2**20
"""Most parts a cycle is cut into to time one access exactly: finer ones come only from numbers written with many
decimal digits."""
MAX_ROUND_TRIP_TICKS = 2**46
"""Most ticks of a burst's round trip (latency, row miss and bus time): the cost model sums the ticks of up to 2**16
bursts in 64-bit integers."""


def exact(x: int | float) -> Fraction:
    """The number the user wrote, exactly: a float by its shortest decimal repr (38.4 -> 192/5)."""
    return Fraction(repr(x)) if isinstance(x, float) else Fraction(x)


def ceil_div(num: int, den: int) -> int:
    """``ceil(num / den)`` in integers (den > 0)."""
    return -(-num // den)


def bus_ticks(nbytes, access_bytes: int, access_ticks: int):
    """Ticks ``nbytes`` (an integer or a numpy integer array) hold the DRAM bus: whole accesses of ``access_bytes``,
    ``access_ticks`` each (:meth:`DramTiming.data_ticks` on plain values, for the cost model's cached stream
    pricing)."""
    return -(-nbytes // access_bytes) * access_ticks


def cycles_of(x: Fraction) -> int:
    """A non-negative number of cycles rounded up to a whole cycle."""
    return ceil_div(x.numerator, x.denominator)


@dataclass(frozen=True)
class DramTiming:
    """The DRAM fields of an Arch in core cycles and ticks (see the module docstring).

    ``ticks``: T, ticks per core cycle (a multiple of ``dma.outstanding``); ``access_bytes``: the least bytes one
    request moves over the bus; ``access_ticks``: ticks one access holds the bus; ``latency``, ``row_miss``: whole
    core cycles; ``bytes_per_cycle``: the bus's exact bandwidth in bytes per core cycle."""

    ticks: int
    access_bytes: int
    access_ticks: int
    latency: int
    row_miss: int
    bytes_per_cycle: Fraction

    @classmethod
    def of(cls, arch: Arch) -> DramTiming:
        """The DRAM timing of ``arch`` (ArchError if its bus time needs parts of a cycle finer than
        :data:`MAX_TICKS`, or its round trip more ticks than :data:`MAX_ROUND_TRIP_TICKS`)."""
        d, ghz, out = arch.dram, exact(arch.clock.ghz), arch.dma.outstanding
        gbs = exact(d.gb_per_s)
        access = d.access_bytes * ghz / gbs            # cycles one access holds the bus
        if access.denominator > MAX_TICKS:
            raise ArchError(
                f"dram.gb_per_s = {d.gb_per_s!r} with dram.access_bytes = {d.access_bytes} at clock.ghz = "
                f"{arch.clock.ghz!r} makes one access hold the bus {access} cycles: timing that exactly needs "
                f"1/{access.denominator} of a cycle (at most 1/{MAX_TICKS}); write dram.gb_per_s and clock.ghz with "
                f"fewer decimal digits (e.g. {float(gbs):.3g} and {float(ghz):.3g})")
        latency, row_miss = cycles_of(exact(d.latency_ns) * ghz), cycles_of(exact(d.row_miss_ns) * ghz)
        timing = cls(access.denominator * out, d.access_bytes, access.numerator * out, latency, row_miss, gbs / ghz)
        trip = timing.latency_ticks + timing.row_miss_ticks + timing.data_ticks(arch.dma.burst_bytes)
        if trip > MAX_ROUND_TRIP_TICKS:
            raise ArchError(
                f"a DMA burst's round trip ({latency} + {row_miss} cycles of dram.latency_ns and dram.row_miss_ns, "
                f"and its bus time) is {trip:,} ticks of 1/{timing.ticks} cycle, more than the cost model counts "
                f"(2**46): lower dram.latency_ns, dram.row_miss_ns, clock.ghz or dma.outstanding, or write "
                f"dram.gb_per_s with fewer decimal digits")
        return timing

    @property
    def latency_ticks(self) -> int:
        return self.latency * self.ticks

    @property
    def row_miss_ticks(self) -> int:
        return self.row_miss * self.ticks

    def data_ticks(self, nbytes):
        """Ticks ``nbytes`` (an integer or a numpy integer array) hold the bus: whole accesses (:func:`bus_ticks`)."""
        return bus_ticks(nbytes, self.access_bytes, self.access_ticks)

    def cycles(self, ticks: int) -> int:
        """``ticks`` rounded up to whole core cycles (once per instruction)."""
        return ceil_div(int(ticks), self.ticks)


@dataclass(frozen=True)
class HostTiming:
    """The host CPU's fields of an Arch in core cycles: ``launch`` whole cycles per call, and its exact bytes and
    operations per core cycle. A call costs ``launch + ceil(bytes / bytes_per_cycle) + ceil(ops / ops_per_cycle)``."""

    launch: int
    bytes_per_cycle: Fraction
    ops_per_cycle: Fraction

    @classmethod
    def of(cls, arch: Arch) -> HostTiming:
        h, ghz = arch.host, exact(arch.clock.ghz)
        return cls(cycles_of(exact(h.launch_ns) * ghz), exact(h.gb_per_s) / ghz, exact(h.gops) / ghz)

    def call_cycles(self, nbytes: int, ops: int) -> int:
        """Cycles of one host call moving ``nbytes`` (reads + writes) and doing ``ops`` operations."""
        return self.launch + cycles_of(nbytes / self.bytes_per_cycle) + cycles_of(ops / self.ops_per_cycle)
