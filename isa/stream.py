"""Bounded evaluation of a cost that adds up along the access stream of a strided view.

A view's accesses (the elements of an SRAM view, the contiguous runs of a DRAM view) form nested repetitions: a
dimension of extent e and stride s repeats the stream of the dimensions inside it e times, copy i moved by i * s
bytes. The stream costs of :mod:`isa.cost` do not change when the whole stream moves by a multiple of a modulus (an
SRAM's bank_width, DRAM's page or burst size), and they depend on what came before only through a small state (the
beat still open, the bursts still in flight). So when copy i of a repetition starts at the same address modulo the
modulus and in the same state as an earlier copy j, the copies from j on repeat with period i - j: one period is
evaluated and multiplied. Memory is bounded by :data:`CHUNK` items per leaf, work by the period and :data:`BUDGET`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

CHUNK = 1 << 14
"""Most items (elements, bursts) one leaf holds."""
BUDGET = 1 << 22
"""Most items one evaluation visits before it gives up with :class:`TooIrregular` (a second or two of work; a
view of fewer items never gets there)."""

Costs = tuple[int, ...]


class TooIrregular(Exception):
    """The stream has no period short enough to evaluate within the budget (:mod:`isa.cost` turns it into an
    IsaError naming the instruction)."""


@dataclass(eq=False)
class Leaf:
    """Items at byte ``offsets`` from the node's origin; ``arg`` is what else the consumer needs (a run's bytes),
    ``weight`` the items each offset stands for (a run's most bursts)."""

    offsets: np.ndarray
    arg: int = 0
    weight: int = 1


@dataclass(eq=False)
class Rep:
    """``count`` copies of ``child``, copy i at ``i * stride`` bytes from the origin."""

    child: Any
    count: int
    stride: int


@dataclass(eq=False)
class Seq:
    """Nodes one after the other, each at its byte offset from the origin."""

    parts: tuple[tuple[int, Any], ...]


@dataclass(eq=False)
class Lazy:
    """A node that can only be built once the origin's residue is known (a DRAM run cut at burst boundaries)."""

    build: Callable[[int], Any]
    built: dict[int, Any] = field(default_factory=dict)

    def at(self, r: int) -> Any:
        if r not in self.built:
            self.built[r] = self.build(r)
        return self.built[r]


class Consumer(Protocol):
    """A stream cost: ``leaf`` evaluates one leaf whose origin is ``r`` (mod ``modulus``) in ``state`` (offsets in
    the state are relative to the origin) and returns the costs and the state after it; ``shift`` moves a state's
    offsets by ``delta`` bytes (to re-base it on another origin)."""

    modulus: int
    zero: Costs
    initial: Any

    def leaf(self, leaf: Leaf, r: int, state: Any) -> tuple[Costs, Any]: ...

    def shift(self, state: Any, delta: int) -> Any: ...


def canonical(dims: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    """The same address sequence with extent-1 dimensions dropped and dense neighbours merged."""
    out: list[tuple[int, int]] = []
    for e, s in dims:
        if e == 1:
            continue
        if out and out[-1][1] == e * s:
            out[-1] = (out[-1][0] * e, s)
        else:
            out.append((e, s))
    return tuple(out)


def build(dims: tuple[tuple[int, int], ...], unit: Leaf | Lazy, modulus: int, phase: int = 1,
          chunk: int | None = None) -> Any:
    """The node of ``unit`` repeated over ``dims`` (outermost first). Leaves hold at most ``chunk`` items; a block
    of copies is sized to a multiple of the copies after which both the position in a ``phase``-item beat and the
    origin modulo ``modulus`` come back, so that a repetition of blocks is periodic from its first block."""
    node, size, chunk = unit, 1, chunk or CHUNK
    for e, s in reversed(dims):
        leafy = isinstance(node, Leaf)
        w = node.weight if leafy else 0
        if leafy and size * e * w <= chunk:
            node = _copies(node, e, s)
        elif leafy and 2 * size * w <= chunk:
            qmax = chunk // (size * w)
            g = math.lcm(phase // math.gcd(size, phase), modulus // math.gcd(s % modulus, modulus))
            q = qmax // g * g if g <= qmax else qmax
            full, rem = divmod(e, q)
            rep = Rep(_copies(node, q, s), full, q * s)
            node = Seq(((0, rep), (full * q * s, _copies(node, rem, s)))) if rem else rep
        else:
            node = Rep(node, e, s)
        size *= e
    return node


def _copies(leaf: Leaf, e: int, s: int) -> Leaf:
    offsets = (np.arange(e, dtype=np.int64)[:, None] * s + leaf.offsets).ravel()
    return Leaf(offsets, leaf.arg, leaf.weight)


def _add(a: Costs, b: Costs) -> Costs:
    return tuple(x + y for x, y in zip(a, b))


class Walk:
    """One evaluation: ``walk(node, r, state) -> (costs, state after)``, memoised on (node, r, state)."""

    def __init__(self, consumer: Consumer, budget: int | None = None):
        self.c, self.budget, self.items = consumer, BUDGET if budget is None else budget, 0
        self.memo: dict[tuple[int, int, Any], tuple[Costs, Any]] = {}

    def __call__(self, node: Any, r: int, state: Any) -> tuple[Costs, Any]:
        key = (id(node), r, state)
        out = self.memo.get(key)
        if out is None:
            out = self.memo[key] = self._eval(node, r, state)
        return out

    def _spend(self, n: int) -> None:
        self.items += n
        if self.items > self.budget:
            raise TooIrregular(f"over {self.budget:,} items without a period")

    def _eval(self, node: Any, r: int, state: Any) -> tuple[Costs, Any]:
        c = self.c
        if isinstance(node, Leaf):
            self._spend(node.offsets.size * node.weight)
            return c.leaf(node, r, state)
        if isinstance(node, Lazy):
            return self(node.at(r), r, state)
        m = c.modulus
        cost = c.zero
        if isinstance(node, Seq):
            for off, child in node.parts:
                ci, out = self(child, (r + off) % m, c.shift(state, -off))
                cost, state = _add(cost, ci), c.shift(out, off)
            return cost, state
        n, s = node.count, node.stride
        seen: dict[tuple[int, Any], tuple[int, Costs]] | None = {}
        i = 0
        while i < n:
            ri = (r + i * s) % m
            if seen is not None:
                first = seen.get((ri, state))
                if first is None:
                    seen[ri, state] = (i, cost)
                else:   # copies first .. i-1 come back from i on: add whole periods at once
                    j, before = first
                    k = (n - i) // (i - j)
                    cost = tuple(x + k * (x - y) for x, y in zip(cost, before))
                    i += k * (i - j)
                    seen = None
                    if i == n:
                        break
            self._spend(1)
            ci, out = self(node.child, ri, state)
            cost, state = _add(cost, ci), c.shift(out, -s)
            i += 1
        return cost, c.shift(state, n * s)


def evaluate(node: Any, consumer: Consumer, origin: int, budget: int | None = None) -> tuple[Costs, Any]:
    """(costs, final state) of the stream of ``node`` at byte address ``origin``; raises TooIrregular."""
    return Walk(consumer, budget)(node, origin % consumer.modulus, consumer.initial)
