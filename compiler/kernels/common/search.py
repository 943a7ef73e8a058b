"""The tiling search every program generator's search is: rank, keep the best, price them, choose.

A generator's search is a :class:`TilingSearch`: it offers its candidate tilings with a rough rank (a closed form,
cheap) to a :class:`Ranking`, which keeps the best ``SearchRule.priced`` of each group; those are priced exactly by the
generator's emitter run into an estimating sink (:class:`~compiler.kernels.common.sink.EstimateSink`: the
:func:`isa.cost.program_estimate` of the program it would emit, without building it), and :meth:`TilingSearch.choose`
takes the best-ranked one whose price is within ``SearchRule.near_tie`` of the least. A search may give lower bounds of
a price (:attr:`TilingSearch.floors`, cheapest first): candidates are then priced best bound first, and most never are.

The convolutions price a tiling as :func:`tiling_price` says: the loads of constants a program starts with may be
hidden (cross-layer prefetch), and with one accumulator tile the matrix work, epilogue and stores take turns.
"""

from __future__ import annotations

import heapq
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from operator import neg
from typing import Generic, TypeVar

from compiler.errors import TilingError
from compiler.kernels.common.target import Target
from compiler.link.linker import is_constant_load, leading_constants
from isa import Instr, Program
from isa.arch import Arch
from isa.cost import ProgramEstimate, instr_cost, program_estimate
from isa.units import Role, key_queue, queues_with

T = TypeVar("T")

Rank = float | tuple
"""A rough rank: lower is better (a number, or a tuple compared in order)."""


@dataclass(frozen=True)
class SearchRule:
    """How a search chooses: ``priced`` candidates of each group are priced exactly (0: the best-ranked wins
    unpriced); the best-ranked one whose price is within ``near_tie`` (a fraction) of the least wins."""

    priced: int
    near_tie: float = 0.0


class Ranking(Generic[T]):
    """The best ``keep`` candidates of each of ``groups`` by rank; of equal ranks, the one offered first."""

    def __init__(self, keep: int, groups: Sequence[Hashable] = (None,)) -> None:
        self.keep = max(1, keep)
        # per group a max-heap of (negated rank, -order, candidate, rank): its top is the worst kept
        self._heaps: dict[Hashable, list] = {g: [] for g in groups}
        self._offered = 0

    def offer(self, rank: Rank, candidate: T, group: Hashable = None) -> None:
        """Consider ``candidate`` of rank ``rank`` in ``group``."""
        heap, order = self._heaps[group], self._offered
        self._offered = order + 1
        full = len(heap) >= self.keep
        if full and not rank < heap[0][3]:   # (offered later, it must rank strictly better than the worst)
            return
        entry = (tuple(map(neg, rank)) if isinstance(rank, tuple) else -rank, -order, candidate, rank)
        if full:
            heapq.heapreplace(heap, entry)
        else:
            heapq.heappush(heap, entry)

    def offer_all(self, offers: list[tuple[Rank, Hashable, T]]) -> None:
        """:meth:`offer` each (rank, group, candidate) of ``offers``, in order: only the best ``keep`` of each group
        can be kept, so they are found by one sort (stable: equal ranks in offer order) and offered alone."""
        start, ranks = self._offered, [rank for rank, _, _ in offers]
        need = {g: self.keep for g in self._heaps}
        left = len(need)
        for i in sorted(range(len(offers)), key=ranks.__getitem__):
            rank, group, candidate = offers[i]
            if need[group]:
                self._offered = start + i
                self.offer(rank, candidate, group)
                need[group] -= 1
                left -= not need[group]
                if not left:
                    break
        self._offered = start + len(offers)

    def admits(self, rank: Rank, group: Hashable = None) -> bool:
        """Whether a candidate of rank ``rank`` offered now to ``group`` would be kept (so it is worth building)."""
        heap = self._heaps[group]
        return len(heap) < self.keep or rank < heap[0][3]

    def worst(self, group: Hashable = None) -> Rank | None:
        """The rank a candidate of ``group`` must beat to be kept (None while fewer than ``keep`` are)."""
        heap = self._heaps[group]
        return heap[0][3] if len(heap) >= self.keep else None

    def __bool__(self) -> bool:
        return any(self._heaps.values())

    def best(self) -> T:
        """The best-ranked candidate of all groups."""
        return max((e for heap in self._heaps.values() for e in heap), key=lambda e: e[:2])[2]

    def ranked(self) -> list[T]:
        """The kept candidates, group by group in the given order, each group best first."""
        return [e[2] for heap in self._heaps.values() for e in sorted(heap, key=lambda e: e[:2], reverse=True)]


class TilingSearch(ABC, Generic[T]):
    """One generator's search (see the module docstring). Subclasses hold what it searches for (shape, dtype,
    target, epilogue, ...) and supply :meth:`rank` and :meth:`price`; :attr:`floors`, :meth:`program_key` and
    :meth:`affordable` are optional."""

    rule: SearchRule
    groups: tuple[Hashable, ...] = (None,)
    """The groups whose best ``rule.priced`` are kept each (e.g. accumulator ring depths)."""

    @abstractmethod
    def rank(self, ranking: Ranking[T]) -> None:
        """Offer every candidate that fits with its rough rank; TilingError when none does."""

    @abstractmethod
    def price(self, candidate: T, bound: float | None) -> float:
        """The exact price of ``candidate`` (cycles) if it is below ``bound``, else some value at least ``bound``."""

    floors: tuple[Callable[[T, float | None], float], ...] = ()
    """Lower bounds of :meth:`price`, each at least the one before (same contract for ``bound``)."""

    def program_key(self, candidate: T) -> Hashable | None:
        """A key equal for candidates that emit the same program (the later one is left out); None: all differ."""
        return None

    def affordable(self, best: T) -> bool:
        """Whether the candidates may be priced at all, given the best-ranked one (else it wins unpriced)."""
        return True

    def candidate(self, offered) -> T:
        """The candidate :meth:`rank` offered as ``offered`` (a search may offer a cheaper stand-in, e.g. the
        fields of a tiling, and build only the kept ones)."""
        return offered

    def candidates(self) -> list[T]:
        """The candidates :meth:`choose` prices, in rank order (only the best-ranked one when it wins unpriced)."""
        ranking: Ranking = Ranking(self.rule.priced, self.groups)
        self.rank(ranking)
        best = self.candidate(ranking.best())
        if not self.rule.priced or not self.affordable(best):
            return [best]
        return [self.candidate(c) for c in ranking.ranked()]

    def choose(self) -> T:
        """The winner: of :meth:`candidates`, the best-ranked whose price is within ``near_tie`` of the least."""
        ranked = self.candidates()
        if len(ranked) == 1:
            return ranked[0]
        unique: dict = {}
        for k, t in enumerate(ranked):
            key = self.program_key(t)
            unique.setdefault(k if key is None else ("program", key), t)
        ranked = list(unique.values())
        if self.floors:
            return ranked[_least_by_bounds(ranked, (*self.floors, self.price))]
        return ranked[_best_within(ranked, self.price, self.rule.near_tie)]


def _best_within(ranked: list, price: Callable, near_tie: float) -> int:
    """The index of the best-ranked of ``ranked`` whose price is within ``near_tie`` of the least: all priced in rank
    order, each only until it is out of the window the ones before leave (``bound``)."""
    prices: list[float] = []
    for t in ranked:
        bound = int(min(prices) * (1 + near_tie)) + 1 if prices else None   # a price at or above it cannot win
        prices.append(price(t, bound))
    window = min(prices) * (1 + near_tie)
    return next(i for i, p in enumerate(prices) if p <= window)


def _least_by_bounds(ranked: list, levels: tuple[Callable, ...]) -> int:
    """The index of the candidate of least (price, rank), ``levels`` its lower bounds then its price: the least
    bound goes first; a bound is replaced by the next level's, the last is the price, until the least bound cannot
    beat the best (price, index) so far (a level stops as soon as it reaches what it has to stay below)."""
    heap = [(levels[0](t, None), i, 0) for i, t in enumerate(ranked)]
    heapq.heapify(heap)
    best = None   # (price, index)
    while heap:
        low, i, k = heapq.heappop(heap)
        if best is not None and (low, i) > best:
            break   # (and so are all the others)
        bound = None if best is None else best[0] + (i < best[1])   # what the price must stay below to win
        value = levels[k + 1](ranked[i], bound)
        if k + 2 < len(levels):
            if bound is None or value < bound:
                heapq.heappush(heap, (max(value, low), i, k + 1))
        elif best is None or (value, i) < best:
            best = (value, i)
    return best[1]


# ------------------------------------------------------------------------------------------------ the array's blocks
PROGRAM_MAX = 1 << 18
"""Instructions (at least two a step: a load and a matrix instruction) above which a tiling is not a candidate: a tiny
SPM or a small block of the array would otherwise make a search walk, and a lowering build, a layer of millions of
steps (gigabytes of instructions, and more than the simulator's default limit of 2,000,000 for the whole model). No
layer of the zoo models comes within a factor of ten on the presets; a layer without a tiling under it runs on the
host like any other that does not fit."""


def under_program_max(steps: int) -> bool:
    """Whether a tiling of ``steps`` steps (two instructions each, at least) keeps its program under
    :data:`PROGRAM_MAX` (a search's filter before it ranks a candidate)."""
    return 2 * steps <= PROGRAM_MAX


def check_program_max(steps: int, tiling: object, of: object) -> None:
    """TilingError when ``tiling`` of ``of`` (a layer's shape; both formatted only then) takes ``steps`` steps, more
    than :func:`under_program_max` lets a program take (a generator's check of a given tiling)."""
    if not under_program_max(steps):
        raise TilingError(f"tiling {tiling} of {of} takes {steps:,} steps, more than {PROGRAM_MAX // 2:,}")


def on_array_blocks(target: Target, attempt: Callable[[Target], T], price: Callable[[Target, T], float],
                    blocks: bool = True) -> tuple[Target, T]:
    """The target and what ``attempt`` (a search, or a lowering built on one) finds on it: ``target``'s; when no
    tiling fits it (TilingError) and ``blocks``, the one of least ``price`` on each block of the array at the first
    level of :meth:`~compiler.kernels.common.target.Target.array_blocks` (the largest area) where any fits, the
    first of equal prices: smaller weight, reduction and output-channel blocks, a partially filled array. Only where
    the whole array has no tiling, so whatever fits it is kept as it is. TilingError of the whole array when no block
    fits either."""
    try:
        return target, attempt(target)
    except TilingError as e:
        if not blocks:
            raise
        refused = e
    for level in target.array_blocks():
        fits = []
        for block in level:
            try:
                fits.append((block, attempt(block)))
            except TilingError:
                continue
        if fits:
            return fits[0] if len(fits) == 1 else min(fits, key=lambda found: price(*found))
    raise refused


# ------------------------------------------------------------------------------------------- the convolutions' price
CONSTANTS = {"Wt": ("W", 0), "Bias": ("W", 0), "Scale": ("W", 0)}
"""How a model binds the constant regions of a convolution's program (weights, bias, scale): to region W, so a
program's leading loads of them are what cross-layer prefetch hides (:func:`compiler.link.linker.is_constant_load`)."""


def loads_constants(instr: Instr) -> bool:
    """Whether ``instr`` loads a convolution's constants (:data:`CONSTANTS`) into SPM."""
    return is_constant_load(instr, CONSTANTS)


_LOADS = queues_with(Role.DMA_LOAD)


def tiling_price(estimate: ProgramEstimate, serial: bool) -> int:
    """A convolution search's price (cycles) of what an estimating sink priced with hidden run
    :func:`loads_constants` (or none): its cycles less the hidden run and, with one accumulator tile (``serial``: the
    matrix work, epilogue and stores take turns on it), at least the busy cycles of every unit but the loads."""
    price = estimate.cycles - estimate.hidden
    if serial:
        price = max(price, sum(b for unit, b in estimate.busy.items() if key_queue(unit) not in _LOADS))
    return price


def program_price(program: Program, arch: Arch, serial: bool, hidden_constants: bool = False) -> int:
    """:func:`tiling_price` of a built ``program`` (cycles), from :func:`isa.cost.program_estimate` and
    :func:`compiler.link.linker.leading_constants` (the oracle the estimates are tested against)."""
    price = program_estimate(program, arch) - (leading_constants(program, arch, CONSTANTS) if hidden_constants else 0)
    if serial:
        price = max(price, sum(instr_cost(i, arch).cycles for i in program.instrs if i.queue not in _LOADS))
    return price
