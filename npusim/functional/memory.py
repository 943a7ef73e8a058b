"""Device memory: the SPM, the ACC and the DRAM regions as byte arrays, and typed strided views into them."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from isa import Program, Space, View
from isa.errors import SimulationError


class DeviceMemory:
    """Byte-addressed backing store of every memory space. Views into it are zero-copy numpy arrays."""

    def __init__(self, spm_bytes: int, acc_bytes: int, regions: Mapping[str, int]):
        self.spm = np.zeros(spm_bytes, np.uint8)
        self.acc = np.zeros(acc_bytes, np.uint8)
        self.dram = {name: np.zeros(size, np.uint8) for name, size in regions.items()}
        # every operand of the program run on it was verified to lie inside its memory (isa.verify, as simulate
        # does before a run): the kernels then skip the per-instruction bounds check
        self.bounds_verified = False
        # the SPM and ACC as typed views of the same bytes (ACC and f32 SPM as 32-bit words), for kernels over
        # aligned operands
        self.spm_f32 = self.spm[: spm_bytes - spm_bytes % 4].view(np.float32)
        self.acc_f32 = self.acc[: acc_bytes - acc_bytes % 4].view(np.float32)
        self.acc_u32 = self.acc_f32.view(np.uint32)
        self.acc_i32 = self.acc_f32.view(np.int32)
        self.spm_i8 = self.spm.view(np.int8)

    @classmethod
    def for_program(cls, program: Program, spm_bytes: int, acc_bytes: int) -> DeviceMemory:
        return cls(spm_bytes, acc_bytes, {r.name: r.size for r in program.regions})

    def buffer(self, view: View) -> np.ndarray:
        """The byte array a view addresses."""
        if view.space is Space.SPM:
            return self.spm
        if view.space is Space.ACC:
            return self.acc
        return self.dram[view.region]

    def array(self, view: View, shape: tuple[int, ...], extra: tuple[tuple[int, int], ...] = ()) -> np.ndarray:
        """A typed, strided, writable numpy view of ``view`` over ``shape`` (+ extra (extent, stride) dims).

        Raises SimulationError when any element falls outside its memory.
        """
        buf = self.buffer(view)
        lo, hi = view.span(shape, extra)
        if lo < 0 or hi > buf.size:
            where = f"region {view.region}" if view.region else view.space.text.upper()
            raise SimulationError(f"access to bytes [{lo}, {hi}) is outside the {buf.size}-byte {where}")
        full = tuple(shape) + tuple(e for e, _ in extra)
        strides = tuple(view.strides[: len(shape)]) + tuple(s for _, s in extra)
        return np.ndarray(full, dtype=view.dtype.storage, buffer=buf, offset=view.base, strides=strides)

    def load(self, region: str, data: np.ndarray) -> None:
        """Copy ``data``'s bytes to the start of a DRAM region."""
        raw = np.ascontiguousarray(data).view(np.uint8).ravel()
        dst = self.dram.get(region)
        if dst is None:
            raise SimulationError(f"input {region!r} names no DRAM region; the program declares "
                                  f"{', '.join(sorted(self.dram)) or 'none'}")
        if raw.size > dst.size:
            raise SimulationError(f"input {region!r} has {raw.size} bytes but region {region} holds {dst.size}")
        dst[: raw.size] = raw
