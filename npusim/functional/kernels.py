"""Numba kernels of the functional model: the arithmetic of every instruction, on raw byte buffers.

Each kernel takes whole memories as 1-D ``uint8`` arrays and one ``int64`` geometry array ``g``: the iteration
shape left-padded with 1s to ``ND`` dimensions, then per operand ``base, strides[ND]`` (bytes, padded strides 0).
Op codes, dtype codes (``DType.code``) and immediates are plain ints/floats, so every kernel compiles once, whatever
the shapes, strides, alignment and dtypes. Operands are gathered into contiguous arrays before anything is written,
computed in f32 or i64, converted, and scattered back in row-major order (a later write to the same bytes wins).

The numpy helpers at the end convert whole arrays between storage and f32 for the reference model and immediates.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from isa import dtypes
from isa.dtypes import INT_RANGE, DType, bf16_to_f32

ND = 5
I8, U8, I16, I32, F16, BF16, F32 = range(7)
SIZE = np.array([1, 1, 2, 4, 2, 2, 4], np.int64)
INT_LO = np.array([-128, 0, -32768, -(2**31)], np.int64)
INT_HI = np.array([127, 255, 32767, 2**31 - 1], np.int64)
I64_MIN, I64_MAX = -(2**63), 2**63 - 1
F32_NAN_BITS, F16_NAN_BITS, BF16_NAN_BITS = 0x7FC00000, 0x7E00, 0x7FC0
SQRT2 = math.sqrt(2.0)
RQ_OK = 1 << 40
"""requant's return value when every shift is valid (any other value is the first bad shift)."""

# op codes: isa.instructions.BinOp / Act / Reduce values
ADD, SUB, MUL, DIV, MIN, MAX, SHL, SHR, AND, OR, XOR, CMPGT, CMPEQ = range(13)
MOV, RELU, CLAMP, ABS, NEG, EXP, LOG, RECIP, SQRT, RSQRT, SIGMOID, TANH, GELU, ERF = range(14)
R_NONE, R_SUM, R_MAX, R_MIN = range(4)

_jit = njit(cache=True, error_model="numpy", nogil=True)


# ---------------------------------------------------------------- addressing


@_jit
def _base(g, i):
    return g[ND + i * (ND + 1)]


@_jit
def _strides(g, i):
    o = ND + i * (ND + 1) + 1
    return g[o:o + ND]


@_jit
def offsets(shape, base, strides):
    """Byte address of every point of an ND-dim ``shape``, row-major (int64[prod(shape)])."""
    n = 1
    for e in shape:
        n *= e
    out = np.empty(n, np.int64)
    if n == 0:
        return out
    idx = np.zeros(ND, np.int64)
    inner, step = shape[ND - 1], strides[ND - 1]
    off, t = base, 0
    while True:
        for i in range(inner):
            out[t] = off + i * step
            t += 1
        if t == n:
            return out
        d = ND - 2
        while True:
            idx[d] += 1
            off += strides[d]
            if idx[d] < shape[d]:
                break
            off -= strides[d] * shape[d]
            idx[d] = 0
            d -= 1


@_jit
def gather_at(buf, offs, es):
    """Bytes of ``es``-byte elements at ``offs``, packed contiguously (uint8[len(offs) * es])."""
    out = np.empty(offs.size * es, np.uint8)
    _pack_runs(out, buf, offs, es)
    return out


@_jit
def scatter_at(buf, offs, es, raw):
    """Write packed ``es``-byte elements to ``offs`` in order (later writes win on overlap)."""
    _unpack_runs(buf, offs, raw, es)


@_jit
def _runs(shape, base, strides, es):
    """(start offsets, bytes per run): the innermost dimensions that lie back to back in memory (each one's stride
    the byte size of everything inside it) are copied as one run."""
    outer, run = shape.copy(), es
    for d in range(ND - 1, -1, -1):
        if outer[d] == 1:
            continue
        if strides[d] != run:
            break
        run *= outer[d]
        outer[d] = 1
    return offsets(outer, base, strides), run


@_jit
def _aligned(offs, *sizes):
    """Whether every offset and size is a multiple of 4 (bytes): the runs can be moved as u32 words."""
    for n in sizes:
        if n % 4:
            return False
    for o in offs:
        if o % 4:
            return False
    return True


@_jit
def _pack_runs(out, buf, offs, run):
    """out[i * run:(i + 1) * run] = buf[offs[i]:offs[i] + run] for each i, by words when aligned (a byte loop moves
    about 0.9 GB/s here, a word loop 3)."""
    if _aligned(offs, run, out.size, buf.size):
        o32, b32, w = out.view(np.uint32), buf.view(np.uint32), run >> 2
        for i in range(offs.size):
            o, s = i * w, offs[i] >> 2
            for b in range(w):
                o32[o + b] = b32[s + b]
        return
    for i in range(offs.size):
        o, s = i * run, offs[i]
        for b in range(run):
            out[o + b] = buf[s + b]


@_jit
def _unpack_runs(buf, offs, raw, run):
    """buf[offs[i]:offs[i] + run] = raw[i * run:(i + 1) * run] for each i in order (later writes win on overlap)."""
    if _aligned(offs, run, raw.size, buf.size):
        r32, b32, w = raw.view(np.uint32), buf.view(np.uint32), run >> 2
        for i in range(offs.size):
            o, s = offs[i] >> 2, i * w
            for b in range(w):
                b32[o + b] = r32[s + b]
        return
    for i in range(offs.size):
        o, s = offs[i], i * run
        for b in range(run):
            buf[o + b] = raw[s + b]


@_jit
def gather(buf, shape, base, strides, es):
    """The ``es``-byte elements of a view over ``shape``, packed in row-major order."""
    offs, run = _runs(shape, base, strides, es)
    out = np.empty(offs.size * run, np.uint8)
    _pack_runs(out, buf, offs, run)
    return out


@_jit
def scatter(buf, shape, base, strides, es, raw):
    """Write packed elements to a view over ``shape`` in row-major order (later writes win on overlap)."""
    offs, run = _runs(shape, base, strides, es)
    _unpack_runs(buf, offs, raw, run)


@_jit
def _load(buf, g, i, code):
    return gather(buf, g[:ND], _base(g, i), _strides(g, i), SIZE[code])


@_jit
def _save(buf, g, i, code, raw):
    scatter(buf, g[:ND], _base(g, i), _strides(g, i), SIZE[code], raw)


# ---------------------------------------------------------------- scalar conversions (bits as int64)


@_jit
def _f16_to_f32_bits(h):
    sign = (h & 0x8000) << 16
    e, m = (h >> 10) & 0x1F, h & 0x3FF
    if e == 31:
        return sign | 0x7F800000 | (m << 13)
    if e == 0:
        if m == 0:
            return sign
        e = 1
        while (m & 0x400) == 0:
            m <<= 1
            e -= 1
        m &= 0x3FF
    return sign | ((e + 112) << 23) | (m << 13)


@_jit
def _f32_to_f16_bits(b):
    """Round to nearest even; overflow gives inf, NaN gives the canonical 0x7E00."""
    sign = (b >> 16) & 0x8000
    a = b & 0x7FFFFFFF
    if a > 0x7F800000:
        return F16_NAN_BITS
    if a >= 0x477FF000:  # >= 65520 (and inf)
        return sign | 0x7C00
    if a >= 0x38800000:  # a normal f16
        q, r, half = (a >> 13) - (112 << 10), a & 0x1FFF, 0x1000
    elif a < 0x33000000:  # below 2**-25
        return sign
    else:  # a subnormal f16, in units of 2**-24
        sh = 126 - (a >> 23)
        m = (a & 0x7FFFFF) | 0x800000
        q, r, half = m >> sh, m & ((1 << sh) - 1), 1 << (sh - 1)
    if r > half or (r == half and (q & 1) == 1):
        q += 1
    return sign | q


@_jit
def _f32_to_bf16_bits(b):
    if (b & 0x7FFFFFFF) > 0x7F800000:
        return BF16_NAN_BITS
    return (b + 0x7FFF + ((b >> 16) & 1)) >> 16


@_jit
def _f32_to_int(x, lo, hi):
    """Round half to even, saturate to [lo, hi]; NaN gives 0."""
    if x != x:
        return np.int64(0)
    r = np.float64(np.rint(x))
    if r <= lo:
        return lo
    if r >= hi:
        return hi
    return np.int64(r)


@_jit
def _max(a, b):
    """The larger value; NaN if either is NaN; a when equal (so max(-0.0, 0.0) = -0.0)."""
    return a if (a >= b or a != a) else b


@_jit
def _min(a, b):
    return a if (a <= b or a != a) else b


# ---------------------------------------------------------------- array conversions


@_jit
def decode_f32(raw, code):
    """Packed elements of dtype ``code`` -> f32 (exact, except i32 rounds to nearest even)."""
    if code == F32:
        return raw.view(np.float32)
    if code == F16 or code == BF16:
        h = raw.view(np.uint16)
        bits = np.empty(h.size, np.uint32)
        for i in range(h.size):
            v = np.int64(h[i])
            bits[i] = _f16_to_f32_bits(v) if code == F16 else v << 16
        return bits.view(np.float32)
    if code == I8:
        return raw.view(np.int8).astype(np.float32)
    if code == U8:
        return raw.astype(np.float32)
    if code == I16:
        return raw.view(np.int16).astype(np.float32)
    return raw.view(np.int32).astype(np.float32)


@_jit
def decode_i64(raw, code):
    """Packed elements of dtype ``code`` -> i64; floats round half to even and saturate, NaN -> 0."""
    if code == I8:
        return raw.view(np.int8).astype(np.int64)
    if code == U8:
        return raw.astype(np.int64)
    if code == I16:
        return raw.view(np.int16).astype(np.int64)
    if code == I32:
        return raw.view(np.int32).astype(np.int64)
    f = decode_f32(raw, code)
    out = np.empty(f.size, np.int64)
    for i in range(f.size):
        out[i] = _f32_to_int(f[i], I64_MIN, I64_MAX)
    return out


@_jit
def _ints_to_raw(v, code):
    """In-range i64 values -> packed integer storage of dtype ``code``."""
    if code == I8:
        return v.astype(np.int8).view(np.uint8)
    if code == U8:
        return v.astype(np.uint8)
    if code == I16:
        return v.astype(np.int16).view(np.uint8)
    return v.astype(np.int32).view(np.uint8)


@_jit
def encode_f32(v, code):
    """f32 -> packed dtype ``code``: floats round to nearest even (canonical NaN), ints round half even + saturate."""
    n = v.size
    if code <= I32:
        iv = np.empty(n, np.int64)
        for i in range(n):
            iv[i] = _f32_to_int(v[i], INT_LO[code], INT_HI[code])
        return _ints_to_raw(iv, code)
    bits = v.view(np.uint32)
    if code == F32:
        out = np.empty(n, np.uint32)
        for i in range(n):
            out[i] = F32_NAN_BITS if v[i] != v[i] else bits[i]
        return out.view(np.uint8)
    h = np.empty(n, np.uint16)
    for i in range(n):
        b = np.int64(bits[i])
        h[i] = _f32_to_f16_bits(b) if code == F16 else _f32_to_bf16_bits(b)
    return h.view(np.uint8)


@_jit
def encode_i64(v, code):
    """i64 -> packed dtype ``code``: ints saturate; floats go through f32 (round to nearest even)."""
    if code <= I32:
        return _ints_to_raw(np.minimum(np.maximum(v, INT_LO[code]), INT_HI[code]), code)
    return encode_f32(v.astype(np.float32), code)


# ---------------------------------------------------------------- DMA


@_jit
def dma_copy(dst_buf, src_buf, g, pad, es, fill):
    """Byte copy of operand 1 (src, over shape - lo - hi) to operand 0 (dst, over shape).

    pad: int64[2 * ND], lo then hi per dimension; padded positions get the ``es`` bytes of ``fill``.
    """
    shape, lo = g[:ND], pad[:ND]
    sshape = shape - lo - pad[ND:]
    src = np.empty(0, np.uint8)
    if sshape.min() > 0:
        src = gather(src_buf, sshape, _base(g, 1), _strides(g, 1), es)
    if pad.max() == 0:
        scatter(dst_buf, shape, _base(g, 0), _strides(g, 0), es, src)
        return
    # row by row over the destination (the innermost dimension: its lo fill, the source run, its hi fill), in the
    # destination's row-major order as the unpadded path (later writes win on overlap); by u32 words when aligned
    dstrides = _strides(g, 0)
    outer = shape.copy()
    outer[ND - 1] = 1
    rows = offsets(outer, _base(g, 0), dstrides)
    step = dstrides[ND - 1]
    if _aligned(rows, es, step, dst_buf.size, src.size):
        _padded_rows(dst_buf.view(np.uint32), src.view(np.uint32), fill.view(np.uint32), rows >> 2, step >> 2,
                     es >> 2, shape, sshape, lo, pad[2 * ND - 1])
    else:
        _padded_rows(dst_buf, src, fill, rows, step, es, shape, sshape, lo, pad[2 * ND - 1])


@_jit
def _padded_rows(dst, src, fill, rows, step, ew, shape, sshape, lo, ihi_pad):
    """:func:`dma_copy`'s padded rows in units of bytes or words (``dst``, ``src``, ``fill`` and the offsets
    ``rows``, ``step``, ``ew`` per element all in the same unit)."""
    inner, ilo = shape[ND - 1], lo[ND - 1]
    ihi = inner - ihi_pad   # [ilo, ihi): the elements of a row read from the source
    mult = np.ones(ND, np.int64)  # row-major multipliers of the source shape
    for d in range(ND - 2, -1, -1):
        mult[d] = mult[d + 1] * sshape[d + 1]
    idx = np.zeros(ND, np.int64)
    for t in range(rows.size):
        s = 0   # the source element at the row's first read position, or -1: the whole row is padding
        for d in range(ND - 1):
            i = idx[d] - lo[d]
            if i < 0 or i >= sshape[d]:
                s = -1
                break
            s += i * mult[d]
        o = rows[t]
        a, z = (ilo, ihi) if s >= 0 else (inner, inner)   # the elements read from the source: [a, z)
        for i in range(a):
            for b in range(ew):
                dst[o + i * step + b] = fill[b]
        for i in range(a, z):
            for b in range(ew):
                dst[o + i * step + b] = src[(s + i - a) * ew + b]
        for i in range(z, inner):
            for b in range(ew):
                dst[o + i * step + b] = fill[b]
        d = ND - 2
        while d >= 0:
            idx[d] += 1
            if idx[d] < shape[d]:
                break
            idx[d] = 0
            d -= 1


@_jit
def dma_fill(dst_buf, g, es, fill):
    """Write the ``es`` bytes of ``fill`` to every element of operand 0."""
    n = 1
    for e in g[:ND]:
        n *= e
    raw = np.empty(n * es, np.uint8)
    for t in range(n):
        raw[t * es:(t + 1) * es] = fill
    scatter(dst_buf, g[:ND], _base(g, 0), _strides(g, 0), es, raw)


# ---------------------------------------------------------------- MXU


@_jit
def matmul(acc_buf, a_buf, b_buf, g, m, k, n, acc_row, a_row, acode, bcode, zero):
    """isa.MatMul on operands acc, a, b = 0, 1, 2 (dtype codes acode, bcode).

    For each (p, r, j) in row-major order: read the ACC element, add the k products, write it back.
    """
    shape, es, bes = g[:ND], SIZE[acode], SIZE[bcode]   # (a float A may take i8/u8 codes as B: weight-only)
    pc = offsets(shape, _base(g, 0), _strides(g, 0))
    pa = offsets(shape, _base(g, 1), _strides(g, 1))
    pb = offsets(shape, _base(g, 2), _strides(g, 2))
    npt = pc.size
    if zero:
        for p in range(npt):
            for r in range(m):
                for j in range(n):
                    o = pc[p] + r * acc_row + 4 * j
                    acc_buf[o:o + 4] = 0
    # A's rows are k contiguous elements (A[r, q] at pa + r * a_row + q * es), B of a point k x n contiguous ones
    # (B[q, j] at pb + (q * n + j) * es): both are read straight from the buffers, B once per run of points that keep
    # it (the stationary weights), and an ACC row's n elements are summed side by side over q, so the j loop
    # vectorizes. Each ACC element still adds its k products in order q = 0, 1, ... to its previous value (the same
    # rounding).
    ka, nb = k * es, k * n * bes
    row = np.empty(4 * n, np.uint8)   # one output row of ACC (n elements)
    araw = np.empty(-(-ka // 4) * 4, np.uint8)   # (whole words, so that it has an f32 view)
    if acode >= F16:
        af32 = araw.view(np.float32)
        fb = decode_f32(b_buf[pb[0]:pb[0] + nb].copy(), bcode)
        rf, ru = row.view(np.float32), row.view(np.uint32)
        for p in range(npt):
            if p and pb[p] != pb[p - 1]:
                fb = decode_f32(b_buf[pb[p]:pb[p] + nb].copy(), bcode)
            for r in range(m):
                oa = pa[p] + r * a_row
                araw[:ka] = a_buf[oa:oa + ka]
                fa = af32 if acode == F32 else decode_f32(araw[:ka].copy(), acode)
                o = pc[p] + r * acc_row
                row[:] = acc_buf[o:o + 4 * n]
                for q in range(k):
                    x, ib = fa[q], q * n
                    for j in range(n):
                        rf[j] += x * fb[ib + j]
                for j in range(n):
                    if rf[j] != rf[j]:
                        ru[j] = F32_NAN_BITS
                acc_buf[o:o + 4 * n] = row
    else:
        ai8 = araw.view(np.int8)
        ia64 = np.empty(k, np.int64)
        ib64 = decode_i64(b_buf[pb[0]:pb[0] + nb].copy(), bcode)
        ri = row.view(np.int32)
        t = np.empty(n, np.int64)
        for p in range(npt):
            if p and pb[p] != pb[p - 1]:
                ib64 = decode_i64(b_buf[pb[p]:pb[p] + nb].copy(), bcode)
            for r in range(m):
                oa = pa[p] + r * a_row
                araw[:ka] = a_buf[oa:oa + ka]
                if acode == I8:
                    for q in range(k):
                        ia64[q] = ai8[q]
                else:
                    ia64[:] = decode_i64(araw[:ka].copy(), acode)
                o = pc[p] + r * acc_row
                row[:] = acc_buf[o:o + 4 * n]
                for j in range(n):
                    t[j] = ri[j]
                for q in range(k):
                    x, ib = ia64[q], q * n
                    for j in range(n):
                        t[j] += x * ib64[ib + j]
                for j in range(n):
                    ri[j] = np.int32(t[j])  # wraps
                acc_buf[o:o + 4 * n] = row


@_jit
def _zero_rows(acc, pc, m, rc, un):
    """Zero the ``un`` words of each of the ``m`` rows (``rc`` words apart) at every word offset of ``pc``."""
    for p in range(pc.size):
        for r in range(m):
            o = np.uint64(pc[p] + r * rc)
            for j in range(un):
                acc[o + j] = 0


@_jit
def _mm_rows(acc, acc_bits, a, b, pc, pa, pb, m, rc, ra, un, uk, t, flt):
    """The word kernels' rows: for each point p and row r, ``t`` = the ACC row's ``un`` elements (at word
    ``pc[p] + r * rc``), plus in order q = 0, 1, ... the products of A (``a[pa[p] + r * ra + q]``) with B's row q
    (``b[pb[p] + q * un + j]``), written back. ``flt``: f32 sums, a NaN stored as F32_NAN_BITS through ``acc_bits``;
    else i64 sums of the integer products, wrapped to i32."""
    for p in range(pc.size):
        ob = np.uint64(pb[p])
        for r in range(m):
            oa, o = np.uint64(pa[p] + r * ra), np.uint64(pc[p] + r * rc)
            for j in range(un):
                t[j] = acc[o + j]
            for q in range(uk):
                x, ib = a[oa + q], ob + q * un
                if flt:   # (B f32, or i8/u8 codes converted exactly)
                    for j in range(un):
                        t[j] += x * np.float32(b[ib + j])
                else:
                    for j in range(un):
                        t[j] += np.int64(x) * np.int64(b[ib + j])
            for j in range(un):
                v = t[j]
                if not flt:
                    acc[o + j] = np.int32(v)  # wraps
                elif v != v:
                    acc_bits[o + j] = F32_NAN_BITS
                else:
                    acc[o + j] = v


@_jit
def matmul_f32(acc, acc_bits, a, b, g, m, k, n, acc_row, a_row, zero):
    """isa.MatMul of f32 operands on 32-bit word views of the buffers: ``acc`` (f32) and ``acc_bits`` (u32) of ACC,
    ``a`` and ``b`` (f32) of SPM; ``g`` in bytes (bases and strides are multiples of 4, as verified).

    The same arithmetic as :func:`matmul` (each ACC element adds its k products in order q = 0, 1, ... to its
    previous value in f32; NaN results stored as F32_NAN_BITS) without copying or decoding the operands: a row's n
    sums are kept side by side in ``t``, and word indices are unsigned (no negative-index wraparound per access).
    """
    shape = g[:ND]
    pc = offsets(shape, _base(g, 0), _strides(g, 0)) >> 2
    pa = offsets(shape, _base(g, 1), _strides(g, 1)) >> 2
    pb = offsets(shape, _base(g, 2), _strides(g, 2)) >> 2
    rc, ra = acc_row >> 2, a_row >> 2
    un, uk = np.uint64(n), np.uint64(k)
    if zero:
        _zero_rows(acc_bits, pc, m, rc, un)
    _mm_rows(acc, acc_bits, a, b, pc, pa, pb, m, rc, ra, un, uk, np.empty(n, np.float32), True)


@_jit
def matmul_f32_codes(acc, acc_bits, a, b, g, m, k, n, acc_row, a_row, zero):
    """isa.MatMul of f32 A by i8/u8 B (weight-only): ``acc`` (f32) and ``acc_bits`` (u32) word views of ACC, ``a``
    the f32 word view of SPM, ``b`` the SPM as int8 or uint8 (B's type); ``g`` in bytes (the ACC and A operands'
    addresses multiples of 4).

    The same arithmetic as :func:`matmul` (each code converts to f32 exactly; each ACC element adds its k products,
    each rounded to f32, in order q = 0, 1, ... to its previous value in f32).
    """
    shape = g[:ND]
    pc = offsets(shape, _base(g, 0), _strides(g, 0)) >> 2
    pa = offsets(shape, _base(g, 1), _strides(g, 1)) >> 2
    pb = offsets(shape, _base(g, 2), _strides(g, 2))
    rc, ra = acc_row >> 2, a_row >> 2
    un, uk = np.uint64(n), np.uint64(k)
    if zero:
        _zero_rows(acc_bits, pc, m, rc, un)
    _mm_rows(acc, acc_bits, a, b, pc, pa, pb, m, rc, ra, un, uk, np.empty(n, np.float32), True)


@_jit
def matmul_int(acc, a, b, g, m, k, n, acc_row, a_row, zero):
    """isa.MatMul of i8/u8 operands straight from the buffers: ``acc`` the i32 word view of ACC, ``a`` and ``b`` the
    SPM as int8 or uint8 (the operands' types); ``g`` in bytes (the ACC operand's addresses multiples of 4).

    The same arithmetic as :func:`matmul` (each ACC element adds its k products in i64, then wraps to i32) with
    unsigned indices and no per-row copies.
    """
    shape = g[:ND]
    pc = offsets(shape, _base(g, 0), _strides(g, 0)) >> 2
    pa = offsets(shape, _base(g, 1), _strides(g, 1))
    pb = offsets(shape, _base(g, 2), _strides(g, 2))
    rc = acc_row >> 2
    un, uk = np.uint64(n), np.uint64(k)
    if zero:
        _zero_rows(acc, pc, m, rc, un)
    _mm_rows(acc, acc, a, b, pc, pa, pb, m, rc, a_row, un, uk, np.empty(n, np.int64), False)


# ---------------------------------------------------------------- VPU


@_jit
def _bin_f(op, a, b):
    if op == ADD:
        return a + b
    if op == SUB:
        return a - b
    if op == MUL:
        return a * b
    if op == DIV:
        return a / b
    if op == MIN:
        return _min(a, b)
    if op == MAX:
        return _max(a, b)
    if op == CMPGT:
        return np.float32(1.0) if a > b else np.float32(0.0)
    if op == CMPEQ:
        return np.float32(1.0) if a == b else np.float32(0.0)
    return np.float32(np.nan)


@_jit
def _bin_i(op, a, b):
    if op == ADD:
        return a + b
    if op == SUB:
        return a - b
    if op == MUL:
        return a * b
    if op == MIN:
        return min(a, b)
    if op == MAX:
        return max(a, b)
    if op == SHL:
        return a << min(max(b, 0), 63)
    if op == SHR:
        return a >> min(max(b, 0), 63)
    if op == AND:
        return a & b
    if op == OR:
        return a | b
    if op == XOR:
        return a ^ b
    if op == CMPGT:
        return np.int64(1) if a > b else np.int64(0)
    if op == CMPEQ:
        return np.int64(1) if a == b else np.int64(0)
    return np.int64(0)


@_jit
def _un_f(fn, x, lo, hi):
    if fn == MOV:
        return x
    if fn == RELU:
        return _max(x, np.float32(0.0))
    if fn == CLAMP:
        return _min(_max(x, lo), hi)
    if fn == ABS:
        return abs(x)
    if fn == NEG:
        return -x
    d = np.float64(x)
    if fn == EXP:
        r = math.exp(d)
    elif fn == LOG:
        r = math.log(d)
    elif fn == RECIP:
        r = 1.0 / d
    elif fn == SQRT:
        r = math.sqrt(d)
    elif fn == RSQRT:
        r = 1.0 / math.sqrt(d)
    elif fn == SIGMOID:
        r = 1.0 / (1.0 + math.exp(-d))
    elif fn == TANH:
        r = math.tanh(d)
    elif fn == GELU:
        r = 0.5 * d * (1.0 + math.erf(d / SQRT2))
    else:
        r = math.erf(d)
    return np.float32(r)


@_jit
def _un_i(fn, x, lo, hi):
    if fn == RELU:
        return max(x, np.int64(0))
    if fn == CLAMP:
        return min(max(x, lo), hi)
    if fn == ABS:
        return abs(x)
    if fn == NEG:
        return -x
    return x


@_jit
def _groups(shape, strides):
    """Group shape (reduction dims -> 1) and row-major group-id strides (0 on reduction dims)."""
    gshape, gstr = shape.copy(), np.zeros(ND, np.int64)
    size = 1
    for d in range(ND - 1, -1, -1):
        if strides[d] == 0 and shape[d] > 1:
            gshape[d] = 1
        else:
            gstr[d] = size
            size *= shape[d]
    return gshape, gstr


@_jit
def _combine(acc, v, gid, red):
    """Fold values ``v`` into ``acc[gid]`` in order (f32 or i64, by the arrays' type)."""
    for i in range(v.size):
        a, b = acc[gid[i]], v[i]
        if red == R_SUM:
            acc[gid[i]] = a + b
        elif red == R_MAX:
            acc[gid[i]] = _max(a, b)
        else:
            acc[gid[i]] = _min(a, b)


@_jit
def _store_f(dst_buf, g, v, code, red, zero):
    """Reduce (f32) and write ``v`` to operand 0."""
    shape, base, strides, es = g[:ND], _base(g, 0), _strides(g, 0), SIZE[code]
    if red == R_NONE:
        scatter(dst_buf, shape, base, strides, es, encode_f32(v, code))
        return
    gshape, gstr = _groups(shape, strides)
    doff, gid = offsets(gshape, base, strides), offsets(shape, 0, gstr)
    if zero:
        init = 0.0 if red == R_SUM else (-np.inf if red == R_MAX else np.inf)
        acc = np.full(doff.size, np.float32(init))
    else:
        acc = decode_f32(gather_at(dst_buf, doff, es), code).copy()
    _combine(acc, v, gid, red)
    scatter_at(dst_buf, doff, es, encode_f32(acc, code))


@_jit
def _store_i(dst_buf, g, v, code, red, zero):
    """Reduce (i64, wrapping) and write ``v`` to operand 0."""
    shape, base, strides, es = g[:ND], _base(g, 0), _strides(g, 0), SIZE[code]
    if red == R_NONE:
        scatter(dst_buf, shape, base, strides, es, encode_i64(v, code))
        return
    gshape, gstr = _groups(shape, strides)
    doff, gid = offsets(gshape, base, strides), offsets(shape, 0, gstr)
    if zero:
        init = 0 if red == R_SUM else (I64_MIN if red == R_MAX else I64_MAX)
        acc = np.full(doff.size, np.int64(init))
    else:
        acc = decode_i64(gather_at(dst_buf, doff, es), code).copy()
    _combine(acc, v, gid, red)
    scatter_at(dst_buf, doff, es, encode_i64(acc, code))


@_jit
def binary_f(dst_buf, s0_buf, s1_buf, g, dcode, c0, c1, op, imm, has_src1, red, zero, act, lo, hi):
    """Float vpu binary op: operands dst, src0, src1 = 0, 1, 2; without src1 the second input is ``imm``. ``act``
    (an Act code, MOV for none) is applied to each result as :func:`unary_f` applies it, before the store."""
    x = decode_f32(_load(s0_buf, g, 1, c0), c0)
    y = decode_f32(_load(s1_buf, g, 2, c1), c1) if has_src1 else np.full(x.size, np.float32(imm))
    v = np.empty(x.size, np.float32)
    lo32, hi32 = np.float32(lo), np.float32(hi)
    for i in range(x.size):
        v[i] = _un_f(act, _bin_f(op, x[i], y[i]), lo32, hi32)
    _store_f(dst_buf, g, v, dcode, red, zero)


@_jit
def binary_i(dst_buf, s0_buf, s1_buf, g, dcode, c0, c1, op, imm, has_src1, red, zero, act, lo, hi):
    """Integer vpu binary op (i64, wrapping): operands dst, src0, src1 = 0, 1, 2; then ``act`` as in :func:`unary_i`."""
    x = decode_i64(_load(s0_buf, g, 1, c0), c0)
    y = decode_i64(_load(s1_buf, g, 2, c1), c1) if has_src1 else np.full(x.size, np.int64(imm))
    v = np.empty(x.size, np.int64)
    for i in range(x.size):
        v[i] = _un_i(act, _bin_i(op, x[i], y[i]), lo, hi)
    _store_i(dst_buf, g, v, dcode, red, zero)


@_jit
def unary_f(dst_buf, src_buf, g, dcode, scode, fn, lo, hi, red, zero):
    """Float vpu unary op: operands dst, src = 0, 1; transcendental functions in f64, rounded once."""
    x = decode_f32(_load(src_buf, g, 1, scode), scode)
    v = np.empty(x.size, np.float32)
    lo32, hi32 = np.float32(lo), np.float32(hi)
    for i in range(x.size):
        v[i] = _un_f(fn, x[i], lo32, hi32)
    _store_f(dst_buf, g, v, dcode, red, zero)


@_jit
def unary_i(dst_buf, src_buf, g, dcode, scode, fn, lo, hi, red, zero):
    """Integer vpu unary op (i64): operands dst, src = 0, 1."""
    x = decode_i64(_load(src_buf, g, 1, scode), scode)
    v = np.empty(x.size, np.int64)
    for i in range(x.size):
        v[i] = _un_i(fn, x[i], lo, hi)
    _store_i(dst_buf, g, v, dcode, red, zero)


@_jit
def convert(dst_buf, src_buf, g, dcode, scode, scale, zp_in, zp_out):
    """vpu.cvt: v = (f32(x) - zp_in) * scale in f32; int dst: sat(rne(v) + zp_out), NaN -> zp_out; float: v + zp_out."""
    x = decode_f32(_load(src_buf, g, 1, scode), scode)
    s32, zi, zo = np.float32(scale), np.float32(zp_in), np.float32(zp_out)
    if dcode <= I32:
        iv = np.empty(x.size, np.int64)
        for i in range(x.size):
            v = (x[i] - zi) * s32
            iv[i] = zp_out if v != v else _f32_to_int(v, -(2**40), 2**40) + zp_out
        raw = encode_i64(iv, dcode)
    else:
        fv = np.empty(x.size, np.float32)
        for i in range(x.size):
            fv[i] = (x[i] - zi) * s32 + zo
        raw = encode_f32(fv, dcode)
    _save(dst_buf, g, 0, dcode, raw)


@_jit
def rshift_rne(v, s):
    """v / 2**s rounded half to even, for 0 <= s <= 62."""
    if s == 0:
        return v
    q = v >> s
    r, half = v & ((np.int64(1) << s) - 1), np.int64(1) << (s - 1)
    if r > half or (r == half and (q & 1) == 1):
        q += 1
    return q


@_jit
def requant(dst_buf, src_buf, prm_buf, g, dcode, zp, lo, hi):
    """vpu.rq: operands dst, src, prm = 0, 1, 2. Returns RQ_OK, or the first shift outside [0, 62] (no writes)."""
    x = decode_i64(_load(src_buf, g, 1, I32), I32)
    prm = gather_at(prm_buf, offsets(g[:ND], _base(g, 2), _strides(g, 2)), 12).view(np.int32)
    for i in range(x.size):
        if not 0 <= prm[3 * i + 2] <= 62:
            return np.int64(prm[3 * i + 2])
    y = np.empty(x.size, np.int64)
    for i in range(x.size):
        bias, mult, s = np.int64(prm[3 * i]), np.int64(prm[3 * i + 1]), np.int64(prm[3 * i + 2])
        v = (x[i] + bias) * mult
        if v == I64_MIN:  # the one overflow: (-2**32) * (-2**31) = 2**63
            q = (np.int64(1) << (63 - s)) if s > 0 else np.int64(I64_MAX)
        else:
            q = rshift_rne(v, s)
        y[i] = min(max(q, lo - zp), hi - zp) + zp
    _save(dst_buf, g, 0, dcode, encode_i64(y, dcode))
    return np.int64(RQ_OK)


# ---------------------------------------------------------------- gather

GATHER_OK = -1
"""gather_rows' return value when every index is below the table's row count (else the first bad point)."""


@_jit
def gather_rows(dst_buf, table_buf, idx_buf, g, es, row, rows, table_base, row_stride, elem_stride, fill):
    """Row gather: operands dst, idx = 0, 1 over the shape; per point p, ``i = idx[p]`` (i32) selects the ``row``
    elements of ``es`` bytes at ``table_base + i*row_stride + j*es``, or ``fill`` when i < 0; they go to ``dst(p) +
    j*elem_stride``. Returns GATHER_OK, or the row-major number of the first point with ``i >= rows`` (nothing is
    written then). Every row is read before anything is written."""
    shape = g[:ND]
    idx = gather(idx_buf, shape, _base(g, 1), _strides(g, 1), 4).view(np.int32)
    for p in range(idx.size):
        if idx[p] >= rows:
            return np.int64(p)
    width = row * es
    raw = np.empty(idx.size * width, np.uint8)
    for p in range(idx.size):
        i = np.int64(idx[p])
        if i < 0:
            for j in range(row):
                raw[p * width + j * es:p * width + (j + 1) * es] = fill
        else:
            o = table_base + i * row_stride
            raw[p * width:(p + 1) * width] = table_buf[o:o + width]
    doff = offsets(shape, _base(g, 0), _strides(g, 0))
    for p in range(idx.size):
        for j in range(row):
            o = doff[p] + j * elem_stride
            for b in range(es):
                dst_buf[o + b] = raw[p * width + j * es + b]
    return np.int64(GATHER_OK)


HOT_KERNELS = (dma_copy, dma_fill, matmul, binary_f, binary_i, unary_f, unary_i, convert, requant, gather_rows)


# ---------------------------------------------------------------- numpy helpers (reference model, immediates)


def f32_to_bf16(x: np.ndarray) -> np.ndarray:
    """f32 -> bf16 bits (uint16), round to nearest even; NaN -> the canonical 0x7FC0 compute units write."""
    return np.where(np.isnan(x), np.uint16(BF16_NAN_BITS), dtypes.f32_to_bf16(x))


def widen(a: np.ndarray, dtype: DType) -> np.ndarray:
    """Storage array -> f32 (exact for every dtype but i32, which rounds to nearest even)."""
    return bf16_to_f32(a) if dtype is DType.BF16 else np.asarray(a).astype(np.float32)


def narrow(x: np.ndarray, dtype: DType) -> np.ndarray:
    """f32 array -> storage of ``dtype``: floats round to nearest even with canonical NaNs; ints round half to even
    and saturate, NaN -> 0."""
    x = np.asarray(x, np.float32)
    nan = np.isnan(x)
    with np.errstate(all="ignore"):
        if dtype is DType.BF16:
            return f32_to_bf16(x)
        if dtype is DType.F16:
            return np.where(nan, np.uint16(F16_NAN_BITS), x.astype(np.float16).view(np.uint16)).view(np.float16)
        if dtype is DType.F32:
            return np.where(nan, np.uint32(F32_NAN_BITS), x.view(np.uint32)).view(np.float32)
        lo, hi = INT_RANGE[dtype]
        return np.where(nan, 0, np.clip(np.rint(x.astype(np.float64)), lo, hi)).astype(dtype.storage)


def scalar_bytes(value: int | float, dtype: DType) -> np.ndarray:
    """An immediate (already canonical for ``dtype``) as its stored bytes (uint8[dtype.size])."""
    if dtype.is_float:
        return narrow(np.array([value], np.float32), dtype).view(np.uint8)
    return np.array([value], dtype.storage).view(np.uint8)
