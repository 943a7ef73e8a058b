"""Execute the notebooks in place at ``SIZE = "full"`` and store their outputs (``make notebooks``).

Each notebook is run top to bottom in a fresh kernel of this interpreter from the repository root, its outputs are
written into the file, and its metadata records what they came from (``metadata.npusim``: the size and the sha256 of
its code cells), so that tests/test_notebooks.py can tell stored outputs that no longer match the code. Cell timing
metadata is not recorded (it would change every run).

    python notebooks/execute.py                      # every notebook
    python notebooks/execute.py 02_architecture_exploration.ipynb
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def code_sha256(nb) -> str:
    """sha256 of a notebook's code cells (their sources in order, the parameters cell as ``SIZE = "full"``): what
    stored outputs depend on. Markdown cells do not count."""
    sources = ['SIZE = "full"' if "parameters" in c.metadata.get("tags", []) else c.source
               for c in nb.cells if c.cell_type == "code"]
    return hashlib.sha256(json.dumps(sources).encode()).hexdigest()


def execute(path: Path, size: str = "full", timeout: int = 3600) -> float:
    """Run notebook ``path`` with its parameters cell set to ``SIZE = size`` and write it back with its outputs;
    returns the seconds it took. The parameters cell keeps its committed text."""
    import nbclient
    import nbformat
    from ipykernel.kernelspec import install

    nb = nbformat.read(path, as_version=4)
    params = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    if len(params) != 1:
        raise SystemExit(f"{path.name}: needs exactly one cell tagged 'parameters' (it has {len(params)})")
    committed = params[0].source
    params[0].source = f'SIZE = "{size}"'
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as prefix:
        install(prefix=prefix, kernel_name="python3")   # a kernel of this interpreter, whatever the user has
        old = os.environ.get("JUPYTER_PATH")
        os.environ["JUPYTER_PATH"] = str(Path(prefix) / "share" / "jupyter")
        try:
            nbclient.NotebookClient(nb, kernel_name="python3", timeout=timeout, record_timing=False,
                                    resources={"metadata": {"path": str(ROOT)}}).execute()
        finally:
            if old is None:
                os.environ.pop("JUPYTER_PATH")
            else:
                os.environ["JUPYTER_PATH"] = old
    params[0].source = committed
    nb.metadata["npusim"] = {"size": size, "code_sha256": code_sha256(nb)}
    nbformat.write(nb, path)
    return time.perf_counter() - start


def main(argv: list[str]) -> int:
    names = argv or sorted(p.name for p in HERE.glob("*.ipynb"))
    for name in names:
        print(f"{name}: {execute(HERE / name):.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
