"""DRAM and host speeds in physical units (issue 24, findings 1 and 2): the Arch gives GB/s and ns, isa.speeds
converts them to core cycles exactly, DRAM bus time is counted in sub-cycle ticks and rounded up once per instruction,
and the old per-cycle fields are refused with the conversion."""

import math
from fractions import Fraction

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from isa import ArchError, DmaCopy, DType, HostCall, Queue, Space, View
from isa.arch import RENAMED, SECTIONS, Arch, load_arch
from isa.cost import dram_window, host_cost, instr_cost

A = View(Space.DRAM, 0, DType.I8, (1,), "A")


# ------------------------------------------------------------------------------------------------ old fields
@pytest.mark.parametrize("old", sorted(RENAMED))
def test_old_fields_say_what_replaced_them_and_how_to_convert(old, tmp_path):
    sec, name = old.split(".")
    with pytest.raises(ArchError) as e:
        load_arch("mid32", [f"{old}=32"])
    message = str(e.value)
    assert message == RENAMED[old] and message.startswith(f"{old} (")
    new = message.split(" is now ")[1].split()[0].rstrip(",")   # the field that replaced it exists
    assert new.split(".")[1] in {f.name for f in SECTIONS[sec].__dataclass_fields__.values()}
    path = tmp_path / "old.toml"
    path.write_text(f'base = "mid32"\n[{sec}]\n{name} = 32\n')
    with pytest.raises(ArchError, match=f"^{path}: {old} \\("):
        load_arch(str(path))


def test_the_conversion_examples_are_the_presets_numbers():
    # each message's example is a preset's old number converted: the presets were converted the same way
    mid, edge = load_arch("mid32"), load_arch("edge16")
    assert "32 B/cycle at 1.2 GHz is dram.gb_per_s = 38.4" in RENAMED["dram.bandwidth"] and mid.dram.gb_per_s == 38.4
    assert "120 cycles at 0.8 GHz is dram.latency_ns = 150" in RENAMED["dram.latency"] and edge.dram.latency_ns == 150
    assert "is dram.row_miss_ns = 36.25" in RENAMED["dram.row_miss_latency"] and edge.dram.row_miss_ns == 36.25
    assert "is host.launch_ns = 10000" in RENAMED["host.launch"] and mid.host.launch_ns == 10000
    assert "is host.gb_per_s = 19.2" in RENAMED["host.bandwidth"] and mid.host.gb_per_s == 19.2
    assert "is host.gops = 19.2" in RENAMED["host.ops_per_cycle"] and mid.host.gops == 19.2


# ------------------------------------------------------------------------------------------------ exact conversion
# each preset's old per-cycle fields: dram.bandwidth, dram.latency, dram.row_miss_latency, host.launch,
# host.bandwidth, host.ops_per_cycle
OLD = {"edge16": (8, 120, 29, 8000, 8, 4), "mid32": (32, 100, 38, 12000, 16, 16),
       "dc128": (512, 250, 28, 20000, 32, 64)}


@pytest.mark.parametrize("preset", sorted(OLD))
def test_presets_keep_their_cycles(preset):
    arch = load_arch(preset)
    d, h = arch.dram_timing, arch.host_timing
    assert (d.bytes_per_cycle, d.latency, d.row_miss, h.launch, h.bytes_per_cycle, h.ops_per_cycle) == OLD[preset]
    assert arch.dram.access_bytes == OLD[preset][0]
    # a partial burst takes the whole cycles it took: ceil(20 / 8) = 3 on edge16, one cycle on the wider ones
    w = dram_window(A, (20,), arch.with_overrides(["dram.model=bandwidth"]))
    assert w.cycles == math.ceil(20 / OLD[preset][0])


def test_numbers_are_the_decimals_written():
    # 100 ns at 1.1 GHz is 110 cycles; in floats 110.00000000000001, which rounds up to 111
    assert math.ceil(100 * 1.1) == 111 and load_arch("mid32", ["clock.ghz=1.1", "dram.latency_ns=100"]).dram_timing \
        .latency == 110
    arch = load_arch("mid32", ["dram.gb_per_s=50"])           # 50 / 1.2 = 41 2/3 B/cycle: one 32-B access 0.768
    t = arch.dram_timing
    assert t.bytes_per_cycle == Fraction(125, 3) and Fraction(t.access_ticks, t.ticks) == Fraction(96, 125)
    assert t.ticks == 125 * arch.dma.outstanding


def test_too_fine_ticks_are_refused_naming_the_fields():
    with pytest.raises(ArchError) as e:
        load_arch("mid32", ["dram.gb_per_s=38.41234"])
    assert str(e.value) == ("dram.gb_per_s = 38.41234 with dram.access_bytes = 32 at clock.ghz = 1.2 makes one access "
                            "hold the bus 1920000/1920617 cycles: timing that exactly needs 1/1920617 of a cycle (at "
                            "most 1/1048576); write dram.gb_per_s and clock.ghz with fewer decimal digits (e.g. 38.4 "
                            "and 1.2)")
    load_arch("mid32", ["dram.gb_per_s=38.41"])                # what it suggests, and 4 digits, are fine


def test_a_burst_is_whole_accesses():
    with pytest.raises(ArchError, match=r"^dma\.burst_bytes \(64\) must be a multiple of dram\.access_bytes \(128\)"):
        load_arch("mid32", ["dram.access_bytes=128"])
    Arch()   # the defaults hold together


# ------------------------------------------------------------------------------------------------ ticks
def test_a_window_by_hand_rounds_once_per_instruction():
    # 30.72 GB/s at 1.2 GHz = 25.6 B/cycle: a 32-B access holds the bus 1.25 cycles, a 64-B burst 2.5; 256 in
    # flight never bind ((100 + 2.5) / 256 < 2.5). Three bursts: 7.5 cycles, rounded up once: 8 (whole cycles per
    # burst gave 3 x ceil(64 / 25.6) = 9). 64 + 64 + 16 B: the 16 B are one access, 2.5 + 2.5 + 1.25 = 6.25 -> 7.
    arch = load_arch("mid32", ["dram.model=bandwidth", "dram.gb_per_s=30.72", "dma.outstanding=256"])
    assert dram_window(A, (192,), arch) == (8, 3, 0, 0)
    assert dram_window(A, (144,), arch) == (7, 3, 0, 0)
    # the DMA: setup 8 + max(window 8, one 256-B SPM line) + latency 100
    load = DmaCopy(queue=Queue.DMA_LD, shape=(192,), dst=View(Space.SPM, 0, DType.I8, (1,)), src=A)
    cost = instr_cost(load, arch)
    assert (cost.cycles, cost.dram_window, cost.dram_latency) == (8 + 8 + 100, 8, 100)


def test_the_clock_scales_dram_cycles_not_dram_time():
    # mid32 at twice its clock: twice the cycles for the bus (38.4 GB/s = 16 B/cycle), the latency (83.33 ns = 200
    # cycles) and the row miss (76): the same nanoseconds; the host too
    slow, fast = load_arch("mid32"), load_arch("mid32", ["clock.ghz=2.4"])
    view = (1 << 16,)
    assert dram_window(A, view, fast).cycles == 2 * dram_window(A, view, slow).cycles
    assert (fast.dram_timing.latency, fast.dram_timing.row_miss) == (200, 76)
    call = HostCall(fn="f", rd=4096, wr=4096, ops=1024)
    assert host_cost(call, fast).cycles == 2 * host_cost(call, slow).cycles


BANDWIDTHS = st.sampled_from((0.8, 3.2, 6.4, 9.6, 12.8, 17.3, 25.6, 38.4, 51.2, 76.8, 102.0, 256.0))


@st.composite
def dram_views(draw):
    """A DRAM view of up to 4096 bytes: 1-3 dimensions of small extents and strides in bytes (page-sized too)."""
    dims = [(draw(st.integers(1, 16)), draw(st.sampled_from((1, 4, 16, 64, 100, 2048, 4096, 8192, -64))))
            for _ in range(draw(st.integers(1, 3)))]
    lo = sum((e - 1) * s for e, s in dims if s < 0)
    return View(Space.DRAM, draw(st.integers(0, 8192)) - lo, DType.I8, tuple(s for _, s in dims), "A"), \
        tuple(e for e, _ in dims)


@settings(max_examples=200, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(vs=dram_views(), preset=st.sampled_from(("edge16", "mid32")), model=st.sampled_from(("rowbuffer", "bandwidth")),
       outstanding=st.sampled_from((1, 4, 16, 64, 256)), pair=st.lists(BANDWIDTHS, min_size=2, max_size=2, unique=True))
def test_a_window_never_grows_when_the_bus_or_the_requests_in_flight_grow(vs, preset, model, outstanding, pair):
    view, shape = vs
    lo, hi = sorted(pair)
    base = load_arch(preset, [f"dram.model={model}", f"dma.outstanding={outstanding}"])
    slower, faster = (base.with_overrides([f"dram.gb_per_s={g}"]) for g in (lo, hi))
    assert dram_window(view, shape, faster).cycles <= dram_window(view, shape, slower).cycles
    more = slower.with_overrides([f"dma.outstanding={outstanding * 4}"])
    assert dram_window(view, shape, more).cycles <= dram_window(view, shape, slower).cycles
