"""The ``npusim`` command line. Whatever goes wrong is one line on stderr: ``npusim: error: ...`` and exit status 1
for a bad input (every NpuSimError, unreadable files), argparse's usage message and exit status 2 for a bad command
line, ``npusim: internal error: ...`` and exit status 70 for a bug (any other exception; ``NPUSIM_DEBUG=1`` shows its
traceback). 3 means a run finished but its values did not match the reference; 130 an interrupt."""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from pathlib import Path

import numpy as np

from isa import NpuSimError
from isa.arch import load_arch, preset_names
from npusim import __version__


def _arch(args):
    return load_arch(args.arch, tuple(args.set or ()))


EXIT_USER, EXIT_USAGE, EXIT_MISMATCH, EXIT_INTERNAL, EXIT_INTERRUPT, EXIT_PIPE = 1, 2, 3, 70, 130, 141


def _load_inputs(path: str | None):
    """The arrays of ``--inputs`` (an .npz by name, or one .npy array), or None."""
    if not path:
        return None
    from npusim.sim.inputs import load_file

    return load_file(path)


def _limits(args):
    from npusim.sim.limits import LIMITS

    return None if args.no_limits else LIMITS


def _dims(args) -> dict[str, int]:
    """``--dim NAME=SIZE`` options as a dict."""
    out = {}
    for item in args.dim or ():
        name, sep, size = item.partition("=")
        try:
            out[name.strip()] = int(size)
        except ValueError:
            raise NpuSimError(f"--dim must look like NAME=SIZE with an integer size, not {item!r}") from None
        if not sep or not name.strip():
            raise NpuSimError(f"--dim must look like NAME=SIZE with an integer size, not {item!r}")
    return out


def _write_json(text: str, dest: str) -> None:
    if dest == "-":
        sys.stdout.write(text + "\n")
    else:
        Path(dest).write_text(text + "\n")


def si(value: float, unit: str) -> str:
    """``value`` (in base ``unit``, e.g. pJ or J) with an SI prefix: ``si(1.2e6, "pJ") == "1.2 uJ"``."""
    prefixes = {"pJ": ("pJ", "nJ", "uJ", "mJ", "J"), "W": ("W", "kW")}
    names = prefixes.get(unit, (unit,))
    k = 0
    while abs(value) >= 1000 and k < len(names) - 1:
        value, k = value / 1000, k + 1
    return f"{value:.3g} {names[k]}"


def energy_lines(report: dict) -> list[str]:
    """The summary's energy, area and memory-roof lines, from a report's ``energy``, ``area`` and ``memory_roof``."""
    from npusim.sim.stats import memory_roof_text

    e, area, roof = report["energy"], report["area"], report["memory_roof"]
    kinds = {k: v for k, v in e["by_kind_pj"].items() if v}
    top = sorted(kinds, key=kinds.get, reverse=True)[:3]
    top += [k for k in ("host",) if k in kinds and k not in top]   # work on the host CPU is always named
    share = ", ".join(f"{k} {kinds[k] / e['total_pj']:.0%}" for k in top) if e["total_pj"] else "-"
    per = f", {si(e['per_inference_pj'], 'pJ')} per inference ({report['batch']['source']})" \
        if e["inferences"] > 1 else ""
    arch = report["arch"]
    return [f"energy {si(e['total_pj'], 'pJ')} (dynamic {si(e['dynamic_pj'], 'pJ')}, static "
            f"{si(e['static_pj'], 'pJ')}){per}; {si(e['average_power_w'], 'W')} average at "
            f"{arch['clock']['ghz']:g} GHz; EDP {e['edp_js']:.3g} J*s; area {area['total_mm2']:.3g} mm2 "
            f"(table {e['table']}, {e['dram_type']}); most: {share}",
            memory_roof_text(roof)]


def utilization_line(result, mac_utilization: float | None = None) -> str:
    """The summary's utilization figures (docs/timing.md, "Utilization figures"): MAC utilization when the useful MACs
    are known (``mac_utilization``: a model's, a layer's), then issued MAC utilization = matrix busy x array fill while
    busy."""
    useful = f"MAC utilization {mac_utilization:.1%}; " if mac_utilization is not None else ""
    return (f"{useful}issued MAC utilization {result.issued_mac_utilization:.1%} = matrix busy "
            f"{result.matrix_busy:.1%} x array fill while busy {result.array_fill_while_busy:.1%}")


def summary(result, mac_utilization: float | None = None, report: dict | None = None) -> str:
    """A short human-readable report: cycles, utilization figures, per-unit busy/stall/idle, traffic, energy.
    ``mac_utilization``: the MAC utilization of the work's useful MACs (a model's or a layer's; None for a bare
    program, whose instructions do not say which of their MACs are useful); ``report``: the run's JSON report if
    already made (its energy per inference counts the batch)."""
    w = max(8, *(len(u.name) for u in result.units))   # the unit column
    lines = [f"{result.program and len(result.program.instrs)} instructions on {result.arch.name}: "
             f"{result.cycles:,} cycles ({result.microseconds:,.2f} us at {result.arch.clock.ghz:g} GHz)",
             utilization_line(result, mac_utilization),
             f"{'unit':{w}} {'instrs':>7} {'busy':>11} {'stalled':>11} {'idle':>11} {'busy%':>6}  main stall"]
    for u in result.units:
        stalled = sum(u.stall.values())
        cause = max(u.stall, key=u.stall.get) if stalled else "-"
        busy = u.busy / result.cycles if result.cycles else 0.0
        lines.append(f"{u.name:{w}} {u.instructions:>7,} {u.busy:>11,} {stalled:>11,} {u.idle:>11,} {busy:>6.1%}  "
                     f"{cause}")
    lines.append(f"DRAM read {result.dram_bytes_read:,} B, written {result.dram_bytes_written:,} B, row hits "
                 f"{result.dram_row_hits:,} / misses {result.dram_row_misses:,}; wall {result.wall_seconds:.3f} s")
    if report and report.get("weight_bytes"):
        from compiler.ops.weight_quant import OP as WEIGHT_QUANT_OP

        quant = any(r.get("op") == WEIGHT_QUANT_OP for r in report.get("layers", ()))
        lines.append(f"weights {report['weight_bytes'] / 1e6:,.2f} MB in DRAM"
                     + (" (quantized MatMul weights stay packed: int4 half a byte, fp8 one byte a weight, plus "
                          "scales)" if quant else ""))
    if report and report.get("kv_cache"):
        kv = report["kv_cache"]
        held, new = sum(c["bytes"] for c in kv), sum(c["appended_bytes"] for c in kv)
        lines.append(f"KV cache in place: {len(kv)} present outputs hold their past inputs ({held:,} B); the step "
                     f"appends {new:,} B")
    lines += energy_lines(report or result.to_dict(instructions=False))
    lines += [f"warning: {w}" for w in result.warnings]
    return "\n".join(lines)


class ProgressBar:
    """A tqdm bar on stderr: instructions retired of total, simulated cycles as postfix. Use as ``progress=``."""

    def __init__(self, desc: str):
        self.desc, self.bar = desc, None

    def __call__(self, retired: int, total: int, cycle: int) -> None:
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=self.desc, unit="instr", file=sys.stderr, leave=False,
                            dynamic_ncols=True)
        self.bar.set_postfix_str(f"{cycle:,} cycles", refresh=False)
        self.bar.update(retired - self.bar.n)   # redraws at most every tqdm.mininterval

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _progress(args, desc: str = "simulating") -> ProgressBar | None:
    """A progress bar when stderr is a terminal and --quiet is not given, else None."""
    return None if args.quiet or not sys.stderr.isatty() else ProgressBar(desc)


def _run_with_progress(args, run, phase: str = ""):
    """``run(progress)`` with the bar of :func:`_progress` closed afterwards; ``phase`` is shown until it starts."""
    bar = _progress(args)
    if bar is not None and phase:
        sys.stderr.write(f"{phase}\r")
        sys.stderr.flush()
    try:
        return run(bar)
    finally:
        if bar is not None:
            bar.close()


def _write_trace(args, result, layers=None) -> None:
    if not args.trace:
        return
    from npusim.report.trace import write_trace

    info = write_trace(result, args.trace, layers)
    if args.json != "-":
        print(f"trace: {info.events:,} events, {info.bytes / 1e6:.1f} MB -> {args.trace}")


def cmd_simulate(args) -> int:
    from isa.files import read_program
    from npusim.sim.simulator import simulate

    arch = _arch(args)
    program = read_program(args.program)
    result = _run_with_progress(args, lambda bar: simulate(
        program, arch, _load_inputs(args.inputs), timing_only=args.timing_only, serial=args.serial,
        max_cycles=args.max_cycles, progress=bar, limits=_limits(args)))
    if args.save_outputs:
        np.savez(args.save_outputs, **result.outputs)
    if args.json:
        _write_json(result.to_json(), args.json)
    if args.json != "-":
        print(summary(result))
    _write_trace(args, result)
    return 0


def _read_report(path: str) -> dict:
    try:
        report = json.loads(Path(path).read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise NpuSimError(f"{path} is not a JSON report: {e}") from None
    if not isinstance(report, dict) or "cycles" not in report:
        raise NpuSimError(f"{path} is not an npusim report (no 'cycles'); write one with `npusim run --json`")
    return report


def cmd_diff(args) -> int:
    from npusim.report.tables import check_report, diff_rows, format_diff, program_note, to_csv

    a, b = _read_report(args.a), _read_report(args.b)
    check_report(a, args.a)
    check_report(b, args.b)
    rows = diff_rows(a, b)
    if args.csv:
        Path(args.csv).write_text(to_csv(rows))
    print(format_diff(rows, Path(args.a).stem, Path(args.b).stem, all_layers=args.all_layers))
    note = program_note(a, b)
    if note:
        print(f"npusim: {note}", file=sys.stderr)
    return 0


def cmd_gemm(args) -> int:
    from isa import DType
    from npusim.app.driver import run_gemm

    result, check = _run_with_progress(args, lambda bar: run_gemm(
        args.M, args.N, args.K, DType.from_text(args.dtype), _arch(args), timing_only=args.timing_only,
        ideal_memory=args.ideal_memory, seed=args.seed, progress=bar, limits=_limits(args)))
    return _layer_report(f"GEMM {args.M}x{args.N}x{args.K} {args.dtype}", result, check, args,
                         args.M * args.N * args.K)


def _all(values: list[int]) -> int | tuple[int, ...]:
    """A per-axis CLI option: one value for every axis (or side), else the tuple."""
    return values[0] if len(values) == 1 else tuple(values)


def cmd_conv(args) -> int:
    from compiler.kernels.conv2d import ConvShape
    from isa import DType
    from npusim.app.driver import run_conv

    cs = ConvShape(args.N, args.C, args.H, args.W, args.K, args.R, args.S, _all(args.stride), _all(args.pad),
                   _all(args.dilation), args.groups)
    result, check = _run_with_progress(args, lambda bar: run_conv(
        cs, DType.from_text(args.dtype), _arch(args), timing_only=args.timing_only, ideal_memory=args.ideal_memory,
        seed=args.seed, progress=bar, limits=_limits(args)))
    title = f"conv N={cs.N} C={cs.C} H={cs.H} W={cs.W} K={cs.K} {cs.R}x{cs.S} {cs.text} {args.dtype} -> {cs.OH}x{cs.OW}"
    return _layer_report(title, result, check, args, cs.macs)


def _layer_report(title: str, result, check, args, macs: int) -> int:
    """Print/write one layer's result and validation; exit 3 if the values do not match the reference. ``macs``:
    the layer's useful MACs, reported instead of the instructions' (which count a packed convolution's zero blocks)."""
    report = result.to_dict(instructions=False) | {"macs": macs, "mac_utilization": result.mac_utilization(macs)}
    if args.json:
        if check is not None:
            report["validation"] = check.to_dict()
        _write_json(json.dumps(report, indent=1), args.json)
    if args.json != "-":
        print(title)
        print(summary(result, report["mac_utilization"], report))
        if check is not None:
            print(f"validation against numpy ({check.rule}): max |err| {check.max_abs_error:.3g}, "
                  f"max rel {check.max_rel_error:.3g}: {'ok' if check.ok else 'FAILED'}")
    return 0 if check is None or check.ok else 3


def cmd_topo(args) -> int:
    from isa import DType
    from npusim.app.driver import run_topology
    from npusim.app.topology import read_topology

    arch = _arch(args)
    layers = read_topology(args.topology, gemm=args.gemm)
    quiet = args.json == "-"

    def show(row):
        if not quiet:
            mxu = row["units"]["matrix"]["busy_cycles"]
            print(f"{row['name']:16} {row['M']:>7} {row['N']:>6} {row['K']:>6} {row['cycles']:>12,} {mxu:>12,} "
                  f"{row['mac_utilization']:>9.1%}")

    if not quiet:
        print(f"{len(layers)} layers on {arch.name} ({arch.matrix.rows}x{arch.matrix.cols} {arch.matrix.dataflow}"
              f"{', ideal memory' if args.ideal_memory else ''})")
        print(f"{'layer':16} {'M':>7} {'N':>6} {'K':>6} {'cycles':>12} {'matrix busy':>12} {'MAC util':>9}")
    report = run_topology(layers, arch, dtype=DType.from_text(args.dtype), ideal_memory=args.ideal_memory,
                          progress=show)
    if args.json:
        _write_json(json.dumps(report, indent=1), args.json)
    if not quiet:
        print(f"total {report['cycles']:,} cycles, wall {report['wall_seconds']:.2f} s")
    return 0


def cmd_compile(args) -> int:
    from compiler.compile import compile_model
    from isa.files import write_program
    from npusim.app.driver import load_model

    fallback = not args.no_fallback
    compiled = compile_model(load_model(args.model, fallback, _dims(args)), _arch(args), dump_after=args.dump_after,
                             fallback=fallback, prefetch=False if args.no_prefetch else None,
                             resident=False if args.no_resident else None)
    write_program(compiled.program, args.output)
    host = f", {len(compiled.host_ops)} on the host CPU" if compiled.host_ops else ""
    print(f"{args.model}: {len(compiled.layers)} layers{host}, {len(compiled.program.instrs):,} instructions -> "
          f"{args.output}")
    return 0


def layers_table(report: dict) -> str:
    """The per-layer table of a model run: start/end cycle, cycles, MACs, MAC utilization, energy (uJ), what
    bounds it."""
    lines = [f"{'layer':28} {'op':18} {'start':>11} {'cycles':>10} {'MACs':>13} {'MAC util':>8} {'energy uJ':>10}  "
             f"bound"]
    for lr in report["layers"]:
        lines.append(f"{lr['name'][:28]:28} {lr['op'][:18]:18} {lr['start']:>11,} {lr['cycles']:>10,} "
                     f"{lr['macs']:>13,} {lr['mac_utilization']:>8.1%} {lr['energy_pj'] / 1e6:>10,.3f}  "
                     f"{lr['bound']}")
    return "\n".join(lines)


def cmd_run(args) -> int:
    from npusim.app.driver import run_model

    arch = _arch(args)
    inputs = _load_inputs(args.inputs)
    compiled, result, outputs, report = _run_with_progress(args, lambda bar: run_model(
        args.model, arch, inputs, timing_only=args.timing_only, validate=args.validate, seed=args.seed,
        dump_after=args.dump_after, fallback=not args.no_fallback, prefetch=False if args.no_prefetch else None,
        resident=False if args.no_resident else None, progress=bar, limits=_limits(args), dims=_dims(args),
        cache=not args.no_cache, batch=args.batch),
        phase=f"compiling {args.model} for {arch.name} ...")
    if args.save_outputs and outputs:
        np.savez(args.save_outputs, **outputs)
    if args.json:
        _write_json(json.dumps(report, indent=1), args.json)
    if args.csv:
        from npusim.report.tables import layer_rows, to_csv

        Path(args.csv).write_text(to_csv(layer_rows(report)))
    if args.timeline:
        from npusim.report.plots import render

        render(report, "timeline", args.timeline, title=Path(args.model).stem)
    ok = all(v["ok"] for v in report.get("validation", {}).values())
    if args.json != "-":
        print(layers_table(report))
        print(summary(result, report["mac_utilization"], report))
        for h in report["host_ops"]:
            print(f"host CPU ran {h['name']} ({h['op']}): {h['reason']}")
        for note in report.get("notes", ()):
            print(f"note: {note}")
        how = {"hit": "loaded from the compile cache", "miss": "compiled, now in the compile cache",
               "off": "compiled"}[report["compile_cache"]]
        print(f"{how} in {report['compile_seconds']:.2f} s, simulated in {report['simulate_seconds']:.2f} s")
        for name, v in report.get("validation", {}).items():
            print(f"validation {name} against onnxruntime ({v['rule']}): max |err| {v['max_abs_error']:.3g}, "
                  f"rel {v['max_rel_error']:.3g}: {'ok' if v['ok'] else 'FAILED'}")
    _write_trace(args, result, compiled.layers)
    return 0 if ok else 3


def cmd_llm(args) -> int:
    from npusim.app.llm import decoder_of, llm_rows, llm_summary, simulate_llm
    from npusim.app.llm.workload import LlmWorkload

    arch = _arch(args)
    try:
        decoder = decoder_of(args.model, args.weights)
        pieces = LlmWorkload(decoder, args.prompt, args.generate, args.batch, args.kv, args.samples).pieces
    except (KeyError, ValueError) as e:
        raise NpuSimError(str(e).strip("'\"")) from None
    bar = None
    if not args.quiet and sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=pieces, desc=f"{decoder.name} on {arch.name}", unit="graph", file=sys.stderr, leave=False)

    def progress(what: str) -> None:
        if bar is not None:
            bar.set_postfix_str(what, refresh=False)
            bar.update(1)

    try:
        report = simulate_llm(args.model, arch, prompt=args.prompt, generate=args.generate, batch=args.batch,
                              weights=args.weights, kv=args.kv, samples=args.samples, timing_only=args.timing_only,
                              cache=not args.no_cache, progress=progress)
    finally:
        if bar is not None:
            bar.close()
    if args.json:
        _write_json(json.dumps(report, indent=1), args.json)
    if args.csv:
        from npusim.report.tables import to_csv

        Path(args.csv).write_text(to_csv(llm_rows(report)))
    if args.json != "-":
        print(llm_summary(report))
    return 0


def _window(text: str | None) -> tuple[int, int] | None:
    if text is None:
        return None
    try:
        c0, c1 = (int(x.replace("_", "")) for x in text.split(":"))
    except ValueError:
        raise NpuSimError(f"--window must be C0:C1 (two cycle numbers), not {text!r}") from None
    if not 0 <= c0 < c1:
        raise NpuSimError(f"--window C0:C1 must have 0 <= C0 < C1, not {text!r}")
    return c0, c1


def cmd_plot(args) -> int:
    from npusim.report.plots import render

    if args.kind == "llm":
        from npusim.app.sweep.llm_plot import read_table, render_llm

        path = Path(args.report)   # default title: a sweep's directory (its tables are all called results)
        title = args.title if args.title is not None else path.parent.name if path.stem == "results" else path.stem
        render_llm(read_table(path), args.output, title=title)
        print(f"wrote {args.output}")
        return 0
    try:   # render checks the fields the plot reads (plots.check_report)
        report = json.loads(Path(args.report).read_bytes())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise NpuSimError(f"{args.report} is not a JSON report: {e}") from None
    render(report, args.kind, args.output, title=args.title if args.title is not None else Path(args.report).stem,
           window=_window(args.window), color_by=args.color_by, buckets=args.buckets)
    print(f"wrote {args.output}")
    return 0


def cmd_zoo(args) -> int:
    from npusim.app.zoo import MODELS, describe

    if args.name == "list":
        for name in MODELS:
            print(f"{name}\t{describe(name)}")
        return 0
    if args.name not in MODELS:
        raise NpuSimError(f"unknown zoo model {args.name!r}; 'npusim zoo list' shows {', '.join(MODELS)}")
    import onnx

    out = args.output or f"{args.name}.onnx"
    onnx.save(MODELS[args.name](), out)
    print(f"wrote {out}")
    return 0


def cmd_cache(args) -> int:
    from npusim.app import compile_cache

    mib = lambda n: f"{n / 2**20:,.1f} MiB"
    if args.action == "clear":
        entries, size = compile_cache.clear()
        print(f"removed {entries} entries ({mib(size)}) from {compile_cache.cache_dir()}")
        return 0
    now = compile_cache.info()
    print(f"{now.directory}: {now.entries} entries, {mib(now.bytes)} of {mib(now.max_bytes)} "
          f"(NPUSIM_CACHE_MAX_BYTES; least recently used entries go first)")
    return 0


def cmd_warm(args) -> int:
    from npusim.app.warm import warm

    seconds = warm(None if args.quiet else print)
    print(f"numba functions compiled and cached in {seconds:.0f} CPU s")
    return 0


def cmd_sweep(args) -> int:
    from npusim.app.sweep import load_spec, pareto, sweep

    spec = load_spec(args.spec)
    out = Path(args.output) if args.output else spec.output or Path(f"{Path(args.spec).stem}-sweep")
    metrics = [m.strip() for m in args.pareto.split(",")] if args.pareto else []
    if args.plot and len(metrics) not in (2, 3):
        raise NpuSimError("--plot draws the Pareto front: give --pareto with two or three metrics, e.g. "
                          "--pareto cycles,dram_bytes")
    points = len(spec.points)
    try:
        df = sweep(spec, out=out, scheduler=args.scheduler, workers=args.workers,
                   progress=not args.quiet and sys.stderr.isatty())
    except KeyboardInterrupt:
        from npusim.app.sweep import ResultStore

        print(f"npusim: interrupted; {len(ResultStore(out))} finished points are stored in {out}: run the same "
              f"command again to compute only the rest", file=sys.stderr)
        return 130
    errors = int(df["error"].notna().sum())
    print(f"{len(df)} rows ({points} Arch points x {len(spec.workloads)} workloads): {df.attrs['computed']} "
          f"computed, {df.attrs['reused']} reused from {out}, {errors} with an error -> {out}/results.csv, "
          f"{out}/results.parquet")
    import pandas as pd

    shown = df.assign(error=df["error"].fillna(""))
    with pd.option_context("display.width", 200, "display.max_columns", 30, "display.max_colwidth", 60):
        if metrics:
            front = pareto(df, metrics, host=args.host_points)
            print(f"Pareto front of {', '.join(metrics)} (minimised), per workload: {len(front)} rows"
                  + _host_note(front))
            print(shown.loc[front.index].assign(**{c: front[c] for c in front.columns if c not in shown})
                  .to_string(index=False))
        else:
            print(shown.to_string(index=False, max_rows=args.rows))
    if args.plot:
        _plot_fronts(df, metrics, args.plot, args.host_points)
        print(f"wrote {args.plot}")
    return 0


def _host_note(front) -> str:
    """What the front did with the points that ran nodes on the host CPU, for the line above it."""
    if front.attrs.get("host_excluded"):
        n = front.attrs["host_excluded"]
        return (f"; {n} point{'s' if n != 1 else ''} left out because {'they' if n != 1 else 'it'} ran nodes on the "
                f"host CPU (host_ops > 0: the host's time and energy, not the NPU's; --host-points mark keeps them, "
                f"marked)")
    if "host_assisted" in front.columns:
        return f"; {int(front['host_assisted'].sum())} of them ran nodes on the host CPU (host_assisted)"
    return ""


def _plot_fronts(df, metrics: list[str], path: str, host: str = "exclude") -> None:
    """One Pareto plot per workload, side by side, written to ``path``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from npusim.app.sweep import plot_pareto, plot_pareto_3d

    names = list(dict.fromkeys(df["workload"]))
    fig = Figure(figsize=(8 * len(names), 4.8), layout="constrained")   # room for the key of numbered points
    FigureCanvasAgg(fig)
    for i, name in enumerate(names):
        ax = fig.add_subplot(1, len(names), i + 1, **({"projection": "3d"} if len(metrics) == 3 else {}))
        (plot_pareto_3d if len(metrics) == 3 else plot_pareto)(df[df["workload"] == name], ax, *metrics, host=host)
        ax.set_title(name, loc="left")
    fig.savefig(path, dpi=110)


def cmd_golden(args) -> int:
    from npusim.app.golden import TRACES, check_golden, golden_names, update_golden

    if not args.dir and not TRACES.is_dir():   # an installed wheel has no traces/ (they belong to the source tree)
        raise NpuSimError(f"no golden traces here: {TRACES} does not exist (they live in the source checkout's "
                          f"traces/); run npusim golden from a source checkout, or pass --dir DIR")
    root, names = Path(args.dir) if args.dir else TRACES, golden_names(args.names)
    if args.update:
        if args.set:
            raise NpuSimError("--set cannot be combined with --update: goldens are recorded on the presets as they are")
        for name in names:
            up = update_golden(name, root)
            print(f"{name}: " + (f"wrote {', '.join(up.files)}" if up.files else "unchanged"), flush=True)
            for line in up.differences:
                print(f"  {line}")
        return 0
    differ = []
    for name in names:
        lines = check_golden(name, tuple(args.set or ()), root)
        differ += [name] if lines else []
        for line in lines or ["ok"]:
            print(f"{name}: {line}", flush=True)
    if differ:
        hint = ("with --set applied (the recorded goldens are unchanged)" if args.set else
                f"if the change is intended, `npusim golden --update {' '.join(differ)}` records it")
        print(f"npusim: error: {len(differ)} of {len(names)} goldens differ; {hint}", file=sys.stderr)
    return 1 if differ else 0


def cmd_verify(args) -> int:
    from isa.files import read_program
    from isa.verify import verify

    program = read_program(args.program)
    report = verify(program)
    for w in report.warnings:
        print(f"warning: {w}")
    if not args.races:
        print(f"{args.program}: {len(program.instrs)} instructions, ok")
        return 0
    from isa.races import find_races

    limit = args.max_races or None
    races = find_races(program, limit)
    for race in races:
        print(race)
    if races:
        more = f" (stopped at --max-races {limit})" if len(races) == limit else ""
        print(f"npusim: error: {args.program}: {len(races)} race{'s' * (len(races) > 1)}{more}: pairs of accesses "
              f"to common bytes, one a write, that no semaphore, queue order or barrier orders", file=sys.stderr)
        return 1
    print(f"{args.program}: {len(program.instrs)} instructions, ok, no races")
    return 0


def cmd_presets(args) -> int:
    for name in preset_names():
        print(f"{name}\t{load_arch(name).description}")
    return 0


def cmd_arch(args) -> int:
    sys.stdout.write(_arch(args).to_toml())
    return 0


class _Help(argparse.HelpFormatter):
    """Help that shows every option's default (when it has a meaningful one)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default in (None, False, argparse.SUPPRESS) or "default" in text or action.nargs == 0:
            return text
        return f"{text} (default: %(default)s)"


def _count(lo: int, hi: int | None = None, what: str = "an integer"):
    """An argparse type: an integer in [lo, hi] (a usage error otherwise)."""
    def parse(text: str) -> int:
        try:
            v = int(text.replace("_", ""), 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what}, not {text!r}") from None
        if v < lo or hi is not None and v > hi:
            bound = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
            raise argparse.ArgumentTypeError(f"must be {what} {bound}, not {v}")
        return v
    return parse


DIM = _count(1)
DTYPES = ["i8", "u8", "f16", "bf16", "f32"]


def build_parser() -> argparse.ArgumentParser:
    """The ``npusim`` argument parser: one subcommand per ``_*_command`` below, each with its ``cmd_*`` function."""
    p = argparse.ArgumentParser(prog="npusim", description="Cycle-accurate NPU simulator with real tensor values.",
                                epilog="Exit status: 0 ok, 1 bad input (one line on stderr), 2 bad command line, "
                                       "3 values differ from the reference, 70 internal error (a bug: rerun with "
                                       "NPUSIM_DEBUG=1 for the traceback), 141 the output's reader went away.")
    p.add_argument("--version", action="version", version=f"npusim {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in (_simulate_command, _gemm_command, _conv_command, _topo_command, _compile_command, _run_command,
                    _plot_command, _diff_command, _zoo_command, _cache_command, _warm_command, _sweep_command,
                    _golden_command, _verify_command, _presets_command, _arch_command, _llm_command):
        command(sub)
    return p


def _add(sub, name: str, help: str) -> argparse.ArgumentParser:
    """Subcommand ``name`` of ``sub`` (its description is its help line)."""
    return sub.add_parser(name, help=help, description=help, formatter_class=_Help)


# -- options several subcommands share ----------------------------------------------------------------------------

def _arch_args(sp) -> None:
    sp.add_argument("--arch", default="edge16", metavar="PRESET|FILE.toml",
                    help=f"Arch preset ({', '.join(preset_names())}) or TOML file")
    sp.add_argument("--set", action="append", metavar="SECTION.FIELD=VALUE",
                    help="override one Arch field, e.g. matrix.rows=32 (repeat for more)")


def _limit_args(sp) -> None:
    sp.add_argument("--no-limits", action="store_true", help="start even when the estimated instructions, "
                    "run time with values or memory exceed the limits (docs: README, Limits)")


def _compile_args(sp) -> None:
    from compiler.passes import PASSES

    sp.add_argument("--dump-after", metavar="PASS", choices=list(PASSES),
                    help=f"print the graph IR after this pass: one of {', '.join(PASSES)}")
    sp.add_argument("--no-fallback", action="store_true", help="fail on ops the NPU cannot run instead of "
                    "running them on the host CPU")
    sp.add_argument("--no-prefetch", action="store_true", help="keep every layer in the whole SPM, waiting for "
                    "the previous one (no cross-layer weight prefetch; see docs/compiler.md)")
    sp.add_argument("--no-resident", action="store_true", help="keep every activation in DRAM (no SPM arena "
                    "for activations on large SPMs; see docs/compiler.md)")
    sp.add_argument("--dim", action="append", metavar="NAME=SIZE", help="fix a symbolic input dimension of the "
                    "model (repeat for each, e.g. --dim batch=1 --dim seq=128)")


def _trace_args(sp, trace: bool = True) -> None:
    if trace:
        sp.add_argument("--trace", metavar="OUT.json", help="write a Chrome/Perfetto trace (docs/trace.md)")
    sp.add_argument("--quiet", action="store_true", help="no progress bar (shown only on a terminal)")


def _layer_args(sp, dims: tuple[tuple[str, str], ...]) -> None:
    """The dimensions ``(name, help)`` of one layer (gemm, conv) and the options of a one-layer run."""
    for dim, what in dims:
        sp.add_argument(dim, type=DIM, help=what)
    sp.add_argument("--dtype", default="i8", choices=DTYPES, help="operand type")
    _arch_args(sp)
    sp.add_argument("--json", metavar="OUT|-", help="write the JSON report (with validation) to a file or stdout")
    sp.add_argument("--timing-only", action="store_true", help="skip values and validation")
    sp.add_argument("--seed", type=_count(0, 2**63 - 1, "a seed"), default=0, help="seed of the random inputs")
    sp.add_argument("--ideal-memory", action="store_true",
                    help="data movement is free (DMA takes no time); gemm also fits one tile in SRAM")
    _limit_args(sp)
    _trace_args(sp, trace=False)


# -- the subcommands, in the order `npusim --help` lists them -------------------------------------------------------

def _simulate_command(sub) -> None:
    s = _add(sub, "simulate", "run an assembly (.s) or binary (.npub) program")
    s.add_argument("program", help="the program: .npub is the binary encoding, anything else UTF-8 assembly")
    _arch_args(s)
    s.add_argument("--inputs", metavar="IN.npz|IN.npy", help=".npz whose numeric arrays fill the DRAM regions of "
                   "the same names (bytes no more than the region's); .npy for a program with one region")
    s.add_argument("--json", metavar="OUT|-", help="write the full JSON report to a file or stdout")
    s.add_argument("--save-outputs", metavar="OUT.npz", help="save every DRAM region's bytes after the run")
    s.add_argument("--timing-only", action="store_true", help="skip the value kernels (same cycles)")
    s.add_argument("--serial", action="store_true", help="one instruction at a time in program order")
    s.add_argument("--max-cycles", type=_count(0, what="a cycle count"), metavar="CYCLES",
                   help="stop with an error after this many cycles (a deadlock is reported as one either way)")
    _limit_args(s)
    _trace_args(s)
    s.set_defaults(func=cmd_simulate)


def _gemm_command(sub) -> None:
    g = _add(sub, "gemm", "compile and simulate one GEMM C[M,N] = A[M,K] @ B[K,N], checked against numpy")
    _layer_args(g, (("M", "rows of A and C"), ("N", "columns of B and C"), ("K", "columns of A, rows of B")))
    g.set_defaults(func=cmd_gemm)


def _conv_command(sub) -> None:
    c = _add(sub, "conv", "compile and simulate one 2-D convolution (NCHW, OIHW), checked against numpy")
    _layer_args(c, (("N", "batch"), ("C", "input channels"), ("H", "input height"), ("W", "input width"),
                    ("K", "output channels (filters)"), ("R", "filter height"), ("S", "filter width")))
    for opt, default, lo, what in (("--stride", 1, 1, "stride of the window: 1 value, or 2 (h w)"),
                                   ("--pad", 0, 0, "zero padding: 1 value for every side, or 4 (top left bottom "
                                    "right)"),
                                   ("--dilation", 1, 1, "spacing of the filter taps: 1 value, or 2 (h w)")):
        c.add_argument(opt, type=_count(lo), nargs="+", default=[default], help=what)
    c.add_argument("--groups", type=_count(1), default=1, help="channel groups (C and K must be multiples)")
    c.set_defaults(func=cmd_conv)


def _topo_command(sub) -> None:
    t = _add(sub, "topo", "simulate every layer of a SCALE-Sim topology file (GEMM view of each layer)")
    t.add_argument("topology", help="SCALE-Sim topology CSV (header line, then one layer per line)")
    t.add_argument("--gemm", action="store_true", help="rows are 'name, M, N, K' instead of conv rows")
    _arch_args(t)
    t.add_argument("--dtype", default="i8", choices=DTYPES, help="operand type")
    t.add_argument("--ideal-memory", action="store_true",
                   help="operands already on chip (SCALE-Sim's setting): only the matrix unit's time counts")
    t.add_argument("--json", metavar="OUT|-", help="write the JSON report to a file or stdout")
    t.set_defaults(func=cmd_topo)


def _compile_command(sub) -> None:
    co = _add(sub, "compile", "compile an ONNX model to a program (.s assembly or .npub binary)")
    co.add_argument("model", help="ONNX model file")
    _arch_args(co)
    co.add_argument("-o", "--output", required=True, metavar="OUT.s|OUT.npub",
                    help="program file to write; .npub writes the binary encoding")
    _compile_args(co)
    co.set_defaults(func=cmd_compile)


def _run_command(sub) -> None:
    ru = _add(sub, "run", "compile and simulate an ONNX model; per-layer table; --validate vs onnxruntime")
    ru.add_argument("model", help="ONNX model file (`npusim zoo NAME -o FILE` writes one)")
    _arch_args(ru)
    ru.add_argument("--inputs", metavar="IN.npz|IN.npy", help=".npz keyed by the model's input names, each array of "
                    "exactly the input's shape and dtype; .npy for a one-input model (default: seeded random)")
    ru.add_argument("--save-outputs", metavar="OUT.npz", help="save the outputs keyed by the model's output names")
    ru.add_argument("--validate", action="store_true", help="run onnxruntime on the same inputs and compare")
    ru.add_argument("--timing-only", action="store_true", help="skip the value kernels (same cycles)")
    ru.add_argument("--json", metavar="OUT|-", help="write the JSON report to a file or stdout")
    ru.add_argument("--no-cache", action="store_true", help="compile even when the disk compile cache has this model, "
                    "Arch and options (and do not store it there)")
    ru.add_argument("--csv", metavar="OUT.csv", help="write the per-layer table (cycles, time split, energy by kind)")
    ru.add_argument("--seed", type=_count(0, 2**63 - 1, "a seed"), default=0, help="seed of the random inputs")
    ru.add_argument("--batch", type=_count(1, what="a batch size"), help="inferences one run makes, for the energy "
                    "per inference (default: the batch the model declares: a symbolic batch dim, else the leading "
                    "dim of its inputs of rank 3 or more, else 1)")
    _compile_args(ru)
    ru.add_argument("--timeline", metavar="OUT.png", help="draw the Gantt timeline of the run (as `npusim plot`)")
    _limit_args(ru)
    _trace_args(ru)
    ru.set_defaults(func=cmd_run)


def _llm_command(sub) -> None:
    from npusim.app.llm import KV_FORMATS, MODELS, WEIGHT_FORMATS

    lm = _add(sub, "llm", "simulate LLM inference: prefill a prompt, decode tokens with a KV cache; TTFT, TPOT, "
              "tokens/s, DRAM bytes and energy per token, what bounds decode (docs/llm.md)")
    lm.add_argument("model", help=f"a decoder config ({', '.join(MODELS)}) or an exported decoder .onnx with a KV "
                    "cache (input_ids, past_key_values.* inputs with symbolic batch, sequence and past dims)")
    _arch_args(lm)
    lm.add_argument("--prompt", type=_count(1, what="a token count"), default=128, help="prompt tokens (prefill)")
    lm.add_argument("--generate", type=_count(1, what="a token count"), default=32, help="tokens generated (the "
                    "first by the prefill, the rest by decode steps)")
    lm.add_argument("--batch", type=_count(1, what="a batch size"), default=1, help="sequences decoded together")
    lm.add_argument("--weights", default="i4", choices=WEIGHT_FORMATS, help="every linear weight's format in DRAM "
                    "(the LM head's too): f32, int8 per column, int4 with a scale per 32 rows, fp8 E4M3")
    lm.add_argument("--kv", default="f32", choices=KV_FORMATS, help="the KV cache's element type")
    lm.add_argument("--samples", type=_count(0, what="a step count"), default=5, help="decode contexts simulated "
                    "(first, last and evenly between; the other steps interpolated); 0: every step")
    lm.add_argument("--timing-only", action="store_true", help="skip the value kernels (same cycles)")
    lm.add_argument("--json", metavar="OUT|-", help="write the JSON report to a file or stdout")
    lm.add_argument("--csv", metavar="OUT.csv", help="write a decode step's per-op table")
    lm.add_argument("--no-cache", action="store_true", help="compile every graph (not from the disk compile cache)")
    lm.add_argument("--quiet", action="store_true", help="no progress bar (shown only on a terminal)")
    lm.set_defaults(func=cmd_llm)


def _plot_command(sub) -> None:
    from npusim.report.plots import KINDS

    pl = _add(sub, "plot", f"draw a plot of a `run --json` report ({', '.join(KINDS)}) or of a sweep table of LLM "
              f"workloads (llm: tokens/s against batch, TPOT against context)")
    pl.add_argument("report", help="JSON report of `npusim run` (timeline and util also take `simulate`'s); llm: a "
                    "results.csv or results.parquet of `npusim sweep`")
    pl.add_argument("--kind", required=True, choices=[*KINDS, "llm"], help="which plot")
    pl.add_argument("-o", "--output", required=True, metavar="OUT.png|OUT.svg|OUT.pdf",
                    help="image file; the suffix picks the format")
    pl.add_argument("--window", metavar="C0:C1", help="timeline: show only cycles [C0, C1)")
    pl.add_argument("--color-by", default="layer", choices=["layer", "op"], help="timeline: bar colours")
    pl.add_argument("--buckets", type=_count(1, 10_000, "a bucket count"), default=100,
                    help="util: number of time buckets")
    pl.add_argument("--title", help="title prefix (default: the report's file name; a sweep table's directory)")
    pl.set_defaults(func=cmd_plot)


def _diff_command(sub) -> None:
    di = _add(sub, "diff", "two JSON reports side by side: totals, per unit (busy, stalls by cause, energy) and per "
              "layer (cycles, energy)")
    di.add_argument("a", metavar="A.json", help="the first report (`npusim run --json` or `simulate --json`)")
    di.add_argument("b", metavar="B.json", help="the second report, compared with the first")
    di.add_argument("--all-layers", action="store_true", help="also list the layers whose cycles and energy are equal")
    di.add_argument("--csv", metavar="OUT.csv", help="write every row (section, name, metric, a, b) as CSV")
    di.set_defaults(func=cmd_diff)


def _zoo_command(sub) -> None:
    zo = _add(sub, "zoo", "'zoo list' or 'zoo NAME -o MODEL.onnx': models built in code")
    zo.add_argument("name", help="'list', or the model to write (see `npusim zoo list`)")
    zo.add_argument("-o", "--output", metavar="OUT.onnx", help="file to write (default: NAME.onnx)")
    zo.set_defaults(func=cmd_zoo)


def _cache_command(sub) -> None:
    ca = _add(sub, "cache", "'cache info' shows the disk compile cache (where, entries, size, cap); 'cache clear' "
              "empties it")
    ca.add_argument("action", choices=("info", "clear"), help="what to do")
    ca.set_defaults(func=cmd_cache)


def _warm_command(sub) -> None:
    wa = _add(sub, "warm", "compile the simulator's numba functions into their disk cache once (make does it after "
              "installing), so the first run does not pay for it")
    wa.add_argument("--quiet", action="store_true", help="print only the total")
    wa.set_defaults(func=cmd_warm)


def _sweep_command(sub) -> None:
    sw = _add(sub, "sweep", "run every workload of a sweep spec (TOML) on every Arch point, on a dask cluster; "
              "resumable; writes CSV and Parquet (docs/sweep.md)")
    sw.add_argument("spec", help="the sweep spec, a UTF-8 TOML file")
    sw.add_argument("-o", "--output", metavar="DIR", help="results directory (default: the spec's output, else "
                    "SPEC-sweep); finished points stored there are not computed again")
    sw.add_argument("--scheduler", default="local", metavar="ADDR", help="'local' (a LocalCluster of processes on "
                    "this machine), tcp://HOST:PORT of a running `dask scheduler`, or 'synchronous' (in this process)")
    sw.add_argument("--workers", type=_count(1, 1024, "a worker count"), help="local worker processes (default: one "
                    "per core)")
    sw.add_argument("--pareto", metavar="M1,M2[,M3]", help="print the Pareto front of these metric columns "
                    "(all minimised), e.g. cycles,dram_bytes")
    sw.add_argument("--plot", metavar="OUT.png", help="draw the --pareto front (2 or 3 metrics), one panel per "
                    "workload")
    sw.add_argument("--host-points", choices=("exclude", "mark"), default="exclude",
                    help="points that ran nodes on the host CPU (host_ops > 0): leave them out of the --pareto front "
                    "(exclude) or keep them, marked (mark) (default: exclude)")
    sw.add_argument("--rows", type=_count(0, what="a row count"), default=40, help="rows of the table to print")
    sw.add_argument("--quiet", action="store_true", help="no progress bar (shown only on a terminal)")
    sw.set_defaults(func=cmd_sweep)


def _golden_command(sub) -> None:
    go = _add(sub, "golden", "recompile + resimulate the golden traces (traces/) and diff; --update rewrites")
    go.add_argument("names", nargs="*", metavar="NAME", help="golden, workload or preset names (default: all)")
    go.add_argument("--update", action="store_true", help="rewrite the goldens' files and say which changed")
    go.add_argument("--set", action="append", metavar="SECTION.FIELD=VALUE",
                    help="check with this Arch override (shows what a change would do; repeat for more)")
    go.add_argument("--dir", help="the traces directory (default: traces/ of the source tree)")
    go.set_defaults(func=cmd_golden)


def _verify_command(sub) -> None:
    v = _add(sub, "verify", "statically check a program (bounds, alignment, semaphores; --races: data races)")
    v.add_argument("program", help="the program: .npub is the binary encoding, anything else UTF-8 assembly")
    v.add_argument("--races", action="store_true", help="also report every pair of accesses to common bytes (one a "
                   "write) that no semaphore, queue order or barrier orders, one line each; exit 1 if any")
    v.add_argument("--max-races", type=_count(0, what="a race count"), default=100, metavar="N",
                   help="with --races: stop after N races (0: report all)")
    v.set_defaults(func=cmd_verify)


def _presets_command(sub) -> None:
    _add(sub, "presets", "list the bundled Arch presets").set_defaults(func=cmd_presets)


def _arch_command(sub) -> None:
    a = _add(sub, "arch", "print an Arch (preset or file, with overrides) as TOML")
    _arch_args(a)
    a.set_defaults(func=cmd_arch)


def _internal(e: BaseException) -> str:
    """``internal error: <Type> in <function> (<file>:<line>); ...`` at the innermost frame of npusim's own code."""
    root = Path(__file__).resolve().parents[2]
    frames = [(Path(f.filename).resolve(), f) for f in traceback.extract_tb(e.__traceback__)]
    ours = [(path, f) for path, f in frames if path.is_relative_to(root) and path.parts[len(root.parts)] in
            ("isa", "compiler", "npusim", "tests")] or frames
    at = ""
    if ours:
        path, f = ours[-1]
        at = f" in {f.name} ({path.relative_to(root) if path.is_relative_to(root) else path.name}:{f.lineno})"
    return f"internal error: {type(e).__name__}{at}; rerun with NPUSIM_DEBUG=1 for the traceback"


OUTPUT_FILES = ("json", "csv", "trace", "timeline", "output")
"""The options that name a file a command writes (``-`` is stdout); checked before the command runs."""


def check_outputs(args) -> None:
    """NpuSimError naming the first output path of ``args`` that cannot be written (its directory is missing or not
    writable, or it is a directory), before any work: a long run must not end by losing its results. The sweep's
    ``--output`` is a results directory: it may exist or be created."""
    for option in OUTPUT_FILES:
        value = getattr(args, option, None)
        if not value or value == "-":
            continue
        path, is_dir = Path(value), args.command == "sweep" and option == "output"
        if path.exists() and path.is_dir() != is_dir:
            want = "a directory" if is_dir else "a file name"
            raise NpuSimError(f"--{option} {value}: {'not a directory' if is_dir else 'is a directory'}; give {want}")
        parent = path.parent
        if is_dir:   # the sweep makes its results directory and the missing ones above it
            parent = next(p for p in path.parents if p.exists())
        target = path if path.exists() else parent
        if not parent.is_dir():
            raise NpuSimError(f"--{option} {value}: directory {parent} does not exist; create it first")
        if not os.access(target, os.W_OK):
            raise NpuSimError(f"--{option} {value}: {target} is not writable")


def main(argv: list[str] | None = None) -> int:
    """The command line; returns the exit status (0 ok, 1 bad input, 2 bad command line, 3 values differ from the
    reference, 70 internal error, 130 interrupted, 141 the reader of stdout went away, as after ``| head``, said
    nowhere). ``NPUSIM_DEBUG=1`` lets internal errors raise."""
    args = build_parser().parse_args(argv)
    try:
        check_outputs(args)
        status = args.func(args)
        sys.stdout.flush()   # here, so a closed pipe is seen now and not as a warning at exit
        return status
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # what is left in the buffer goes nowhere
        return EXIT_PIPE
    except NpuSimError as e:
        print(f"npusim: error: {' '.join(str(e).split())}", file=sys.stderr)
        return EXIT_USER
    except OSError as e:
        where = f": {e.filename}" if e.filename else ""
        print(f"npusim: error: {' '.join(str(e.strerror or e).split())}{where}", file=sys.stderr)
        return EXIT_USER
    except KeyboardInterrupt:
        print("npusim: interrupted", file=sys.stderr)
        return EXIT_INTERRUPT
    except Exception as e:  # noqa: BLE001 - a bug: one line, not a wall of text
        if os.environ.get("NPUSIM_DEBUG"):
            raise
        print(f"npusim: {_internal(e)}", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
