"""The results directory of a sweep: one small JSON file per finished (Arch point, workload), written the moment its
result arrives, so a sweep that is killed keeps everything it finished and a rerun computes only what is missing.

A point's key hashes everything its result depends on: the whole Arch (its TOML), the workload's bytes and compiler
options (:attr:`digest`), and the npusim version with a fingerprint of the installed source (isa, compiler, npusim),
so results computed by other code are never reused.
"""

from __future__ import annotations

import hashlib
import json
import os
from functools import cache
from pathlib import Path
from typing import Any

from isa.arch import Arch

POINTS = "points"


@cache
def code_fingerprint() -> str:
    """sha256 of the npusim version and every source and preset file of the isa, compiler and npusim packages."""
    import importlib.util

    import npusim

    h = hashlib.sha256(npusim.__version__.encode())
    for pkg in ("isa", "compiler", "npusim"):   # located, not imported
        root = Path(importlib.util.find_spec(pkg).origin).parent
        for path in sorted(p for p in root.rglob("*") if p.suffix in (".py", ".toml")):
            h.update(str(path.relative_to(root.parent)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def point_key(arch: Arch, workload_digest: str) -> str:
    """The result store's key of ``workload`` on ``arch`` (hex sha256)."""
    text = json.dumps([arch.to_dict(), workload_digest, code_fingerprint()], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


class ResultStore:
    """``root/points/<key>.json``: one finished point's record (its metrics and error, with the workload's name
    and the point's overrides for a reader)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.points = self.root / POINTS
        self.points.mkdir(parents=True, exist_ok=True)

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored record of ``key``, or None (also for a file cut short by a crash, which is recomputed)."""
        try:
            return json.loads((self.points / f"{key}.json").read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def put(self, key: str, record: dict[str, Any]) -> None:
        """Write ``record`` atomically (a temporary file renamed into place)."""
        tmp = self.points / f".{key}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(record))
        os.replace(tmp, self.points / f"{key}.json")

    def __len__(self) -> int:
        return sum(1 for _ in self.points.glob("*.json"))
