"""The element-wise stream, the core of the vector unit's programs, and the ops that are one stream: binary ops with
numpy broadcasting, select, unary functions, activations and recipes (:mod:`compiler.kernels.vector.recipes`).

A stream is one :class:`~compiler.kernels.common.pipeline.RingPipeline`: ``dma.ld`` brings a tile of each input into
SPM, the vector unit computes it, ``dma.st`` writes it back; tiles are double-buffered. Tensors are row-major in DRAM.
Results are computed in f32 for float types (i64 for integers) and rounded once when written.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from compiler.errors import CompileError
from compiler.kernels.common.epilogue import activation_ops
from compiler.kernels.common.pipeline import RingPipeline, vector_config
from compiler.kernels.common.target import Target
from compiler.kernels.vector.strides import broadcast_strides, collapse, row_major
from isa import Act, BinOp, DmaCopy, DType, Instr, Queue, Region, Space, VecBinary, VecUnary, View
from isa.view import MAX_EXTENT

F32 = DType.F32


def _tiles(shape: tuple[int, ...], limit: int):
    """Yield (index of the tile's first element per dim, tile shape) covering ``shape`` with <= ``limit`` elements."""
    d = next(i for i in range(len(shape)) if math.prod(shape[i + 1:]) <= limit)
    inner = math.prod(shape[d + 1:])
    chunk = max(1, min(limit // inner, MAX_EXTENT))
    for outer in np.ndindex(*shape[:d]):
        for c0 in range(0, shape[d], chunk):
            c = min(chunk, shape[d] - c0)
            yield (*outer, c0) + (0,) * (len(shape) - d - 1), (1,) * d + (c,) + tuple(shape[d + 1:])


Recipe = Callable[[View, list[View], tuple[int, ...]], list[Instr]]
"""The vector instructions of one tile: ``recipe(y, xs, shape)`` with the SPM views of the output tile ``y`` and of
each input's tile ``xs`` (a broadcast input is read with stride 0). A recipe may overwrite ``xs[0]`` as scratch when
the first input has the output's shape (every unary one of :mod:`compiler.kernels.vector.recipes` does); ``y`` is
f32 scratch until its last write."""


MIN_TILES = 8   # a stream that fits the SPM whole still runs in 8 tiles, so loads, compute and stores overlap


def overlap_cap(total: int, floor: int) -> int:
    """The most units (elements, rows, ...) a tile may hold so that ``total`` units make at least MIN_TILES tiles (so
    loads, compute and stores overlap), but at least ``floor``."""
    return max(-(-total // MIN_TILES), floor)


def _dram_box(start: tuple[int, ...], strides: tuple[int, ...], dtype: DType, region: str) -> View:
    """The DRAM view of a tile starting at element index ``start`` of ``region`` (strides in elements)."""
    return View(Space.DRAM, sum(i * st for i, st in zip(start, strides)) * dtype.size, dtype,
                tuple(st * dtype.size for st in strides), region)


@dataclass(frozen=True)
class Operand:
    """A tensor a stream reads or writes: its DRAM ``region`` and its element strides per dimension of the stream's
    output shape (0 where an input is broadcast)."""

    region: str
    strides: tuple[int, ...]


def stream(pipe: RingPipeline, out_shape: tuple[int, ...], ins: list[Operand], out: Operand, dtypes: list[DType],
           out_dtype: DType, spm: int, compute: Recipe, scratch: tuple[DType, ...] = ()) -> None:
    """Append to ``pipe`` the steps of an element-wise stream over ``out_shape``: tiles of at most half of ``spm``
    bytes (two ring slots of every buffer, and at least MIN_TILES tiles); per tile load every input (``dtypes``) into
    a contiguous SPM slot (a broadcast input once per distinct element), the vector instructions
    ``compute(dst, srcs, shape)`` gives for the tile's SPM views, and store the output tile (``out_dtype``).
    ``scratch``: the types of dense tile-shaped SPM buffers (one each, after the rings: only the vector unit touches
    them) that ``compute`` finds after the inputs' views in ``srcs``."""
    shape, strides = collapse(out_shape, *(o.strides for o in ins), out.strides)
    if len(shape) > 5:
        raise CompileError(f"shape {out_shape} does not collapse to 5 dimensions")
    sizes = [d.size for d in dtypes] + [out_dtype.size]
    extra = sum(d.size for d in scratch)
    limit = max(1, (spm // 2) // sum(sizes) if not extra else spm // (2 * sum(sizes) + extra))   # two ring slots
    limit = min(limit, overlap_cap(math.prod(shape), 4096))
    if len(set(sizes + [d.size for d in scratch])) > 1 and limit >= 4:   # mixed sizes: keep every slot word-aligned
        limit -= limit % 4
    slot_bytes = [limit * s for s in sizes]
    for start, tshape in _tiles(shape, limit):
        base, offs, views = 0, [], []
        for size in slot_bytes:
            offs.append(base + pipe.slot * size)
            base += 2 * size
        temps = []
        for d in scratch:
            temps.append(View(Space.SPM, base, d, tuple(st * d.size for st in row_major(tshape))))
            base += limit * d.size
        loads = []
        for k, d in enumerate(dtypes + [out_dtype]):
            # a broadcast input (DRAM stride 0) is loaded once per distinct element and read with stride 0
            held = tuple(1 if k < len(ins) and st == 0 else e for e, st in zip(tshape, strides[k]))
            dense = row_major(held)
            views.append(View(Space.SPM, offs[k], d, tuple(0 if h < e else s * d.size
                                                           for h, e, s in zip(held, tshape, dense))))
            if k < len(ins):
                loads.append(DmaCopy(queue=Queue.DMA_LD, shape=held,
                                     dst=View(Space.SPM, offs[k], d, tuple(s * d.size for s in dense)),
                                     src=_dram_box(start, strides[k], d, ins[k].region)))
        store = DmaCopy(queue=Queue.DMA_ST, shape=tshape, src=views[-1],
                        dst=_dram_box(start, strides[-1], out_dtype, out.region))
        pipe.step(loads, compute(views[-1], views[:-1] + temps, tshape), [store])


def binary(op: BinOp, a_shape: tuple[int, ...], b_shape: tuple[int, ...], dtype: DType, target: Target,
           act: tuple[Act, float, float] | None = None):
    """``Y = act(A op B)`` with numpy broadcasting; regions A, B, Y (all ``dtype``, row-major). ``act`` is a fused
    activation ``(fn, lo, hi)`` (relu or clamp) that the binary op applies in the same pass (its ``act``)."""
    spm = target.spm
    out = tuple(np.broadcast_shapes(tuple(a_shape), tuple(b_shape)))
    pipe = RingPipeline()
    fused = {} if act is None else dict(act=act[0], lo=act[1], hi=act[2])

    def compute(dst, srcs, shape):
        return [VecBinary(op=op, shape=shape, dst=dst, src0=srcs[0], src1=srcs[1], **fused)]

    stream(pipe, out, [Operand("A", broadcast_strides(a_shape, out)), Operand("B", broadcast_strides(b_shape, out))],
           Operand("Y", row_major(out)), [dtype, dtype], dtype, spm, compute)
    es = dtype.size
    return pipe.program(vector_config(spm), (Region("A", 0, math.prod(a_shape) * es),
                                             Region("B", 1, math.prod(b_shape) * es),
                                             Region("Y", 2, math.prod(out) * es)))


def select(out: tuple[int, ...], strides: tuple[tuple[int, ...], ...], sizes: tuple[int, ...], dtype: DType,
           target: Target):
    """``Y = M ? X : Z`` bit for bit, as ``Z ^ ((X ^ Z) & M)`` on the integer view of the bytes (M: all ones where
    the condition holds, else 0), so NaN or inf in the branch not taken cannot leak. ``strides``: element strides of
    X, Z and M per dimension of ``out`` (0 where broadcast); ``sizes``: their bytes; regions X, Z, M, Y. ``dtype``
    is the integer type of the elements' size (i32 for f32, i8 for int8)."""
    spm = target.spm
    pipe = RingPipeline()

    def compute(dst, srcs, shape):
        x, z, m = srcs
        return [VecBinary(op=BinOp.XOR, shape=shape, dst=dst, src0=x, src1=z),
                VecBinary(op=BinOp.AND, shape=shape, dst=dst, src0=dst, src1=m),
                VecBinary(op=BinOp.XOR, shape=shape, dst=dst, src0=dst, src1=z)]

    stream(pipe, tuple(out), [Operand(r, s) for r, s in zip("XZM", strides)], Operand("Y", row_major(out)),
           [dtype] * 3, dtype, spm, compute)
    return pipe.program(vector_config(spm), tuple(Region(r, i, max(1, n)) for i, (r, n) in
                                                  enumerate(zip("XZMY", (*sizes, math.prod(out) * dtype.size)))))


def unary(fn: Act, shape: tuple[int, ...], dtype: DType, target: Target, lo: float = 0, hi: float = 0):
    """``Y = fn(X)`` (relu, clamp(lo, hi), sigmoid, tanh, gelu, erf, exp, ...); regions X, Y."""
    spm = target.spm
    pipe = RingPipeline()
    stream(pipe, tuple(shape), [Operand("X", row_major(shape))], Operand("Y", row_major(shape)), [dtype], dtype,
           spm, lambda dst, srcs, s: [VecUnary(fn=fn, shape=s, dst=dst, src=srcs[0], lo=lo, hi=hi)])
    n = math.prod(shape) * dtype.size
    return pipe.program(vector_config(spm), (Region("X", 0, n), Region("Y", 1, n)))


def activation(act: str, shape: tuple[int, ...], dtype: DType, target: Target, lo: float = 0.0, hi: float = 0.0,
               alpha: float = 1.0):
    """``Y = act(X)`` for any activation of :mod:`compiler.kernels.common.epilogue` (``gelu_tanh``: eight instructions,
    ``silu``: two, or three with ``alpha``) as one stream: per tile all of the activation's instructions, the output
    slot serving as their scratch; regions X, Y."""
    spm = target.spm
    pipe = RingPipeline()
    stream(pipe, tuple(shape), [Operand("X", row_major(shape))], Operand("Y", row_major(shape)), [dtype], dtype,
           spm, lambda dst, srcs, s: activation_ops(act, s, dst, srcs[0], dst, lo, hi, alpha))
    n = math.prod(shape) * dtype.size
    return pipe.program(vector_config(spm), (Region("X", 0, n), Region("Y", 1, n)))


def pointwise(recipe: Recipe, inputs: list[tuple[str, tuple[int, ...]]], out_shape: tuple[int, ...], target: Target,
              dtype: DType = F32):
    """``Y = recipe(inputs)`` element-wise with numpy broadcasting, all its instructions on each tile in turn (one
    DRAM pass however many instructions); regions: the ``inputs`` by name in order, then Y (all ``dtype``)."""
    out = tuple(out_shape)
    pipe = RingPipeline()
    stream(pipe, out, [Operand(name, broadcast_strides(shape, out)) for name, shape in inputs],
           Operand("Y", row_major(out)), [dtype] * len(inputs), dtype, target.spm, recipe)
    regions = tuple(Region(name, k, math.prod(shape) * dtype.size) for k, (name, shape) in enumerate(inputs))
    return pipe.program(vector_config(target.spm), regions + (Region("Y", len(inputs), math.prod(out) * dtype.size),))
