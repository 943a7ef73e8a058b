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
from npusim.app.llm.configs import LlmConfig
from npusim.app.llm.decoder import WEIGHT_FORMATS, embed_model, head_chunks, head_models, layer_model

KV_FORMATS = ("f32",)
"""``--kv`` values: the cache's element type (activations are f32 on the NPU; narrower caches are not modelled)."""
KV_BYTES = {"f32": 4}


@dataclass(frozen=True)
class LlmWorkload:
    """One inference request: ``prompt`` tokens then ``generate`` new ones, for ``batch`` sequences at once, every
    linear weight in ``weights`` format (:data:`~npusim.app.llm.decoder.WEIGHT_FORMATS`), the cache in ``kv``;
    ``samples``: decode contexts simulated (0: every step)."""

    config: LlmConfig
    prompt: int = 128
    generate: int = 32
    batch: int = 1
    weights: str = "i4"
    kv: str = "f32"
    samples: int = 5

    def __post_init__(self) -> None:
        for what, v, lo in (("prompt", self.prompt, 1), ("generate", self.generate, 1), ("batch", self.batch, 1),
                            ("samples", self.samples, 0)):
            if not isinstance(v, int) or v < lo:
                raise ValueError(f"{what} must be an integer >= {lo}, not {v!r}")
        if self.weights not in WEIGHT_FORMATS:
            raise ValueError(f"weights must be one of {', '.join(WEIGHT_FORMATS)}, not {self.weights!r}")
        if self.kv not in KV_FORMATS:
            raise ValueError(f"kv must be one of {', '.join(KV_FORMATS)}, not {self.kv!r} (the NPU's activations "
                             f"are f32; a narrower cache is not modelled yet)")
        if self.prompt + self.generate > self.config.max_positions:
            raise ValueError(f"prompt + generate = {self.prompt + self.generate} exceeds {self.config.name}'s "
                             f"{self.config.max_positions} positions")

    @property
    def decode_pasts(self) -> list[int]:
        """The cached tokens of each decode step, in order."""
        return list(range(self.prompt, self.prompt + self.generate - 1))

    @property
    def pieces(self) -> int:
        """How many graphs :func:`simulate_pieces` simulates (for a progress bar)."""
        heads = head_chunks(self.config, self.weights)
        decode = 1 + heads + len(self.sampled_pasts()) if self.generate > 1 else 0
        return 2 + heads + decode

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


@dataclass(frozen=True)
class LlmRun:
    """The simulated pieces of a workload: ``prefill`` (embed, layer, head runs), ``ends`` (the decode step's embed
    and head runs) and ``layers`` (the decode layer's run by cached tokens, for the sampled steps)."""

    workload: LlmWorkload
    prefill: dict[str, PieceRun]
    ends: dict[str, PieceRun]
    layers: dict[int, PieceRun]


def _heads(cfg: LlmConfig, w: LlmWorkload, run: Runner, phase: str) -> dict[str, PieceRun]:
    return {f"head{i}": run(m, f"{phase} head{i}") for i, m in enumerate(head_models(cfg, w.weights, w.batch))}


def simulate_pieces(w: LlmWorkload, run: Runner) -> LlmRun:
    """Simulate the workload's pieces with ``run`` (prefill, the decode step's embedding and head once, the decode
    layer at each sampled context)."""
    cfg, b = w.config, w.batch
    prefill = {"embed": run(embed_model(cfg, b, w.prompt, 0), "prefill embed"),
               "layer": run(layer_model(cfg, w.weights, b, w.prompt, 0), "prefill layer"),
               **_heads(cfg, w, run, "prefill")}
    ends, layers = {}, {}
    if w.generate > 1:
        ends = {"embed": run(embed_model(cfg, b, 1, w.prompt), "decode embed"), **_heads(cfg, w, run, "decode")}
        for past in w.sampled_pasts():
            layers[past] = run(layer_model(cfg, w.weights, b, 1, past), f"decode layer, {past} cached")
    return LlmRun(w, prefill, ends, layers)


def phase_cost(pieces: dict[str, PieceRun], layer: StepCost, layers: int) -> StepCost:
    """A step: its layer ``layers`` times plus every other piece once."""
    rest = [StepCost.of(p) for k, p in pieces.items() if k != "layer"]
    return sum(rest, layer.times(layers))


def layer_at(run: LlmRun, past: int) -> StepCost:
    """The decode layer at ``past`` cached tokens: simulated, or interpolated linearly between the nearest sampled
    contexts."""
    xs = sorted(run.layers)
    if past in run.layers:
        return StepCost.of(run.layers[past])
    hi = next(x for x in xs if x > past)
    lo = xs[xs.index(hi) - 1]
    t = (past - lo) / (hi - lo)
    a, b = StepCost.of(run.layers[lo]), StepCost.of(run.layers[hi])
    return a.times(1 - t) + b.times(t)


def decode_steps(run: LlmRun) -> list[StepCost]:
    """Every decode step's cost, in order."""
    cfg = run.workload.config
    return [phase_cost(run.ends, layer_at(run, past), cfg.layers) for past in run.workload.decode_pasts]


def kv_bytes(w: LlmWorkload, past: int) -> tuple[int, int]:
    """(KV bytes a decode step over ``past`` cached tokens reads, writes): the whole cache plus the new token's
    keys and values read by the attention, the new ones written, over all layers and sequences."""
    per_token = w.batch * w.config.kv_bytes_per_token(KV_BYTES[w.kv])
    return per_token * (past + 1), per_token


def weight_bytes(run: LlmRun) -> int:
    """DRAM bytes of weights a decode step reads: the layer's image ``layers`` times, the heads', and the rows of the
    embedding table it looks up (the tables themselves are not read whole)."""
    w, cfg = run.workload, run.workload.config
    layer = next(iter(run.layers.values())).weight_bytes
    heads = sum(p.weight_bytes for k, p in run.ends.items() if k.startswith("head"))
    return cfg.layers * layer + heads + w.batch * cfg.hidden * 4


def dram_bound_cycles(nbytes: float, arch: Arch) -> float:
    """Cycles to move ``nbytes`` at the DRAM bus's bandwidth (``dram.gb_per_s`` at the core clock)."""
    return nbytes / float(arch.dram_timing.bytes_per_cycle)


def busiest_unit(report: dict) -> tuple[str, float]:
    """The unit busy for the largest fraction of a run, and that fraction."""
    name, unit = max(report["units"].items(), key=lambda kv: kv[1]["busy_fraction"])
    return name, unit["busy_fraction"]


def mean(xs: list[float]) -> float:
    return math.fsum(xs) / len(xs) if xs else 0.0
