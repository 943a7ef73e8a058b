"""A compile cache on disk: a model compiled once for an Arch and compiler options is loaded, not compiled, the next
time (a notebook re-run, a sweep revisiting a point, `npusim run` again).

An entry is the pickled imported :class:`compiler.ir.Graph` and :class:`compiler.compile.CompiledModel`, named by
the SHA-256 of what the compile depends on: the ONNX model's bytes, the whole Arch, the compiler options, the npusim
version and a fingerprint of the compiler's and ISA's source files (so an edited compiler never reads an entry of
the old one), and the onnx and numpy versions (the importer converts opsets with onnx). The directory is
``$NPUSIM_CACHE_DIR``, else ``$XDG_CACHE_HOME/npusim/compile``, else ``~/.cache/npusim/compile``. Entries are
written atomically, so concurrent processes never read half an entry; an unreadable entry is a miss (compiled again
and rewritten).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from functools import lru_cache
from pathlib import Path

from compiler.compile import CompiledModel
from compiler.ir import Graph

_SOURCES = ("compiler", "isa")   # packages whose code decides a compiled program


def cache_dir() -> Path:
    """Where entries live (see the module doc)."""
    if os.environ.get("NPUSIM_CACHE_DIR"):
        return Path(os.environ["NPUSIM_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "npusim" / "compile"


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """SHA-256 of the compiler's and the ISA's Python sources (paths and bytes), with the npusim, onnx and numpy
    versions."""
    import numpy
    import onnx

    from npusim import __version__

    root = Path(__file__).resolve().parents[2]
    h = hashlib.sha256(f"npusim {__version__} onnx {onnx.__version__} numpy {numpy.__version__}".encode())
    for pkg in _SOURCES:
        for path in sorted((root / pkg).rglob("*.py")):
            h.update(str(path.relative_to(root)).encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def cache_key(model_bytes: bytes, arch, options: dict) -> str:
    """The entry name of ``model_bytes`` (a serialized ONNX model) compiled for ``arch`` with compiler ``options``."""
    h = hashlib.sha256(code_fingerprint().encode())
    h.update(hashlib.sha256(model_bytes).digest())
    h.update(repr(arch).encode())
    h.update(repr(sorted(options.items())).encode())
    return h.hexdigest()


def load(key: str, directory: Path | None = None) -> tuple[Graph, CompiledModel] | None:
    """The entry ``key`` (the imported graph and the compiled model), or None when there is none or it cannot be
    read."""
    path = (directory or cache_dir()) / f"{key}.pkl"
    try:
        with open(path, "rb") as f:
            entry = pickle.load(f)
    except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, TypeError, ValueError):
        return None
    ok = isinstance(entry, tuple) and len(entry) == 2 and isinstance(entry[0], Graph) and \
        isinstance(entry[1], CompiledModel)
    return entry if ok else None


def store(key: str, graph: Graph, compiled: CompiledModel, directory: Path | None = None) -> bool:
    """Write entry ``key`` (atomically); False when the directory cannot be written (the run goes on uncached)."""
    directory = directory or cache_dir()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            pickle.dump((graph, compiled), f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, directory / f"{key}.pkl")
    except OSError:
        return False
    return True
