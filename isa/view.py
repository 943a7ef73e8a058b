"""Operands: affine strided views over one memory space.

A view over an iteration space ``shape[e0, ..., e_{n-1}]`` (outermost first) names the element of iteration point
``p`` at byte address ``base + sum(p[i] * strides[i])``. Strides are signed byte counts; a stride of 0 on a source
broadcasts, a stride of 0 on a destination marks a reduction dimension.
"""

from __future__ import annotations

from dataclasses import dataclass

from isa.dtypes import DType, Space
from isa.errors import IsaError

MAX_DIMS = 5
MAX_EXTENT = 0xFFFF
NAME_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"
_NAME_SET = frozenset(NAME_CHARS)


def is_name(text: str) -> bool:
    """Whether ``text`` is a non-empty run of :data:`NAME_CHARS` (a region or semaphore name)."""
    return bool(text) and _NAME_SET.issuperset(text)


@dataclass(frozen=True, slots=True)
class View:
    """``space:base<dtype>{strides}``; DRAM views add a region name: ``dram:A+0x40<i8>{64,1}``.

    base: byte address in SPM/ACC, byte offset inside the region for DRAM. strides: bytes, outermost first.
    """

    space: Space
    base: int
    dtype: DType
    strides: tuple[int, ...]
    region: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.space, Space):
            raise IsaError(f"view space must be a Space, not {self.space!r}")
        if (self.space is Space.DRAM) != (self.region is not None):
            raise IsaError("a DRAM view needs a region name and an SPM/ACC view must not have one")
        if self.region is not None and not is_name(self.region):
            raise IsaError(f"region name must be letters, digits and '_', not {self.region!r}")
        if not 0 <= self.base < 2**32:
            raise IsaError(f"view base must be in [0, 2**32), not {self.base}")
        if len(self.strides) > MAX_DIMS + 1:
            raise IsaError(f"a view has at most {MAX_DIMS + 1} strides, not {len(self.strides)}")
        for s in self.strides:
            if not -(2**31) <= s < 2**31:
                raise IsaError(f"stride must fit in a signed 32-bit integer, not {s}")

    def span(self, shape: tuple[int, ...], extra: tuple[tuple[int, int], ...] = ()) -> tuple[int, int]:
        """Byte range [lo, hi) touched for ``shape`` (plus extra (extent, stride) pairs), relative to the space."""
        lo = hi = self.base
        for e, s in zip(shape, self.strides):
            if s > 0:
                hi += (e - 1) * s
            else:
                lo += (e - 1) * s
        for e, s in extra:
            if s > 0:
                hi += (e - 1) * s
            else:
                lo += (e - 1) * s
        return lo, hi + self.dtype.size

    def with_strides(self, strides: tuple[int, ...]) -> View:
        return View(self.space, self.base, self.dtype, strides, self.region)
