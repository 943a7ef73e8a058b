"""The one dtype table (compiler/frontend/dtypes.py): how each graph element type is held on the NPU, and values
across that boundary (narrowed int64 range-checked, widened back exactly; bool as bytes; bf16 as its bits)."""

import numpy as np
import pytest

from compiler.errors import CompileError, ValueRangeError
from compiler.frontend.dtypes import (
    BFLOAT16,
    GRAPH_DTYPES,
    from_storage,
    is_narrowed,
    npu_constant,
    npu_dtype,
    npu_view,
    to_storage,
)
from isa import DType

EXPECTED = {"float32": (DType.F32, False), "float16": (DType.F16, False), "bfloat16": (DType.BF16, False),
            "float64": (DType.F32, True), "int8": (DType.I8, False), "uint8": (DType.U8, False),
            "int16": (DType.I16, False), "uint16": (DType.I32, False), "int32": (DType.I32, False),
            "uint32": (DType.I32, True), "int64": (DType.I32, True), "uint64": (DType.I32, True),
            "bool": (DType.U8, False)}


def test_every_onnx_numeric_type_and_bool_has_one_storage():
    assert sorted(d.name for d in GRAPH_DTYPES) == sorted(EXPECTED)
    for d in GRAPH_DTYPES:
        assert (npu_dtype(d), is_narrowed(d)) == EXPECTED[d.name]
    assert npu_view(np.int64) == np.int32 and npu_view(np.bool_) == np.uint8 and npu_view(np.float64) == np.float32
    assert npu_view(BFLOAT16) == BFLOAT16   # a lowering sees bf16 as itself (stored as raw bits)
    with pytest.raises(CompileError, match=r"element type complex64 has no NPU storage; the compiler takes f32, "):
        npu_dtype(np.complex64)


@pytest.mark.parametrize("dtype", [np.int64, np.uint32, np.uint64, np.uint16, np.int8, np.bool_, np.float64])
def test_values_round_trip_through_storage(dtype):
    rng = np.random.default_rng(1)
    if np.dtype(dtype).kind == "b":
        x = rng.random(12) < 0.5
    elif np.dtype(dtype).kind == "f":
        x = rng.standard_normal(12).astype(dtype)
    else:
        info = np.iinfo(dtype)
        lo, hi = max(info.min, -(2 ** 31)), min(info.max, 2 ** 31 - 1)
        x = np.concatenate([[lo, hi], rng.integers(lo, hi, 10, endpoint=True)]).astype(dtype)
    stored = to_storage(x, dtype, "input 'x'")
    assert stored.dtype == npu_dtype(dtype).storage
    back = from_storage(stored, dtype)
    assert back.dtype == np.dtype(dtype)
    if np.dtype(dtype) == np.float64:   # narrowed to float32: rounded, not refused
        np.testing.assert_array_equal(back, x.astype(np.float32).astype(np.float64))
    else:
        np.testing.assert_array_equal(back, x)


def test_bf16_is_stored_as_its_bits():
    x = np.array([1.5, -2.0, 3.25], BFLOAT16)
    stored = to_storage(x, BFLOAT16, "x")
    assert stored.dtype == np.uint16 and stored.tolist() == x.view(np.uint16).tolist()
    assert from_storage(stored, BFLOAT16).tolist() == x.tolist()


@pytest.mark.parametrize("value, dtype", [(2 ** 31, np.int64), (-(2 ** 31) - 1, np.int64), (2 ** 40, np.uint64),
                                          (2 ** 32 - 1, np.uint32)])
def test_narrowed_integers_outside_int32_are_refused_naming_the_value(value, dtype):
    x = np.array([0, value, 1], dtype)
    with pytest.raises(ValueRangeError, match=rf"^input 'input_ids' holds {value}, outside the NPU's i32 range "
                                              rf"\[-2147483648, 2147483647\] that {np.dtype(dtype).name} tensors are "
                                              rf"narrowed to; use values in that range$"):
        to_storage(x, dtype, "input 'input_ids'")


def test_float64_beyond_float32_is_refused_not_made_infinite():
    x = np.array([1.0, -np.inf, np.nan, -9.01766344e223, 1e-310])
    with pytest.raises(ValueRangeError, match=r"^input 'x' holds -9.01766e\+223, beyond the NPU's f32 range "
                                              r"\(\+-3.40282e\+38\) that float64 tensors are narrowed to"):
        to_storage(x, np.float64, "input 'x'")
    kept = from_storage(to_storage(x[[0, 1, 2, 4]], np.float64, "x"), np.float64)   # infinities, NaN, subnormals
    assert kept[0] == 1 and kept[1] == -np.inf and np.isnan(kept[2]) and kept[3] == 0


def test_int64_constants_for_the_npu_are_range_checked_at_compile_time():
    assert npu_constant("idx", np.array([3, -1], np.int64)).dtype == np.int32
    with pytest.raises(ValueRangeError, match=r"^constant 'idx' holds 4294967296, outside the NPU's i32 range"):
        npu_constant("idx", np.array([3, 2 ** 32], np.int64))
