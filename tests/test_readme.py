"""The README's examples run: every Python block as a script (as a user pastes it into a file), the assembly
block, and the deadlock message it quotes."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", README, re.S)


@pytest.mark.slow
@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_finding5_readme_python_blocks_run_as_scripts(block, tmp_path):
    """Each block, written to a file and run with ``python FILE`` from the checkout: a script, not an exec() in the
    test's process, so what only fails in a script (dask's worker processes re-importing ``__main__``) fails here."""
    script = tmp_path / "example.py"
    script.write_text(block)
    proc = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"README block failed as a script:\n{block}\n--- stderr:\n{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]


def test_assembly_block_parses_and_runs():
    from isa.arch import load_arch
    from isa.asm import parse_program
    from npusim import simulate

    text = re.search(r"```\n(\.config.*?)```", README, re.S).group(1)
    assert simulate(parse_program(text, "README.md"), load_arch("edge16"), timing_only=True).cycles > 0


def test_quoted_deadlock_message_is_current():
    import subprocess
    import sys

    quoted = re.search(r"^npusim: error: deadlock.*$", README, re.M).group(0)
    proc = subprocess.run([sys.executable, "-m", "npusim", "simulate", "examples/deadlock.s"], capture_output=True,
                          text=True, cwd=Path(__file__).resolve().parent.parent)
    assert proc.stderr.strip() == quoted
