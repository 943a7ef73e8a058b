"""The layering rule holds: the import-linter contracts of pyproject.toml ([tool.importlinter]) are all kept.

isa imports neither compiler nor npusim; compiler never imports npusim; inside npusim only npusim.app imports
compiler, and npusim's folders are layers (app > report > sim > functional). `lint-imports` checks the same.
"""

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINT = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"


def test_every_import_contract_is_kept(tmp_path):
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, "-c", LINT, str(ROOT / "pyproject.toml"),
                          "--cache-dir", str(tmp_path)], cwd=ROOT, env=env, capture_output=True, text=True)
    out = run.stdout + run.stderr
    verdicts = dict(re.findall(r"^(.+?) (KEPT|BROKEN)(?: \(\d+ ignored imports?\))?$", out, flags=re.M))
    missing = [c["name"] for c in contracts if c["name"] not in verdicts]
    assert not missing, f"lint-imports did not check {missing}:\n{out}"
    broken = [name for name, verdict in verdicts.items() if verdict == "BROKEN"]
    assert not broken, f"broken layering contract(s): {'; '.join(broken)}\n{out[out.find('Broken contracts'):]}"
    assert run.returncode == 0, out
