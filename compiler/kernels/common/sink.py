"""Where a program generator puts its instructions: a :class:`ProgramSink` keeps them (the program), an
:class:`EstimateSink` prices them (:class:`isa.cost.ProgramEstimate`) and keeps nothing.

A generator that a tiling search prices writes its instructions once, into a sink (:class:`Sink`), in program order;
the search runs it into an estimating sink, the lowering into a program sink, so the estimate is the emitted
program's :func:`isa.cost.program_estimate` by construction. What makes the estimate fast is the generator's to
say:

- ``recall(key)`` / ``begin()`` ... ``end(key)``: a run of instructions (a step, a tile) whose costs depend only on
  ``key`` (the generator's choice: extents, flags, SRAM bases modulo the bank width, DRAM offsets modulo
  ``dram_modulus``) is priced once; later runs with that key add its :class:`isa.cost.EstimateParts` instead of
  being emitted. A program sink never recalls (it keeps every instruction).
- ``group(key, build, ...)``: a group of instructions whose costs depend only on ``key`` is built and priced once
  per search (by an estimating sink; a program sink builds every group).
- ``nests(...)``: a loop nest of matrix instructions that differ only in their bases (their costs are equal) is
  priced as its first instruction times the nest's size, once per search and cost key.
- ``stopped``: an estimating sink given a ``bound`` stops the generator once the price is known to reach it.

Semaphores change no price: an estimating sink prices the instructions the generator gives it (with or without
their waits and signals: ``semaphores`` says whether the sink needs them), and it prices ``nests`` without the
``.sync`` that :func:`compiler.kernels.common.pipeline.synced` may add after a queue's last instruction (no cycles,
on the queue of the instruction before it).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Protocol

from compiler.kernels.common.matmul_nest import MatMulNests
from compiler.kernels.common.pipeline import synced
from isa import Instr
from isa.arch import Arch
from isa.cost import EstimateParts, ProgramEstimate


class Sink(Protocol):
    """What a program generator emits into (see the module docstring)."""

    pricing: bool
    """True for an estimating sink: memo keys are worth working out, positions are not kept."""
    dram_modulus: int
    """What a run's DRAM offsets matter modulo (bytes): 1 for a program (every offset is its own), the row-buffer
    page or the burst for an estimate (:func:`isa.cost.dram_window` reads no more)."""
    stopped: bool
    """Whether the generator may stop (an estimate reached its bound)."""
    semaphores: bool
    """Whether the instructions need their semaphores (an estimating sink prices them without: they change no
    cost)."""

    def extend(self, instrs: Sequence[Instr]) -> None:
        """Append ``instrs`` in program order."""

    def place(self, at: int | None, key: Hashable | None, build: Callable[..., Sequence[Instr]], *args) -> None:
        """Put the instructions ``build(*args)`` gives at program position ``at`` (a :meth:`mark`; None: the end),
        as :meth:`group` does at the end. An estimating sink prices them at the end: exact as long as only DMAs lie
        between ``at`` and the end and they are store-queue DMAs after the last compute instruction so far (what the
        generators move back: an accumulator tile's start, before the store that frees the tile)."""

    def mark(self) -> int:
        """The program position of the next instruction (0 for an estimating sink)."""

    def nests(self, nests: MatMulNests, waits: tuple[str, ...], signals: tuple[str, ...]) -> None:
        """Append the matrix instructions of ``nests``, the first waiting for ``waits`` and the last signalling
        ``signals`` (:func:`~compiler.kernels.common.pipeline.synced`)."""

    def group(self, key: Hashable | None, build: Callable[..., Sequence[Instr]], *args) -> None:
        """Append the instructions ``build(*args)`` gives; an estimating sink builds and prices them once per ``key``
        (None: every time), which must then hold everything their costs read: its keys are shared by every estimate
        of a search (:class:`PriceMemo`), so they hold the tiling's sizes too."""

    def recall(self, key: Hashable | None) -> tuple | None:
        """The extra of the run recorded under ``key`` (:meth:`end`), its parts added; None (nothing added) if there
        is none or ``key`` is None. Runs are kept per scope (:class:`EstimateSink`)."""

    def begin(self) -> None:
        """Start recording a run."""

    def end(self, key: Hashable | None, extra: tuple = ()) -> EstimateParts | None:
        """Stop recording the run started by the matching :meth:`begin` and keep it under ``key`` with ``extra`` (what
        the generator needs to skip it: e.g. the ring slots it advanced); its parts (None for a program sink)."""

    def at_least(self, cycles: float) -> None:
        """The program is known to take at least ``cycles``: stop if that reaches the bound."""

    def check(self) -> bool:
        """Whether the price is known to reach the bound (then :attr:`stopped`); call between runs."""


class ProgramSink:
    """Keeps the instructions, in order: :attr:`instrs` is the program's body."""

    pricing = False
    dram_modulus = 1
    stopped = False
    semaphores = True

    def __init__(self) -> None:
        self.instrs: list[Instr] = []

    def extend(self, instrs: Sequence[Instr]) -> None:
        self.instrs += instrs

    def place(self, at: int | None, key: Hashable | None, build: Callable[..., Sequence[Instr]], *args) -> None:
        at = len(self.instrs) if at is None else at
        self.instrs[at:at] = build(*args)

    def mark(self) -> int:
        return len(self.instrs)

    def nests(self, nests: MatMulNests, waits: tuple[str, ...], signals: tuple[str, ...]) -> None:
        self.instrs += synced(nests.instrs, waits, signals)

    def group(self, key: Hashable | None, build: Callable[..., Sequence[Instr]], *args) -> None:
        self.instrs += build(*args)

    def recall(self, key: Hashable | None) -> tuple | None:
        return None

    def begin(self) -> None:
        pass

    def end(self, key: Hashable | None, extra: tuple = ()) -> EstimateParts | None:
        return None

    def at_least(self, cycles: float) -> None:
        pass

    def check(self) -> bool:
        return False


class PriceMemo:
    """What the estimates of one search share (one target, one ``hidden`` rule): the :func:`isa.cost.instr_costs`
    memos (exact and floor) and the runs recorded by :meth:`EstimateSink.end`, per scope (a generator's runs are
    keyed within a scope it names, e.g. its tiling). Owned by the search (or a compile session) that creates it:
    it lives as long as they do."""

    def __init__(self) -> None:
        self.costs: dict[bool, dict] = {False: {}, True: {}}
        self._runs: dict[tuple, dict] = {}

    def runs(self, scope: Hashable, floor: bool) -> dict:
        """The recorded runs of ``scope`` (key -> (parts, extra)), exact or floor."""
        return self._runs.setdefault((floor, scope), {})


_GROUPS = ("groups",)   # (the scope of PriceMemo.runs that holds the groups of EstimateSink.group)


class EstimateSink:
    """Prices what is emitted into it (:class:`isa.cost.ProgramEstimate`): :attr:`estimate` is the running sum.

    ``memo``: the search's :class:`PriceMemo` (a fresh one by default), ``scope``: which of its recorded runs this
    generator may recall; ``floor``: price by :func:`isa.cost.instr_floor` (a lower bound; DRAM offsets then do not
    matter: ``dram_modulus`` 1); ``hidden``: the estimate's hidden-run predicate (load DMAs only); ``bound``: stop
    (:attr:`stopped`) once :attr:`isa.cost.ProgramEstimate.least` reaches it, checked by :meth:`check`."""

    pricing = True
    semaphores = False

    def __init__(self, arch: Arch, memo: PriceMemo | None = None, scope: Hashable = None, floor: bool = False,
                 hidden: Callable[[Instr], bool] | None = None, bound: float | None = None) -> None:
        memo = memo if memo is not None else PriceMemo()
        self.estimate = ProgramEstimate(arch, memo.costs[floor], floor, hidden)
        self._open = self.estimate   # the run being recorded (or the estimate)
        self._stack: list[ProgramEstimate] = []
        # (runs priced with another hidden predicate have other parts)
        self._runs, self._groups = memo.runs((scope, hidden), floor), memo.runs((_GROUPS, hidden), floor)
        d = arch.dram
        self.dram_modulus = 1 if floor else d.page_bytes if d.model == "rowbuffer" else arch.dma.burst_bytes
        self.bound, self.stopped = bound, False

    def extend(self, instrs: Sequence[Instr]) -> None:
        self._open.add(instrs)

    def place(self, at: int | None, key: Hashable | None, build: Callable[..., Sequence[Instr]], *args) -> None:
        self.group(key, build, *args)

    def mark(self) -> int:
        return 0

    def nests(self, nests: MatMulNests, waits: tuple[str, ...], signals: tuple[str, ...]) -> None:
        for nest in nests:   # (each nest's first instruction built and priced once per cost key in a search)
            key = ("nest", nest.cost_key)
            parts = self._groups.get(key)
            if parts is None:
                parts = self._groups[key] = self._open.price((nest.first(),))
            self._open.add_parts(parts, nest.count)

    def group(self, key: Hashable | None, build: Callable[..., Sequence[Instr]], *args) -> None:
        parts = self._groups.get(key) if key is not None else None
        if parts is None:
            parts = self._open.price(build(*args))
            if key is not None:
                self._groups[key] = parts
        self._open.add_parts(parts)

    def recall(self, key: Hashable | None) -> tuple | None:
        got = self._runs.get(key) if key is not None else None
        if got is None:
            return None
        self._open.add_parts(got[0])
        return got[1]

    def begin(self) -> None:
        self._stack.append(self._open)
        e = self.estimate
        self._open = ProgramEstimate(e.arch, e.memo, e.floor, e.hide)

    def end(self, key: Hashable | None, extra: tuple = ()) -> EstimateParts:
        parts = self._open.parts()
        if key is not None:
            self._runs[key] = (parts, extra)
        self._open = self._stack.pop()
        self._open.add_parts(parts)
        return parts

    def at_least(self, cycles: float) -> None:
        if self.bound is not None and cycles >= self.bound:
            self.stopped = True

    def check(self) -> bool:
        """Whether the price now reaches the bound (then :attr:`stopped`); call between runs."""
        if self.bound is not None and not self.stopped:
            self.stopped = self.estimate.least >= self.bound
        return self.stopped
