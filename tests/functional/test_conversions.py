"""The numba dtype conversions against numpy (the numpy helpers are what the reference model uses)."""

from __future__ import annotations

import numpy as np
import pytest

from isa import DType
from npusim.functional import kernels as K

FLOAT_CODES = [DType.F16, DType.BF16, DType.F32]


def f32_patterns() -> np.ndarray:
    """Random f32 bit patterns plus every exponent with edge mantissas (ties, subnormals, inf, NaN)."""
    rng = np.random.default_rng(0)
    rand = rng.integers(0, 2**32, 400_000, dtype=np.uint64).astype(np.uint32)
    exps = np.arange(256, dtype=np.uint32) << 23
    mants = np.array([0, 1, 0xFFF, 0x1000, 0x1001, 0x2000, 0x3000, 0x7FFF, 0x8000, 0x8001, 0x18000, 0x7FFFFF,
                      0x7FF000, 0x7FE000, 0x7FEFFF, 0x400000, 0x400001], np.uint32)
    edge = (exps[:, None] | mants[None, :]).ravel()
    return np.concatenate([rand, edge, edge | 0x80000000]).view(np.float32)


def test_decode_every_f16_and_bf16_pattern():
    h = np.arange(2**16, dtype=np.uint16)
    raw = h.view(np.uint8)
    f16 = K.decode_f32(raw, DType.F16.code)
    ref = h.view(np.float16).astype(np.float32)
    same = (f16.view(np.uint32) == ref.view(np.uint32)) | (np.isnan(f16) & np.isnan(ref))
    assert same.all()
    assert np.array_equal(K.decode_f32(raw, DType.BF16.code).view(np.uint32), K.bf16_to_f32(h).view(np.uint32))


@pytest.mark.parametrize("dt", list(DType), ids=lambda d: d.text)
def test_encode_f32_matches_numpy_narrow(dt):
    x = f32_patterns()
    got = K.encode_f32(x, dt.code)
    assert np.array_equal(got, K.narrow(x, dt).view(np.uint8))


def test_bf16_helper_hand_values():
    x = np.array([1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8), np.inf, np.float32(3.4028235e38), np.nan], np.float32)
    assert list(K.f32_to_bf16(x)) == [0x3F80, 0x3F82, 0xBF80, 0x7F80, 0x7F80, 0x7FC0]


@pytest.mark.parametrize("dt", list(DType), ids=lambda d: d.text)
def test_encode_i64_rounds_through_f32_and_saturates(dt):
    rng = np.random.default_rng(1)
    v = np.concatenate([rng.integers(-(2**63), 2**63 - 1, 100_000), rng.integers(-70_000, 70_000, 10_000),
                        np.array([2**24 + 1, 2**24 + 3, -(2**63), 2**63 - 1, 2**62 + 2**38, 65520, 65519])])
    got = K.encode_i64(v, dt.code)
    if dt.is_float:
        expect = K.narrow(v.astype(np.float32), dt)
    else:
        expect = np.clip(v, *(np.iinfo(dt.storage).min, np.iinfo(dt.storage).max)).astype(dt.storage)
    assert np.array_equal(got, expect.view(np.uint8))


def test_decode_i64_from_floats():
    x = np.array([2.5, 3.5, -2.5, np.nan, np.inf, -np.inf, 1e30, -0.5, 7.0], np.float32)
    assert list(K.decode_i64(x.view(np.uint8), DType.F32.code)) == [2, 4, -2, 0, 2**63 - 1, -(2**63), 2**63 - 1, 0, 7]


def test_scalar_bytes():
    assert list(K.scalar_bytes(1.5, DType.F16)) == list(np.float16(1.5).tobytes())
    assert list(K.scalar_bytes(-2, DType.I16)) == [0xFE, 0xFF]
    assert list(K.scalar_bytes(float("nan"), DType.F32).view(np.uint32)) == [0x7FC00000]


def test_rshift_rne():
    for v in range(-40, 41):
        for s in range(4):
            q, r = divmod(v, 2**s)  # floor division, 0 <= r < 2**s
            expect = q + 1 if 2 * r > 2**s or (2 * r == 2**s and q % 2) else q
            assert K.rshift_rne(v, s) == expect, (v, s)
