"""The README's examples run: every Python block, the assembly block, and the deadlock message it quotes."""

import re
from pathlib import Path

import pytest

README = (Path(__file__).resolve().parent.parent / "README.md").read_text()


@pytest.mark.slow
@pytest.mark.parametrize("block", re.findall(r"```python\n(.*?)```", README, re.S))
def test_python_blocks_run(block):
    exec(compile(block, "README.md", "exec"), {})


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
