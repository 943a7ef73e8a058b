"""What a weight-only quantized GEMM's weight is (:class:`WeightFormat`) and how a program of it is cut and scheduled
(:class:`DequantTiling`), with the two schemes that apply a quantized weight:

- ``array``: the matrix unit multiplies the f32 activations by one byte per code (``mxu.mm`` f32 x i8/u8,
  weight-only), into one f32 partial sum per K block; the vector unit applies the zero point and the scale to those
  sums, ``C += sum_blk (A . Q_blk - zp * rowsum(A_blk)) * scale_blk``, so its work per weight is ``M / block`` (and
  the unpacking of 4-bit codes), not a dequantization of every weight;
- ``vector``: the vector unit dequantizes each weight tile to f32, ``(q - zp) * scale`` (one f32 rounding, as
  onnxruntime), for an f32 ``mxu.mm``: its work per weight does not grow with M (prefill), and fp8 codes, which are
  not integers, take only this one.
"""

from __future__ import annotations

from dataclasses import dataclass

from isa import DType

FORMATS = ("int4", "uint4", "int8", "uint8", "fp8")
SCHEMES = ("array", "vector")
NIBBLE_OFFSET = 8
"""What an int4 code adds to itself in DRAM: ``q + 8`` (0..15) makes every 4-bit code unsigned, so that unpacking
it is a mask and a shift; the zero point grows by the same 8 (a constant transform at compile time)."""


@dataclass(frozen=True)
class WeightFormat:
    """How the weight is quantized: ``kind`` (one of :data:`FORMATS`), the block size along K (elements; 0: one
    scale per column), and the zero point: ``zp`` one value for all, or ``per_block_zp`` (an image, one per block
    and column)."""

    kind: str
    block: int
    zp: int = 0
    per_block_zp: bool = False

    @property
    def codes_per_byte(self) -> int:
        """2 for the 4-bit kinds (two codes a byte), else 1."""
        return 2 if self.nibbles else 1

    @property
    def nibbles(self) -> bool:
        """Whether codes are 4-bit, two a byte."""
        return self.kind in ("int4", "uint4")

    @property
    def offset(self) -> int:
        """What the stored code adds to the code (:data:`NIBBLE_OFFSET` for int4, else 0)."""
        return NIBBLE_OFFSET if self.kind == "int4" else 0

    @property
    def stored_zp(self) -> int:
        """The uniform zero point of the stored codes (``zp + offset``; a per-block image adds ``offset`` too)."""
        return self.zp + self.offset

    @property
    def code_dtype(self) -> DType:
        """The element type the stored codes are read as, one per byte (unpacked 4-bit codes are u8; fp8 bytes as
        i8, their sign in the top bit)."""
        return DType.U8 if self.kind in ("uint8", "int4", "uint4") else DType.I8

    @property
    def schemes(self) -> tuple[str, ...]:
        """The schemes that can apply this format: fp8 codes are no integers the array could take."""
        return ("vector",) if self.kind == "fp8" else SCHEMES

    @property
    def zero_term(self) -> bool:
        """Whether the ``array`` scheme subtracts ``zp * rowsum(A_blk)`` (a zero point other than 0)."""
        return self.per_block_zp or self.stored_zp != 0


@dataclass(frozen=True)
class DequantTiling:
    """Tile sizes (elements): ``tm`` rows of A, ``tn`` columns, ``tk`` reduction depth (a multiple of the k quantum:
    :func:`compiler.kernels.dequant.plan.k_quantum`), and the ``scheme`` (one of :data:`SCHEMES`)."""

    tm: int
    tn: int
    tk: int
    scheme: str = "array"
