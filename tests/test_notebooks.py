"""The notebooks under notebooks/ run green at SIZE = "small", and what they show is right."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
FACTS = "__facts__"


@pytest.fixture(scope="module")
def kernel_path(tmp_path_factory):
    """A ``python3`` kernel spec running this interpreter, first on JUPYTER_PATH, so the notebooks run in the venv
    the tests run in (not whatever python a user-wide kernel spec names)."""
    from ipykernel.kernelspec import install

    prefix = tmp_path_factory.mktemp("jupyter")
    install(prefix=str(prefix), kernel_name="python3")
    mp = pytest.MonkeyPatch()
    mp.setenv("JUPYTER_PATH", str(prefix / "share" / "jupyter"))
    yield
    mp.undo()


def execute(name: str, facts: str) -> tuple[dict, object]:
    """Run notebook ``name`` with its parameters cell replaced by ``SIZE = "small"`` and a last cell printing the
    JSON of expression ``facts``; returns the facts and the executed notebook."""
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1 and "SIZE" in params[0].source, "each notebook has one parameters cell setting SIZE"
    params[0].source = 'SIZE = "small"'
    nb.cells.append(nbformat.v4.new_code_cell(f"import json\nprint({FACTS!r}, json.dumps({facts}))"))
    nbclient.NotebookClient(nb, kernel_name="python3", timeout=300,
                            resources={"metadata": {"path": str(ROOT)}}).execute()
    line = next(ln for o in nb.cells[-1].outputs if o.get("name") == "stdout" for ln in o.text.splitlines()
                if ln.startswith(FACTS))
    return json.loads(line[len(FACTS):]), nb


def images(nb) -> int:
    return sum("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code" for o in c.outputs)


def code_sha256(nb) -> str:
    """notebooks/execute.py's fingerprint of a notebook's code (the one ``make notebooks`` stores)."""
    spec = importlib.util.spec_from_file_location("notebook_execute", NOTEBOOKS / "execute.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.code_sha256(nb)


def test_finding5_notebooks_are_committed_with_the_outputs_of_their_code():
    """Readers see results without running anything: every code cell ran (in order, no error) at SIZE = "full", and
    the stored fingerprint of the code matches the code, so an edit without `make notebooks` fails here."""
    paths = sorted(NOTEBOOKS.glob("*.ipynb"))
    assert len(paths) >= 4
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert [c.execution_count for c in code] == list(range(1, len(code) + 1)), f"{path.name}: not run in order"
        assert not [o for c in code for o in c.outputs if o.output_type == "error"], f"{path.name} stores an error"
        stamp = nb.metadata.get("npusim", {})
        assert stamp.get("size") == "full", f"{path.name}: outputs not from SIZE = 'full' (run make notebooks)"
        assert stamp.get("code_sha256") == code_sha256(nb), f"{path.name}: code changed since its outputs (make " \
                                                            "notebooks)"
        assert images(nb) > 0, f"{path.name} stores no figure"


@pytest.mark.slow
def test_quickstart(kernel_path):
    facts, nb = execute("01_quickstart", '{"ok": [v["ok"] for v in report["validation"].values()], '
                        '"layers": len(report["layers"]), "compiled": len(compiled.layers), '
                        '"cycles": report["cycles"], "last_end": max(lr["end"] for lr in report["layers"])}')
    assert facts["ok"] == [True]
    assert facts["layers"] == facts["compiled"] > 10
    assert facts["last_end"] <= facts["cycles"]
    assert images(nb) == 2   # the timeline + utilization figure and the per-layer split


@pytest.mark.slow
def test_architecture_exploration(kernel_path):
    records = 'json.loads({}.to_json(orient="records", double_precision=15))'
    facts, nb = execute("02_architecture_exploration", "{" + ", ".join(f'"{t}": {records.format(t)}'
                                                                      for t in ("df", "bw", "ck", "front")) + "}")
    rows_all = facts["df"]
    assert sorted({r["workload"] for r in rows_all}) == ["bert_layer(seq=16, hidden=64, heads=2, ffn=128)",
                                                         "resnet18(image=32, width=8, classes=10)"]
    for name in {r["workload"] for r in rows_all}:
        rows = [r for r in rows_all if r["workload"] == name]
        assert [(r["matrix.rows"], r["matrix.cols"], r["spm.size"], r["dram.gb_per_s"]) for r in rows] == \
            [(n, n, 1048576, 19.2) for n in (16, 32)]
        assert all(r["error"] is None and r["host_ops"] == 0 for r in rows)
        work = [r["mac_utilization"] * r["cycles"] * r["matrix.rows"] ** 2 for r in rows]   # the model's MACs
        assert work == pytest.approx([r["macs"] for r in rows], rel=1e-9) and rows[0]["macs"] == rows[1]["macs"]
        assert all(r["power_w"] == pytest.approx(r["energy_pj"] * 1e-12 / r["time_s"]) for r in rows)
        assert rows[0]["area_mm2"] < rows[1]["area_mm2"]   # the 32x32 array is 4x the 16x16 one's MACs
    assert all(r["host_ops"] == 0 for r in facts["front"])
    for outstanding in (64, 256):   # the bandwidth sweep: time falls with every step while the bus binds
        rows = [r for r in facts["bw"] if r["dma.outstanding"] == outstanding]
        cycles = [r["cycles"] for r in rows]
        assert cycles == sorted(cycles, reverse=True) and len(set(cycles)) == len(cycles)
    assert {r["memory_bound_by"] for r in facts["bw"] if r["dram.gb_per_s"] == 128} == {"dma.outstanding",
                                                                                       "dram.gb_per_s"}
    gemm = [r for r in facts["ck"] if r["workload"].startswith("gemm")]   # memory-bound: time nearly flat
    assert [r["clock.ghz"] for r in gemm] == [0.6, 1.2, 2.4, 4.8]
    assert max(r["time_s"] for r in gemm) < 1.1 * min(r["time_s"] for r in gemm) and gemm[-1]["cycles"] > \
        7 * gemm[0]["cycles"]
    assert images(nb) == 5   # the Pareto fronts, the 3-D front, bandwidth, clock, utilization


@pytest.mark.slow
def test_compiler_validation(kernel_path):
    facts, nb = execute("03_compiler_validation", '{"n": len(rows), "worst": max(r["max_rel_error"] for r in rows), '
                        '"ops": sorted({r["op"] for r in rows}), "cycles": cycles}')
    assert facts["n"] > 10 and facts["worst"] < 1e-3
    assert {"Conv", "Add", "Gemm"} <= set(facts["ops"]) or {"Relu", "Gemm"} <= set(facts["ops"])
    c = facts["cycles"]
    assert c["single buffering"] > c["baseline"], "double buffering overlaps loads with compute"
    assert c["no fusion"] > c["baseline"], "an unfused Relu is an extra pass over DRAM"
    assert c["serial"] >= c["single buffering"]
    assert images(nb) == 1


@pytest.mark.slow
def test_perception_operators(kernel_path):
    facts, nb = execute("04_perception_operators", '{"rows": json.loads(df.to_json(orient="records")), '
                        '"host": report["host_ops"], "ok": [v["ok"] for v in report["validation"].values()], '
                        '"ops": sorted(set(by_op.index))}')
    rows = facts["rows"]
    assert {r["op"] for r in rows} == {"ConvTranspose", "Resize", "GridSample", "MSDeformAttn"} and \
        {r["preset"] for r in rows} == {"mid32"}
    assert all(r["validated"] in ("exact", "tol") for r in rows if r["variant"] != "host"), rows
    split = {r["case"]: r for r in rows if r["variant"] == "split"}
    swelled = {r["case"]: r for r in rows if r["variant"] == "swell_dram"}
    assert all(split[c]["cycles"] < swelled[c]["cycles"] for c in split)   # the interleave costs nothing
    fused = {r["case"]: r for r in rows if r["variant"] == "fused"}
    unfused = {r["case"]: r for r in rows if r["variant"] == "unfused"}
    assert fused and all(fused[c]["dram_rd"] + fused[c]["dram_wr"] < unfused[c]["dram_rd"] + unfused[c]["dram_wr"]
                         for c in fused)   # the sampled tensor stays in the SPM
    assert facts["host"] == [] and facts["ok"] == [True, True]
    assert {"ConvTranspose", "GridSample", "Resize", "MSDeformAttn"} <= set(facts["ops"])
    assert images(nb) == 3   # cycles per case, DRAM bytes, bev_tiny by op


@pytest.mark.slow
def test_llm_decode(kernel_path):
    records = 'json.loads({}.to_json(orient="records", double_precision=15))'
    facts, nb = execute("05_llm_decode", '{"table": ' + records.format("table.reset_index()") + ', "df": '
                        + records.format("df") + ', "capacity": ' + records.format("capacity.reset_index()")
                        + ', "conclusion": conclusion, "model": model, "batches": batches, "contexts": contexts}')
    table = {r["preset"]: r for r in facts["table"]}
    assert list(table) == ["edge16", "mid32", "dc128"] and facts["model"] == "tiny-llama"
    for r in table.values():
        assert r["tokens/s"] == pytest.approx(1e3 / r["TPOT (ms)"]) and r[">= 20 tokens/s"] == (r["tokens/s"] >= 20)
        assert r["bound"] in ("bandwidth", "compute", "latency") and r["what binds"]
        assert r["TPOT / DRAM bound"] == pytest.approx(r["tokens/s at the DRAM bound"] / r["tokens/s"])
        assert r["weights MB/token"] + r["KV read MB/token"] < r["DRAM MB/token"]
    assert all(r["(weights + KV) / SPM"] < 1 for r in facts["capacity"])   # a tiny decoder fits every SPM
    rows = facts["df"]
    assert len(rows) == 3 * (len(facts["batches"]) + len(facts["contexts"]) - 1)
    assert all(r["error"] is None for r in rows)
    for preset in table:
        mine = sorted((r["batch"], r["tokens_per_s"]) for r in rows if r["preset"] == preset and r["prompt"] == 8)
        assert [b for b, _ in mine] == facts["batches"] and mine[0][1] < mine[-1][1]   # a batch shares the weights
    at16 = {r["preset"]: r for r in rows if r["prompt"] == 16}   # the sweep's request = the table's
    assert all(at16[p]["tpot_s"] * 1e3 == pytest.approx(table[p]["TPOT (ms)"]) for p in table)
    assert all(f"`{p}`: {table[p]['tokens/s']:.1f} tokens/s" in facts["conclusion"] for p in table)
    assert images(nb) == 1   # tokens/s against batch, TPOT against context
