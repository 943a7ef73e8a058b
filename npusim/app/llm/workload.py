"""LLM inference on the NPU: the prefill of a prompt and the decode steps that follow it, simulated piece by piece
(:mod:`npusim.app.llm.decoder`'s graphs, compiled and simulated like any model), with time to first token, time per
output token, tokens per second, DRAM bytes and energy per token.

What is simulated: the prefill (embedding lookup, one decoder layer over the prompt, final norm and LM head on the
last token) and each sampled decode step (the same over one new token per sequence at its real context length).
The decoder's layers have the same shapes, so one layer is simulated per step and counted ``layers`` times; layers
run one after the other (no overlap between one layer's tail and the next one's weight loads is counted). Decode
steps not sampled are interpolated linearly in the context length between the sampled ones (their layer's cycles,
DRAM bytes and energy; the report lists the sampled contexts). ``samples=0`` simulates every step.

Step ``i`` of ``generate - 1`` decode steps attends over ``prompt + i`` cached tokens plus its own: the prefill
already produced the first token (TTFT), and TPOT is the mean time of the decode steps."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from isa.arch import Arch
from npusim.app.llm.sources import ConfigDecoder, OnnxDecoder, StepPiece

KV_FORMATS = ("f32",)
"""``--kv`` values: the cache's element type (activations are f32 on the NPU; narrower caches are not modelled)."""
KV_BYTES = {"f32": 4}


@dataclass(frozen=True)
class LlmWorkload:
    """One inference request: ``prompt`` tokens then ``generate`` new ones, for ``batch`` sequences at once, on
    ``decoder`` (a :class:`~npusim.app.llm.sources.ConfigDecoder` or an exported
    :class:`~npusim.app.llm.sources.OnnxDecoder`), the cache in ``kv``; ``samples``: decode contexts simulated (0:
    every step)."""

    decoder: ConfigDecoder | OnnxDecoder
    prompt: int = 128
    generate: int = 32
    batch: int = 1
    kv: str = "f32"
    samples: int = 5

    def __post_init__(self) -> None:
        for what, v, lo in (("prompt", self.prompt, 1), ("generate", self.generate, 1), ("batch", self.batch, 1),
                            ("samples", self.samples, 0)):
            if not isinstance(v, int) or v < lo:
                raise ValueError(f"{what} must be an integer >= {lo}, not {v!r}")
        if self.kv not in KV_FORMATS:
            raise ValueError(f"kv must be one of {', '.join(KV_FORMATS)}, not {self.kv!r} (the NPU's activations "
                             f"are f32; a narrower cache is not modelled yet)")
        if self.prompt + self.generate > self.decoder.max_positions:
            raise ValueError(f"prompt + generate = {self.prompt + self.generate} exceeds {self.decoder.name}'s "
                             f"{self.decoder.max_positions} positions")

    @property
    def decode_pasts(self) -> list[int]:
        """The cached tokens of each decode step, in order."""
        return list(range(self.prompt, self.prompt + self.generate - 1))

    @property
    def pieces(self) -> int:
        """How many graphs :func:`simulate_pieces` simulates (for a progress bar)."""
        step = self.decoder.pieces(self.batch, 1, self.prompt)
        fixed, varying = sum(not p.varies for p in step), sum(p.varies for p in step)
        decode = fixed + varying * len(self.sampled_pasts()) if self.generate > 1 else 0
        return len(step) + decode

    def sampled_pasts(self) -> list[int]:
        """The decode steps simulated: all, or ``samples`` spread evenly with the first and the last."""
        pasts = self.decode_pasts
        if self.samples == 0 or len(pasts) <= self.samples:
            return pasts
        at = np.linspace(0, len(pasts) - 1, self.samples).round().astype(int)
        return sorted({pasts[i] for i in at})


@dataclass(frozen=True)
class PieceRun:
    """One simulated graph: its cycles, DRAM bytes (read + written), energy (pJ), the DRAM weights image (bytes)
    and its run report (layers, units)."""

    cycles: int
    dram_bytes: int
    energy_pj: float
    weight_bytes: int
    report: dict = field(repr=False, compare=False)

    @classmethod
    def of(cls, report: dict) -> PieceRun:
        return cls(report["cycles"], report["dram"]["bytes_read"] + report["dram"]["bytes_written"],
                   report["energy"]["total_pj"], report["weight_bytes"], report)


@dataclass(frozen=True)
class StepCost:
    """A whole step (all layers, embedding and head): cycles, DRAM bytes, energy (pJ)."""

    cycles: float
    dram_bytes: float
    energy_pj: float

    def __add__(self, o: StepCost) -> StepCost:
        return StepCost(self.cycles + o.cycles, self.dram_bytes + o.dram_bytes, self.energy_pj + o.energy_pj)

    def times(self, k: float) -> StepCost:
        return StepCost(self.cycles * k, self.dram_bytes * k, self.energy_pj * k)

    @classmethod
    def of(cls, run: PieceRun) -> StepCost:
        return cls(run.cycles, run.dram_bytes, run.energy_pj)


Runner = Callable[[object, str], PieceRun]
"""Simulates one ONNX model (its name for progress) and returns its :class:`PieceRun`."""


Runner = Callable[[StepPiece, str], PieceRun]
"""Simulates one step piece (with a description for progress) and returns its :class:`PieceRun`."""
Step = dict[str, tuple[PieceRun, int]]
"""A simulated step's pieces by name: each run and how many times it counts."""


@dataclass(frozen=True)
class LlmRun:
    """The simulated pieces of a workload: the ``prefill`` step, the decode step's ``fixed`` pieces (simulated once)
    and its ``varying`` ones by cached tokens (at the sampled contexts)."""

    workload: LlmWorkload
    prefill: Step
    fixed: Step
    varying: dict[int, Step]


def simulate_pieces(w: LlmWorkload, run: Runner) -> LlmRun:
    """Simulate the workload's pieces with ``run``: the prefill, the decode step's pieces that do not depend on the
    context once, and those that do at each sampled context."""
    b = w.batch
    prefill = {p.name: (run(p, f"prefill {p.name}"), p.repeat) for p in w.decoder.pieces(b, w.prompt, 0)}
    fixed, varying = {}, {}
    if w.generate > 1:
        fixed = {p.name: (run(p, f"decode {p.name}"), p.repeat) for p in w.decoder.pieces(b, 1, w.prompt)
                 if not p.varies}
        for past in w.sampled_pasts():
            varying[past] = {p.name: (run(p, f"decode {p.name}, {past} cached"), p.repeat)
                             for p in w.decoder.pieces(b, 1, past) if p.varies}
    return LlmRun(w, prefill, fixed, varying)


Counted = list[tuple[PieceRun, float]]
"""Simulated pieces, each with how many times it counts."""


def cost_of(pieces: Counted) -> StepCost:
    """The cost of ``pieces``: each piece's cost times its count."""
    return sum((StepCost.of(r).times(k) for r, k in pieces), StepCost(0, 0, 0))


def decode_pieces(run: LlmRun) -> Counted:
    """Every simulated piece of the decode steps with how many times the steps count it: the fixed pieces once a
    step (times their count), each sampled context's pieces their count times their weight in the linear
    interpolation, in the context length, of the steps between the sampled contexts (all their weight 1 when every
    step is simulated)."""
    xs, pasts = sorted(run.varying), run.workload.decode_pasts
    weight = {x: float(np.interp(pasts, xs, [float(x == y) for y in xs]).sum()) for x in xs}
    fixed = [(r, k * len(pasts)) for r, k in run.fixed.values()]
    return fixed + [(r, k * weight[x]) for x in xs for r, k in run.varying[x].values()]


def first_decode(run: LlmRun) -> Step:
    """The first simulated decode step's pieces."""
    return {**run.varying[min(run.varying)], **run.fixed}


def kv_bytes(w: LlmWorkload, past: int) -> tuple[int, int]:
    """(KV bytes a decode step over ``past`` cached tokens reads, writes): the whole cache plus the new token's
    keys and values read by the attention, the new ones written, over all layers and sequences."""
    per_token = w.batch * w.decoder.kv_bytes_per_token(KV_BYTES[w.kv])
    return per_token * (past + 1), per_token


def weight_bytes(run: LlmRun) -> int:
    """DRAM bytes of weights a decode step reads: each piece's weights image times its count, but of the embedding
    table only the rows it looks up."""
    dec = run.workload.decoder
    read = sum((r.weight_bytes - dec.unread_bytes(name, r.weight_bytes)) * k
               for name, (r, k) in first_decode(run).items())
    return read + dec.embedding_rows_bytes(run.workload.batch)


def dram_bound_cycles(nbytes: float, arch: Arch) -> float:
    """Cycles to move ``nbytes`` at the DRAM bus's bandwidth (``dram.gb_per_s`` at the core clock)."""
    return nbytes / float(arch.dram_timing.bytes_per_cycle)


def busiest_unit(report: dict) -> tuple[str, float]:
    """The unit busy for the largest fraction of a run, and that fraction."""
    name, unit = max(report["units"].items(), key=lambda kv: kv[1]["busy_fraction"])
    return name, unit["busy_fraction"]


def mean(xs: list[float]) -> float:
    return math.fsum(xs) / len(xs) if xs else 0.0
