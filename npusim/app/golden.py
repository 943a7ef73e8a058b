"""Golden traces: reference workloads compiled and simulated (timing only) on two presets, recorded under traces/.

Each golden ``<workload>-<preset>`` is a directory of three files:

- ``program.s`` (``program.s.gz`` above :data:`GZIP_ABOVE` bytes): the compiled program as canonical assembly,
- ``report.json``: total cycles, per-unit busy/idle/stall cycles by cause, per-layer start/end/cycles, DRAM and SRAM
  bytes, instruction count, the program's sha256 and the Arch; integers only, no wall time, so it is deterministic,
- ``summary.md``: a short table for humans (total cycles, issued MAC utilization, per-unit busy fraction, top
  layers).

:func:`check_golden` recompiles and resimulates one golden and lists readable differences from its files;
:func:`update_golden` rewrites them. It reaches the compiler only through :mod:`npusim.app.driver`. An Arch field added
after a golden was recorded reads as its default there (:func:`load`): defaults keep the behaviour the golden was
recorded with, so a new field is not a difference, while any cycle it moved still is.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compiler.kernels.conv2d import ConvShape
from compiler.kernels.conv_transpose2d import ConvTransposeShape
from isa import DType, NpuSimError
from isa.arch import Arch, load_arch
from isa.asm import format_program
from npusim.app.driver import (
    run_conv,
    run_conv_transpose,
    run_gemm,
    run_model,
    single_layer_report,
    zoo_model,
)
from npusim.report.tables import keyed_layers
from npusim.sim.simulator import SimResult

GOLDEN_PRESETS = ("edge16", "mid32")
"""The presets the golden traces are recorded on (every workload on each)."""
TRACES = Path(__file__).resolve().parents[2] / "traces"
GZIP_ABOVE = 64 * 1024  # bytes of assembly above which program.s is stored gzipped
FORMAT = 1  # version of report.json's layout
TOP_LAYERS = 5  # layers listed in summary.md


@dataclass(frozen=True)
class Workload:
    """A reference workload: what it is and how to compile + simulate it (timing only) on an Arch."""

    name: str
    what: str
    run: Callable[[Arch], tuple[SimResult, list[dict]]]  # -> result, one layer_report row per layer


def _whole_program(result: SimResult, name: str, op: str) -> tuple[SimResult, list[dict]]:
    return result, single_layer_report(result, name, op)


def _gemm(M: int, N: int, K: int, dtype: DType) -> Callable[[Arch], tuple[SimResult, list[dict]]]:
    return lambda arch: _whole_program(run_gemm(M, N, K, dtype, arch, timing_only=True)[0], "gemm", "Gemm")


def _conv(cs: tuple[int, ...], dtype: DType) -> Callable[[Arch], tuple[SimResult, list[dict]]]:
    return lambda arch: _whole_program(run_conv(ConvShape(*cs), dtype, arch, timing_only=True)[0], "conv", "Conv")


def _conv_transpose(ct: ConvTransposeShape, dtype: DType) -> Callable[[Arch], tuple[SimResult, list[dict]]]:
    return lambda arch: _whole_program(run_conv_transpose(ct, dtype, arch, timing_only=True)[0], "conv_transpose",
                                       "ConvTranspose")


def _zoo(name: str) -> Callable[[Arch], tuple[SimResult, list[dict]]]:
    def run(arch: Arch) -> tuple[SimResult, list[dict]]:
        _, result, _, report = run_model(zoo_model(name), arch, timing_only=True)
        return result, report["layers"]
    return run


WORKLOADS = {w.name: w for w in (
    Workload("gemm512", "tiled GEMM C[512,512] = A[512,512] @ B[512,512], int8, B pre-packed",
             _gemm(512, 512, 512, DType.I8)),
    Workload("conv3x3", "ResNet-like convolution 1x64x56x56 -> 64 channels, 3x3, stride 1, pad 1, int8",
             _conv((1, 64, 56, 56, 64, 3, 3, 1, 1), DType.I8)),
    Workload("conv_transpose", "2x upsampling ConvTranspose by phase splitting, perception case C "
             "(docs/perception.md): 1x128x25x25 -> 128 channels, 3x3, stride 2, pad 1, output_padding 1, fp32",
             _conv_transpose(
                 ConvTransposeShape(1, 128, 25, 25, 128, 3, 3, 2, 1, output_padding=1), DType.F32)),
    Workload("resnet18", "ResNet-18 from npusim.app.zoo (fp32, seed 0), 1x3x224x224 -> 1x1000", _zoo("resnet18")),
    Workload("bert_layer", "transformer encoder layer from npusim.app.zoo (BERT-base, fp32, seed 0), 1x128x768",
             _zoo("bert_layer")),
)}
GOLDENS = tuple(f"{w}-{p}" for w in WORKLOADS for p in GOLDEN_PRESETS)


def golden_names(selection: Sequence[str] = ()) -> list[str]:
    """The goldens named by ``selection`` (golden, workload or preset names; all when empty), in table order."""
    if not selection:
        return list(GOLDENS)
    out = []
    for sel in selection:
        hits = [g for g in GOLDENS if sel in (g, *g.rsplit("-", 1))]
        if not hits:
            raise NpuSimError(f"no golden {sel!r}; goldens: {', '.join(GOLDENS)} (or a workload or preset name)")
        out += [g for g in hits if g not in out]
    return out


def _split(name: str) -> tuple[str, str]:
    """(workload, preset) of golden ``name``; NpuSimError listing the goldens if there is no such golden."""
    if name not in GOLDENS:
        raise NpuSimError(f"no golden {name!r}; goldens: {', '.join(GOLDENS)}")
    workload, preset = name.rsplit("-", 1)
    return workload, preset


@dataclass(frozen=True)
class Golden:
    """One golden's content: the program's assembly text and its report (the dict written to report.json)."""

    program: str
    report: dict[str, Any]


def record(name: str, arch_overrides: Sequence[str] = ()) -> Golden:
    """Compile and simulate golden ``name`` now (timing only), on its preset with ``arch_overrides`` applied."""
    workload, preset = _split(name)
    result, layers = WORKLOADS[workload].run(load_arch(preset, tuple(arch_overrides)))
    text = format_program(result.program)
    return Golden(text, _report(name, result, layers, text))


def _report(name: str, result: SimResult, layers: list[dict], text: str) -> dict[str, Any]:
    workload, preset = _split(name)
    return {
        "format": FORMAT, "golden": name, "workload": workload, "what": WORKLOADS[workload].what, "preset": preset,
        "program": {"instructions": len(result.program.instrs), "lines": len(text.splitlines()),
                    "sha256": hashlib.sha256(text.encode()).hexdigest()},
        "cycles": result.cycles,
        "macs": result.macs,
        "units": {u.name: {"instructions": u.instructions, "busy_cycles": u.busy, "idle_cycles": u.idle,
                           "stall_cycles": dict(u.stall)} for u in result.units},
        "layers": [{k: lr[k] for k in ("name", "op", "start", "end", "cycles", "macs", "bound")} for lr in layers],
        "dram": {"bytes_read": result.dram_bytes_read, "bytes_written": result.dram_bytes_written,
                 "row_hits": result.dram_row_hits, "row_misses": result.dram_row_misses},
        "sram": {"spm_bytes": result.spm_bytes, "acc_bytes": result.acc_bytes},
        "warnings": list(result.warnings),
        # goldens record cycles: the energy section prices a run and times nothing, so it is not part of them
        "arch": _timing_arch(result.arch.to_dict()),
    }


# --- files ------------------------------------------------------------------------------------------------------------

def _files(g: Golden) -> dict[str, bytes]:
    """File name -> content of a golden's directory."""
    text = g.program.encode()
    program = ("program.s.gz", gzip.compress(text, 9, mtime=0)) if len(text) > GZIP_ABOVE else ("program.s", text)
    return dict([program, ("report.json", (json.dumps(g.report, indent=1) + "\n").encode()),
                 ("summary.md", summary_md(g.report).encode())])


def _plain(fname: str, content: bytes) -> bytes:
    """Content as compared: gzip is undone, so a different zlib never counts as a change."""
    return gzip.decompress(content) if fname.endswith(".gz") else content


def load(name: str, root: Path = TRACES) -> Golden | None:
    """The recorded golden ``name`` under ``root``, or None if it has not been recorded."""
    d = Path(root) / name
    programs = [d / f for f in ("program.s", "program.s.gz") if (d / f).is_file()]
    if not programs or not (d / "report.json").is_file():
        return None
    text = _plain(programs[0].name, programs[0].read_bytes()).decode()
    report = json.loads((d / "report.json").read_text())
    return Golden(text, report | {"arch": _with_new_fields(report["arch"])} if "arch" in report else report)


def _with_new_fields(arch: dict[str, Any]) -> dict[str, Any]:
    """A recorded Arch (its timing sections) with the sections and fields added since it was recorded at their
    defaults."""
    default = _timing_arch(Arch().to_dict())
    return arch | {sec: {k: v for k, v in fields.items() if k not in arch.get(sec, {})} | arch.get(sec, {})
                   for sec, fields in default.items() if isinstance(fields, dict)}


def _timing_arch(arch: dict[str, Any]) -> dict[str, Any]:
    """What a golden records of an Arch: every section but ``energy`` (which changes no cycle)."""
    return {k: v for k, v in arch.items() if k != "energy"}


@dataclass(frozen=True)
class Update:
    """What :func:`update_golden` did: the files it (re)wrote or removed, and the differences from the old golden."""

    files: list[str]
    differences: list[str]


def update_golden(name: str, root: Path = TRACES) -> Update:
    """Recompile + resimulate golden ``name`` and rewrite its files under ``root`` where their content changed."""
    new = record(name)
    old = load(name, root)
    d = Path(root) / name
    d.mkdir(parents=True, exist_ok=True)
    changed = []
    files = _files(new)
    for fname, content in files.items():
        path = d / fname
        if not path.is_file() or _plain(fname, path.read_bytes()) != _plain(fname, content):
            path.write_bytes(content)
            changed.append(fname)
    for stale in ("program.s", "program.s.gz"):
        if stale not in files and (d / stale).exists():
            (d / stale).unlink()
            changed.append(f"removed {stale}")
    return Update(changed, ["new golden"] if old is None else diff(old, new))


def check_golden(name: str, arch_overrides: Sequence[str] = (), root: Path = TRACES) -> list[str]:
    """Recompile + resimulate golden ``name`` and list how it differs from the recorded one (empty: identical).

    ``arch_overrides`` (``section.field=value``) change the preset for this run only, to see what a change would do.
    """
    _split(name)
    old = load(name, root)
    if old is None:
        return [f"no golden recorded in {Path(root) / name}; `npusim golden --update {name}` records it"]
    return diff(old, record(name, arch_overrides))


# --- differences ------------------------------------------------------------------------------------------------------

def _change(old: int, new: int, unit: str = "") -> str:
    """``old -> new unit (+delta, +pct)`` with thousands separators."""
    pct = f", {(new - old) / old:+.2%}" if old else ""
    return f"{old:,} -> {new:,}{unit} ({new - old:+,}{pct})"


def _value(v: Any) -> str:
    return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else "(absent)" if v is None else repr(v)


def program_diff(old: str, new: str) -> list[str]:
    """One line if the programs differ: lines removed/added, and the first differing line with both versions."""
    if old == new:
        return []
    a, b = old.splitlines(), new.splitlines()
    first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    line = lambda lines: repr(lines[first]) if first < len(lines) else "(end of program)"
    removed, added = sum((Counter(a) - Counter(b)).values()), sum((Counter(b) - Counter(a)).values())
    return [f"program: {removed:,} lines removed, {added:,} added ({len(a):,} -> {len(b):,} lines); first difference "
            f"at line {first + 1}: {line(a)} -> {line(b)}"]


def layer_diff(old: list[dict], new: list[dict]) -> list[str]:
    """Per layer (program order of the new run, then layers that are gone): cycles old -> new."""
    a, b = keyed_layers(old), keyed_layers(new)
    out = []
    for key, lr in b.items():
        if key not in a:
            out.append(f"layer {key} ({lr['op']}): new, {lr['cycles']:,} cycles")
        elif a[key]["cycles"] != lr["cycles"]:
            out.append(f"layer {key} ({lr['op']}): {_change(a[key]['cycles'], lr['cycles'], ' cycles')}")
    out += [f"layer {key} ({lr['op']}): gone (was {lr['cycles']:,} cycles)" for key, lr in a.items() if key not in b]
    return out


def unit_diff(old: dict[str, dict], new: dict[str, dict]) -> list[str]:
    """Per unit (order of the new run, then units that are gone): busy, idle, each stall cause, instructions."""
    def total(u):
        return (f"busy {u['busy_cycles']:,}, stalled {sum(u['stall_cycles'].values()):,}, idle {u['idle_cycles']:,} "
                f"cycles, {u['instructions']:,} instructions")

    out = []
    for name, u in new.items():
        if name not in old:
            out.append(f"unit {name}: new, not in the golden ({total(u)})")
            continue
        o = old[name]
        for key, label, unit in (("busy_cycles", "busy", " cycles"), ("idle_cycles", "idle", " cycles"),
                                 ("instructions", "instructions", "")):
            if o[key] != u[key]:
                out.append(f"unit {name}: {label} {_change(o[key], u[key], unit)}")
        for cause in [*u["stall_cycles"], *(c for c in o["stall_cycles"] if c not in u["stall_cycles"])]:
            x, y = o["stall_cycles"].get(cause), u["stall_cycles"].get(cause)
            if x != y:
                out.append(f"unit {name}: stall {cause} " + (_change(x, y, " cycles") if None not in (x, y)
                                                             else f"{_value(x)} -> {_value(y)}"))
    out += [f"unit {name}: in the golden but not in this run (had {total(u)})" for name, u in old.items()
            if name not in new]
    return out


def _flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out = {}
    for k, v in d.items():
        out.update(_flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def diff(old: Golden, new: Golden) -> list[str]:
    """Readable differences, in a fixed order: program, total cycles, layers, units, then every other report field
    (DRAM/SRAM bytes, MACs, warnings, Arch fields) by name."""
    a, b = old.report, new.report
    out = program_diff(old.program, new.program)
    if a["cycles"] != b["cycles"]:
        out.append(f"cycles: {_change(a['cycles'], b['cycles'])}")
    out += layer_diff(a.get("layers", []), b["layers"])
    out += unit_diff(a.get("units", {}), b["units"])
    skip = ("cycles", "layers", "units", "program.sha256", "program.lines")
    fa, fb = (_flat({k: v for k, v in r.items() if k not in skip}) for r in (a, b))
    for key in sorted(fa.keys() | fb.keys()):
        x, y = fa.get(key), fb.get(key)
        if key not in skip and x != y:
            both_int = all(isinstance(v, int) and not isinstance(v, bool) for v in (x, y))
            out.append(f"{key}: {_change(x, y) if both_int else f'{_value(x)} -> {_value(y)}'}")
    return out


# --- summary ----------------------------------------------------------------------------------------------------------

def summary_md(report: dict[str, Any]) -> str:
    """summary.md: totals, per-unit busy fraction and the layers that take longest, as Markdown tables. Its MACs are
    the program's instructions' (zero blocks included), so its utilization is the issued MAC utilization
    (docs/timing.md)."""
    cycles, arch = report["cycles"], report["arch"]
    pct = lambda x: f"{x / cycles:.1%}" if cycles else "-"
    peak = cycles * arch["matrix"]["rows"] * arch["matrix"]["cols"] * arch.get("units", {}).get("matrix", 1)
    instrs, dram = report["program"]["instructions"], report["dram"]
    lines = [f"# {report['golden']}", "",
             f"{report['what']}, on preset `{report['preset']}` ({arch['description']}); compiled and simulated "
             f"timing-only. Generated by `npusim golden --update {report['golden']}`: do not edit.", "",
             "| total cycles | time | instructions | issued MACs | issued MAC utilization | DRAM read | DRAM written |",
             "|---:|---:|---:|---:|---:|---:|---:|",
             f"| {cycles:,} | {cycles / (arch['clock']['ghz'] * 1e3):,.2f} us | {instrs:,} | {report['macs']:,} | "
             f"{report['macs'] / peak if peak else 0:.1%} | {dram['bytes_read']:,} B | {dram['bytes_written']:,} B |",
             "",
             "| unit | instructions | busy | stalled | idle | busy % | main stall |",
             "|---|---:|---:|---:|---:|---:|---|"]
    for name, u in report["units"].items():
        stalled = sum(u["stall_cycles"].values())
        cause = max(u["stall_cycles"], key=u["stall_cycles"].get) if stalled else "-"
        lines.append(f"| {name} | {u['instructions']:,} | {u['busy_cycles']:,} | {stalled:,} | {u['idle_cycles']:,} "
                     f"| {pct(u['busy_cycles'])} | {cause} |")
    top = sorted(report["layers"], key=lambda lr: -lr["cycles"])[:TOP_LAYERS]
    lines += ["", f"Longest layers ({len(top)} of {len(report['layers'])}):", "",
              "| layer | op | start | cycles | share | bound |", "|---|---|---:|---:|---:|---|"]
    lines += [f"| {lr['name']} | {lr['op']} | {lr['start']:,} | {lr['cycles']:,} | {pct(lr['cycles'])} | "
              f"{lr['bound']} |" for lr in top]
    return "\n".join(lines) + "\n"
