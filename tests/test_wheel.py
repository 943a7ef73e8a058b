"""`pip install .` (not editable) gives a working npusim: the wheel ships the Arch presets and everything the CLI
needs, and runs from outside the source tree.

The wheel is built offline (--no-build-isolation, with the venv's setuptools) from a copy of the sources, installed
with --no-deps into a fresh virtual environment without pip, which then borrows the project venv's dependencies
through a .pth file appended *after* its own site-packages (so the wheel's isa/compiler/npusim come first and the
source tree is not on the path: every command runs in a temporary directory)."""

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from isa.arch import preset_names

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("pyproject.toml", "README.md", "isa", "compiler", "npusim")


def _run(*argv, cwd: Path, env: dict | None = None) -> str:
    proc = subprocess.run([str(a) for a in argv], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env=None if env is None else {**os.environ, **env})
    assert proc.returncode == 0, f"{argv}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> tuple[Path, Path]:
    """(bin directory of a fresh venv with the npusim wheel installed, a work directory outside the sources)."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    src.mkdir()
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy(path, src / name)
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q", "-w",
         tmp / "dist", "./src", cwd=tmp)
    (wheel,) = (tmp / "dist").glob("npusim-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for preset in preset_names():
        assert f"isa/presets/{preset}.toml" in names
    _run(sys.executable, "-m", "venv", "--without-pip", tmp / "env", cwd=tmp)
    python = tmp / "env" / "bin" / "python"
    _run(sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", "-q", wheel, cwd=tmp)
    site = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=tmp).strip())
    deps = sysconfig.get_paths()["purelib"]   # this (project) venv's site-packages: numpy, onnx, numba, ...
    (site / "_npusim_test_deps.pth").write_text(f"import sys; sys.path.append({deps!r})\n")
    work = tmp / "work"
    work.mkdir()
    return tmp / "env" / "bin", work


@pytest.mark.slow
def test_wheel_imports_from_its_own_site_packages(installed):
    bin_, work = installed
    out = _run(bin_ / "python", "-c", "import isa, compiler, npusim; print(isa.__file__, compiler.__file__, "
               "npusim.__file__)", cwd=work)
    for path in out.split():
        assert Path(path).is_relative_to(bin_.parent) and not Path(path).is_relative_to(ROOT), out


@pytest.mark.slow
def test_wheel_cli_lists_presets_and_runs_a_zoo_model_on_mid32(installed):
    bin_, work = installed
    npusim = bin_ / "npusim"
    assert [line.split("\t")[0] for line in _run(npusim, "presets", cwd=work).splitlines()] == preset_names()
    _run(npusim, "zoo", "bert_layer", "-o", "bert.onnx", cwd=work)
    out = _run(npusim, "run", "bert.onnx", "--arch", "mid32", "--timing-only", "--quiet", cwd=work)
    assert "instructions on mid32:" in out and "cycles" in out
    _run(npusim, "compile", "bert.onnx", "--arch", "mid32", "-o", "bert.npub", cwd=work)
    assert _run(npusim, "verify", "--races", "bert.npub", cwd=work).strip().endswith("ok, no races")
    # values too, on a GEMM small enough to run with numba's JIT off (a cold JIT of the kernels takes a minute)
    out = _run(npusim, "gemm", "16", "16", "16", "--arch", "mid32", "--quiet", cwd=work,
               env={"NUMBA_DISABLE_JIT": "1"})
    assert "validation against numpy (exact): max |err| 0" in out


@pytest.mark.slow
def test_wheel_golden_says_the_traces_are_not_installed(installed):
    bin_, work = installed
    proc = subprocess.run([bin_ / "npusim", "golden", "gemm512"], cwd=work, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 1 and proc.stderr.startswith("npusim: error: no golden traces here: ")
