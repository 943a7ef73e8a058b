"""The one table of element types: which ones a :class:`compiler.ir.Graph` may hold, and how the NPU stores each.

Every ONNX numeric element type (and bool) is legal in the graph; compile-time constants of any of them fold. On the
NPU (DRAM regions, kernels) a tensor is held in the :class:`isa.DType` of :data:`NPU_STORAGE`:

- a bool is a byte holding 0 or 1 (``u8``);
- int64 (and uint32, uint64) is held as ``i32``, *narrowed*: values outside int32 are refused where they enter (a
  graph input written to DRAM, a constant put in the weights: :class:`compiler.errors.ValueRangeError`), and a graph
  output is widened back to its own type when read, so outputs have the model's dtype;
- float64 is computed in float32 (narrowed: rounded; a finite value beyond float32's range is refused where it
  enters, as it would become an infinity; a run's report names such tensors);
- uint16 is held as ``i32`` (exactly); every other type as itself.

Everything that places a tensor on the NPU reads this table: :func:`npu_dtype` (the storage type),
:func:`to_storage` / :func:`from_storage` (values across the boundary), :func:`npu_view` (the numpy type a lowering
sees, which :class:`compiler.ops.OpSpec`'s dtype sets are written in).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from onnx import helper

from compiler.errors import CompileError, ValueRangeError
from compiler.ir import short_dtype
from isa import DType

BFLOAT16 = np.dtype(helper.tensor_dtype_to_np_dtype(16))   # ml_dtypes' bfloat16 (onnx.TensorProto.BFLOAT16)


@dataclass(frozen=True)
class Storage:
    """How the NPU holds one graph element type: as ``dtype``; ``narrowed`` when some values of the graph type have
    no exact counterpart there (integers outside it are refused, float64 is rounded to float32)."""

    dtype: DType
    narrowed: bool = False


NPU_STORAGE: dict[np.dtype, Storage] = {
    np.dtype(np.float32): Storage(DType.F32),
    np.dtype(np.float16): Storage(DType.F16),
    BFLOAT16: Storage(DType.BF16),
    np.dtype(np.float64): Storage(DType.F32, narrowed=True),
    np.dtype(np.int8): Storage(DType.I8),
    np.dtype(np.uint8): Storage(DType.U8),
    np.dtype(np.int16): Storage(DType.I16),
    np.dtype(np.uint16): Storage(DType.I32),
    np.dtype(np.int32): Storage(DType.I32),
    np.dtype(np.uint32): Storage(DType.I32, narrowed=True),
    np.dtype(np.int64): Storage(DType.I32, narrowed=True),
    np.dtype(np.uint64): Storage(DType.I32, narrowed=True),
    np.dtype(np.bool_): Storage(DType.U8),
}
"""Graph element type -> its NPU storage. A type absent here (strings, complex, float8) is not taken by the
compiler (:class:`compiler.errors.UnsupportedDTypeError`)."""

GRAPH_DTYPES = tuple(NPU_STORAGE)
"""The element types a graph tensor (constant or not) may have."""


def graph_dtype_names() -> tuple[str, ...]:
    """The short names of :data:`GRAPH_DTYPES` (``f32``, ``i64``, ``bool``, ...), for messages."""
    return tuple(short_dtype(d) for d in GRAPH_DTYPES)


def storage(dtype: np.dtype) -> Storage:
    """The NPU storage of graph element type ``dtype``; CompileError for a type the compiler does not take."""
    try:
        return NPU_STORAGE[np.dtype(dtype)]
    except (KeyError, TypeError):
        name = getattr(dtype, "__name__", None) or str(dtype)
        raise CompileError(f"element type {name} has no NPU storage; the compiler takes "
                           f"{', '.join(graph_dtype_names())}") from None


def npu_dtype(dtype: np.dtype) -> DType:
    """The :class:`isa.DType` a tensor of graph element type ``dtype`` is stored as on the NPU."""
    return storage(dtype).dtype


def is_narrowed(dtype: np.dtype) -> bool:
    """Whether the NPU holds ``dtype`` in a narrower type (int64, uint32, uint64 as i32; float64 as f32)."""
    return storage(dtype).narrowed


def npu_view(dtype: np.dtype) -> np.dtype:
    """The numpy type whose values a lowering sees for graph type ``dtype`` (``bfloat16`` stays itself; bool is
    ``uint8``, int64 ``int32``, float64 ``float32``)."""
    dtype = np.dtype(dtype)
    s = storage(dtype).dtype
    return dtype if s is DType.BF16 else s.storage


def to_storage(value: np.ndarray, dtype: np.dtype, what: str) -> np.ndarray:
    """``value`` (of graph type ``dtype``) as the NPU stores it: its storage type's numpy array (bf16 as raw bits).
    An integer value outside the storage type, or a finite float64 beyond float32's largest, is a
    :class:`ValueRangeError` naming ``what`` (e.g. ``"input 'input_ids'"``) and the value."""
    dtype = np.dtype(dtype)
    s = storage(dtype).dtype
    value = np.asarray(value, dtype)
    if s is DType.BF16:
        return value.view(np.uint16)
    if storage(dtype).narrowed and value.size:
        _check_range(value, dtype, s, what)
    return value.astype(s.storage, copy=False)


def _check_range(value: np.ndarray, dtype: np.dtype, s: DType, what: str) -> None:
    """ValueRangeError when ``value`` holds an integer outside storage ``s``, or a finite float beyond its largest
    (it would become an infinity: a silent wrong answer)."""
    if dtype.kind == "f":
        finite = np.abs(value[np.isfinite(value)])
        top = float(np.finfo(s.storage).max)
        if finite.size and finite.max() > top:
            bad = value.ravel()[np.flatnonzero(np.isfinite(value.ravel()) & (np.abs(value.ravel()) > top))[0]]
            raise ValueRangeError(f"{what} holds {bad:.6g}, beyond the NPU's {s.text} range (+-{top:.6g}) that "
                                  f"{dtype.name} tensors are narrowed to; use values in that range")
        return
    info = np.iinfo(s.storage)
    lo, hi = value.min(), value.max()
    if lo < info.min or hi > info.max:
        bad = lo if lo < info.min else hi
        raise ValueRangeError(f"{what} holds {bad}, outside the NPU's {s.text} range [{info.min}, {info.max}] that "
                              f"{dtype.name} tensors are narrowed to; use values in that range")


def from_storage(raw: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Values stored on the NPU (``raw``, of graph type ``dtype``'s storage) in graph type ``dtype`` (widened)."""
    dtype = np.dtype(dtype)
    if storage(dtype).dtype is DType.BF16:
        return np.asarray(raw).view(dtype)
    return np.asarray(raw).astype(dtype, copy=False)


def npu_constant(name: str, data: np.ndarray) -> np.ndarray:
    """Constant ``name``'s value as a lowering puts it in the weights for the NPU to read: in its storage type, an
    int64 range-checked (:class:`ValueRangeError` naming the constant and the value)."""
    data = np.asarray(data)
    return to_storage(data, data.dtype, f"constant {name!r}")
