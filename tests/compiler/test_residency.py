"""place_in_spm: which activation tensors go to the SPM arena, where, and how segments are rebound."""

from compiler.link.linker import Segment
from compiler.link.residency import place_in_spm

BASE, ALIGN = 1 << 20, 1024


def seg(name: str, **bind) -> Segment:
    return Segment(name, "Conv", None, bind)   # placement only reads the binds


def test_overlapping_lifetimes_get_disjoint_addresses_and_disjoint_ones_share():
    # a: segments 0-1, b: 1-2, c: 2-3. a and b overlap, b and c overlap, a and c do not.
    segs = [seg("s0", Y=("ACT", 0)), seg("s1", X=("ACT", 0), Y=("ACT", 5000)),
            seg("s2", X=("ACT", 5000), Y=("ACT", 9000)), seg("s3", X=("ACT", 9000), Y=("ACT", 20000))]
    tensors = [(0, 5000), (5000, 4000), (9000, 3000), (20000, 100)]
    out, placed = place_in_spm(segs, tensors, pinned={20000}, base=BASE, size=16 * ALIGN, align=ALIGN)
    at = {p.offset: (p.spm, p.first, p.last) for p in placed}
    assert at == {0: (BASE, 0, 1), 5000: (BASE + 5 * ALIGN, 1, 2), 9000: (BASE, 2, 3)}   # c reuses a's bytes
    assert out[1].bind == {"X": ("SPM", BASE), "Y": ("SPM", BASE + 5 * ALIGN)}
    assert out[3].bind == {"X": ("SPM", BASE), "Y": ("ACT", 20000)}   # the pinned output stays in DRAM


def test_a_bind_inside_a_tensor_keeps_its_offset_and_what_does_not_fit_stays_in_dram():
    segs = [seg("s0", Y=("ACT", 0), W=("W", 64)), seg("s1", X=("ACT", 256), Y=("ACT", 4096)),
            seg("s2", X=("ACT", 4096))]
    tensors = [(0, 1000), (4096, 9000)]
    out, placed = place_in_spm(segs, tensors, pinned=set(), base=BASE, size=8 * ALIGN, align=ALIGN)
    assert [p.offset for p in placed] == [0]   # 9000 B need 9 KiB: more than the 8 KiB arena
    assert out[0].bind == {"Y": ("SPM", BASE), "W": ("W", 64)}   # constants are never moved
    assert out[1].bind == {"X": ("SPM", BASE + 256), "Y": ("ACT", 4096)}
    assert out[2].bind == {"X": ("ACT", 4096)}


def test_first_fit_fills_a_gap_left_by_a_dead_tensor():
    # a (0-1) and b (0-3) are placed first; c (2-3) fits where a was, d (2-3) goes above b.
    segs = [seg("s0", A=("ACT", 0), B=("ACT", 10000)), seg("s1", A=("ACT", 0)),
            seg("s2", C=("ACT", 20000), D=("ACT", 30000)), seg("s3", B=("ACT", 10000), C=("ACT", 20000),
                                                                  D=("ACT", 30000))]
    tensors = [(0, 2 * ALIGN), (10000, ALIGN), (20000, 2 * ALIGN), (30000, ALIGN)]
    _, placed = place_in_spm(segs, tensors, pinned=set(), base=0, size=4 * ALIGN, align=ALIGN)
    assert {p.offset: p.spm for p in placed} == {0: 0, 10000: 2 * ALIGN, 20000: 0, 30000: 3 * ALIGN}


def test_a_residual_conv_writes_its_output_over_the_residual_it_reads_last():
    # s1 reads r (also read by s0) as its residual and writes y of the same size: y takes r's bytes exactly.
    # In s3 the residual q is read again later (s4), so z must go elsewhere.
    segs = [seg("s0", Y=("ACT", 0)), seg("s1", X=("ACT", 0), R=("ACT", 0), Y=("ACT", 8192)),
            seg("s2", X=("ACT", 8192), Y=("ACT", 16384)),
            seg("s3", X=("ACT", 16384), R=("ACT", 8192), Y=("ACT", 24576)), seg("s4", X=("ACT", 8192))]
    tensors = [(0, 2 * ALIGN), (8192, 2 * ALIGN), (16384, 2 * ALIGN), (24576, 2 * ALIGN)]
    _, placed = place_in_spm(segs, tensors, pinned=set(), base=0, size=8 * ALIGN, align=ALIGN)
    at = {p.offset: p.spm for p in placed}
    assert at[8192] == at[0] == 0                 # in place: r's last reader is s1
    assert at[24576] not in (at[8192], at[16384])  # y is still read by s4: z cannot take its bytes
