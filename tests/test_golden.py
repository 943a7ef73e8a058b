"""Golden traces: the recorded programs and cycles are what the compiler and simulator produce now, and a change of
timing (a patched Arch) or of the compiled program is reported naming the layer, the unit and the cycle counts."""

import gzip
import json

import pytest

import npusim.app.driver
from compiler.kernels.conv2d import ConvShape, ConvTiling
from isa import DType, NpuSimError
from isa.arch import load_arch
from isa.asm import format_program, parse_program
from npusim.app import golden
from npusim.app.cli import main
from npusim.app.driver import run_conv, run_gemm, run_model
from npusim.app.golden import GOLDENS, TRACES, Golden, check_golden, diff, golden_names, load, update_golden
from npusim.app.zoo import MODELS
from npusim.sim.simulator import simulate

CONV = ConvShape(1, 64, 56, 56, 64, 3, 3, stride=1, pad=1)  # the conv3x3 workload, built here independently


def stored_report(name: str) -> dict:
    return json.loads((TRACES / name / "report.json").read_text())


def stored_program(name: str) -> str:
    d = TRACES / name
    return (d / "program.s").read_text() if (d / "program.s").exists() else \
        gzip.decompress((d / "program.s.gz").read_bytes()).decode()


@pytest.mark.parametrize("name", [pytest.param(g, marks=pytest.mark.slow) if g.startswith(("resnet18", "bert"))
                                  else g for g in GOLDENS])
def test_golden_is_reproduced(name):
    differences = check_golden(name)
    assert differences == [], f"{name} differs from traces/{name}:\n" + "\n".join(differences)


@pytest.mark.parametrize("name", ["gemm512-mid32", "conv3x3-edge16"])
def test_recorded_program_simulates_to_recorded_report(name):
    """program.s on its own (parsed from the file, not recompiled) gives report.json's cycles and unit split."""
    report = stored_report(name)
    result = simulate(parse_program(stored_program(name), name), load_arch(report["preset"]), timing_only=True)
    assert result.cycles == report["cycles"]
    assert {u.name: (u.busy, u.idle, u.stall) for u in result.units} == \
        {n: (u["busy_cycles"], u["idle_cycles"], u["stall_cycles"]) for n, u in report["units"].items()}
    assert len(result.program.instrs) == report["program"]["instructions"]


def test_halved_dram_bandwidth_names_cycles_layer_and_unit():
    name, patch = "bert_layer-mid32", "dram.gb_per_s=19.2"   # 16 B/cycle at 1.2 GHz
    old = stored_report(name)
    _, res, _, new = run_model(MODELS["bert_layer"](), load_arch("mid32", [patch]), timing_only=True)
    assert res.cycles > old["cycles"]   # half the bandwidth: slower
    lines = check_golden(name, [patch])
    assert any(line.startswith(f"cycles: {old['cycles']:,} -> {res.cycles:,} (+{res.cycles - old['cycles']:,}, ")
               for line in lines)
    moved = max(zip(old["layers"], new["layers"]), key=lambda p: abs(p[1]["cycles"] - p[0]["cycles"]))
    assert any(line.startswith(f"layer {moved[0]['name']} ({moved[0]['op']}): {moved[0]['cycles']:,} -> "
                               f"{moved[1]['cycles']:,} cycles") for line in lines)
    was, now = old["units"]["dma_load"]["stall_cycles"]["dram_bandwidth"], res.unit["dma_load"].stall["dram_bandwidth"]
    assert any(line.startswith(f"unit dma_load: stall dram_bandwidth {was:,} -> {now:,} cycles") for line in lines)
    assert "arch.dram.gb_per_s: 38.4 -> 19.2" in lines


def test_fold_overlap_off_shows_in_the_matrix_unit():
    name, patch = "gemm512-edge16", "matrix.fold_overlap=false"
    old = stored_report(name)
    res, _ = run_gemm(512, 512, 512, DType.I8, load_arch("edge16", [patch]), timing_only=True)
    assert res.unit["matrix"].busy > old["units"]["matrix"]["busy_cycles"]   # folds no longer overlap
    lines = check_golden(name, [patch])
    assert f"unit matrix: busy {old['units']['matrix']['busy_cycles']:,} -> {res.unit['matrix'].busy:,} cycles" in \
        " ".join(lines)
    assert any(line.startswith(f"layer gemm (Gemm): {old['layers'][0]['cycles']:,} -> ") for line in lines)


def test_changed_program_reports_first_differing_line(monkeypatch):
    name = "conv3x3-mid32"
    conv2d = npusim.app.driver.conv2d
    smaller = ConvTiling(toh=8, tow=56)   # the compiler would pick 18 output rows a tile on mid32
    monkeypatch.setattr(npusim.app.driver, "conv2d", lambda cs, dtype, target, tiling=None, **k:
                        conv2d(cs, dtype, target, smaller, **k))
    new = format_program(run_conv(CONV, DType.I8, load_arch("mid32"), timing_only=True)[0].program).splitlines()
    old = stored_program(name).splitlines()
    assert new != old
    k = next(i for i, (x, y) in enumerate(zip(old, new)) if x != y)
    lines = check_golden(name)
    assert lines[0].startswith("program: ")
    assert lines[0].endswith(f"first difference at line {k + 1}: {old[k]!r} -> {new[k]!r}")
    assert f"({len(old):,} -> {len(new):,} lines)" in lines[0]


def test_new_and_missing_units_and_layers_are_named():
    g = Golden(stored_program("conv3x3-mid32"), stored_report("conv3x3-mid32"))
    units = dict(g.report["units"])
    extra_unit = {"instructions": 3, "busy_cycles": 40, "idle_cycles": 10, "stall_cycles": {"semaphore": 5}}
    grown = Golden(g.program, {**g.report, "units": {**units, "tpu": extra_unit},
                               "layers": [*g.report["layers"], {**g.report["layers"][0], "name": "extra"}]})
    assert diff(g, grown) == [f"layer extra (Conv): new, {g.report['layers'][0]['cycles']:,} cycles",
                              "unit tpu: new, not in the golden (busy 40, stalled 5, idle 10 cycles, 3 instructions)"]
    assert diff(grown, g) == [f"layer extra (Conv): gone (was {g.report['layers'][0]['cycles']:,} cycles)",
                              "unit tpu: in the golden but not in this run (had busy 40, stalled 5, idle 10 cycles, "
                              "3 instructions)"]


def test_update_writes_only_what_changed(tmp_path, monkeypatch):
    name = "conv3x3-mid32"
    first = update_golden(name, tmp_path)
    assert (first.files, first.differences) == (["program.s", "report.json", "summary.md"], ["new golden"])
    assert load(name, tmp_path) == load(name, TRACES)
    assert update_golden(name, tmp_path).files == []
    report = json.loads((tmp_path / name / "report.json").read_text())
    report["cycles"] -= 100
    (tmp_path / name / "report.json").write_text(json.dumps(report))
    was = report["cycles"]
    assert check_golden(name, root=tmp_path) == [f"cycles: {was:,} -> {was + 100:,} (+100, +{100 / was:.2%})"]
    again = update_golden(name, tmp_path)
    assert again.files == ["report.json"] and again.differences[0].startswith("cycles: ")
    monkeypatch.setattr(golden, "GZIP_ABOVE", 0)   # above the threshold the program is stored gzipped instead
    assert update_golden(name, tmp_path).files == ["program.s.gz", "removed program.s"]
    assert check_golden(name, root=tmp_path) == []


def test_unknown_golden_is_an_error_listing_the_goldens():
    with pytest.raises(NpuSimError, match="no golden 'conv3x3'; goldens: gemm512-edge16, "):
        check_golden("conv3x3")   # a workload, not a golden


def test_names_select_by_golden_workload_or_preset():
    assert golden_names(["conv3x3"]) == ["conv3x3-edge16", "conv3x3-mid32"]
    assert golden_names(["mid32", "gemm512-mid32"]) == [g for g in GOLDENS if g.endswith("-mid32")]
    assert golden_names() == list(GOLDENS) and len(GOLDENS) == 10


def test_cli_exit_codes_and_one_line_per_difference(tmp_path, capsys):
    name = "conv3x3-edge16"
    assert main(["golden", "--update", name, "--dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith(f"{name}: wrote program.s, report.json, summary.md\n")
    assert main(["golden", name, "--dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out == f"{name}: ok\n"
    cycles, new = stored_report(name)["cycles"], run_conv(CONV, DType.I8, load_arch("edge16", ["dram.latency_ns=300"]),
                                                           timing_only=True)[0].cycles
    assert main(["golden", name, "--dir", str(tmp_path), "--set", "dram.latency_ns=300"]) == 1
    out, err = capsys.readouterr()
    assert f"{name}: cycles: {cycles:,} -> {new:,} " in out
    assert all(line.startswith(f"{name}: ") for line in out.splitlines())
    assert err.count("\n") == 1 and err.startswith("npusim: error: 1 of 1 goldens differ")
    assert main(["golden", "nosuch"]) == 1
    assert "npusim: error: no golden 'nosuch'" in capsys.readouterr().err
    assert main(["golden", "--update", "--set", "dram.latency_ns=1", name, "--dir", str(tmp_path)]) == 1
    assert "cannot be combined with --update" in capsys.readouterr().err
