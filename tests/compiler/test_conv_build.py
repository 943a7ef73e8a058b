"""compiler.kernels.conv2d.conv2d copies a tile's instructions to the later tiles of its kind: the program must be the
one that emitting every tile on its own gives."""

import itertools

from compiler.errors import TilingError
from compiler.kernels.common.sink import ProgramSink
from compiler.kernels.common.target import Target
from compiler.kernels.conv2d import (
    ConvEmitter,
    ConvLayout,
    ConvTiling,
    Epilogue,
    Halt,
    TileState,
    conv2d,
    search_conv_tiling,
)
from isa import DType
from isa.arch import load_arch
from tests.compiler.test_conv_estimate import EPILOGUES, SHAPES, TILINGS


def each_tile(cs, dtype, target, tiling, ep):
    """conv2d's program with every tile emitted by itself (no copies)."""
    layout = ConvLayout.of(cs, dtype, target, tiling, ep, 0)
    emitter, sink, state = ConvEmitter(layout), ProgramSink(), TileState()
    sink.extend(layout.prologue())
    for b, oh0, ow0 in layout.tiles:
        emitter.tile(sink, layout.geometry(b, oh0, ow0), state)
    return layout.program(sink.instrs + [Halt()])


def test_copied_tiles_equal_emitted_tiles():
    # every shape and epilogue with the hand-picked tilings (split reductions, x_all, one accumulator tile, packing,
    # im2col, group packing, fills for wide pads) and the searched one, on two presets; a residual's R loads and a
    # bias init before the previous tile's store move with the tile too
    built = copied = 0
    for preset in ("edge16", "mid32"):
        target = Target.of(load_arch(preset))
        for cs, (ep, dtype), tiling in itertools.product(SHAPES, EPILOGUES, TILINGS + [None]):
            tiling = tiling or search_conv_tiling(cs, dtype, target, ep)
            try:
                prog = conv2d(cs, dtype, target, tiling, ep)
            except TilingError:   # (a hand-picked tiling this shape or preset cannot take)
                continue
            want = each_tile(cs, dtype, target, tiling, ep)
            assert prog == want, (preset, cs, ep, tiling)
            built += 1
            tiles = len(ConvLayout.of(cs, dtype, target, tiling, ep, 0).tiles)
            copied += tiles > 4
    assert built >= 100 and copied >= 50


def test_copies_rebase_only_their_own_tile():
    # two tiles of one kind differ in their X, Y and R offsets only: the second tile's loads and stores read and
    # write its own pixels (a 3x3 with a residual, tiles of 2 x 4 pixels, one channel block per accumulator tile)
    cs = SHAPES[0]
    target = Target.of(load_arch("mid32"))
    prog = conv2d(cs, DType.F32, target, ConvTiling(2, 4, 1 << 16, 1, False, 2), Epilogue(bias=True, residual=True))
    stores = [i.dst.base for i in prog.instrs if getattr(i, "dst", None) is not None and i.dst.region == "Y"]
    assert stores == [((oh * cs.OW + ow) * cs.K + nb) * 4 for oh in range(0, cs.OH, 2) for ow in range(0, cs.OW, 4)
                      for nb in range(0, cs.K, target.cols)]   # (one store per output-channel block)
    res = [i.src.base for i in prog.instrs if getattr(i, "src", None) is not None and i.src.region == "R"]
    assert res == stores
