"""compiler.vector.permute: any transpose equals numpy's, and its DMAs move long runs in both directions."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from compiler.target import Target
from compiler.vector import permute
from isa import DmaCopy, DType, Space
from isa.arch import load_arch
from npusim import simulate
from npusim.simulator import region_array


@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(1, 9), min_size=2, max_size=5), data=st.data(),
       preset=st.sampled_from(["edge16", "dc128"]), spm=st.sampled_from([None, 4096]))
def test_any_transpose_matches_numpy(shape, data, preset, spm):
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    arch = load_arch(preset)
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    target = Target.of(arch)
    p = permute(tuple(shape), perm, DType.F32, target.with_spm(spm) if spm else target)  # small SPM: many tiles
    got = region_array(simulate(p, arch, {"X": x}), "Y", DType.F32, x.transpose(perm).shape)
    assert (got == x.transpose(perm)).all()


def test_attention_head_split_reads_and_writes_contiguous_runs():
    # BERT's K^T: (1, 128, 12, 64) -> (1, 12, 64, 128); the DRAM side of every DMA is unit-stride innermost, the
    # reordering happens in SPM
    arch = load_arch("mid32")
    p = permute((1, 128, 12, 64), (0, 2, 3, 1), DType.F32, Target.of(arch))
    dmas = [i for i in p.instrs if isinstance(i, DmaCopy)]
    dram = [i.src if i.src.space is Space.DRAM else i.dst for i in dmas]
    assert dmas and all(v.strides[-1] == 4 for v in dram)
