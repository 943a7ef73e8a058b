"""Sweeps on dask.distributed: a LocalCluster of processes, an existing cluster (a scheduler and two workers started as
processes on 127.0.0.1, free ports) giving the same table row for row, and a sweep killed mid-way that a rerun
finishes computing only the missing points. Every process a test starts is gone when it ends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from npusim.app.sweep import ResultStore, sweep

SPEC = {"arch": "mid32", "grid": {"matrix.rows,matrix.cols": [8, 16], "spm.size": [256, 65536]},
        "workloads": [{"gemm": {"M": 1024, "N": 1024, "K": 1024}},   # (no tiling with 256 B: 2 error rows)
                      {"zoo": "resnet18", "args": {"image": 16, "width": 8, "classes": 10}}]}


class Group:
    """Processes started in their own session (so their children share the group) and ended together."""

    def __init__(self):
        self.procs: list[subprocess.Popen] = []

    def start(self, *args: str, log: Path) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, *args], stdout=log.open("w"), stderr=subprocess.STDOUT,
                                start_new_session=True)
        self.procs.append(proc)
        return proc

    def end(self, sig=signal.SIGTERM) -> None:
        for p in self.procs:
            _signal_group(p.pid, sig)
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                _signal_group(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
        for p in self.procs:   # and every child of theirs (a nanny's worker process)
            for _ in range(100):
                if not _signal_group(p.pid, signal.SIGKILL if _ > 40 else 0):
                    break
                time.sleep(0.1)
            assert not _signal_group(p.pid, 0), f"processes of group {p.pid} outlived the test"


def _signal_group(pgid: int, sig) -> bool:
    """Send ``sig`` to process group ``pgid``; False if no process is left in it."""
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False


@pytest.fixture
def group():
    g = Group()
    yield g
    g.end()


def _wait_for(check, what: str, timeout: float = 60.0):
    t0 = time.monotonic()
    while not (value := check()):
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
    return value


@pytest.mark.slow
def test_an_existing_cluster_gives_the_local_table_row_for_row(tmp_path, group):
    from distributed import Client, get_task_stream

    local = sweep(SPEC, workers=2)   # the default: a LocalCluster of processes
    assert local["error"].notna().sum() == 2 and local["cycles"].notna().sum() == 6   # (the model: host rows)
    info = tmp_path / "scheduler.json"
    group.start("-m", "dask", "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                "--scheduler-file", str(info), log=tmp_path / "scheduler.log")
    address = _wait_for(lambda: info.exists() and json.loads(info.read_text() or "{}").get("address"),
                        "the scheduler's address")
    assert address.startswith("tcp://127.0.0.1:")
    for i in range(2):
        group.start("-m", "dask", "worker", address, "--nworkers", "1", "--nthreads", "1", "--no-dashboard",
                    "--no-nanny", "--host", "127.0.0.1", "--name", f"w{i}", log=tmp_path / f"worker{i}.log")
    with Client(address, timeout="30s") as client:
        client.wait_for_workers(2, timeout=60)
        workers = client.scheduler_info()["workers"]
        assert sorted(w["name"] for w in workers.values()) == ["w0", "w1"]
        with get_task_stream(client) as tasks:
            remote = sweep(SPEC, scheduler=address)
        client.shutdown()   # the scheduler and its workers exit (the fixture then checks they are gone)
    assert remote.equals(local)
    ran = [t for t in tasks.data if str(t["key"]).startswith("npusim-point-")]
    assert len(ran) == remote.attrs["computed"] == 8 and len({t["worker"] for t in ran}) == 2   # both took points


def _stored(out: Path) -> int:
    return len(list((out / "points").glob("*.json"))) if (out / "points").exists() else 0


@pytest.mark.slow
def test_a_killed_or_interrupted_sweep_rerun_computes_only_the_missing_points(tmp_path, group):
    spec = tmp_path / "spec.toml"
    spec.write_text('arch = "mid32"\n[grid]\n"dram.latency_ns" = [20, 60, 100, 140, 180, 220]\n'
                    '"matrix.rows,matrix.cols" = [4, 8]\n[[workloads]]\ngemm = { M = 128, N = 128, K = 128 }\n')
    out = tmp_path / "out"
    cmd = ("-m", "npusim", "sweep", str(spec), "-o", str(out), "--workers", "1")
    proc = group.start(*cmd, log=tmp_path / "killed.log")
    _wait_for(lambda: _stored(out) >= 2 or proc.poll() is not None, "two stored points", timeout=120)
    group.end(signal.SIGKILL)   # the sweep, its scheduler and its worker, mid-way
    killed = _stored(out)
    assert 2 <= killed < 12, f"the sweep was not stopped mid-way ({killed} of 12 points stored)"
    assert not (out / "results.csv").exists()
    # Ctrl-C (SIGINT to the terminal's process group: the sweep and its workers) stops it cleanly
    log = tmp_path / "interrupted.log"
    proc = group.start(*cmd, log=log)
    _wait_for(lambda: _stored(out) >= killed + 2 or proc.poll() is not None, "two more points", timeout=120)
    os.killpg(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    group.end()
    kept = _stored(out)
    assert killed + 2 <= kept < 12, f"the sweep was not interrupted mid-way ({kept} of 12 points stored)"
    assert log.read_text() == (f"npusim: interrupted; {kept} finished points are stored in {out}: run the same "
                               f"command again to compute only the rest\n")   # and no worker's traceback
    rerun = sweep(spec, out=out, scheduler="synchronous")   # the same store from the API
    assert rerun.attrs == {"computed": 12 - kept, "reused": kept}
    import pandas as pd

    assert pd.read_parquet(out / "results.parquet").equals(rerun)
    assert rerun.equals(sweep(spec, scheduler="synchronous")) and len(ResultStore(out)) == 12
