"""Binary encoding of programs (``.npub``): a header, the region and semaphore tables, 128-byte instruction records.

All little endian. Header (32 B): magic ``NPU0``, u16 version, u16 reserved, config rows/cols/spm/acc u32, u16
n_regions, u16 n_sems, u32 n_instrs. Region (40 B): 32-byte zero-padded name, u8 index, 3 pad, u32 size. Semaphore
(36 B): 32-byte name, u16 init, 2 pad. Instruction record (128 B):

====== =====================================================================================================
bytes  field
====== =====================================================================================================
0      opcode (:class:`Opcode`)
1      queue (:class:`Queue`, bits 0-3) and unit (bits 4-7: which of the queue's units runs it)
2-3    flags: bit 0 ``.z``, bits 1-2 :class:`Reduce`, bit 3 src1 is the immediate, bits 4-7 VecBinary's fused
       ``act`` (:class:`Act` value + 1; 0 = none); MatMul: bits 8-15 are bits 8-15 of n
4      ndim
5      sub-op (:class:`BinOp` / :class:`Act`); MatMul: bits 8-15 of k
6-7    m
8-15   4 sync slots u16: bit 15 signal (1) / wait (0), bits 14-8 count (0 = empty), bits 7-0 semaphore index
16-25  extents u16[5]
26, 27 k, n (MatMul: their bits 0-7; k and n are 16-bit, their high bytes in bytes 5 and 3, which are zero for
       k, n <= 255, so programs of arrays up to 255 x 255 encode as they did before larger arrays were allowed)
28-111 three operands of 28 B: u32 tag (space bits 0-1, region index bits 2-5, dtype code bits 6-9, present
       bit 31), u32 base, i32 strides[5]; MatMul keeps acc.row / a.row in stride slot 4 of acc / a;
       HostCall: u64 rd, u64 wr, u64 ops, 32-byte zero-padded function name, 28 zero bytes
112    imm: i32, or f32 for float values (DMA fill/value by dst dtype, VecBinary imm by src0 dtype, cvt scale)
116    VPU/MXU: i16 zp_in, i16 zp_out, lo and hi (i32, f32 for a float VecUnary / VecBinary source); DmaCopy:
       5 x (u8 lo, u8 hi) pads, 0xFF/0xFF for an unpadded dimension. VecRequant keeps zp in zp_out; an i32 dst's
       zp beyond i16 puts its high part in zp_in: ``zp = i32(zp_in * 65536 + zp_out)`` (zp_in is 0 whenever zp
       fits in i16)
====== =====================================================================================================

Gather (opcode 12) uses the same record: ``m`` is ``row`` (R), the operands are dst (its ndim + 1 strides: the
last is the element stride inside a row), table (stride slot 0: the row stride) and idx; the immediate is ``rows``
(N, i32) and the union's first 4 bytes hold ``fill`` (i32, or f32 for a float dst), the other 8 are zero.

Unused fields are zero. ``decode_program`` accepts only the canonical encoding, so ``encode(decode(b)) == b``.
"""

from __future__ import annotations

import dataclasses
import enum
import struct
from typing import TypeVar

from isa.dtypes import DType, Space
from isa.errors import EncodingError, IsaError
from isa.instructions import (
    Act,
    Barrier,
    BinOp,
    DmaCopy,
    DmaFill,
    Gather,
    Halt,
    HostCall,
    Instr,
    MatMul,
    Opcode,
    Pad,
    Reduce,
    SemOp,
    Sync,
    VecBinary,
    VecConvert,
    VecRequant,
    VecUnary,
)
from isa.program import Program, ProgramConfig, Region, SemDecl
from isa.units import Queue
from isa.view import MAX_DIMS, View

MAGIC = b"NPU0"
VERSION = 1
RECORD_SIZE = 128

_HEADER = struct.Struct("<4sHH4IHHI")
_REGION = struct.Struct("<32sB3xI")
_SEM = struct.Struct("<32sH2x")
_RECORD = struct.Struct("<BBHBBH4H5HBB28s28s28s4s12s")
_OPERAND = struct.Struct("<II5i")
_VPU_UNION = struct.Struct("<hh4s4s")
_DMA_UNION = struct.Struct("<10B2x")
_HOST_CALL = struct.Struct("<QQQ32s28x")
_GATHER_UNION = struct.Struct("<4s8x")
_PRESENT = 1 << 31
_NO_PAD = 0xFF
_NAME_BYTES = 32
E = TypeVar("E", bound=enum.Enum)
assert _RECORD.size == RECORD_SIZE and _OPERAND.size == 28 and _HOST_CALL.size == 3 * _OPERAND.size


# ---- small pieces ---------------------------------------------------------------------------------------------


def _num(v: int | float, is_float: bool) -> bytes:
    return struct.pack("<f" if is_float else "<i", v)


def _unnum(b: bytes, is_float: bool) -> int | float:
    return struct.unpack("<f" if is_float else "<i", b)[0]


def _i16(v: int) -> int:
    """``v`` wrapped to a signed 16-bit integer."""
    return (v + 0x8000 & 0xFFFF) - 0x8000


def _i32(v: int) -> int:
    """``v`` wrapped to a signed 32-bit integer."""
    return (v + 2**31 & 0xFFFFFFFF) - 2**31


def _name(name: str) -> bytes:
    b = name.encode("ascii", "replace")
    if len(b) >= _NAME_BYTES:
        raise EncodingError(f"name {name!r} does not fit its {_NAME_BYTES}-byte field")
    return b


def _unname(b: bytes) -> str:
    b = b.split(b"\0", 1)[0]
    try:
        return b.decode("ascii")
    except UnicodeDecodeError:
        raise EncodingError(f"name {b!r} is not ASCII") from None


def _enum(cls: type[E], value: int, what: str) -> E:
    try:
        return cls(value)
    except ValueError:
        raise EncodingError(f"unknown {what} {value}") from None


def _view(v: View | None, header: Program, row: int = 0) -> bytes:
    if v is None:
        return bytes(_OPERAND.size)
    index = 0
    if v.region is not None:
        if v.region not in header.region_map:
            raise EncodingError(f"region {v.region!r} is not declared in the program")
        index = header.region_map[v.region].index
    slots = (list(v.strides) + [0] * MAX_DIMS)[:MAX_DIMS]
    if row:
        slots[MAX_DIMS - 1] = row
    return _OPERAND.pack(_PRESENT | v.dtype.code << 6 | index << 2 | int(v.space), v.base, *slots)


def _unview(b: bytes, ndim: int, regions: dict[int, str]) -> tuple[View | None, int]:
    """The view of an operand (None if absent) and its stride slot 4 (MatMul's row stride)."""
    tag, base, *slots = _OPERAND.unpack(b)
    if not tag & _PRESENT:
        return None, 0
    space = _enum(Space, tag & 3, "memory space")
    code, index = tag >> 6 & 15, tag >> 2 & 15
    if code >= len(DType):
        raise EncodingError(f"unknown dtype code {code}")
    region = None
    if space is Space.DRAM:
        if index not in regions:
            raise EncodingError(f"operand refers to region index {index}, which the program does not declare")
        region = regions[index]
    return View(space, base, DType.from_code(code), tuple(slots[:ndim]), region), slots[MAX_DIMS - 1]


def _sync_slots(i: Instr, header: Program) -> list[int]:
    slots = []
    for bit, ops in ((0, i.waits), (1, i.signals)):
        for o in ops:
            if o.name not in header.sem_index:
                raise EncodingError(f"semaphore {o.name!r} is not declared in the program")
            if not 1 <= o.count <= 0x7F:
                raise EncodingError(f"semaphore count {o.count} does not fit its 7-bit field")
            slots.append(bit << 15 | o.count << 8 | header.sem_index[o.name])
    return slots + [0] * (4 - len(slots))


# ---- instructions ---------------------------------------------------------------------------------------------


def encode_instr(instr: Instr, header: Program) -> bytes:
    """The 128-byte record of ``instr``; ``header`` supplies the region and semaphore tables (its instrs are unused)."""
    try:
        return _encode(instr, header)
    except (struct.error, OverflowError) as e:
        raise EncodingError(f"{instr}: a value does not fit its binary field ({e})") from None


def _encode(i: Instr, header: Program) -> bytes:
    flags = sub = m = k = n = 0
    ops: list[bytes] = []
    imm, union = bytes(4), bytes(12)
    match i:
        case DmaCopy():
            ops = [_view(i.dst, header), _view(i.src, header)]
            imm = _num(i.fill, i.dst.dtype.is_float)
            pads = [_NO_PAD] * (2 * MAX_DIMS)
            for p in i.pad:
                pads[2 * p.dim:2 * p.dim + 2] = p.lo, p.hi
            union = _DMA_UNION.pack(*pads)
        case DmaFill():
            ops = [_view(i.dst, header)]
            imm = _num(i.value, i.dst.dtype.is_float)
        case MatMul():
            flags, sub, m, k, n = int(i.zero) | (i.n >> 8) << 8, i.k >> 8, i.m, i.k & 0xFF, i.n & 0xFF
            ops = [_view(i.acc, header, i.acc_row), _view(i.a, header, i.a_row), _view(i.b, header)]
        case VecBinary():
            act = 0 if i.act is None else i.act + 1
            flags, sub = int(i.zero) | i.reduce << 1 | (i.src1 is None) << 3 | act << 4, i.op
            ops = [_view(i.dst, header), _view(i.src0, header), _view(i.src1, header)]
            flt = i.src0.dtype.is_float
            imm = _num(i.imm, flt)
            union = _VPU_UNION.pack(0, 0, _num(i.lo, flt), _num(i.hi, flt))
        case VecUnary():
            flags, sub = int(i.zero) | i.reduce << 1, i.fn
            ops = [_view(i.dst, header), _view(i.src, header)]
            flt = i.src.dtype.is_float
            union = _VPU_UNION.pack(0, 0, _num(i.lo, flt), _num(i.hi, flt))
        case VecConvert():
            ops = [_view(i.dst, header), _view(i.src, header)]
            imm = _num(i.scale, True)
            union = _VPU_UNION.pack(i.zp_in, i.zp_out, bytes(4), bytes(4))
        case VecRequant():
            ops = [_view(i.dst, header), _view(i.src, header), _view(i.prm, header)]
            zp_lo = _i16(i.zp)
            union = _VPU_UNION.pack(_i16((i.zp - zp_lo) >> 16), zp_lo, _num(i.lo, False), _num(i.hi, False))
        case Gather():
            m = i.row
            ops = [_view(i.dst, header), _view(i.table, header), _view(i.idx, header)]
            imm = _num(i.rows, False)
            union = _GATHER_UNION.pack(_num(i.fill, i.dst.dtype.is_float))
        case HostCall():
            blob = _HOST_CALL.pack(i.rd, i.wr, i.ops, _name(i.fn))
            ops = [blob[j:j + _OPERAND.size] for j in range(0, len(blob), _OPERAND.size)]
    shape = getattr(i, "shape", ())
    ops += [bytes(_OPERAND.size)] * (3 - len(ops))
    extents = (list(shape) + [0] * MAX_DIMS)[:MAX_DIMS]
    return _RECORD.pack(i.opcode, i.unit_key, flags, len(shape), sub, m, *_sync_slots(i, header), *extents, k, n, *ops,
                        imm, union)


def decode_instr(record: bytes, header: Program) -> Instr:
    """The instruction of a 128-byte record (not checked for canonical form; ``decode_program`` does that)."""
    if len(record) != RECORD_SIZE:
        raise EncodingError(f"an instruction record has {RECORD_SIZE} bytes, not {len(record)}")
    try:
        return _decode(record, header)
    except EncodingError:
        raise
    except IsaError as e:
        raise EncodingError(f"{Opcode(record[0]).name.lower()}: {e}") from None


def _decode(record: bytes, header: Program) -> Instr:
    opc, q, flags, ndim, sub, m, *rest = _RECORD.unpack(record)
    slots, extents, (k, n, o0, o1, o2, imm, union) = rest[:4], rest[4:9], rest[9:]
    opcode, queue = _enum(Opcode, opc, "opcode"), _enum(Queue, q & 15, "queue")
    if ndim > MAX_DIMS:
        raise EncodingError(f"ndim must be at most {MAX_DIMS}, not {ndim}")
    sync = _sync_ops(slots, header) | ({"unit": q >> 4} if q >> 4 else {})
    shape = tuple(extents[:ndim])
    if opcode is Opcode.HOST:   # its operand bytes are not views
        rd, wr, ops, fn = _HOST_CALL.unpack(o0 + o1 + o2)
        return HostCall(fn=_unname(fn), rd=rd, wr=wr, ops=ops, **sync)
    regions = {r.index: r.name for r in header.regions}
    if opcode is Opcode.GATHER:   # dst has a stride per dimension and one for the row, the table one stride
        return _decode_gather(queue, shape, m, [_unview(o, n, regions)[0] for o, n in ((o0, ndim + 1), (o1, 1),
                                                                                       (o2, ndim))], imm, union, sync)
    views = [_unview(o, ndim, regions) for o in (o0, o1, o2)]
    return _decode_viewed(_Fields(opcode, queue, flags, sub, m, k, n, shape, imm, union, sync), views)


def _sync_ops(slots: list[int], header: Program) -> dict[str, tuple[SemOp, ...]]:
    """The ``waits`` and ``signals`` of a record's four sync slots (a slot with count 0 is empty)."""
    waits: list[SemOp] = []
    signals: list[SemOp] = []
    for s in slots:
        if s >> 8 & 0x7F:
            if s & 0xFF >= len(header.sems):
                raise EncodingError(f"sync slot names semaphore {s & 0xFF}, but the program declares "
                                    f"{len(header.sems)}")
            (signals if s >> 15 else waits).append(SemOp(header.sems[s & 0xFF].name, s >> 8 & 0x7F))
    return {"waits": tuple(waits), "signals": tuple(signals)}


@dataclasses.dataclass(frozen=True)
class _Fields:
    """The fields of a record every opcode reads the same way (its operands apart)."""

    opcode: Opcode
    queue: Queue
    flags: int
    sub: int
    m: int
    k: int
    n: int
    shape: tuple[int, ...]
    imm: bytes
    union: bytes
    sync: dict


def _need(v: View | None, role: str) -> View:
    if v is None:
        raise EncodingError(f"operand {role} is missing")
    return v


def _decode_viewed(f: _Fields, views: list[tuple[View | None, int]]) -> Instr:
    """The instruction of a record whose three operands are views (``(view, row stride)`` each), or none."""
    (v0, row0), (v1, row1), (v2, _) = views
    shape, imm, union, sync = f.shape, f.imm, f.union, f.sync
    zero, reduce = bool(f.flags & 1), Reduce(f.flags >> 1 & 3)
    match f.opcode:
        case Opcode.COPY:
            dst = _need(v0, "dst")
            lohi = _DMA_UNION.unpack(union)
            pad = tuple(Pad(d, lohi[2 * d], lohi[2 * d + 1]) for d in range(MAX_DIMS)
                        if lohi[2 * d:2 * d + 2] != (_NO_PAD, _NO_PAD))
            return DmaCopy(queue=f.queue, shape=shape, dst=dst, src=_need(v1, "src"), pad=pad,
                           fill=_unnum(imm, dst.dtype.is_float), **sync)
        case Opcode.FILL:
            dst = _need(v0, "dst")
            return DmaFill(queue=f.queue, shape=shape, dst=dst, value=_unnum(imm, dst.dtype.is_float), **sync)
        case Opcode.MM:
            return MatMul(shape=shape, m=f.m, k=f.sub << 8 | f.k, n=f.flags & 0xFF00 | f.n, acc=_need(v0, "acc"),
                          acc_row=row0, a=_need(v1, "a"), a_row=row1, b=_need(v2, "b"), zero=zero, **sync)
        case Opcode.BIN:
            src0 = _need(v1, "src0")
            src1 = None if f.flags & 8 else _need(v2, "src1")
            act = f.flags >> 4 & 15
            _, _, lo, hi = _VPU_UNION.unpack(union)
            flt = src0.dtype.is_float
            return VecBinary(op=_enum(BinOp, f.sub, "binary op"), shape=shape, dst=_need(v0, "dst"), src0=src0,
                             src1=src1, imm=_unnum(imm, flt), reduce=reduce, zero=zero,
                             act=_enum(Act, act - 1, "activation") if act else None, lo=_unnum(lo, flt),
                             hi=_unnum(hi, flt), **sync)
        case Opcode.UNARY:
            src = _need(v1, "src")
            _, _, lo, hi = _VPU_UNION.unpack(union)
            flt = src.dtype.is_float
            return VecUnary(fn=_enum(Act, f.sub, "activation"), shape=shape, dst=_need(v0, "dst"), src=src,
                            lo=_unnum(lo, flt), hi=_unnum(hi, flt), reduce=reduce, zero=zero, **sync)
        case Opcode.CVT:
            zp_in, zp_out, _, _ = _VPU_UNION.unpack(union)
            return VecConvert(shape=shape, dst=_need(v0, "dst"), src=_need(v1, "src"), scale=_unnum(imm, True),
                              zp_in=zp_in, zp_out=zp_out, **sync)
        case Opcode.RQ:
            zp_hi, zp_lo, lo, hi = _VPU_UNION.unpack(union)
            return VecRequant(shape=shape, dst=_need(v0, "dst"), src=_need(v1, "src"), prm=_need(v2, "prm"),
                              zp=_i32(zp_hi * 65536 + zp_lo),
                              lo=_unnum(lo, False), hi=_unnum(hi, False), **sync)
        case Opcode.SYNC:
            return Sync(on=f.queue, **sync)
        case Opcode.BARRIER:
            return Barrier(**sync)
        case _:
            return Halt(**sync)


def _decode_gather(queue: Queue, shape: tuple[int, ...], row: int, views: list[View | None], imm: bytes,
                   union: bytes, sync: dict) -> Gather:
    for v, role in zip(views, ("dst", "table", "idx")):
        if v is None:
            raise EncodingError(f"operand {role} is missing")
    dst, table, idx = views
    (fill,) = _GATHER_UNION.unpack(union)
    return Gather(queue=queue, shape=shape, row=row, rows=_unnum(imm, False), dst=dst, table=table, idx=idx,
                  fill=_unnum(fill, dst.dtype.is_float), **sync)


# ---- programs -------------------------------------------------------------------------------------------------


def encode_program(p: Program) -> bytes:
    """The binary encoding of a program."""
    c = p.config
    try:
        out = [_HEADER.pack(MAGIC, VERSION, 0, c.rows, c.cols, c.spm, c.acc, len(p.regions), len(p.sems),
                            len(p.instrs))]
        out += [_REGION.pack(_name(r.name), r.index, r.size) for r in p.regions]
        out += [_SEM.pack(_name(s.name), s.init) for s in p.sems]
    except struct.error as e:
        raise EncodingError(f"program header: a value does not fit its binary field ({e})") from None
    for index, i in enumerate(p.instrs):
        try:
            out.append(encode_instr(i, p))
        except EncodingError as e:
            raise EncodingError(f"instruction {index}: {e}") from None
    return b"".join(out)


def decode_program(data: bytes) -> Program:
    """Decode a binary program; EncodingError on bad magic or version, truncation, unknown codes, bad values."""
    data = bytes(data)
    if len(data) < _HEADER.size:
        raise EncodingError(f"truncated program: {len(data)} bytes, the header alone has {_HEADER.size}")
    magic, version, _, rows, cols, spm, acc, n_regions, n_sems, n_instrs = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise EncodingError(f"bad magic {magic!r}, expected {MAGIC!r} (not an npusim binary program)")
    if version != VERSION:
        raise EncodingError(f"unsupported encoding version {version}, expected {VERSION}")
    start = _HEADER.size + n_regions * _REGION.size + n_sems * _SEM.size
    size = start + n_instrs * RECORD_SIZE
    if len(data) < size:
        raise EncodingError(f"truncated program: the header announces {n_regions} regions, {n_sems} semaphores and "
                            f"{n_instrs} instructions ({size} bytes), but there are {len(data)} bytes")
    if len(data) > size:
        raise EncodingError(f"{len(data) - size} trailing bytes after the last instruction")
    try:
        off = _HEADER.size
        regions = []
        for _ in range(n_regions):
            name, index, rsize = _REGION.unpack_from(data, off)
            regions.append(Region(_unname(name), index, rsize))
            off += _REGION.size
        sems = []
        for _ in range(n_sems):
            name, init = _SEM.unpack_from(data, off)
            sems.append(SemDecl(_unname(name), init))
            off += _SEM.size
        header = Program(ProgramConfig(rows, cols, spm, acc), tuple(regions), tuple(sems), ())
    except IsaError as e:  # EncodingError included
        raise EncodingError(f"program header: {e}") from None
    instrs = []
    for index in range(n_instrs):
        off = start + index * RECORD_SIZE
        try:
            instrs.append(decode_instr(data[off:off + RECORD_SIZE], header))
        except EncodingError as e:
            raise EncodingError(f"instruction {index} (byte {off}): {e}") from None
    p = dataclasses.replace(header, instrs=tuple(instrs))
    again = encode_program(p)
    if again != data:
        j = next(j for j, (a, b) in enumerate(zip(again, data)) if a != b)
        where = "the header" if j < start else f"instruction {(j - start) // RECORD_SIZE}, record byte " \
                                               f"{(j - start) % RECORD_SIZE}"
        raise EncodingError(f"non-canonical encoding at byte {j} ({where}): reserved bits, padding and unused "
                            f"fields must be zero")
    return p
