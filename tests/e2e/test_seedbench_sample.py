"""npusim.app.seedbench.sample: the Sample2D rows of the perception bench. The small cases run with values on every
preset and every NPU variant equals the numpy reference (onnxruntime's order) bit for bit; the counters add up."""

import math
from fractions import Fraction

from isa.arch import load_arch, presets_by_size
from npusim.app.seedbench.sample import CASES, SMALL, _host_cycles, seed_sample_rows


def test_small_cases_are_exact_on_every_variant_and_preset():
    rows = seed_sample_rows(SMALL, values=True)
    variants = {(r["case"], r["variant"]) for r in rows}
    assert {("r2-small", "class1"), ("r2-small", "class2"), ("g1-small", "class2"), ("g1-small", "class3")} <= variants
    assert ("r1-small", "class1") not in variants            # align_corners is not affine by phase
    for r in rows:
        assert r["validated"] == ("-" if r["variant"] == "host" else "exact"), r
        if r["variant"] in ("class2", "class3"):
            assert r["gather_busy"] > 0 and r["vector_busy"] > 0
        if r["variant"] == "class1":
            assert r["gather_busy"] == 0
        if r["op"] == "GridSample" and r["variant"] != "host":
            assert r["bank_conflict"] == 0, r
    # class 3 = class 2 + the coordinate program: the same gathers, more cycles and 24 B/point more DRAM traffic
    by = {(r["case"], r["variant"], r["preset"]): r for r in rows}
    for preset in presets_by_size():
        c2, c3 = by[("g2-small", "class2", preset)], by[("g2-small", "class3", preset)]
        assert c3["gather_busy"] == c2["gather_busy"] and c3["cycles"] > c2["cycles"]
        assert c3["dram_wr"] - c2["dram_wr"] == 16 * 16 * (16 + 16)


def test_host_baseline_is_the_host_cost_formula():
    """R1b's 100->200 step: 51.2 MB read, 204.8 MB written, 256 M element ops (docs/perception.md#sample2d-cases)."""
    r1b = next(c for c in CASES if c.name == "R1b")
    arch = load_arch("mid32")
    cycles, rd, wr = _host_cycles(r1b, arch)
    assert (rd, wr) == (51_200_000, 204_800_000)
    h, ghz = arch.host, Fraction(repr(arch.clock.ghz))   # mid32: 10 us, 19.2 GB/s, 19.2 ops/ns at 1.2 GHz
    assert cycles == math.ceil(Fraction(repr(h.launch_ns)) * ghz) + math.ceil((rd + wr) * ghz / Fraction(repr(
        h.gb_per_s))) + math.ceil((rd + wr) // 4 * ghz / Fraction(repr(h.gops)))
