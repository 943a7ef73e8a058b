"""Element types and memory spaces of the NPU (its queues and units: :mod:`isa.units`)."""

from __future__ import annotations

import enum

import numpy as np

from isa.errors import IsaError


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
        self.is_float = text in ("f16", "bf16", "f32")   # (an attribute: read for every operand built)

    @property
    def code(self) -> int:
        """Index in declaration order (the 4-bit dtype field of the binary encoding)."""
        return _CODE[self]

    @classmethod
    def from_text(cls, text: str) -> DType:
        return _BY_TEXT[text]

    @classmethod
    def from_code(cls, code: int) -> DType:
        return _BY_CODE[code]

    @classmethod
    def from_numpy(cls, dtype) -> DType:
        """The type whose values numpy ``dtype`` holds (``bfloat16``: ml_dtypes' type; ``uint16`` is not bf16);
        :class:`~isa.errors.IsaError` when the NPU has none."""
        d = np.dtype(dtype)
        found = _BY_NUMPY.get(d.name)
        if found is None:
            raise IsaError(f"numpy dtype {d} has no NPU element type; types: "
                           f"{', '.join(sorted(_BY_NUMPY))}")
        return found

    def __repr__(self) -> str:
        return f"DType.{self.name}"


_CODE = {d: i for i, d in enumerate(DType)}
_BY_CODE = dict(enumerate(DType))
_BY_TEXT = {d.text: d for d in DType}
_BY_NUMPY = {("bfloat16" if d is DType.BF16 else d.storage.name): d for d in DType}

INT_RANGE = {DType.I8: (-128, 127), DType.U8: (0, 255), DType.I16: (-32768, 32767), DType.I32: (-(2**31), 2**31 - 1)}


class Space(enum.IntEnum):
    """A memory space. DRAM is addressed through named regions; SPM and ACC by byte address."""

    DRAM = 0
    SPM = 1
    ACC = 2

    @property
    def text(self) -> str:
        return self.name.lower()


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """Widen raw bf16 bits (uint16) to float32 exactly."""
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(x: np.ndarray) -> np.ndarray:
    """Round float32 to bf16 bits (uint16), nearest even; NaN stays a quiet NaN."""
    u = np.asarray(x, np.float32).view(np.uint32)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(np.asarray(x, np.float32)), ((u >> 16) | 0x40).astype(np.uint16), rounded)


def to_compute(raw: np.ndarray, dtype: DType) -> np.ndarray:
    """Values held in storage array ``raw`` as float32 (float types) or int64 (integer types)."""
    if dtype is DType.BF16:
        return bf16_to_f32(raw)
    return raw.astype(np.float32 if dtype.is_float else np.int64)
