"""The command line: output shapes, JSON report, and one-line errors with a non-zero exit (never a traceback)."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from isa.arch import preset_names
from npusim import __version__
from npusim.app.cli import main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_presets_one_per_line_name_first(capsys):
    code, out, _ = run(capsys, "presets")
    names = [line.split("\t")[0] for line in out.splitlines()]
    assert code == 0 and names == preset_names()
    assert "16x16 int8 edge NPU" in out


def test_version():
    out = subprocess.run([sys.executable, "-m", "npusim", "--version"], capture_output=True, text=True)
    assert out.stdout.strip() == f"npusim {__version__}"


def test_simulate_example_gemm_json_matches_numpy(capsys, tmp_path):
    outputs = tmp_path / "out.npz"
    code, out, err = run(capsys, "simulate", str(EXAMPLES / "gemm_int8.s"), "--arch", "edge16", "--inputs",
                         str(EXAMPLES / "gemm_int8.npz"), "--json", "-", "--save-outputs", str(outputs))
    assert code == 0, err
    report = json.loads(out)
    assert report["cycles"] > 0 and report["arch"]["matrix"]["rows"] == 16
    for unit in report["units"].values():
        total = unit["busy_cycles"] + unit["idle_cycles"] + sum(unit["stall_cycles"].values())
        assert total == report["cycles"]
    expected = np.load(EXAMPLES / "gemm_int8.expected.npy")
    c = np.load(outputs)["C"][: expected.nbytes].view(np.int32).reshape(expected.shape)
    assert (c == expected).all()


def test_timing_only_gives_the_same_cycles(capsys):
    args = ["simulate", str(EXAMPLES / "gemm_int8.s"), "--arch", "mid32", "--json", "-"]
    _, with_values, _ = run(capsys, *args, "--inputs", str(EXAMPLES / "gemm_int8.npz"))
    _, timing, _ = run(capsys, *args, "--timing-only")
    assert json.loads(with_values)["cycles"] == json.loads(timing)["cycles"]


def test_human_summary(capsys):
    code, out, _ = run(capsys, "simulate", str(EXAMPLES / "gemm_int8.s"), "--arch", "edge16", "--timing-only")
    assert code == 0 and out.startswith("109 instructions on edge16: ") and "dma_load" in out


def test_deadlock_example_runs_without_inputs_and_fails_cleanly():
    proc = subprocess.run([sys.executable, "-m", "npusim", "simulate", str(EXAMPLES / "deadlock.s")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    (line,) = proc.stderr.splitlines()
    assert line.startswith("npusim: error: deadlock at cycle 0: mxu blocked at pc 0")
    assert "vpu blocked at pc 1" in line and "wait-for cycle: mxu -> vpu -> mxu" in line


@pytest.mark.parametrize("argv,message", [
    (["--set", "matrix.rows=-1"], "npusim: error: matrix.rows must be an integer in [1, 2**16 - 1] (the k and n of "
                                  "mxu.mm hold 1-65535), not -1"),
    (["--arch", "nope"], "npusim: error: --arch must be a preset (dc128, edge16, mid32) or a TOML file, not 'nope'"),
    (["--set", "dram.gb_per_sec=3"], "npusim: error: unknown Arch field 'dram.gb_per_sec'; did you mean "
                                     "'dram.gb_per_s'?"),
    (["--set", "dram.bandwidth=32"], "npusim: error: dram.bandwidth (bytes per core cycle) is now dram.gb_per_s in "
                                     "GB/s, which the core clock does not scale: bytes/cycle x clock.ghz, e.g. 32 "
                                     "B/cycle at 1.2 GHz is dram.gb_per_s = 38.4 (and dram.access_bytes = 32 keeps a "
                                     "partial burst's cycles)"),
])
def test_bad_arch_is_one_line(capsys, argv, message):
    code, _, err = run(capsys, "simulate", str(EXAMPLES / "deadlock.s"), *argv)
    assert code == 1 and err.strip() == message


def test_malformed_assembly_names_line_and_column(capsys, tmp_path):
    bad = tmp_path / "bad.s"
    bad.write_text(".config rows=16 cols=16 spm=262144 acc=65536\nhalt\nmxu.mmm shape[1] m=1\n")
    code, _, err = run(capsys, "simulate", str(bad))
    assert code == 1
    assert err.startswith(f"npusim: error: {bad}:3:1: unknown mnemonic 'mxu.mmm'")


def test_missing_program_file(capsys, tmp_path):
    code, _, err = run(capsys, "simulate", str(tmp_path / "none.s"))
    assert code == 1 and err == f"npusim: error: No such file or directory: {tmp_path / 'none.s'}\n"


def test_inputs_for_unknown_region(capsys, tmp_path):
    npz = tmp_path / "in.npz"
    np.savez(npz, Z=np.zeros(4, np.int8))
    code, _, err = run(capsys, "simulate", str(EXAMPLES / "gemm_int8.s"), "--inputs", str(npz))
    assert code == 1
    assert err.strip() == "npusim: error: input 'Z' names no DRAM region; the program declares A, B, C"


def test_conv_reports_the_layers_macs_when_packing_multiplies_zeros(capsys):
    # 64 -> 64 channels on dc128's 128 columns: pixel-packed, so the array also multiplies the zero blocks
    code, out, _ = run(capsys, "conv", "1", "64", "16", "16", "64", "3", "3", "--pad", "1", "--arch", "dc128",
                       "--timing-only", "--json", "-")
    report = json.loads(out)
    macs = 16 * 16 * 64 * 64 * 9
    assert code == 0 and report["macs"] == macs
    assert report["mac_utilization"] == pytest.approx(macs / (report["cycles"] * 128 * 128))


def test_verify_races_prints_one_line_per_race_and_exits_non_zero():
    proc = subprocess.run([sys.executable, "-m", "npusim", "verify", "--races", str(EXAMPLES / "race.s")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith("race on spm[") for line in lines)
    assert lines[0].startswith("race on spm[0x0, 0x40) (64 common bytes): vpu pc 2 `vpu.act.relu")
    assert "(reads src) and dma.ld pc 4 `dma.ld shape[64] dst=spm:0x0<i8>{1}" in lines[0]
    assert "(writes dst) are not ordered" in lines[0] and "vpu pc 5 " in lines[1] and "dma.ld pc 7 " in lines[1]
    (err,) = proc.stderr.splitlines()
    assert err.startswith(f"npusim: error: {EXAMPLES / 'race.s'}: 2 races: ")


def test_verify_races_of_a_race_free_program_and_the_race_cap(capsys):
    code, out, _ = run(capsys, "verify", "--races", str(EXAMPLES / "gemm_int8.s"))
    assert code == 0 and out.strip().endswith("109 instructions, ok, no races")
    code, out, err = run(capsys, "verify", "--races", "--max-races", "1", str(EXAMPLES / "race.s"))
    assert code == 1 and len(out.splitlines()) == 1 and "1 race (stopped at --max-races 1)" in err
    with pytest.raises(SystemExit) as e:   # a bad option value is a usage error, as for every numeric option
        main(["verify", "--races", "--max-races", "-1", str(EXAMPLES / "race.s")])
    assert e.value.code == 2 and "argument --max-races: must be a race count >= 0, not -1" in capsys.readouterr().err


@pytest.mark.slow
def test_warm_runs_each_workload_and_leaves_the_numba_functions_compiled():
    """In a fresh process (where no earlier test compiled anything), `npusim warm` runs every workload and leaves the
    compiled timing run and the matmul kernels compiled (or loaded from the cache it fills)."""
    from npusim.app.warm import WORKLOADS

    code = ("import sys; from npusim.app.cli import main; rc = main(['warm']); "
            "from npusim.sim import compiled_timing as c; from npusim.functional import kernels as k; "
            "print(rc, bool(c._run.signatures and k.matmul_f32.signatures and k.matmul_int.signatures))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT).stdout.splitlines()
    assert [line.split(":")[0] for line in out[:-2]] == [f"{m} on {p}" for m, p in WORKLOADS]
    assert out[-2].startswith("numba functions compiled and cached in ")
    assert out[-1] == "0 True"
