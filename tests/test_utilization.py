"""The utilization figures (issue 24, finding 4): one name and one definition each (docs/timing.md, "Utilization
figures"), the same in the summary, the unit table, the JSON report of `run` and `simulate`, and checked by hand."""

from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from isa import MatMul
from isa.arch import load_arch
from npusim import simulate
from npusim.app.cli import main, summary
from npusim.app.driver import run_model

PEAK = 128 * 128   # dc128: one 128 x 128 array


def _packed_conv():
    """A 64 -> 64 channel 3x3 convolution on 16x16: on dc128's 128 columns the compiler packs two pixels per column
    block, so the array also multiplies zero blocks (issued MACs > the convolution's own)."""
    w = np.random.default_rng(0).standard_normal((64, 64, 3, 3)).astype(np.float32)
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], name="conv")], "conv",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64, 16, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 16, 16])],
                          initializer=[numpy_helper.from_array(w, "w")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_finding4_utilization_names_distinct(tmp_path, capsys):
    compiled, result, _, report = run_model(_packed_conv(), load_arch("dc128"), timing_only=True, cache=False)
    useful = 16 * 16 * 64 * 64 * 9
    issued = sum(i.macs for i in compiled.program.instrs if isinstance(i, MatMul))
    busy = report["units"]["matrix"]["busy_cycles"]
    cycles = report["cycles"]
    want = {"mac_utilization": useful / (PEAK * cycles), "issued_mac_utilization": issued / (PEAK * cycles),
            "matrix_busy": busy / cycles, "array_fill_while_busy": issued / (PEAK * busy)}
    assert {k: report[k] for k in want} == pytest.approx(want)
    assert issued > useful and len({round(v, 3) for v in want.values()}) == 4   # four different numbers
    assert want["issued_mac_utilization"] == pytest.approx(want["matrix_busy"] * want["array_fill_while_busy"])
    assert "matrix_utilization" not in report and "utilization" not in report["units"]["matrix"]
    assert report["units"]["matrix"]["busy_fraction"] == pytest.approx(want["matrix_busy"])
    (layer,) = [lr for lr in report["layers"] if lr["op"] == "Conv"]
    assert layer["mac_utilization"] == pytest.approx(useful / (PEAK * layer["cycles"]))

    # the summary names each figure; the unit table's column is the busy fraction
    lines = summary(result, report["mac_utilization"], report).splitlines()
    pct = {k: f"{v:.1%}" for k, v in want.items()}
    assert lines[1] == (f"MAC utilization {pct['mac_utilization']}; issued MAC utilization "
                        f"{pct['issued_mac_utilization']} = matrix busy {pct['matrix_busy']} x array fill while busy "
                        f"{pct['array_fill_while_busy']}")
    assert lines[2].split()[-3:] == ["busy%", "main", "stall"]
    (matrix,) = [ln for ln in lines if ln.startswith("matrix ")]
    assert matrix.split()[5] == pct["matrix_busy"]

    # simulate of the same program: the same issued figures, and no MAC utilization (it cannot know the useful MACs)
    again = simulate(compiled.program, load_arch("dc128"), timing_only=True).to_dict(instructions=False)
    assert {k: again[k] for k in ("issued_mac_utilization", "matrix_busy", "array_fill_while_busy")} == \
        pytest.approx({k: want[k] for k in ("issued_mac_utilization", "matrix_busy", "array_fill_while_busy")})
    assert "mac_utilization" not in again

    # the command line: `conv` of the same layer reports the same MAC utilization by name
    assert main(["conv", "1", "64", "16", "16", "64", "3", "3", "--pad", "1", "--arch", "dc128", "--timing-only",
                 "--json", str(tmp_path / "c.json")]) == 0
    out = capsys.readouterr().out.splitlines()
    conv = json.loads((tmp_path / "c.json").read_text())
    assert conv["mac_utilization"] == pytest.approx(useful / (PEAK * conv["cycles"]))
    assert out[2].startswith(f"MAC utilization {conv['mac_utilization']:.1%}; issued MAC utilization ")
