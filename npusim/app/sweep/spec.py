"""The sweep spec: a base Arch, the Arch points (a grid, a list or a seeded random sample of ``section.field``
overrides) and the workloads, read from TOML (``npusim sweep SPEC.toml``) or from the same structure as a dict
(``npusim.app.sweep.sweep({...})``). Every key and value is checked before anything runs (docs/sweep.md)::

    output = "r18-sweep"                       # results directory (relative to where you run it); -o overrides
    arch = { base = "edge16", set = ["dram.latency_ns=150"] }   # preset or TOML file, fixed overrides

    [grid]                                     # or [[points]] tables, or [random]
    "matrix.rows,matrix.cols" = [16, 32]       # a joint key sets every field it names
    "dram.gb_per_s" = [6.4, 12.8]

    [options]                                  # compiler options of ONNX and zoo workloads
    prefetch = true

    [[workloads]]
    zoo = "resnet18"
    args = { image = 64, width = 16 }
"""

from __future__ import annotations

import itertools
import math
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from isa import NpuSimError
from isa.arch import Arch, load_arch, parse_override
from isa.utf8 import decode_utf8
from npusim.app.sweep.workloads import MODEL_OPTIONS, SpecError, Workload, workloads_from_dict

TOP_KEYS = ("output", "arch", "grid", "points", "random", "options", "workloads")
Point = tuple[tuple[str, Any], ...]
"""One Arch point: (``section.field``, value) pairs, values of the field's type (tuples for list fields)."""


@dataclass(frozen=True)
class SweepSpec:
    """A checked sweep: the base Arch, every point's overrides (in order), the workloads and the override columns
    (every ``section.field`` any point sets, in the order they first appear)."""

    base: Arch
    points: tuple[Point, ...]
    workloads: tuple[Workload, ...]
    columns: tuple[str, ...]
    output: Path | None = None

    def overrides(self, point: Point) -> list[str]:
        """``point`` as ``--set`` strings."""
        return [f"{k}={_text(v)}" for k, v in point]

    def column_values(self, point: Point) -> dict[str, Any]:
        """Every override column's value at ``point``: the point's, else the base Arch's (list fields as text)."""
        own = dict(point)
        out = {}
        for col in self.columns:
            sec, name = col.split(".")
            v = own.get(col, getattr(getattr(self.base, sec), name))
            out[col] = ",".join(v) if isinstance(v, tuple) else v
        return out


def load_spec(source: str | Path | dict | SweepSpec, root: str | Path | None = None) -> SweepSpec:
    """A SweepSpec from a TOML file path, a dict of the same structure (paths relative to ``root``, default the
    current directory) or a SweepSpec (returned as is). Raises SpecError (or ArchError) with one line saying what
    is wrong where."""
    if isinstance(source, SweepSpec):
        return source
    if isinstance(source, dict):
        return _from_dict(source, Path(root or "."), "spec")
    path = Path(source)
    try:
        data = tomllib.loads(decode_utf8(path.read_bytes(), str(path),
                                         lambda msg, line, col: SpecError(f"{path}:{line}:{col}: {msg}")))
    except FileNotFoundError:
        raise SpecError(f"no sweep spec {str(path)!r}") from None
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"{path}: not valid TOML: {e}") from None
    return _from_dict(data, Path(root) if root else path.parent, str(path))


def _from_dict(data: dict, root: Path, where: str) -> SweepSpec:
    unknown = [k for k in data if k not in TOP_KEYS]
    if unknown:
        raise SpecError(f"{where}: unknown key {unknown[0]!r}; a sweep spec has {', '.join(TOP_KEYS)}")
    base = _base_arch(data.get("arch", "edge16"), root, f"{where}: arch")
    modes = [k for k in ("grid", "points", "random") if k in data]
    if len(modes) > 1:
        raise SpecError(f"{where}: give one of grid, points or random, not {' and '.join(modes)}")
    mode = modes[0] if modes else None
    points = {"grid": _grid, "points": _listed, "random": _random, None: lambda *_: [()]}[mode](
        data.get(mode), base, f"{where}: {mode}")
    options = _options(data.get("options", {}), f"{where}: options")
    entries = data.get("workloads")
    if not isinstance(entries, list) or not entries:
        raise SpecError(f"{where}: workloads must be a non-empty list of [[workloads]] tables")
    workloads = tuple(x for i, w in enumerate(entries) for x in ([w] if isinstance(w, Workload) else
                                                                 workloads_from_dict(w, root, options,
                                                                                     f"{where}: workloads[{i}]")))
    names = [w.name for w in workloads]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise SpecError(f"{where}: two workloads are named {dup!r}; give them distinct name = ...")
    columns = tuple(dict.fromkeys(k for p in points for k, _ in p))
    output = data.get("output")
    if output is not None and not isinstance(output, str):
        raise SpecError(f"{where}: output must be a directory path, not {output!r}")
    return SweepSpec(base, tuple(points), workloads, columns, Path(output) if output else None)


def _base_arch(value: Any, root: Path, where: str) -> Arch:
    if isinstance(value, str | Arch):
        value = {"base": value}
    if not isinstance(value, dict):
        raise SpecError(f"{where} must be a preset name, a TOML file or a table {{base, set}}, not {value!r}")
    for key in value:
        if key not in ("base", "set"):
            raise SpecError(f"{where}: unknown key {key!r}; arch has base and set")
    base, fixed = value.get("base", "edge16"), value.get("set", [])
    if not isinstance(fixed, list) or not all(isinstance(x, str) for x in fixed):
        raise SpecError(f"{where}.set must be a list of \"section.field=value\" strings, not {fixed!r}")
    if isinstance(base, Arch):
        return base.with_overrides(fixed)
    if not isinstance(base, str):
        raise SpecError(f"{where}.base must be a preset name or a TOML file, not {base!r}")
    local = root / base
    try:
        return load_arch(local if local.suffix == ".toml" and local.is_file() else base, fixed)
    except NpuSimError as e:
        raise SpecError(f"{where}: {e}") from None


def _fields(key: Any, where: str) -> list[str]:
    if not isinstance(key, str) or not key:
        raise SpecError(f"{where}: keys must be \"section.field\" strings, not {key!r}")
    return [k.strip() for k in key.split(",")]


def _typed(key: str, value: Any, where: str) -> Any:
    """``value`` (a TOML scalar or list) checked and parsed as Arch field ``key``'s type."""
    if isinstance(value, dict) or (isinstance(value, list) and not all(isinstance(x, str) for x in value)):
        raise SpecError(f"{where}: {key} = {value!r} is not a value of the field")
    try:
        return parse_override(f"{key}={_text(value)}")[2]
    except NpuSimError as e:
        raise SpecError(f"{where}: {e}") from None


def _text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list | tuple):
        return ",".join(map(str, v))
    return str(v)


def _grid(grid: Any, base: Arch, where: str) -> list[Point]:
    """Every combination, first key slowest; a joint key ``"a.x,a.y"`` sets each field it names to the value."""
    if not isinstance(grid, dict) or not grid:
        raise SpecError(f"{where} must be a table of \"section.field\" = [values]")
    axes = []
    for key, values in grid.items():
        names = _fields(key, where)
        if not isinstance(values, list) or not values:
            raise SpecError(f"{where}: {key} must be a non-empty list of values, not {values!r}")
        axes.append([tuple((n, _typed(n, v, where)) for n in names) for v in values])
    return [tuple(kv for part in combo for kv in part) for combo in itertools.product(*axes)]


def grid_points(grid: dict[str, Sequence]) -> list[list[str]]:
    """Every combination of ``grid`` (override key -> values) as ``--set``-style override lists, first key slowest."""
    return [[f"{k}={_text(v)}" for k, v in p] for p in _grid({k: list(v) for k, v in grid.items()}, Arch(), "grid")]


def _listed(points: Any, base: Arch, where: str) -> list[Point]:
    if not isinstance(points, list) or not points or not all(isinstance(p, dict) for p in points):
        raise SpecError(f"{where} must be a non-empty list of [[points]] tables of \"section.field\" = value")
    return [tuple((n, _typed(n, v, f"{where}[{i}]")) for key, v in p.items() for n in _fields(key, where))
            for i, p in enumerate(points)]


DRAWN_DIGITS = 3
"""Significant digits of a randomly drawn number: the DRAM's bus time converts to core cycles exactly in ticks whose
size comes from the digits of dram.gb_per_s and clock.ghz (:mod:`isa.speeds`), so a draw with 16 digits would be
refused."""


def _random(table: Any, base: Arch, where: str) -> list[Point]:
    """``samples`` points drawn with numpy's generator seeded by ``seed``: per key, one of a list of values, or a
    number in ``{low, high}`` (uniform; ``log = true``: log-uniform; integer fields on the grid ``low + k * step``,
    numbers rounded to :data:`DRAWN_DIGITS` significant digits)."""
    if not isinstance(table, dict):
        raise SpecError(f"{where} must be a table with samples, seed and \"section.field\" = choices")
    samples, seed = table.get("samples"), table.get("seed", 0)
    for name, v in (("samples", samples), ("seed", seed)):
        if isinstance(v, bool) or not isinstance(v, int) or v < (1 if name == "samples" else 0):
            raise SpecError(f"{where}.{name} must be an integer >= {1 if name == 'samples' else 0}, not {v!r}")
    space = [(key, _fields(key, where), dist) for key, dist in table.items() if key not in ("samples", "seed")]
    if not space:
        raise SpecError(f"{where} names no \"section.field\" to draw")
    draws = [(names, _distribution(key, names, dist, where)) for key, names, dist in space]
    rng = np.random.default_rng(seed)
    return [tuple((n, v) for names, draw in draws for v in [draw(rng)] for n in names) for _ in range(samples)]


def _distribution(key: str, names: list[str], dist: Any, where: str):
    """A function rng -> value of every field in ``names`` (checked as each of them)."""
    if isinstance(dist, list):
        if not dist:
            raise SpecError(f"{where}: {key} must list at least one value")
        values = [_typed(n, v, where) for v in dist for n in names][::len(names)]
        return lambda rng: values[int(rng.integers(len(values)))]
    if not isinstance(dist, dict) or not {"low", "high"} <= set(dist) or set(dist) - {"low", "high", "step", "log"}:
        raise SpecError(f"{where}: {key} must be a list of values or a table {{low, high[, step][, log]}}, "
                        f"not {dist!r}")
    kind = type(_typed(names[0], dist["low"], where))
    lo, hi, step, log = dist["low"], dist["high"], dist.get("step", 1), dist.get("log", False)
    for n in names:
        _typed(n, hi, where)
    if kind not in (int, float) or not lo <= hi or not isinstance(log, bool) or (log and lo <= 0) or \
            isinstance(step, bool) or not isinstance(step, int | float) or step <= 0:
        raise SpecError(f"{where}: {key} = {dist!r} needs numbers 0 < low <= high (low > 0 with log), step > 0")

    def draw(rng) -> Any:
        x = math.exp(rng.uniform(math.log(lo), math.log(hi))) if log else rng.uniform(lo, hi)
        if kind is float:   # (a few digits: GB/s and GHz convert to cycles exactly, isa.speeds)
            return min(max(float(f"{x:.{DRAWN_DIGITS}g}"), lo), hi)
        k = min(round((x - lo) / step), int((hi - lo) // step))
        return int(lo + k * step)
    return draw


def _options(options: Any, where: str) -> dict[str, Any]:
    if not isinstance(options, dict):
        raise SpecError(f"{where} must be a table")
    for key, v in options.items():
        if key not in MODEL_OPTIONS:
            raise SpecError(f"{where}: unknown option {key!r}; options are {', '.join(MODEL_OPTIONS)}")
        want = MODEL_OPTIONS[key]
        if isinstance(v, bool) != (want is bool) or not isinstance(v, want):
            raise SpecError(f"{where}.{key} must be {'true or false' if want is bool else 'an integer'}, not {v!r}")
    if options.get("buffers", 2) not in (1, 2):
        raise SpecError(f"{where}.buffers must be 1 or 2, not {options['buffers']!r}")
    return options

