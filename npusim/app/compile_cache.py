"""A compile cache on disk: a model compiled once for an Arch and compiler options is loaded, not compiled, the next
time (a notebook re-run, a sweep revisiting a point, `npusim run` again).

An entry is the pickled imported :class:`compiler.ir.Graph` and :class:`compiler.compile.CompiledModel`, named by
the SHA-256 of what the compile depends on: the ONNX model's bytes, the whole Arch, the compiler options, the npusim
version and a fingerprint of the compiler's and ISA's source files (so an edited compiler never reads an entry of
the old one), and the onnx and numpy versions (the importer converts opsets with onnx). The directory is
``$NPUSIM_CACHE_DIR``, else ``$XDG_CACHE_HOME/npusim/compile``, else ``~/.cache/npusim/compile``. Entries are
written atomically, so concurrent processes never read half an entry; an unreadable entry is a miss (compiled again
and rewritten).

The directory is capped (``$NPUSIM_CACHE_MAX_BYTES``, default :data:`DEFAULT_MAX_BYTES`, 2 GiB): each store evicts
the least recently used entries (a hit counts as a use) until the entries fit, and an entry larger than the whole cap
is not kept. ``npusim cache info`` and ``npusim cache clear`` show and empty it (:func:`info`, :func:`clear`).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from compiler.compile import CompiledModel
from compiler.ir import Graph
from isa.errors import NpuSimError

_SOURCES = ("compiler", "isa")   # packages whose code decides a compiled program


class CacheSettingError(NpuSimError, ValueError):
    """An environment setting of the compile cache that is not what it must be."""


DEFAULT_MAX_BYTES = 2 * 1024**3
"""The cache's default size cap, bytes (2 GiB): an hour of sweeping filled 3.6 GB before there was one."""


def max_bytes() -> int:
    """The size cap, bytes: ``$NPUSIM_CACHE_MAX_BYTES`` (a non-negative integer; 0 keeps nothing), else
    :data:`DEFAULT_MAX_BYTES`; CacheSettingError naming the variable for anything else."""
    text = os.environ.get("NPUSIM_CACHE_MAX_BYTES", "").strip()
    if not text:
        return DEFAULT_MAX_BYTES
    if not text.isdigit():
        raise CacheSettingError(f"NPUSIM_CACHE_MAX_BYTES must be a whole number of bytes (e.g. 2147483648), "
                                f"not {text!r}")
    return int(text)


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
    if ok:
        try:
            os.utime(path)   # a use: eviction takes the least recently used first
        except OSError:
            pass
    return entry if ok else None


def store(key: str, graph: Graph, compiled: CompiledModel, directory: Path | None = None) -> bool:
    """Write entry ``key`` (atomically); False when the directory cannot be written (the run goes on uncached)."""
    directory, limit = directory or cache_dir(), max_bytes()
    try:
        directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            pickle.dump((graph, compiled), f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, directory / f"{key}.pkl")
    except OSError:
        return False
    evict(directory, limit)
    return (directory / f"{key}.pkl").exists()


def _entries(directory: Path) -> list[tuple[float, int, Path]]:
    """(last use, bytes, path) of every entry, least recently used first; entries that vanish meanwhile are left
    out (another process evicted them)."""
    found = []
    for path in directory.glob("*.pkl"):
        try:
            st = path.stat()
        except OSError:
            continue
        found.append((st.st_mtime, st.st_size, path))
    return sorted(found)


def evict(directory: Path, limit: int) -> int:
    """Remove the least recently used entries of ``directory`` until the rest hold at most ``limit`` bytes; the
    number removed."""
    entries = _entries(directory)
    total, removed = sum(size for _, size, _ in entries), 0
    for _, size, path in entries:
        if total <= limit:
            break
        try:
            path.unlink()
            removed += 1
        except OSError:
            pass
        total -= size
    return removed


@dataclass(frozen=True)
class CacheInfo:
    """What the cache holds: its ``directory``, ``entries`` and their ``bytes``, and its cap ``max_bytes``."""

    directory: Path
    entries: int
    bytes: int
    max_bytes: int


def info(directory: Path | None = None) -> CacheInfo:
    """The cache's directory, entry count, size and cap."""
    directory = directory or cache_dir()
    entries = _entries(directory) if directory.is_dir() else []
    return CacheInfo(directory, len(entries), sum(size for _, size, _ in entries), max_bytes())


def clear(directory: Path | None = None) -> tuple[int, int]:
    """Remove every entry (and leftover partial writes); (entries, bytes) removed."""
    directory = directory or cache_dir()
    if not directory.is_dir():
        return 0, 0
    entries = _entries(directory)
    for path in (*(path for _, _, path in entries), *directory.glob("*.tmp")):
        try:
            path.unlink()
        except OSError:
            pass
    return len(entries), sum(size for _, size, _ in entries)
