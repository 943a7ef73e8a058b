"""Agreement with SCALE-Sim 3.0.0 (the reference for systolic-array cycle counts).

The reference numbers were produced by SCALE-Sim itself (bench/scalesim_reference.py, in its own venv) and are
committed under tests/data. Convention: SCALE-Sim's "Total Cycles" is the 0-based index of the last cycle, npusim
counts cycles, so npusim = SCALE-Sim + 1 per layer (docs/validation.md).
"""

import csv
import json
from pathlib import Path

import pytest

from isa import DType
from isa.arch import load_arch
from npusim.app.cli import main
from npusim.app.driver import run_gemm, run_topology
from npusim.app.topology import read_topology

DATA = Path(__file__).resolve().parent.parent / "data"
SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "scalesim" / "Resnet18.csv"
GEMMS = list(csv.DictReader(open(DATA / "scalesim_reference.csv")))
RESNET = list(csv.DictReader(open(DATA / "scalesim_resnet18_32x32_ws.csv")))


def scalesim_arch(rows: int, cols: int, dataflow: str):
    return load_arch("mid32", [f"matrix.rows={rows}", f"matrix.cols={cols}", f"matrix.dataflow={dataflow}",
                               "matrix.fold_overlap=false"])


@pytest.mark.parametrize("row", GEMMS, ids=[f"{r['name']}-{r['rows']}x{r['cols']}-{r['dataflow']}" for r in GEMMS])
def test_gemm_matrix_cycles_equal_scalesim(row):
    M, N, K, R, C = (int(row[k]) for k in ("M", "N", "K", "rows", "cols"))
    res, _ = run_gemm(M, N, K, DType.I8, scalesim_arch(R, C, row["dataflow"]), timing_only=True, ideal_memory=True)
    assert res.unit["matrix"].busy == int(row["scalesim_total_cycles"]) + 1


@pytest.mark.parametrize("dataflow", ["ws", "os", "is"])
def test_cli_gemm_ideal_memory_json(capsys, dataflow):
    row = next(r for r in GEMMS if r["name"].startswith("ragged") and r["dataflow"] == dataflow)
    code = main(["gemm", row["M"], row["N"], row["K"], "--set", f"matrix.rows={row['rows']}", "--set",
                 f"matrix.cols={row['cols']}", "--set", f"matrix.dataflow={dataflow}", "--set",
                 "matrix.fold_overlap=false", "--ideal-memory", "--json", "-"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["validation"]["ok"]
    assert report["units"]["matrix"]["busy_cycles"] == int(row["scalesim_total_cycles"]) + 1


def resnet_layers():
    if SHARED.exists():
        return read_topology(SHARED)
    from npusim.app.topology import Layer
    return [Layer(r["layer"], int(r["M"]), int(r["N"]), int(r["K"])) for r in RESNET]


def test_resnet18_topology_equals_scalesim_layer_by_layer():
    report = run_topology(resnet_layers(), scalesim_arch(32, 32, "ws"), ideal_memory=True)
    got = {x["name"]: x["units"]["matrix"]["busy_cycles"] for x in report["layers"]}
    want = {r["layer"]: int(r["scalesim_total_cycles"]) + 1 for r in RESNET}
    assert got == want
    assert report["cycles"] == sum(want.values()) == 2_519_815 + 21


def test_fold_overlap_is_faster_than_scalesim_accounting():
    arch = load_arch("mid32", ["matrix.rows=32", "matrix.cols=32", "matrix.dataflow=ws"])
    report = run_topology(resnet_layers(), arch, ideal_memory=True)
    for layer, ref in zip(report["layers"], RESNET):
        assert layer["units"]["matrix"]["busy_cycles"] <= int(ref["scalesim_total_cycles"]) + 1
    assert report["cycles"] < 0.8 * 2_519_815


def test_topology_file_errors(tmp_path):
    from npusim.app.topology import TopologyError

    bad = tmp_path / "t.csv"
    bad.write_text("Layer name, M, N, K,\nfc, 1, 2,\n")
    with pytest.raises(TopologyError, match=r"t\.csv:2: a GEMM row has 4 fields \(name, M, N, K\), not 3$"):
        read_topology(bad, gemm=True)
    bad.write_text("Layer name, H, W, R, S, C, F, stride,\nc1, 8, 8, 9, 3, 3, 4, 1,\n")
    with pytest.raises(TopologyError, match=r"t\.csv:2: filter 9x3 is larger than the 8x8 input$"):
        read_topology(bad)
