"""Element types, memory spaces and instruction queues of the NPU."""

from __future__ import annotations

import enum

import numpy as np


class DType(enum.Enum):
    """An element type: its assembly name, size in bytes and numpy storage type.

    bf16 is stored as its raw 16 bits (``uint16``); kernels widen it to fp32 by a 16-bit shift.
    """

    I8 = ("i8", 1, np.int8)
    U8 = ("u8", 1, np.uint8)
    I16 = ("i16", 2, np.int16)
    I32 = ("i32", 4, np.int32)
    F16 = ("f16", 2, np.float16)
    BF16 = ("bf16", 2, np.uint16)
    F32 = ("f32", 4, np.float32)

    def __init__(self, text: str, size: int, storage: type):
        self.text, self.size, self.storage = text, size, np.dtype(storage)

    @property
    def is_float(self) -> bool:
        return self in (DType.F16, DType.BF16, DType.F32)

    @property
    def code(self) -> int:
        return list(DType).index(self)

    @classmethod
    def from_text(cls, text: str) -> DType:
        for d in cls:
            if d.text == text:
                return d
        raise KeyError(text)

    @classmethod
    def from_code(cls, code: int) -> DType:
        return list(cls)[code]

    def __repr__(self) -> str:
        return f"DType.{self.name}"


INT_RANGE = {DType.I8: (-128, 127), DType.U8: (0, 255), DType.I16: (-32768, 32767), DType.I32: (-(2**31), 2**31 - 1)}


class Space(enum.IntEnum):
    """A memory space. DRAM is addressed through named regions; SPM and ACC by byte address."""

    DRAM = 0
    SPM = 1
    ACC = 2

    @property
    def text(self) -> str:
        return self.name.lower()


class Queue(enum.IntEnum):
    """An in-order instruction queue; each feeds one unit. CTRL instructions stay in the dispatcher."""

    DMA_LD = 0
    DMA_ST = 1
    MXU = 2
    VPU = 3
    CTRL = 15

    @property
    def text(self) -> str:
        return {0: "dma.ld", 1: "dma.st", 2: "mxu", 3: "vpu", 15: "ctrl"}[int(self)]


UNIT_QUEUES = (Queue.DMA_LD, Queue.DMA_ST, Queue.MXU, Queue.VPU)
