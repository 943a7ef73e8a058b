"""The sweep's LLM workload: one inference request of a named decoder (:func:`npusim.app.llm.simulate_llm`, timing
only) on each Arch point, its report given the keys the sweep's generic metrics read.

A ``[[workloads]]`` table ``llm = "llama-3.2-1b"`` takes ``prompt``, ``generate``, ``batch``, ``weights``, ``kv``
and ``samples`` (defaults: :func:`~npusim.app.llm.simulate_llm`'s); ``prompt``, ``batch`` and ``weights`` may be
lists, and the table expands into one :class:`LlmPoint` per combination (:func:`llm_points`).
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import json
from dataclasses import asdict, dataclass
from typing import Any

from isa.arch import Arch

LISTABLE = ("prompt", "batch", "weights")
"""Keys of an ``llm`` workload that may list several values (one workload per combination, in this order, the first
slowest)."""
SCALAR = ("generate", "kv", "samples")
"""Keys of an ``llm`` workload that take one value."""


def defaults() -> dict[str, Any]:
    """The default of every key: :func:`npusim.app.llm.simulate_llm`'s."""
    from npusim.app.llm import simulate_llm

    params = inspect.signature(simulate_llm).parameters
    return {k: params[k].default for k in (*LISTABLE, *SCALAR)}


@dataclass(frozen=True)
class LlmPoint:
    """``prompt`` tokens of prefill then ``generate`` tokens (``generate - 1`` decode steps) of decoder ``model``
    (a name of :data:`npusim.app.llm.MODELS`) for ``batch`` sequences, every linear weight in ``weights`` format,
    the KV cache in ``kv``; ``samples``: decode contexts simulated (0: every step)."""

    name: str
    model: str
    prompt: int = 128
    generate: int = 32
    batch: int = 1
    weights: str = "i4"
    kv: str = "f32"
    samples: int = 5

    @property
    def digest(self) -> str:
        """sha256 of the workload: its parameters and every shape of its decoder config."""
        from npusim.app.llm import llm_config

        params = {k: v for k, v in asdict(self).items() if k != "name"}
        text = json.dumps(["llm", params, asdict(llm_config(self.model))], sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()

    def run(self, arch: Arch) -> dict:
        """Simulate the request on ``arch`` (timing only, no host fallback) and return :func:`sweep_report`'s dict."""
        from npusim.app.llm import simulate_llm

        report = simulate_llm(self.model, arch, prompt=self.prompt, generate=self.generate, batch=self.batch,
                              weights=self.weights, kv=self.kv, samples=self.samples, timing_only=True)
        return sweep_report(report, arch)


def sweep_report(llm: dict, arch: Arch) -> dict:
    """The keys of a run report the sweep's metrics read (:data:`npusim.app.sweep.METRICS`), for a whole LLM request
    (its prefill and every decode step: cycles, time, MACs, DRAM bytes, energy), with ``energy.per_inference_pj``
    the decode energy per generated token (one sequence's; the prefill's per sequence when nothing is decoded), and
    the LLM report itself under ``llm``. ``host_ops`` is empty: :func:`~npusim.app.llm.simulate_llm` compiles with
    no host fallback, so a node the NPU cannot run is an error, never a host op."""
    from isa.energy import area_mm2
    from npusim.sim.stats import memory_roof

    phases = [p for p in (llm["prefill"], llm["decode"]) if p]
    cycles = sum(p["cycles"] for p in phases)
    seconds = sum(p["seconds"] for p in phases)
    pj = sum(p["energy_pj"] for p in phases)
    macs = sum(p["macs"] for p in phases)
    names = dict.fromkeys(k for p in phases for k in p["energy_by_kind_pj"])
    kinds = {k: sum(p["energy_by_kind_pj"].get(k, 0.0) for p in phases) for k in names}
    decode = llm["decode"]
    per_token = decode["energy_per_token_pj"] if decode else llm["prefill"]["energy_pj"] / llm["batch"]
    return {"cycles": cycles, "time_us": seconds * 1e6, "macs": macs,
            "mac_utilization": macs / (cycles * arch.peak_macs_per_cycle) if cycles else 0.0,
            "dram": {"bytes_read": sum(p["dram_bytes_read"] for p in phases),
                     "bytes_written": sum(p["dram_bytes_written"] for p in phases)},
            "energy": {"total_pj": pj, "per_inference_pj": per_token,
                       "average_power_w": pj * 1e-12 / seconds if seconds else 0.0, "edp_js": pj * 1e-12 * seconds,
                       "by_kind_pj": kinds},
            "area": {f"{part}_mm2": v for part, v in area_mm2(arch).items()}, "memory_roof": memory_roof(arch),
            "host_ops": [], "llm": llm}


def llm_points(entry: dict, where: str) -> list[LlmPoint]:
    """The workloads of one ``[[workloads]]`` table with key ``llm`` (its other keys: ``name``, :data:`LISTABLE`,
    :data:`SCALAR`): one per combination of the listed values. Raises SpecError naming ``where`` and the bad key or
    value. Their names: ``name`` (default: the model's) and, when the table lists more than one value of a key,
    each such key's value, e.g. ``llama-3.2-1b prompt=512 batch=4``."""
    from npusim.app.llm import MODELS, WEIGHT_FORMATS, decoder_of
    from npusim.app.llm.workload import KV_FORMATS, LlmWorkload
    from npusim.app.sweep.workloads import SpecError  # (here: it imports this module)

    model, name = entry["llm"], entry.get("name", entry["llm"])
    if not isinstance(model, str) or model not in MODELS:
        raise SpecError(f"{where}.llm: unknown LLM config {model!r}; configs: {', '.join(MODELS)}")
    allowed = {"llm", "name", *LISTABLE, *SCALAR}
    unknown = sorted(set(entry) - allowed)
    if unknown:
        raise SpecError(f"{where}: unknown key {unknown[0]!r} for an llm workload; allowed: "
                        f"{', '.join(sorted(allowed))}")
    if not isinstance(name, str):
        raise SpecError(f"{where}.name must be a string, not {name!r}")
    choices = {"weights": WEIGHT_FORMATS, "kv": KV_FORMATS}
    values: dict[str, list] = {}
    for key, default in defaults().items():
        v = entry.get(key, default)
        many = isinstance(v, list) and key in LISTABLE
        if many and (not v or len(set(map(repr, v))) < len(v)):
            raise SpecError(f"{where}.{key} must list distinct values, not {v!r}")
        for x in v if many else [v]:
            _check(key, x, choices.get(key), f"{where}.{key}")
        values[key] = v if many else [v]
    listed = [k for k in LISTABLE if len(values[k]) > 1]
    points = []
    for combo in itertools.product(*(values[k] for k in LISTABLE)):
        args = dict(zip(LISTABLE, combo)) | {k: values[k][0] for k in SCALAR}
        label = " ".join([name, *(f"{k}={args[k]}" for k in listed)])
        try:
            # the request's checks across keys (prompt + generate within the positions)
            request = {k: v for k, v in args.items() if k != "weights"}
            LlmWorkload(decoder_of(model, args.get("weights", "i4")), **request)
        except ValueError as e:
            raise SpecError(f"{where}: {label}: {e}") from None
        points.append(LlmPoint(label, model, **args))
    return points


def _check(key: str, v: Any, choices: tuple[str, ...] | None, where: str) -> None:
    from npusim.app.sweep.workloads import SpecError

    if choices is not None:
        if v not in choices:
            listed = " or a list of them" if key in LISTABLE else ""
            raise SpecError(f"{where} must be one of {', '.join(choices)}{listed}, not {v!r}")
        return
    lo = 0 if key == "samples" else 1
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        listed = " or a list of them" if key in LISTABLE else ""
        raise SpecError(f"{where} must be an integer >= {lo}{listed}, not {v!r}")
