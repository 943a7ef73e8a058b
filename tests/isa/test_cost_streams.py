"""The cost model's SRAM and DRAM stream formulas, evaluated period by period (isa.stream), equal the element-by-element
oracle (tests/isa/cost_oracle.py, the implementation before) on random views, whatever the leaf size; they take
bounded time and memory on views of any size; a stream without a short period is refused, not run for ever."""

import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from isa import DType, Gather, IsaError, Queue, Space, View, stream
from isa.arch import load_arch
from isa.cost import (
    _bank_cycles,
    _Bus,
    _dram,
    _row_misses,
    _uniform_row_misses,
    bank_cycles,
    clear_caches,
    dram_window,
    gather_bursts,
)
from tests.isa import cost_oracle

SETTINGS = settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
CHUNKS = (1 << 14, 64, 16)   # the default leaf, and leaves small enough that every view takes the periodic paths


@st.composite
def dims(draw, max_points: int = 4000):
    """1-5 (extent, stride) pairs in bytes, at most ``max_points`` points (the oracle materialises them)."""
    out, points = [], 1
    for _ in range(draw(st.integers(1, 5))):
        e = draw(st.sampled_from((1, 2, 3, 4, 5, 7, 8, 16, 17, 31, 64, 100, 257)))
        if points * e > max_points:
            break
        points *= e
        out.append((e, draw(st.one_of(st.sampled_from((0, 1, 2, 4, 16, 64, 128, 4096, -1, -4, -64)),
                                      st.integers(-5000, 5000)))))
    return tuple(out) or ((1, 1),)


def _offset_nonneg(base: int, d: tuple[tuple[int, int], ...]) -> bool:
    return base + sum((e - 1) * s for e, s in d if s < 0) >= 0


@pytest.fixture(params=CHUNKS, ids=lambda c: f"chunk{c}")
def chunk(request, monkeypatch):
    monkeypatch.setattr(stream, "CHUNK", request.param)
    clear_caches()
    yield request.param
    clear_caches()


@SETTINGS
@given(d=dims(), banks=st.sampled_from((1, 2, 4, 8, 16, 32)), width=st.sampled_from((1, 2, 4, 16, 64, 128)),
       beat=st.one_of(st.sampled_from((1, 16, 32, 256)), st.integers(1, 100)), base=st.integers(0, 1 << 20))
def test_bank_cycles_equal_the_oracle(chunk, d, banks, width, beat, base):
    _bank_cycles.cache_clear()
    got = _bank_cycles(base % width, d, banks, width, beat)
    period = banks * width
    base %= period
    if not _offset_nonneg(base, d):
        # the oracle dropped words below address 0 of its translated frame (it read the padding sentinel -1 as "no
        # word"): compare with it on the same view moved up by whole bank periods, which is what it stands for
        lo = -sum((e - 1) * s for e, s in d if s < 0)
        base += -(-lo // period) * period
    assert got == cost_oracle._bank_cycles(base, d, 0, banks, width, beat)


@SETTINGS
@given(d=dims(), es=st.sampled_from((1, 2, 4)), burst=st.sampled_from((4, 16, 64, 512)),
       page_mul=st.sampled_from((0, 1, 2, 4, 32)), access=st.sampled_from((1, 2, 8, 64)),
       access_ticks=st.sampled_from((1, 2, 5, 13)), latency=st.sampled_from((0, 5, 100, 1001)),
       outstanding=st.sampled_from((1, 2, 3, 16, 64)), banks=st.sampled_from((1, 2, 8, 32)),
       row_miss=st.sampled_from((0, 7, 30, 300)), base=st.integers(0, 1 << 20))
def test_dram_window_equals_the_oracle(chunk, d, es, burst, page_mul, access, access_ticks, latency, outstanding,
                                       banks, row_miss, base):
    d = tuple((e, s * es) for e, s in d)
    page = burst * page_mul
    args = (d, es, burst, min(access, burst), access_ticks, latency, outstanding, page, banks if page else 0,
            row_miss if page else 0)
    _dram.cache_clear()
    assert _dram(base % (page or burst), *args) == cost_oracle._dram(base % (page or burst), *args)


@SETTINGS
@given(runs=st.lists(st.tuples(st.sampled_from((1, 2, 3, 5, 8, 17)), st.integers(-40, 40)), max_size=2),
       bursts=st.sampled_from((1, 2, 3, 8)), burst=st.sampled_from((4, 16, 64)),
       page_mul=st.sampled_from((0, 1, 2, 32)), access=st.sampled_from((1, 2, 8, 64)),
       access_ticks=st.sampled_from((1, 2, 5, 13)), latency=st.sampled_from((0, 5, 100, 1001)),
       outstanding=st.sampled_from((1, 2, 3, 16)), banks=st.sampled_from((1, 2, 8, 32)),
       row_miss=st.sampled_from((0, 7, 30, 300)), base=st.integers(0, 1 << 12))
def test_whole_bursts_equal_the_oracle(chunk, monkeypatch, runs, bursts, burst, page_mul, access, access_ticks,
                                       latency, outstanding, banks, row_miss, base):
    # views whose runs all start and end on burst boundaries (what _Bus.full_bursts evaluates in closed form):
    # runs of whole bursts at strides of whole bursts (any sign), from an aligned base; equal to the oracle and to the
    # general evaluation
    page = burst * page_mul
    d = tuple((e, s * burst) for e, s in runs) + ((bursts * burst // 4, 4),)
    base = base * burst + sum((e - 1) * -s for e, s in d if s < 0)   # (no byte below offset 0)
    args = (d, 4, burst, min(access, burst), access_ticks, latency, outstanding, page, banks if page else 0,
            row_miss if page else 0)
    _dram.cache_clear()
    got = _dram(base % (page or burst), *args)
    assert got == cost_oracle._dram(base % (page or burst), *args)
    with monkeypatch.context() as m:   # (undone before the next example)
        m.setattr(_Bus, "full_bursts", lambda self, leaf, r: None)
        _dram.cache_clear()
        assert got == _dram(base % (page or burst), *args)


@SETTINGS
@given(pages=st.lists(st.integers(0, 40), min_size=1, max_size=400), step=st.integers(1, 50),
       banks=st.sampled_from((1, 2, 8, 32)), row_miss=st.sampled_from((0, 7, 30, 300)),
       outstanding=st.sampled_from((1, 2, 3, 16)), runs=st.integers(1, 8))
def test_uniform_row_misses_equal_the_general_ones(pages, step, banks, row_miss, outstanding, runs):
    # bursts issued a constant interval apart, walked group by group (or, above WALKED_GROUPS groups, by numpy):
    # revisited pages, banks shared by pages, runs of bursts to one page
    pages = np.repeat(np.array(pages, np.int64), runs)
    want = _row_misses(pages, np.arange(pages.size, dtype=np.int64) * step, 0, banks, row_miss, outstanding)[:2]
    assert _uniform_row_misses(pages, step, banks, row_miss, outstanding) == want


def test_whole_bursts_take_the_closed_form():
    """A weight chunk's load (whole bursts) is priced by _Bus.full_bursts; a run that ends mid-burst is not."""
    bus = _Bus(64, 32, 1, 100, 16, 8192, 32, 38)
    assert bus.full_bursts(stream.Leaf(np.array([0, 4096], np.int64), 1024), 128) is not None
    assert bus.full_bursts(stream.Leaf(np.array([0, 4096], np.int64), 1000), 128) is None
    assert bus.full_bursts(stream.Leaf(np.array([0, 4096], np.int64), 1024), 100) is None


def test_periodic_paths_are_taken():
    """With small leaves a long strided view is a repetition of blocks: evaluated, it visits a few of them."""
    walk = stream.Walk(type("C", (), {"modulus": 16, "zero": (0,), "initial": (), "shift": lambda s, st, d: st,
                                      "leaf": lambda s, leaf, r, st: ((leaf.offsets.size,), st)})())
    tree = stream.build(((1000, 48), (7, 4)), stream.Leaf(np.zeros(1, np.int64)), 16, 1, chunk=64)
    assert walk(tree, 0, ())[0] == (7000,)       # every element counted ...
    assert walk.items < 300                        # ... from a few leaves


EDGE, MID = load_arch("edge16"), load_arch("mid32")
HUGE = [  # (shape, strides, DRAM too): 65535**2 and 65535**3 elements, far more than any array could hold
    ((65535, 65535), (0, 1), True),
    ((65535, 65535, 65535), (0, 0, 0), True),
    ((65535, 65535), (65535, 1), True),
    ((4096, 65535), (3, 0), False),     # in DRAM: 4096 different page offsets, refused (below)
    ((65535, 65535), (1, 65535), False),
]


@pytest.mark.parametrize("shape,strides,dram", HUGE)
def test_huge_views_cost_in_bounded_time(shape, strides, dram):
    """The fuzzer's "Unable to allocate 938 MiB" and 9.7 GB cases: bank conflicts and DRAM bursts of views with
    billions of elements, in well under a second each."""
    clear_caches()
    t0 = time.perf_counter()
    points = int(np.prod(shape))
    actual, ideal = bank_cycles(View(Space.SPM, 0x40, DType.I8, strides), shape, EDGE.spm, 16)
    assert points // 16 // EDGE.spm.banks <= ideal <= actual <= points   # a beat: 1 to 16 cycles
    if dram:
        window = dram_window(View(Space.DRAM, 0x40, DType.I8, strides, "A"), shape, MID)
        assert window.bursts >= points // MID.dma.burst_bytes
    assert time.perf_counter() - t0 < 5


def test_contiguous_views_follow_the_closed_forms():
    """A contiguous i8 stream: a DMA beat is one memory line, one cycle; bursts are full; a 64 MiB copy too."""
    n = 1 << 26
    view = View(Space.SPM, 0, DType.I8, (1,))
    line = EDGE.spm.banks * EDGE.spm.bank_width
    assert bank_cycles(view, (n,), EDGE.spm, line) == (n // line, n // line)
    w = dram_window(View(Space.DRAM, 0, DType.I8, (1,), "A"), (n,), MID)
    assert (w.bursts, w.row_misses) == (n // 64, n // MID.dram.page_bytes)


def test_a_stream_without_a_short_period_is_refused(monkeypatch):
    """A 1-byte transpose of 65535 x 65535 in DRAM: every column starts at another offset in its page, so the
    columns' row misses differ and there is no short period; with a small budget it is refused at once (with the
    default one, in a few seconds)."""
    monkeypatch.setattr(stream, "BUDGET", 100_000)
    clear_caches()
    view = View(Space.DRAM, 0x40, DType.I8, (1, 65535), "A")
    with pytest.raises(IsaError, match=r"^the cost model cannot time operand dram:A\+0x40<i8>\{1,65535\} over "
                                       r"shape\[65535, 65535\] \(4,294,836,225 elements\): its address pattern has "
                                       r"no short period \(over 100,000 items without a period\); split the "
                                       r"instruction into smaller ones$"):
        dram_window(view, (65535, 65535), MID)
    clear_caches()


@SETTINGS
@given(base=st.integers(0, 1 << 16), rs=st.integers(1, 5000), row=st.integers(1, 700), rows=st.integers(1, 300),
       points=st.integers(1, 50), dtype=st.sampled_from((DType.I8, DType.F16, DType.F32)),
       burst=st.sampled_from((16, 64, 512, 4096)), gb_per_s=st.sampled_from((0.8, 2.8, 6.4, 51.2, 100.0)),
       access=st.sampled_from((1, 8, 16)), latency_ns=st.sampled_from((0, 6.25, 125)),
       outstanding=st.sampled_from((1, 2, 16)))
def test_gather_bursts_equal_the_oracle(base, rs, row, rows, points, dtype, burst, gb_per_s, access, latency_ns,
                                        outstanding):
    """The DRAM gather's bus window in closed form over the row offsets equals cutting each offset's row into
    bursts one by one (edge16's 0.8 GHz: 1 to 125 B per cycle, bus ticks of 1 to 1/5 cycle)."""
    arch = load_arch("edge16", [f"dma.burst_bytes={burst}", f"dram.page_bytes={max(burst, 2048)}",
                                f"dram.gb_per_s={gb_per_s}", f"dram.access_bytes={access}",
                                f"dram.latency_ns={latency_ns}", f"dma.outstanding={outstanding}"])
    es = dtype.size
    g = Gather(queue=Queue.DMA_LD, shape=(points,), row=row, rows=rows,
               dst=View(Space.SPM, 0, dtype, (row * es, es)),
               table=View(Space.DRAM, base * es, dtype, (rs * es,), region="T"),
               idx=View(Space.SPM, 0x40000, DType.I32, (4,)))
    assert tuple(gather_bursts(g, arch)) == cost_oracle.gather_bursts(g, arch)


def test_gather_bursts_of_a_huge_row_are_closed_form():
    """A table of 65,535 rows of 65,535 f32 (1 GiB) at an odd row stride from DRAM with 64 KiB bursts: every row
    offset modulo the burst is priced at once (no array grows with the row's bytes)."""
    arch = load_arch("edge16", ["dma.burst_bytes=65536", "dram.page_bytes=65536"])
    g = Gather(queue=Queue.DMA_LD, shape=(4,), row=65535, rows=65535, dst=View(Space.SPM, 0, DType.F32, (4, 4)),
               table=View(Space.DRAM, 4, DType.F32, (65537 * 4,), region="T"),
               idx=View(Space.SPM, 0x40000, DType.I32, (4,)))
    window, row_bursts = gather_bursts(g, arch)
    assert row_bursts == 5 and window > 0     # 262,140 bytes from offset 16 of a burst: a head, 3 full, a tail
