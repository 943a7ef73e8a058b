"""make torch-corpus's bookkeeping (npusim.app.torch_corpus), without torch: a run that dies or hangs in its child
process is a row of its own, and the summary and table say what each run did."""

import functools
import importlib.util
import sys
import types

import numpy as np
import onnx
import pytest

from compiler.frontend.builder import GraphBuilder, to_onnx
from npusim.app import torch_corpus
from npusim.app.torch_corpus import CORPUS, STATUS, Case, Outcome, run_in_child, run_one, summary, table
from npusim.app.torch_entry import DYNAMO, TORCHSCRIPT, export_module

NO_TORCH = importlib.util.find_spec("torch") is None


def test_the_corpus_covers_what_the_issue_names():
    names = {c.name for c in CORPUS}
    assert {"resnet18", "swin_t", "vit_b_16", "fcn_resnet50", "deeplabv3_resnet50", "lraspp_mobilenet_v3_large",
            "fpn", "raft_small", "hf_bert", "hf_vit", "hf_gpt2", "hf_llama"} <= names
    assert len(names) == len(CORPUS) and all(c.family and c.inputs for c in CORPUS)


def test_a_run_past_its_time_bound_is_a_timeout_row():
    o = run_in_child(CORPUS[0], DYNAMO, "mid32", timeout=0.01)
    assert (o.model, o.exporter, o.status, o.error) == (CORPUS[0].name, "dynamo", "timeout", "killed after 0.01 s")


@pytest.mark.skipif(not NO_TORCH, reason="with torch the child would export and run the model")
def test_a_child_that_dies_is_a_crash_row_with_its_last_line():
    o = run_in_child(CORPUS[0], TORCHSCRIPT, "mid32", timeout=120)
    assert o.status == "crash" and o.error == "the child died (exit 1): ModuleNotFoundError: No module named 'torch'"


def _outcomes() -> list[Outcome]:
    return [Outcome("swin_t", "dynamo", "host", 900, [("ScatterND", "no lowering"), ("ScatterND", "no lowering"),
                                                     ("Where", "condition 'a' is not constant"),
                                                     ("Where", "condition 'b' is not constant")], cycles=1234567,
                    max_rel_err=2e-6, export_seconds=9, seconds=30),
            Outcome("swin_t", "torchscript", "refused", 1100, error="tensor 'x|y' has symbolic dim 1 ('unk__2')",
                    export_seconds=5, seconds=7),
            Outcome("hf_gpt2", "torchscript", "export", error="UnsupportedOperatorError: aten::diff at opset 17"),
            Outcome("hf_llama", "torchscript", "export", error="UnsupportedOperatorError: aten::diff at opset 17"),
            Outcome("resnet18", "dynamo", "npu", 60, cycles=1589312, max_rel_err=0.0)]


def test_the_summary_counts_runs_by_exporter_and_outcome_and_groups_the_causes():
    text = summary(_outcomes())
    rows = {line.split(" | ")[0].lstrip("| "): line for line in text.splitlines()[2:5]}
    cols = list(STATUS)
    dynamo = rows["dynamo"].strip("| ").split(" | ")[1:]
    assert dynamo[0] == "2" and dynamo[1 + cols.index("npu")] == "1" and dynamo[1 + cols.index("host")] == "1"
    script = rows["torchscript"].strip("| ").split(" | ")[1:]
    assert script[0] == "3" and script[1 + cols.index("export")] == "2" and script[1 + cols.index("refused")] == "1"
    assert "- ScatterND: no lowering (1)" in text and "- Where: condition '…' is not constant (1)" in text
    assert "- export failed: UnsupportedOperatorError: aten::diff at opset 17 (2)" in text
    assert "- refused: tensor '…' has symbolic dim 1 ('…') (1)" in text


def test_the_table_has_a_row_per_run_with_host_ops_cycles_and_the_error():
    lines = table(_outcomes()).splitlines()
    assert len(lines) == 2 + 5
    assert lines[2] == ("| swin_t | 1x3x64x64 | dynamo | host-assisted | 900 | ScatterND x2, Where x2 | 2.0e-06 | "
                        "1,234,567 | 30 (9) |  |")
    assert lines[3].endswith("| refused | 1100 |  |  |  | 7 (5) | tensor 'x\\|y' has symbolic dim 1 ('unk__2') |")


def test_a_saved_run_gives_its_report_again(tmp_path, capsys):
    """--json saves a run; --from-json writes its report without running anything (markdown needs the versions of
    torch & co., so without torch only the printed summary is checked)."""
    import json
    from dataclasses import asdict

    from npusim.app.torch_corpus import main

    saved = tmp_path / "run.json"
    saved.write_text(json.dumps({"arch": "mid32", "command": "make torch-corpus", "seconds": 1236.0,
                                 "outcomes": [asdict(o) for o in _outcomes()]}))
    assert main(["--from-json", str(saved)]) == 0
    out = capsys.readouterr().out
    assert out.strip().endswith("5 runs in 20.6 min") and summary(_outcomes()) in out


def test_run_one_sorts_a_run_into_npu_export_failed_and_refused(monkeypatch):
    """run_one's own steps, with a stand-in for torch and its exporter: the model ``relu(x)`` (its input named
    ``name``) is written unless the exporter raises."""
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(manual_seed=lambda seed: None))

    def exporting(name: str, fail: bool = False):
        def export(path, exporter):
            if fail:
                raise RuntimeError("cannot trace\n(graph dump)")
            b = GraphBuilder("m")
            b.output(b.relu(b.input(name, (1, 8)), name="y"))
            onnx.save(to_onnx(b.build()), str(path))
        return functools.partial(export_module, export=export)

    case = Case("relu", "test", "1x8", lambda: (None, (np.ones((1, 8), np.float32),)))
    monkeypatch.setattr(torch_corpus, "export_module", exporting("input_0"))
    o = run_one(case, DYNAMO, "edge16")
    assert (o.status, o.nodes, o.error, o.max_rel_err) == ("npu", 1, "", 0.0) and o.cycles > 0
    monkeypatch.setattr(torch_corpus, "export_module", exporting("input_0", fail=True))
    o = run_one(case, DYNAMO, "edge16")
    assert (o.status, o.nodes, o.error) == ("export", None, "RuntimeError: cannot trace")
    monkeypatch.setattr(torch_corpus, "export_module", exporting("x"))
    o = run_one(case, TORCHSCRIPT, "edge16")
    assert o.status == "refused" and o.error.startswith("the exported model takes input 'x'") and o.nodes is None
