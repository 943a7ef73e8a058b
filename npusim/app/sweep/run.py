"""Running a sweep: every (Arch point, workload) as one task on a dask.distributed cluster, results stored as they
arrive (:class:`ResultStore`), gathered into one tidy pandas DataFrame."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from isa import NpuSimError
from isa.arch import Arch
from npusim.app.sweep.spec import SweepSpec, load_spec
from npusim.app.sweep.store import ResultStore, point_key
from npusim.app.sweep.workloads import Workload, compile_view


@dataclass(frozen=True)
class Metric:
    """A metric column of a sweep row: how to read it from the run report, its unit and what it is."""

    read: Callable[[dict], Any]
    unit: str
    meaning: str = ""


METRICS: dict[str, Metric] = {
    "cycles": Metric(lambda r: r["cycles"], "cycles"),
    "time_s": Metric(lambda r: r["time_us"] * 1e-6, "s"),
    "mac_utilization": Metric(lambda r: r["mac_utilization"], "fraction",
                              "MAC utilization: the workload's MACs / (cycles x peak MACs per cycle), docs/timing.md"),
    "dram_bytes": Metric(lambda r: r["dram"]["bytes_read"] + r["dram"]["bytes_written"], "bytes"),
    "macs": Metric(lambda r: r["macs"], "MACs"),
    "energy_pj": Metric(lambda r: r["energy"]["total_pj"], "pJ", "dynamic + static (docs/energy.md)"),
    "energy_per_inference_pj": Metric(lambda r: r["energy"]["per_inference_pj"], "pJ",
                                      "energy_pj / the model's batch"),
    "power_w": Metric(lambda r: r["energy"]["average_power_w"], "W", "energy / time at the Arch's clock"),
    "edp_js": Metric(lambda r: r["energy"]["edp_js"], "J·s", "energy x time"),
    "area_mm2": Metric(lambda r: r["area"]["total_mm2"], "mm²", "matrix + vector + SPM + ACC"),
    "memory_roof_gb_per_s": Metric(lambda r: r["memory_roof"]["gb_per_s"], "GB/s",
                                   "what a long stream of full DRAM bursts attains: the lower of the DRAM bus and the "
                                   "DMA's requests in flight (docs/report.md)"),
    "memory_bound_by": Metric(lambda r: r["memory_roof"]["binds"], "Arch field",
                              "the field that binds the memory roof: dram.gb_per_s (the bus), dma.outstanding (the "
                              "requests in flight) or both"),
    "host_ops": Metric(lambda r: len(r.get("host_ops", ())), "nodes",
                       "the workload's nodes that ran on the host CPU, e.g. a layer no tiling of this Arch fits (0: "
                       "all on the NPU); Pareto fronts leave such points out unless asked to mark them"),
    "host_energy_pj": Metric(lambda r: r["energy"].get("by_kind_pj", {}).get("host", 0.0), "pJ",
                             "the host CPU's part of energy_pj (docs/energy.md)"),
    # LLM workloads (docs/llm.md); None for the other kinds
    "llm": Metric(lambda r: _llm(r, "model"), "name", "LLM workloads: the decoder config"),
    "prompt": Metric(lambda r: _llm(r, "prompt"), "tokens", "LLM workloads: the prompt's length (the context decode "
                     "starts from)"),
    "batch": Metric(lambda r: _llm(r, "batch"), "sequences", "LLM workloads: sequences decoded together"),
    "weights": Metric(lambda r: _llm(r, "weights"), "format", "LLM workloads: every linear weight's format in DRAM "
                      "(f32, i8, i4, fp8)"),
    "ttft_s": Metric(lambda r: _llm(r, "ttft_s"), "s", "LLM workloads: time to first token, the prefill"),
    "tpot_s": Metric(lambda r: _llm(r, "tpot_s"), "s", "LLM workloads: time per output token, the mean decode step"),
    "tokens_per_s": Metric(lambda r: _llm(r, "tokens_per_s"), "tokens/s", "LLM workloads: decode throughput of the "
                           "batch, batch / tpot_s"),
    "decode_dram_bytes_per_token": Metric(lambda r: _llm(r, "decode", "dram_bytes_per_token", "total"), "bytes",
                                          "LLM workloads: DRAM bytes a decode step moves per sequence (weights, KV "
                                          "cache, activations)"),
    "decode_bound_by": Metric(lambda r: _llm(r, "decode", "bound_by"), "text", "LLM workloads: what bounds decode: "
                              "DRAM bandwidth, the busiest unit, or latency (the report's decode.bound_by, "
                              "docs/llm.md)"),
}
"""The metric columns of a sweep row by name. A metric every run report carries is one line here."""
INTEGER_METRICS = ("cycles", "dram_bytes", "macs", "host_ops", "prompt", "batch")


def _llm(report: dict, *keys: str) -> Any:
    """``report["llm"][keys[0]][keys[1]]...``: an LLM workload's report (:mod:`npusim.app.sweep.llm_workload`), or
    None for a report without one, or a phase it lacks (no decode when one token is generated)."""
    v = report.get("llm")
    for k in keys:
        v = v.get(k) if isinstance(v, dict) else None
    return v
RESULTS = ("results.csv", "results.parquet")
LOCAL, SYNCHRONOUS = "local", "synchronous"
PROTOCOLS = ("tcp://", "tls://", "inproc://", "ucx://", "ws://", "wss://")
"""The address schemes of a dask scheduler (``--scheduler``)."""


def row_metrics(report: dict) -> dict[str, Any]:
    """The :data:`METRICS` of one run report."""
    return {name: m.read(report) for name, m in METRICS.items()}


def evaluate(workload: Workload, arch: Arch) -> dict[str, Any]:
    """One point on a worker: its metrics and ``error`` None, or every metric None and ``error`` saying why the
    point cannot run (any exception: one point's failure never stops the sweep)."""
    try:
        return row_metrics(workload.run(arch)) | {"error": None}
    except Exception as e:  # noqa: BLE001 - the row reports it
        return dict.fromkeys(METRICS) | {"error": _message(e)}


def _message(e: BaseException) -> str:
    return f"{type(e).__name__}: {' '.join(str(e).split())}"


def sweep(spec: str | Path | dict | SweepSpec, *, out: str | Path | None = None, client=None,
          scheduler: str = LOCAL, workers: int | None = None, progress: bool | None = None):
    """Run every workload of ``spec`` (a TOML path, a dict of the same structure or a :class:`SweepSpec`) on every
    Arch point; return a pandas DataFrame, one row per (point, workload) in spec order: ``workload``, one column per
    overridden ``section.field`` (the value in effect), then :data:`METRICS` and ``error`` (None, or why the point
    cannot run; its metrics are then missing).

    out: the results directory (default: the spec's ``output``; None: nothing on disk). Each point's result is
    stored there as it arrives and reused by a rerun (see :mod:`npusim.app.sweep.store`); the whole table is written as
    ``results.csv`` and ``results.parquet``. ``df.attrs`` says how many points were ``computed`` and ``reused``.

    Where the points run: ``client`` (a ``distributed.Client``), else ``scheduler``: "local" (a LocalCluster of
    ``workers`` single-threaded processes, default one per core), "tcp://HOST:PORT" (an existing cluster started
    with ``dask scheduler`` / ``dask worker``) or "synchronous" (one by one in this process, for debugging).
    progress: a tqdm bar with ETA on stderr (default: when stderr is a terminal). Ctrl-C (KeyboardInterrupt) cancels
    the remaining points; the finished ones stay stored.
    """
    if client is None and scheduler not in (LOCAL, SYNCHRONOUS) and not scheduler.startswith(PROTOCOLS):
        raise NpuSimError(f"scheduler must be 'local', 'synchronous' or a scheduler address like tcp://HOST:PORT, "
                          f"not {scheduler!r}")
    spec = load_spec(spec)
    out = Path(out) if out is not None else spec.output
    store = ResultStore(out) if out is not None else None
    jobs = _jobs(spec)
    records: dict[str, dict] = {}
    if store is not None:
        records = {k: r for k in {j[2] for j in jobs if j[2]} if (r := store.get(k)) is not None}
    todo = {key: (w, arch) for w, arch, key in jobs if key and key not in records}
    # points that compile alike one after the other, so a worker's compile cache keeps each program while it is used
    todo = dict(sorted(todo.items(), key=lambda item: (item[1][0].digest, compile_view(item[1][1]).to_toml())))
    reused = len({j[2] for j in jobs if j[2]}) - len(todo)

    def done(key: str, record: dict, final: bool) -> None:
        records[key] = record
        if store is not None and final:
            w, arch = todo[key]
            store.put(key, {"workload": w.name, "arch": arch.to_dict()} | record)

    _execute(todo, done, client, scheduler, workers, _show(progress), reused)
    df = _table(spec, jobs, records)
    df.attrs.update(computed=len(todo), reused=reused)
    if out is not None:
        write_table(df, out)
    return df


def _jobs(spec: SweepSpec) -> list[tuple[Workload, Arch | str, str | None]]:
    """(workload, Arch or why the point has none, key or None) per row, in row order."""
    jobs = []
    for point in spec.points:
        try:
            arch: Arch | str = spec.base.with_overrides(spec.overrides(point))
        except NpuSimError as e:
            arch = _message(e)
        jobs += [(w, arch, point_key(arch, w.digest) if isinstance(arch, Arch) else None) for w in spec.workloads]
    return jobs


def _show(progress: bool | None) -> bool:
    return sys.stderr.isatty() if progress is None else progress


def _execute(todo: dict[str, tuple[Workload, Arch]], done: Callable[[str, dict, bool], None], client, scheduler: str,
             workers: int | None, progress: bool, reused: int) -> None:
    """Evaluate every ``todo`` point where asked; ``done(key, record, final)`` as each finishes (``final`` False:
    the worker was lost, so the record is an error not worth storing)."""
    if not todo:
        return
    from tqdm import tqdm

    bar = tqdm(total=len(todo), desc="sweep", unit="point", file=sys.stderr, disable=not progress, dynamic_ncols=True,
               postfix=f"{reused} reused" if reused else None)
    try:
        if client is None and scheduler == SYNCHRONOUS:
            for key, (w, arch) in todo.items():
                done(key, evaluate(w, arch), True)
                bar.update()
            return
        with _client(client, scheduler, workers or min(os.cpu_count() or 1, len(todo))) as c:
            _distribute(c, todo, done, bar)
    finally:
        bar.close()


def _distribute(c, todo, done, bar) -> None:
    from distributed import as_completed

    shared = {}
    for w, _ in todo.values():
        if w.digest not in shared:
            shared[w.digest] = c.scatter(w, hash=False)
    futures = {c.submit(evaluate, shared[w.digest], arch, key=f"npusim-point-{key}", retries=0): key
               for key, (w, arch) in todo.items()}
    try:
        for fut in as_completed(futures):
            try:
                done(futures[fut], fut.result(), True)
            except Exception as e:  # noqa: BLE001 - a worker died (KilledWorker) or the cluster went away
                done(futures[fut], dict.fromkeys(METRICS) | {"error": f"not computed: {_message(e)}"}, False)
            bar.update()
    except KeyboardInterrupt:
        c.cancel(list(futures), force=True)
        raise


@contextmanager
def _client(client, scheduler: str, workers: int) -> Iterator:
    """``client`` as is, a Client of the cluster at ``scheduler`` or of a new LocalCluster (closed afterwards)."""
    if client is not None:
        yield client
        return
    from distributed import Client, LocalCluster

    if scheduler == LOCAL:
        with _sigint_ignored():   # the workers inherit it: Ctrl-C reaches them too, and only this process handles it
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None,
                                   silence_logs=logging.CRITICAL)   # a worker whose scheduler closed on Ctrl-C logs
                                                                    # a heartbeat traceback at ERROR; failed points
                                                                    # are reported through their futures
        with cluster, Client(cluster) as c:
            yield c
        return
    try:
        c = Client(scheduler, timeout="10s")
    except OSError as e:
        raise NpuSimError(f"cannot reach the dask scheduler at {scheduler}: {e}; start one with `dask scheduler` "
                          f"(docs/sweep.md)") from None
    with c:
        yield c


@contextmanager
def _sigint_ignored() -> Iterator[None]:
    """SIGINT ignored while worker processes start (they keep ignoring it; in the main thread only)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


def _table(spec: SweepSpec, jobs: list, records: dict[str, dict]):
    import pandas as pd

    rows = []
    for i, (w, arch, key) in enumerate(jobs):
        point = spec.points[i // len(spec.workloads)]
        record = records.get(key) if key else dict.fromkeys(METRICS) | {"error": arch}
        if record is None:   # not finished (interrupted)
            record = dict.fromkeys(METRICS) | {"error": "not computed"}
        rows.append({"workload": w.name, **spec.column_values(point), **{m: record[m] for m in METRICS},
                     "error": record["error"]})
    df = pd.DataFrame(rows, columns=["workload", *spec.columns, *METRICS, "error"])
    for col in INTEGER_METRICS:
        df[col] = df[col].astype("Int64")
    return df


def write_table(df, out: str | Path) -> list[Path]:
    """``df`` as ``out/results.csv`` and ``out/results.parquet``; returns the two paths."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    csv, parquet = (out / name for name in RESULTS)
    df.to_csv(csv, index=False)
    df.to_parquet(parquet, index=False)
    return [csv, parquet]
