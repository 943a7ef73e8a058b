"""The model CLI: zoo export, compile to assembly, run with validation and a per-layer JSON report."""

import json

import onnx

from compiler.frontend.builder import to_onnx
from isa.files import read_program
from npusim.app.cli import main
from tests.e2e.test_model_compile import tiny_resnet


def test_zoo_list_and_export(capsys, tmp_path):
    assert main(["zoo", "list"]) == 0
    names = [line.split("\t")[0] for line in capsys.readouterr().out.splitlines()]
    assert names == ["resnet18", "resnet50", "mobilenet_v2", "bert_layer", "vit_block", "resnet18_int8", "bev_tiny"]
    out = tmp_path / "bert.onnx"
    assert main(["zoo", "bert_layer", "-o", str(out)]) == 0
    onnx.checker.check_model(onnx.load(out))
    assert main(["zoo", "alexnet"]) == 1
    assert "unknown zoo model 'alexnet'" in capsys.readouterr().err


def test_compile_then_simulate_the_program(capsys, tmp_path):
    model, prog = tmp_path / "tiny.onnx", tmp_path / "tiny.s"
    onnx.save(to_onnx(tiny_resnet()), model)
    assert main(["compile", str(model), "--arch", "dc128", "-o", str(prog)]) == 0
    program = read_program(prog)
    assert len(program.instrs) > 20 and {r.name for r in program.regions} == {"W", "ACT"}
    assert main(["simulate", str(prog), "--arch", "dc128", "--timing-only"]) == 0


def test_run_validates_and_reports_layers(capsys, tmp_path):
    model = tmp_path / "tiny.onnx"
    onnx.save(to_onnx(tiny_resnet()), model)
    code = main(["run", str(model), "--arch", "dc128", "--validate", "--json", "-"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0
    (check,) = report["validation"].values()
    assert check["ok"] and check["max_rel_error"] < 1e-5
    ops = [lr["op"] for lr in report["layers"]]
    assert ops[0] == "Conv" and "Gemm" in ops and "Softmax" in ops
    assert report["arch"]["matrix"]["rows"] == 128 and report["cycles"] == max(lr["end"] for lr in report["layers"])


def test_no_prefetch_compiles_what_the_api_compiles_without_prefetch(capsys, tmp_path):
    from compiler.compile import compile_model
    from isa.arch import load_arch

    model, prog = tmp_path / "tiny.onnx", tmp_path / "tiny.s"
    onnx.save(to_onnx(tiny_resnet()), model)
    programs = []
    for flag, prefetch in (([], None), (["--no-prefetch"], False)):
        assert main(["compile", str(model), "--arch", "dc128", "-o", str(prog), *flag]) == 0
        programs.append(read_program(prog))
        assert programs[-1] == compile_model(tiny_resnet(), load_arch("dc128"), prefetch=prefetch).program
    assert programs[0] != programs[1]
    assert main(["run", str(model), "--arch", "dc128", "--timing-only", "--no-prefetch", "--json", "-"]) == 0
