"""Run inputs, checked before anything runs: a program's by DRAM region (name, numeric dtype, bytes that fit), a
model's by graph input (name, shape and dtype exactly). Files: ``.npz`` holds arrays by name, ``.npy`` the one array
of a program with one region or a model with one input."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from isa import Program
from isa.errors import InputError

NUMERIC = "biuf"
"""numpy dtype kinds an input may have: bool, signed and unsigned integers, floats (no complex, strings, objects)."""


def load_file(path: str | Path) -> dict[str, np.ndarray] | np.ndarray:
    """The arrays of an ``.npz`` by name, or the one array of an ``.npy`` (never a pickle)."""
    try:
        with open(path, "rb") as f:
            data = np.load(f, allow_pickle=False)
            if isinstance(data, np.ndarray):
                return data
            with data:
                return {k: data[k] for k in data.files}
    except OSError as e:
        raise InputError(f"cannot read inputs {path}: {e.strerror or e}") from None
    except Exception as e:  # noqa: BLE001 - numpy and zipfile raise many kinds for a file that is not one
        reason = " ".join(str(e).split()) or type(e).__name__
        raise InputError(f"cannot read inputs {path}: not an .npz or .npy of numeric arrays ({reason})") from None


def _array(name: str, data: Any) -> np.ndarray:
    try:
        arr = np.asarray(data)
    except (ValueError, TypeError) as e:
        raise InputError(f"input {name!r} must be an array of numbers, not {type(data).__name__} ({e})") from None
    if arr.dtype.kind not in NUMERIC:
        kind = {"O": "objects", "c": "complex numbers", "U": "text", "S": "bytes"}.get(arr.dtype.kind, "no numbers")
        raise InputError(f"input {name!r} must hold numbers (bool, int, uint or float), not {arr.dtype} ({kind})")
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    return arr


def _named(inputs: Any, names: Sequence[str], what: str) -> Mapping[str, Any]:
    """``inputs`` as a mapping; one bare array goes to the one name there is."""
    if isinstance(inputs, Mapping):
        return inputs
    if len(names) == 1:
        return {names[0]: inputs}
    raise InputError(f"one unnamed input array needs {what} with exactly one input, not {len(names)} "
                     f"({', '.join(names) or 'none'}): pass them by name (a dict, or an .npz: "
                     f"numpy.savez(path, {', '.join(f'{n}=...' for n in names[:3])}))")


def for_program(program: Program, inputs: Mapping[str, Any] | np.ndarray | None) -> dict[str, np.ndarray]:
    """``inputs`` (region name -> array, or one array for a program with one region) checked against the program's
    DRAM regions: every name a region, every array numeric and no larger than its region (bytes)."""
    if inputs is None:
        return {}
    regions = program.region_map
    out = {}
    for name, data in _named(inputs, list(regions), "a program").items():
        if name not in regions:
            raise InputError(f"input {name!r} names no DRAM region; the program declares "
                             f"{', '.join(regions) or 'none'}")
        arr = out[name] = _array(name, data)
        if arr.nbytes > regions[name].size:
            raise InputError(f"input {name!r} has {arr.nbytes:,} bytes but region {name} holds "
                             f"{regions[name].size:,}")
    return out


def for_model(expected: Mapping[str, tuple[tuple[int, ...], np.dtype]], inputs: Any) -> dict[str, np.ndarray]:
    """``inputs`` checked against a model's inputs (name -> (shape, dtype)): the same names, each array exactly of
    its input's shape and dtype."""
    names = list(expected)
    inputs = _named(inputs, names, "a model")
    for name in inputs:
        if name not in expected:
            raise InputError(f"input {name!r} is not an input of the model; its inputs are {', '.join(names)}")
    missing = [n for n in names if n not in inputs]
    if missing:
        raise InputError(f"inputs lack {', '.join(missing)}; the model's inputs are {', '.join(names)}")
    out = {}
    for name, (shape, dtype) in expected.items():
        arr = out[name] = _array(name, inputs[name])
        if arr.shape != tuple(shape) or arr.dtype != dtype:
            hint = f" (convert with .astype(numpy.{np.dtype(dtype).name}))" if arr.shape == tuple(shape) else ""
            raise InputError(f"input {name!r} must be {np.dtype(dtype).name} of shape {tuple(shape)}, not "
                             f"{arr.dtype} of shape {arr.shape}{hint}")
    return out
