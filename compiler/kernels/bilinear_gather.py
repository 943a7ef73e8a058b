"""Bilinear sampling by row gathers: the intended use of ``vpu.gather`` / ``dma.ld.gather``
(docs/perception.md#row-gather).

Not a lowering (Resize and GridSample lower onto the same pattern, in their own module): one small program that
samples ``P`` points of an NHWC image ``X (H, W, C)`` f32 the way onnxruntime's GridSample does on its fast path
(bilinear, ``padding_mode=zeros``, ``align_corners=0``), bit for bit:

1. The table is X with a one-pixel zero halo, ``(H+2, W+2, C)``: loaded into SPM with the DMA's ``pad``
   (``table="spm"``), or stored that way in DRAM by its producer (``table="dram"``). Its "rows" are pixel *pairs*:
   row ``k`` is the ``2C`` elements of padded pixels ``k`` and ``k + 1``, rows ``C`` elements apart, so the two
   horizontal neighbours ``(x1, x1 + 1)`` of a sample are one row.
2. Two gathers, the top pair (row ``y1``) and the bottom pair (``y1 + 1``), build ``g[P, 4, C]`` in the tap order
   ``p11, p12, p21, p22``; a pair wholly outside the halo gets index -1 and reads ``fill = 0``.
3. Two vector instructions weight the taps in onnxruntime's product order ``((w11*p11 + w12*p12) + w21*p21) +
   w22*p22``: ``vpu.mul`` writes ``w11*p11``, then ``vpu.mul.sum`` *without* ``.z`` adds the other three products in
   row-major order.

The indices and weights are the compile-time tables of a constant grid (class 2 of docs/perception.md#sample2d-classes),
computed by :func:`bilinear_taps` in float32 in onnxruntime's order.
"""

from __future__ import annotations

import numpy as np

from compiler.errors import CompileError
from compiler.kernels.common.target import Target
from isa import (
    BinOp,
    DmaCopy,
    DType,
    Gather,
    Halt,
    Pad,
    Program,
    Queue,
    Reduce,
    Region,
    SemDecl,
    SemOp,
    Space,
    VecBinary,
    View,
)
from isa.instructions import MAX_TABLE_ROWS
from isa.view import MAX_EXTENT

F32 = DType.F32
TAPS = 4
ES = F32.size


def bilinear_taps(grid: np.ndarray, height: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Gather indices ``(2, P)`` i32 (top and bottom pair rows of the haloed table, -1 for a pair wholly outside it)
    and weights ``(P, 4)`` f32 ``(w11, w12, w21, w22)`` of the points ``grid (P, 2)`` (``x, y`` normalised to
    [-1, 1]), in onnxruntime's float32 order: ``x = ((gx + 1) * W - 1) / 2``, ``x1 = floor(x)``, ``dx1 = x - x1``,
    ``dx2 = (x1 + 1) - x`` (same for y), ``w11 = dy2*dx2, w12 = dy2*dx1, w21 = dy1*dx2, w22 = dy1*dx1``."""
    g = np.asarray(grid, np.float32).reshape(-1, 2)
    one, two = np.float32(1), np.float32(2)
    x = ((g[:, 0] + one) * np.float32(width) - one) / two
    y = ((g[:, 1] + one) * np.float32(height) - one) / two
    x1, y1 = np.floor(x), np.floor(y)
    dx1, dx2 = x - x1, (x1 + one) - x
    dy1, dy2 = y - y1, (y1 + one) - y
    weights = np.stack([dy2 * dx2, dy2 * dx1, dy1 * dx2, dy1 * dx1], axis=1).astype(np.float32)
    # pair (x1, x1 + 1) is padded row (yy + 1) * (W + 2) + x1 + 1; it holds image pixels when -1 <= x1 <= W - 1
    xi, yi = x1.astype(np.int64), y1.astype(np.int64)
    x_ok = (xi >= -1) & (xi <= width - 1)
    idx = np.empty((2, g.shape[0]), np.int64)
    for k, yy in enumerate((yi, yi + 1)):
        ok = x_ok & (yy >= -1) & (yy <= height)
        idx[k] = np.where(ok, (yy + 1) * (width + 2) + xi + 1, -1)
    return idx.astype(np.int32), weights


def bilinear_sample(height: int, width: int, channels: int, points: int, target: Target,
                    table: str = "spm") -> Program:
    """The program sampling ``points`` points of ``X (height, width, channels)`` f32 bilinearly.

    DRAM regions: ``X`` the image ((H, W, C) for ``table="spm"``, which loads it into SPM with its zero halo and
    gathers with ``vpu.gather``; the haloed (H+2, W+2, C) for ``table="dram"``, gathered by ``dma.ld.gather``),
    ``I`` the indices (2, P) i32 and ``Wt`` the weights (P, 4) f32 of :func:`bilinear_taps`; ``Y`` (P, C) f32 out.
    Raises CompileError when the tiles do not fit ``target``'s SPM or a field's range.
    """
    if table not in ("spm", "dram"):
        raise CompileError(f"table must be 'spm' or 'dram', not {table!r}")
    h, w, c, p = height, width, channels, points
    hp, wp = h + 2, w + 2
    pair_rows = hp * wp - 1
    if not 1 <= 2 * c <= MAX_EXTENT or not 1 <= p <= MAX_EXTENT or pair_rows > MAX_TABLE_ROWS:
        raise CompileError(f"bilinear_sample takes 2*channels and points in [1, {MAX_EXTENT}] and at most "
                           f"{MAX_TABLE_ROWS} table rows, not {2 * c}, {p} and {pair_rows}")
    vpu = table == "spm"
    line = target.bank_row
    up = lambda n: -(-n // line) * line  # noqa: E731   (every tile starts on an SRAM line)
    t_at = 0
    i_at = t_at + (up(hp * wp * c * ES) if vpu else 0)
    w_at = i_at + up(2 * p * 4)
    g_at = w_at + up(p * TAPS * ES)
    y_at = g_at + up(p * TAPS * c * ES)
    if y_at + p * c * ES > target.spm:
        raise CompileError(f"bilinear_sample of a {h}x{w}x{c} table at {p} points needs {y_at + p * c * ES} bytes of "
                           f"SPM, the target has {target.spm}; sample fewer points per program")
    regions = (Region("X", 0, (h * w if vpu else hp * wp) * c * ES), Region("I", 1, 2 * p * 4),
               Region("Wt", 2, p * TAPS * ES), Region("Y", 3, p * c * ES))
    ld, ready, done = Queue.DMA_LD, SemOp("ready"), SemOp("done")
    instrs = []
    if vpu:   # the image with its one-pixel zero halo
        instrs.append(DmaCopy(queue=ld, shape=(hp, wp, c), dst=View(Space.SPM, t_at, F32, (wp * c * ES, c * ES, ES)),
                              src=View(Space.DRAM, 0, F32, (w * c * ES, c * ES, ES), "X"),
                              pad=(Pad(0, 1, 1), Pad(1, 1, 1)), fill=0.0))
    instrs.append(DmaCopy(queue=ld, shape=(2 * p,), dst=View(Space.SPM, i_at, DType.I32, (4,)),
                          src=View(Space.DRAM, 0, DType.I32, (4,), "I")))
    src = View(Space.SPM, t_at, F32, (c * ES,)) if vpu else View(Space.DRAM, 0, F32, (c * ES,), "X")
    gathers = [Gather(queue=Queue.VPU if vpu else ld, shape=(p,), row=2 * c, rows=pair_rows,
                      dst=View(Space.SPM, g_at + k * 2 * c * ES, F32, (TAPS * c * ES, ES)), table=src,
                      idx=View(Space.SPM, i_at + k * p * 4, DType.I32, (4,)), fill=0.0,
                      waits=(ready,) if vpu and k == 0 else ())
               for k in range(2)]   # the top pair (p11, p12), then the bottom pair (p21, p22)
    load_w = DmaCopy(queue=ld, shape=(p * TAPS,), dst=View(Space.SPM, w_at, F32, (ES,)),
                     src=View(Space.DRAM, 0, F32, (ES,), "Wt"), signals=(ready,))
    instrs += [load_w, *gathers] if vpu else [*gathers, load_w]
    instrs += [
        VecBinary(op=BinOp.MUL, shape=(p, c), dst=View(Space.SPM, y_at, F32, (c * ES, ES)),
                  src0=View(Space.SPM, g_at, F32, (TAPS * c * ES, ES)), src1=View(Space.SPM, w_at, F32, (TAPS * ES, 0)),
                  waits=() if vpu else (ready,)),
        VecBinary(op=BinOp.MUL, reduce=Reduce.SUM, shape=(p, TAPS - 1, c),
                  dst=View(Space.SPM, y_at, F32, (c * ES, 0, ES)),
                  src0=View(Space.SPM, g_at + c * ES, F32, (TAPS * c * ES, c * ES, ES)),
                  src1=View(Space.SPM, w_at + ES, F32, (TAPS * ES, ES, 0)), signals=(done,)),
        DmaCopy(queue=Queue.DMA_ST, shape=(p, c), dst=View(Space.DRAM, 0, F32, (c * ES, ES), "Y"),
                src=View(Space.SPM, y_at, F32, (c * ES, ES)), waits=(done,)),
        Halt(),
    ]
    return Program(target.config, regions, (SemDecl("ready", 0), SemDecl("done", 0)), tuple(instrs))

