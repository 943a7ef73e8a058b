"""The command line on bad input: one line, the exit status of its kind (1 bad input, 2 bad command line, 70 internal
error), never a traceback; each case a reproducer of what issue 17's fuzzer found. And help that explains."""

import re
import subprocess
import sys

import numpy as np
import pytest

from npusim.app import cli
from tests.fuzz.fixtures import EXAMPLES, tiny_inputs, write_files


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return write_files(tmp_path_factory.mktemp("files"))


def run(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str) -> str:
    (line,) = err.splitlines()
    assert "Traceback" not in err
    return line


@pytest.mark.parametrize("name,message", [
    ("latin1.s", r"latin1\.s:\d+:\d+: not UTF-8 text: byte 0xe9 \(invalid continuation byte\); save .*latin1\.s as "
                 r"UTF-8$"),
    ("binary.s", r"binary\.s:2:118: not UTF-8 text: byte 0x80 \(invalid start byte\); save .*binary\.s as UTF-8$"),
    ("nul.s", r"nul\.s:\d+:\d+: unexpected character '\\x00'$"),
])
@pytest.mark.parametrize("cmd", ["simulate", "verify"])
def test_assembly_that_is_not_text(capsys, files, name, message, cmd):
    code, _, err = run(capsys, cmd, files[name])
    assert code == 1 and re.match(r"^npusim: error: .*" + message, one_line(err))


@pytest.mark.parametrize("argv,message", [
    (["gemm", "16", "-4", "16"], "npusim gemm: error: argument N: must be an integer >= 1, not -4"),
    (["gemm", "16", "0", "16"], "npusim gemm: error: argument N: must be an integer >= 1, not 0"),
    (["gemm", "16", "1e3", "16"], "npusim gemm: error: argument N: must be an integer, not '1e3'"),
    (["conv", "1", "3", "8", "8", "4", "3", "3", "--stride", "0"],
     "npusim conv: error: argument --stride: must be an integer >= 1, not 0"),
    (["conv", "1", "3", "8", "8", "4", "3", "3", "--pad", "-1"],
     "npusim conv: error: argument --pad: must be an integer >= 0, not -1"),
    (["simulate", "x.s", "--max-cycles", "-1"],
     "npusim simulate: error: argument --max-cycles: must be a cycle count >= 0, not -1"),
    (["gemm", "8", "8", "8", "--seed", "-1"], "npusim gemm: error: argument --seed: must be a seed in [0, "
                                              "9223372036854775807], not -1"),
    (["plot", "r.json", "--kind", "util", "-o", "u.png", "--buckets", "0"],
     "npusim plot: error: argument --buckets: must be a bucket count in [1, 10000], not 0"),
    (["run", "m.onnx", "--dump-after", "nonsense"], "npusim run: error: argument --dump-after: invalid choice: "
                                                    "'nonsense' (choose from 'fold_constants', 'fold_batchnorm', "
                                                    "'fuse_qdq', 'fuse_gelu', 'fuse_silu', 'fuse_layernorm', "
                                                    "'fuse_rmsnorm', 'fuse_softmax', 'fuse_attention', "
                                                    "'fuse_activation', 'fuse_residual', 'fuse_matmul', "
                                                    "'fuse_repeat_kv', 'fuse_msda', 'bind_kv_cache')"),
])
def test_bad_command_lines_are_usage_errors(capsys, argv, message):
    """`npusim gemm 16 -4 16` was a ZeroDivisionError, `npusim conv ... --stride 0` a traceback."""
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    _, err = capsys.readouterr()
    assert e.value.code == 2 and err.splitlines()[-1] == message and "Traceback" not in err


def test_a_huge_gemm_is_refused_at_once_with_the_numbers(capsys):
    """`npusim gemm 1000000 1000000 1000000` died of MemoryError after 7.7 s."""
    code, _, err = run(capsys, "gemm", 1000000, 1000000, 1000000)
    assert code == 1 and one_line(err).startswith("npusim: error: GEMM 1000000x1000000x1000000 would need "
                                                  "122,070,313 instructions (limit 2,000,000); ")
    assert err.rstrip().endswith("lift the limits with --no-limits (Python: limits=None)")


def test_no_limits_lifts_the_limits(capsys, files, monkeypatch):
    import npusim.sim.limits

    args = ["simulate", files["good.s"], "--json", "-"]
    monkeypatch.setattr(npusim.sim.limits, "LIMITS", npusim.sim.limits.Limits(instructions=10))
    code, _, err = run(capsys, *args)
    assert code == 1 and "would need 109 instructions (limit 10)" in one_line(err)
    assert run(capsys, *args, "--no-limits")[0] == 0


@pytest.mark.parametrize("name,message", [
    ("list.json", "a report must be a JSON object (what `npusim run --json` or `simulate --json` writes), not a list"),
    ("garbage.json", "garbage.json is not a JSON report: Expecting property name enclosed in double quotes"),
    ("binary.s", "binary.s is not a JSON report: "),
    ("empty.json", "the utilization plot needs the report's 'instructions', which this report lacks"),
])
def test_plot_of_what_is_not_a_report(capsys, files, tmp_path, name, message):
    """`npusim plot` of a JSON list was an AttributeError traceback."""
    code, _, err = run(capsys, "plot", files[name], "--kind", "util", "-o", tmp_path / "u.png")
    assert code == 1 and message in one_line(err)


def test_plot_window_must_be_a_range(capsys, files, tmp_path):
    code, _, err = run(capsys, "plot", files["sim.json"], "--kind", "timeline", "-o", tmp_path / "t.png",
                       "--window", "100:0")
    assert code == 1 and one_line(err) == "npusim: error: --window C0:C1 must have 0 <= C0 < C1, not '100:0'"


@pytest.mark.parametrize("name,message", [
    ("tiny_shape.npz", "input 'x' must be float32 of shape (1, 4, 8, 8), not float32 of shape (4, 8, 8)"),
    ("tiny_dtype.npz", "input 'x' must be float32 of shape (1, 4, 8, 8), not float64 of shape (1, 4, 8, 8) (convert "
                       "with .astype(numpy.float32))"),
    ("tiny_missing.npz", "inputs lack z; the model's inputs are x, z"),
    ("tiny_x.npy", "one unnamed input array needs a model with exactly one input, not 2 (x, z)"),
    ("objects.npz", "cannot read inputs "),
    ("corrupt.npz", "cannot read inputs "),
])
def test_run_inputs_of_the_wrong_shape_or_dtype(capsys, files, name, message):
    """`npusim run --inputs` with the wrong shape or dtype exited 0 (or with a traceback)."""
    code, _, err = run(capsys, "run", files["tiny.onnx"], "--inputs", files[name], "--timing-only")
    assert code == 1 and message in one_line(err)


def test_run_inputs_that_match(capsys, files):
    code, out, err = run(capsys, "run", files["tiny.onnx"], "--inputs", files["tiny.npz"], "--validate")
    assert code == 0 and "validation" in out and "FAILED" not in out, err
    assert set(np.load(files["tiny.npz"])) == set(tiny_inputs())


@pytest.mark.parametrize("name,message", [
    ("wrongdtype.npz", "input 'A' has 43,008 bytes but region A holds 10,752"),
    ("unknown.npz", "input 'Q' names no DRAM region; the program declares A, B, C"),
    ("single.npy", "one unnamed input array needs a program with exactly one input, not 3 (A, B, C)"),
    ("strings.npz", "input 'A' must hold numbers (bool, int, uint or float), not <U1 (text)"),
])
def test_simulate_inputs(capsys, files, name, message):
    code, _, err = run(capsys, "simulate", files["good.s"], "--inputs", files[name], "--timing-only")
    assert code == 1 and message in one_line(err)


@pytest.mark.parametrize("cap", ["0", "10", "1000000000000"])
@pytest.mark.parametrize("serial", [[], ["--serial"]])
def test_a_deadlock_under_a_cycle_cap_is_a_deadlock(capsys, cap, serial):
    code, _, err = run(capsys, "simulate", EXAMPLES / "deadlock.s", "--max-cycles", cap, *serial)
    line = one_line(err)
    assert code == 1 and ("deadlock at cycle 0: mxu blocked at pc 0" in line or "serial run blocked at pc 0" in line)
    assert "cycle cap" not in line


def test_an_internal_error_is_one_line_with_exit_70(capsys, monkeypatch, files):
    def broken(args):
        return {}["missing"]

    monkeypatch.setattr(cli, "cmd_verify", broken)
    code, _, err = run(capsys, "verify", files["good.s"])
    assert code == 70
    assert re.fullmatch(r"npusim: internal error: KeyError in broken \(tests/test_cli_errors\.py:\d+\); rerun with "
                        r"NPUSIM_DEBUG=1 for the traceback", one_line(err))
    monkeypatch.setenv("NPUSIM_DEBUG", "1")
    with pytest.raises(KeyError):
        cli.main(["verify", files["good.s"]])


def test_internal_errors_name_the_innermost_project_frame(capsys, monkeypatch, files):
    import isa.files

    def decode(*a, **k):
        return np.zeros(3).reshape(2, 2)            # raises inside numpy; the line names the project frame

    monkeypatch.setattr(isa.files, "read_program", decode)
    code, _, err = run(capsys, "verify", files["good.s"])
    assert code == 70 and re.fullmatch(r"npusim: internal error: ValueError in decode \(tests/test_cli_errors\.py:"
                                       r"\d+\); rerun with NPUSIM_DEBUG=1 for the traceback", one_line(err))


def test_exit_statuses_from_a_real_process(files):
    for argv, status in ((["presets"], 0), (["verify", files["binary.s"]], 1), (["gemm", "1", "-1", "1"], 2)):
        proc = subprocess.run([sys.executable, "-m", "npusim", *argv], capture_output=True, text=True, timeout=120)
        assert proc.returncode == status and "Traceback" not in proc.stderr


def test_a_closed_pipe_ends_quietly():
    """`npusim presets | head -1` printed "npusim: error: Broken pipe" and exited 1."""
    proc = subprocess.run(f"'{sys.executable}' -m npusim presets | head -c 10", shell=True, capture_output=True,
                          text=True, timeout=120, executable="/bin/bash")
    assert proc.returncode == 0 and len(proc.stdout) == 10 and proc.stderr == ""
    status = subprocess.run(f"'{sys.executable}' -m npusim presets | true; echo ${{PIPESTATUS[0]}}",
                            shell=True, capture_output=True, text=True, timeout=120, executable="/bin/bash")
    assert status.stdout.split() == ["141"] and status.stderr == ""


def _actions(parser):
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    return sub.choices


def test_help_describes_every_argument_shows_defaults_and_choices():
    parser = cli.build_parser()
    for name, sp in _actions(parser).items():
        for a in sp._actions:
            if a.dest == "help":
                continue
            assert a.help, f"npusim {name} {a.dest} has no help"
        text = " ".join(sp.format_help().split())
        if any(a.dest == "set" for a in sp._actions):
            assert "repeat for more)" in text, name
        for a in sp._actions:
            if a.default not in (None, False) and a.nargs != 0 and a.dest != "help" and a.option_strings:
                assert f"(default: {a.default})" in text, (name, a.dest)
    run_help = " ".join(_actions(parser)["run"].format_help().split())
    assert ("one of fold_constants, fold_batchnorm, fuse_qdq, fuse_gelu, fuse_silu, fuse_layernorm, fuse_rmsnorm, "
            "fuse_softmax, fuse_attention, fuse_activation, fuse_residual, fuse_matmul, fuse_repeat_kv, fuse_msda, "
            "bind_kv_cache") in run_help
    assert "{timeline,util,layers,roofline,energy,llm}" in _actions(parser)["plot"].format_help()
    assert "70 internal error" in " ".join(parser.format_help().split())


@pytest.mark.parametrize("report,message", [
    ('{"instructions": 5, "units": {}}', "the report's instructions must be a list, not '5'"),
    ('{"instructions": [{"pc": 0, "unit": "matrix", "start": "a", "end": 3}], "units": {"matrix": {}}, "cycles": 5}',
     "the report's instructions[0].start must be an integer, not 'a'"),
    ('{"instructions": [], "units": [], "cycles": 5}', "the report's units must be an object of objects"),
    ('{"instructions": [], "units": {}, "cycles": -1}', "the report's cycles must be an integer >= 0, not '-1'"),
])
def test_plot_of_a_malformed_report(capsys, tmp_path, report, message):
    """A report whose fields have the wrong types was a TypeError in plots._instructions (exit 70)."""
    path = tmp_path / "r.json"
    path.write_text(report)
    code, _, err = run(capsys, "plot", path, "--kind", "util", "-o", tmp_path / "u.png")
    assert code == 1 and one_line(err).startswith(f"npusim: error: {message}")


def test_topology_that_is_not_utf8(capsys, tmp_path):
    """A Latin-1 topology file was a UnicodeDecodeError in read_topology (exit 70)."""
    path = tmp_path / "t.csv"
    path.write_bytes(b"Layer, M, N, K,\ng\xe9, 8, 8, 8,\n")
    code, _, err = run(capsys, "topo", path, "--gemm")
    assert code == 1 and one_line(err) == (f"npusim: error: {path}:2:2: not UTF-8 text: byte 0xe9 (invalid "
                                           f"continuation byte); save {path} as UTF-8")


@pytest.mark.parametrize("value,message", [
    ("{tmp}/missing/report.json", "--json {tmp}/missing/report.json: directory {tmp}/missing does not exist; "
                                  "create it first"),
    ("{tmp}", "--json {tmp}: is a directory; give a file name"),
])
def test_finding5_unwritable_output_is_refused_before_the_run(tmp_path, capsys, monkeypatch, value, message):
    """Issue 24: an unwritable --json path was found only after the whole run, losing its results."""
    from npusim.app import cli

    ran = []
    monkeypatch.setattr(cli, "cmd_gemm", lambda args: ran.append(args) or 0)
    value, message = value.format(tmp=tmp_path), message.format(tmp=tmp_path)
    assert cli.main(["gemm", "16", "16", "16", "--json", value]) == 1
    assert not ran and capsys.readouterr().err.strip() == f"npusim: error: {message}"
    assert cli.main(["gemm", "16", "16", "16", "--json", str(tmp_path / "ok.json")]) == 0 and len(ran) == 1


def test_finding5_sweep_may_name_a_results_directory_it_will_create(tmp_path):
    """check_outputs lets the sweep's -o name missing directories (the sweep makes them); a file is refused."""
    from argparse import Namespace

    from isa import NpuSimError
    from npusim.app.cli import check_outputs

    check_outputs(Namespace(command="sweep", output=str(tmp_path / "res" / "a" / "b")))
    (tmp_path / "f").write_text("")
    with pytest.raises(NpuSimError, match="not a directory; give a directory"):
        check_outputs(Namespace(command="sweep", output=str(tmp_path / "f")))
    with pytest.raises(NpuSimError, match="does not exist; create it first"):
        check_outputs(Namespace(command="run", json=str(tmp_path / "res" / "r.json")))
