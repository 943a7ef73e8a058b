"""What a sweep runs on every Arch point: an ONNX model (a zoo model is built into one on the client), one GEMM, one
convolution, the layers of a SCALE-Sim topology file, or an LLM request (:mod:`npusim.app.sweep.llm_workload`).

A workload is a small frozen dataclass that carries everything a worker needs (the model's bytes, not a path, so a
worker on another machine needs no shared files) and a ``digest`` of exactly those bytes for the result store. Its
``run(arch, options)`` compiles and simulates it (timing only) and returns the run report, the dict ``npusim run
--json`` writes (without the instruction list); the sweep's row builder reads its metrics from that report.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from isa import DType, NpuSimError
from isa.arch import Arch
from npusim.app.sweep.llm_workload import LlmPoint, llm_points

COMPILE_FREE_FIELDS = (("queues", "depth"), ("dma", "channels"), ("energy", "table"), ("energy", "dram"))
"""Arch fields the compiler never reads (nothing under compiler/ nor the ``isa.cost`` formulas it prices tilings
with, nor the unit conversions those read (:mod:`isa.speeds`), touches them; not ``clock.ghz``, which converts the
DRAM's GB/s and ns to cycles; tests/sweep/test_run.py checks both by reading the source and by compiling with
changed values):
points that differ only in these, and in the Arch's name, compile to the same program, so a worker compiles once
for all of them (:func:`compile_view`)."""


class SpecError(NpuSimError, ValueError):
    """A sweep spec that cannot run: unknown key, bad value, unknown zoo model, unreadable file."""


def _digest(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode() if isinstance(p, str) else p)
        h.update(b"\0")
    return h.hexdigest()


def compile_view(arch: Arch) -> Arch:
    """``arch`` with the fields of :data:`COMPILE_FREE_FIELDS` (and its name) set to the defaults: equal for every
    point that compiles to the same program, so it keys the per-worker compile cache."""
    names: dict[str, list[str]] = {}
    for sec, name in COMPILE_FREE_FIELDS:
        names.setdefault(sec, []).append(name)
    default = Arch()
    sections = {sec: replace(getattr(arch, sec), **{n: getattr(getattr(default, sec), n) for n in ns})
                for sec, ns in names.items()}
    return replace(arch, name="compile", description="", **sections)


@lru_cache(maxsize=4)
def _graph(model: OnnxModel):
    from npusim.app.driver import load_model

    return load_model(_proto(model.data), model.options_dict().get("fallback", True))


def _proto(data: bytes):
    import onnx

    return onnx.load_from_string(data)


@lru_cache(maxsize=4)
def _compiled(model: OnnxModel, arch: Arch):
    """The model compiled for ``arch`` (a :func:`compile_view`), cached per worker process: the points of a sweep
    that compile identically compile once."""
    from compiler.compile import compile_model

    return compile_model(_graph(model), arch, **model.options_dict())


MODEL_OPTIONS = {"fuse": bool, "buffers": int, "prefetch": bool, "resident": bool, "fallback": bool}
"""Compiler options a sweep spec may set for its ONNX and zoo workloads (:func:`compiler.compile.compile_model`)."""


@dataclass(frozen=True)
class OnnxModel:
    """An ONNX model's serialized bytes (a zoo model's, or a file's) and the compiler options it runs with."""

    name: str
    data: bytes = field(repr=False, compare=False)
    digest: str = ""
    options: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if not self.digest:
            object.__setattr__(self, "digest", _digest("onnx", self.data, json.dumps(self.options)))

    def options_dict(self) -> dict[str, Any]:
        return dict(self.options)

    def run(self, arch: Arch) -> dict:
        from npusim.app.driver import model_report
        from npusim.sim.simulator import simulate

        compiled = _compiled(self, compile_view(arch))
        result = simulate(compiled.program, arch, None, timing_only=True)
        return model_report(result, compiled, instructions=False)


@dataclass(frozen=True)
class Gemm:
    """``C[M, N] = A[M, K] @ B[K, N]`` in ``dtype`` (:func:`npusim.app.driver.run_gemm`)."""

    name: str
    M: int
    N: int
    K: int
    dtype: str = "i8"

    @property
    def digest(self) -> str:
        return _digest("gemm", f"{self.M} {self.N} {self.K} {self.dtype}")

    def run(self, arch: Arch) -> dict:
        from npusim.app.driver import run_gemm

        result, _ = run_gemm(self.M, self.N, self.K, DType.from_text(self.dtype), arch, timing_only=True)
        return _layer_report(result, self.M * self.N * self.K)


@dataclass(frozen=True)
class Conv:
    """One 2-D convolution (:class:`compiler.kernels.conv2d.ConvShape` fields) in ``dtype``
    (:func:`npusim.app.driver.run_conv`)."""

    name: str
    shape: Any
    dtype: str = "i8"

    @property
    def digest(self) -> str:
        return _digest("conv", repr(self.shape), self.dtype)

    def run(self, arch: Arch) -> dict:
        from npusim.app.driver import run_conv

        result, _ = run_conv(self.shape, DType.from_text(self.dtype), arch, timing_only=True)
        return _layer_report(result, self.shape.macs)


@dataclass(frozen=True)
class Topology:
    """The layers of a SCALE-Sim topology file, each run as its GEMM view one after another (``npusim topo``): cycles,
    time, MACs, DRAM bytes and energy add up; power and EDP are those of the sum."""

    name: str
    layers: tuple = ()
    dtype: str = "i8"

    @property
    def digest(self) -> str:
        return _digest("topology", repr(self.layers), self.dtype)

    def run(self, arch: Arch) -> dict:
        from npusim.app.driver import run_gemm

        results = [run_gemm(x.M, x.N, x.K, DType.from_text(self.dtype), arch, timing_only=True)[0]
                   for x in self.layers]
        cycles, macs = sum(r.cycles for r in results), sum(x.M * x.N * x.K for x in self.layers)
        seconds, joules = sum(r.microseconds for r in results) * 1e-6, sum(r.energy.total for r in results) * 1e-12
        first = results[0].to_dict(instructions=False)
        return {"cycles": cycles, "time_us": seconds * 1e6, "macs": macs,
                "mac_utilization": macs / (cycles * arch.peak_macs_per_cycle) if cycles else 0.0,
                "dram": {"bytes_read": sum(r.dram_bytes_read for r in results),
                         "bytes_written": sum(r.dram_bytes_written for r in results)},
                "energy": {"total_pj": joules * 1e12, "per_inference_pj": joules * 1e12,
                           "average_power_w": joules / seconds if seconds else 0.0, "edp_js": joules * seconds},
                "area": first["area"], "memory_roof": first["memory_roof"],   # the Arch's, as every run's
                "layers": [{"name": x.name, "cycles": r.cycles, "energy_pj": r.energy.total}
                           for x, r in zip(self.layers, results)]}


Workload = OnnxModel | Gemm | Conv | Topology | LlmPoint


def _layer_report(result, macs: int) -> dict:
    """A single-layer run's report: the result's, with the layer's MACs and MAC utilization (as ``npusim gemm
    --json``)."""
    return result.to_dict(instructions=False) | {"macs": macs, "mac_utilization": result.mac_utilization(macs)}


# ------------------------------------------------------------------------------------------------ from the spec
KINDS = ("zoo", "onnx", "gemm", "conv", "topology", "llm")


def workloads_from_dict(entry: dict, root: Path, options: dict[str, Any], where: str) -> list[Workload]:
    """One ``[[workloads]]`` table of a spec: exactly one of ``zoo``, ``onnx``, ``gemm``, ``conv``, ``topology``,
    ``llm``, with ``name`` (optional), ``args`` (zoo), ``dtype`` (gemm, conv, topology), ``format`` (topology: "conv"
    or "gemm" rows), the ``llm`` keys (:func:`~npusim.app.sweep.llm_workload.llm_points`). Paths are relative to
    ``root``. An ``llm`` table whose keys list several values gives one workload per combination; every other table
    one. Raises SpecError naming ``where`` and the bad key or value."""
    if not isinstance(entry, dict):
        raise SpecError(f"{where} must be a table, not {entry!r}")
    kinds = [k for k in KINDS if k in entry]
    if len(kinds) != 1:
        raise SpecError(f"{where} must have exactly one of {', '.join(KINDS)}, not {', '.join(kinds) or 'none'}")
    if kinds[0] == "llm":
        return list(llm_points(entry, where))
    return [_workload(kinds[0], entry, root, options, where)]


def _workload(kind: str, entry: dict, root: Path, options: dict[str, Any], where: str) -> Workload:
    allowed = {kind, "name", *{"zoo": ("args",), "onnx": (), "gemm": ("dtype",), "conv": ("dtype",),
                               "topology": ("dtype", "format")}[kind]}
    unknown = sorted(set(entry) - allowed)
    if unknown:
        raise SpecError(f"{where}: unknown key {unknown[0]!r} for a {kind} workload; allowed: "
                        f"{', '.join(sorted(allowed))}")
    name = entry.get("name")
    if name is not None and not isinstance(name, str):
        raise SpecError(f"{where}.name must be a string, not {name!r}")
    dtype = entry.get("dtype", "i8")
    if kind in ("gemm", "conv", "topology"):
        try:
            DType.from_text(dtype)
        except (NpuSimError, ValueError, KeyError):
            raise SpecError(f"{where}.dtype must be one of i8, u8, f16, bf16, f32, not {dtype!r}") from None
    value = entry[kind]
    if kind == "zoo":
        return _zoo(value, entry.get("args", {}), name, options, where)
    if kind == "onnx":
        path = _path(value, root, where + ".onnx")
        return OnnxModel(name or path.stem, path.read_bytes(), options=_model_options(options))
    if kind == "gemm":
        dims = _ints(value, ("M", "N", "K"), where + ".gemm")
        return Gemm(name or "gemm {}x{}x{} {}".format(*dims, dtype), *dims, dtype)
    if kind == "conv":
        return _conv(value, name, dtype, where)
    fmt = entry.get("format", "conv")
    if fmt not in ("conv", "gemm"):
        raise SpecError(f"{where}.format must be 'conv' or 'gemm' (the topology file's rows), not {fmt!r}")
    from npusim.app.topology import read_topology

    path = _path(value, root, where + ".topology")
    try:
        layers = tuple(read_topology(path, gemm=fmt == "gemm"))
    except NpuSimError as e:
        raise SpecError(f"{where}.topology: {e}") from None
    return Topology(name or path.stem, layers, dtype)


def _model_options(options: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(options.items()))


def _zoo(model: Any, args: Any, name: str | None, options: dict[str, Any], where: str) -> OnnxModel:
    from npusim.app.zoo import MODELS

    if model not in MODELS:
        raise SpecError(f"{where}.zoo: unknown zoo model {model!r}; the zoo has {', '.join(MODELS)}")
    if not isinstance(args, dict):
        raise SpecError(f"{where}.args must be a table of the model's size arguments, not {args!r}")
    params = [p for p in inspect.signature(MODELS[model]).parameters]
    for key, v in args.items():
        if key not in params:
            raise SpecError(f"{where}.args: {model} has no argument {key!r}; it takes {', '.join(params)}")
        if isinstance(v, bool) or not isinstance(v, int):
            raise SpecError(f"{where}.args.{key} must be an integer, not {v!r}")
    try:
        proto = MODELS[model](**args)
    except NpuSimError as e:
        raise SpecError(f"{where}: {model}({_call(args)}): {e}") from None
    label = name or (f"{model}({_call(args)})" if args else model)
    return OnnxModel(label, proto.SerializeToString(), options=_model_options(options))


def _call(args: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in args.items())


def _path(value: Any, root: Path, where: str) -> Path:
    if not isinstance(value, str):
        raise SpecError(f"{where} must be a file path, not {value!r}")
    path = Path(value) if Path(value).is_absolute() else root / value
    if not path.is_file():
        raise SpecError(f"{where}: no such file {str(path)!r}")
    return path


def _ints(value: Any, names: tuple[str, ...], where: str, optional: dict[str, int] | None = None) -> list[int]:
    """Positive integers named ``names`` (then ``optional``, with defaults) from a table or a list in that order."""
    optional = optional or {}
    keys = (*names, *optional)
    if isinstance(value, list):
        if not names and not optional or not len(names) <= len(value) <= len(keys):
            raise SpecError(f"{where} must list {', '.join(names)} in order, not {value!r}")
        value = dict(zip(keys, value))
    if not isinstance(value, dict):
        raise SpecError(f"{where} must be a table {{{', '.join(f'{k} = ...' for k in names)}}}, not {value!r}")
    for key in value:
        if key not in keys:
            raise SpecError(f"{where}: unknown key {key!r}; expected {', '.join(keys)}")
    missing = [k for k in names if k not in value]
    if missing:
        raise SpecError(f"{where} lacks {', '.join(missing)}")
    out = []
    for k in keys:
        v = value.get(k, optional.get(k))
        lo = 0 if k == "pad" else 1
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            raise SpecError(f"{where}.{k} must be an integer >= {lo}, not {v!r}")
        out.append(v)
    return out


def _conv(value: Any, name: str | None, dtype: str, where: str) -> Conv:
    from compiler.kernels.conv2d import ConvShape

    dims = _ints(value, ("N", "C", "H", "W", "K", "R", "S"), where + ".conv",
                 {"stride": 1, "pad": 0, "dilation": 1, "groups": 1})
    try:
        cs = ConvShape(*dims)
    except NpuSimError as e:
        raise SpecError(f"{where}.conv: {e}") from None
    label = name or (f"conv {cs.C}x{cs.H}x{cs.W} -> {cs.K} {cs.R}x{cs.S}/{cs.stride} {dtype}")
    return Conv(label, cs, dtype)
