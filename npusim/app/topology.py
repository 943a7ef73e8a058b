"""SCALE-Sim topology files, read as they are.

Conv rows: ``name, IFMAP H, IFMAP W, Filter H, Filter W, Channels, Num Filter, Stride,`` with SCALE-Sim's geometry
(no padding; output size ``ceil((H - R + S) / S)``); GEMM rows (``--gemm``): ``name, M, N, K,``. Every layer is
reduced to its GEMM view: M = output pixels, N = filters, K = filter window x channels.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass
from pathlib import Path

from isa import NpuSimError
from isa.utf8 import decode_utf8


class TopologyError(NpuSimError, ValueError):
    """A topology file that does not parse."""


@dataclass(frozen=True)
class Layer:
    """One layer's GEMM view: C[M, N] = A[M, K] @ B[K, N]."""

    name: str
    M: int
    N: int
    K: int


def conv_gemm(h: int, w: int, r: int, s: int, c: int, filters: int, stride: int) -> tuple[int, int, int]:
    """(M, N, K) of a SCALE-Sim conv row."""
    return math.ceil((h - r + stride) / stride) * math.ceil((w - s + stride) / stride), filters, r * s * c


def read_topology(path: str | Path, gemm: bool = False) -> list[Layer]:
    """The layers of a SCALE-Sim topology CSV (the header line is skipped; trailing commas are fine)."""
    layers = []
    text = decode_utf8(Path(path).read_bytes(), str(path),
                       lambda msg, line, col: TopologyError(f"{path}:{line}:{col}: {msg}"))
    for lineno, row in enumerate(csv.reader(io.StringIO(text, newline="")), 1):
        cells = [c.strip() for c in row if c.strip()]
        if lineno == 1 or not cells:
            continue
        want = 4 if gemm else 8
        if len(cells) < want:
            kind = "name, M, N, K" if gemm else "name, H, W, R, S, C, filters, stride"
            raise TopologyError(f"{path}:{lineno}: a {'GEMM' if gemm else 'conv'} row has {want} fields "
                                f"({kind}), not {len(cells)}" + ("" if gemm else "; use --gemm for GEMM rows"))
        try:
            nums = [int(x) for x in cells[1:want]]
        except ValueError:
            raise TopologyError(f"{path}:{lineno}: fields after the name must be integers: {cells[1:want]}") \
                from None
        if min(nums) < 1:
            raise TopologyError(f"{path}:{lineno}: fields must be positive, not {nums}")
        if not gemm and (nums[2] > nums[0] or nums[3] > nums[1]):
            raise TopologyError(f"{path}:{lineno}: filter {nums[2]}x{nums[3]} is larger than the "
                                f"{nums[0]}x{nums[1]} input")
        layers.append(Layer(cells[0], *(nums if gemm else conv_gemm(*nums))))
    if not layers:
        raise TopologyError(f"{path}: no layers")
    return layers
