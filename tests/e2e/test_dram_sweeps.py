"""Sweeps of DRAM bandwidth and clock whose numbers cannot mislead (issue 24, findings 1 and 2): compiled and
simulated, cycles fall as bandwidth rises until the limit the summary names binds, and a faster core clock does not
make DRAM faster."""

import numpy as np
import pytest

from compiler.kernels.conv2d import ConvShape
from isa import DType
from isa.arch import load_arch
from npusim.app.cli import summary
from npusim.app.driver import run_conv, run_gemm, run_model
from npusim.app.zoo import MODELS

GEMM = (64, 1024, 4096)   # M, N, K in f32: 16 MiB of weights streamed once for 33 MFLOP: DRAM-bound on mid32


def test_finding1_bandwidth_sweep_falls_until_named_limit():
    # ResNet-18 (64 x 64 input, width 32) on mid32 with 96 requests in flight: 96 x 64 B per ~84 ns round trip carry
    # ~73 GB/s. Before issue 24 every bandwidth from 32 to 63 B/cycle gave the same cycles (a 64-B burst held the bus
    # ceil(64 / bw) whole cycles) and the summary blamed the DRAM bus for what the requests in flight capped.
    model = MODELS["resnet18"](image=64, width=32, classes=100)
    rows = []
    for gb in np.linspace(16, 128, 8):     # 16, 32, ..., 128 GB/s
        arch = load_arch("mid32", [f"dram.gb_per_s={gb:g}", "dma.outstanding=96"])
        _, result, _, report = run_model(model, arch, timing_only=True)
        line = next(x for x in summary(result, report=report).splitlines() if x.startswith("memory roof"))
        rows.append((gb, result.cycles, report["memory_roof"], line))
    binds = [roof["binds"] for _, _, roof, _ in rows]
    first = binds.index("dma.outstanding")
    assert 2 <= first < len(rows) - 1 and set(binds[:first]) == {"dram.gb_per_s"} \
        and set(binds[first:]) == {"dma.outstanding"}     # the bus binds, then the requests in flight
    cycles = [c for _, c, _, _ in rows]
    assert all(a > b for a, b in zip(cycles[:first + 1], cycles[1:first + 1])), cycles   # strictly falling
    assert all(a >= b for a, b in zip(cycles[first:], cycles[first + 1:])), cycles       # never rising after
    assert cycles[first - 1] / cycles[first] > 1.05     # the last bus-bound step still pays
    for gb, _, roof, line in rows[first:]:
        assert roof["dma"]["outstanding"] == 96 and roof["gb_per_s"] < roof["dram_bus"]["gb_per_s"] == gb
        assert line.startswith(f"memory roof {roof['gb_per_s']:.3g} GB/s") and "bound by dma.outstanding (96 x 64 B "\
            "in flight per" in line and line.endswith(f"the DRAM bus gives {gb:g} GB/s: raise dma.outstanding")
    for gb, _, roof, line in rows[:first]:
        assert roof["gb_per_s"] == gb and "bound by the DRAM bus (dram.gb_per_s)" in line


@pytest.mark.parametrize("kind", ["gemm", "conv"])
def test_finding1_cycles_never_rise_as_bandwidth_rises(kind):
    # 20 bandwidths drawn log-uniformly from 2 to 400 GB/s (3 significant digits, as a sweep's [random] draws them):
    # a DRAM-bound GEMM and convolution, compiled for each, never take more cycles at more bandwidth; mid32's 64
    # requests in flight bind from ~48 GB/s, so both regimes are crossed
    rng = np.random.default_rng(24)
    bandwidths = sorted({float(f"{x:.3g}") for x in np.exp(rng.uniform(np.log(2), np.log(400), 20))})
    cycles = []
    for gb in bandwidths:
        arch = load_arch("mid32", [f"dram.gb_per_s={gb}"])
        if kind == "gemm":
            cycles.append(run_gemm(*GEMM, DType.F32, arch, timing_only=True)[0].cycles)
        else:
            cycles.append(run_conv(ConvShape(1, 256, 14, 14, 256, 3, 3, pad=1), DType.F32, arch,
                                   timing_only=True)[0].cycles)
    assert all(a >= b for a, b in zip(cycles, cycles[1:])), list(zip(bandwidths, cycles))
    assert cycles[0] > 8 * cycles[-1]    # and the sweep crosses the DRAM-bound range


def test_finding2_clock_does_not_speed_dram():
    # the DRAM-bound GEMM on mid32 from 0.6 to 4.8 GHz: DRAM stays 38.4 GB/s, so the time stays within 2% (the
    # compute that DRAM does not hide gets faster) while the cycles grow with the clock. Before issue 24, bandwidth
    # and latency per cycle made 2.4 GHz twice as fast as 1.2 with the same cycles.
    clocks = (0.6, 1.2, 2.4, 4.8)
    runs = [run_gemm(*GEMM, DType.F32, load_arch("mid32", [f"clock.ghz={ghz}"]), timing_only=True)[0]
            for ghz in clocks]
    us = [r.microseconds for r in runs]
    assert max(us) / min(us) < 1.02, us
    nbytes = (GEMM[0] * GEMM[2] + GEMM[2] * GEMM[1] + GEMM[0] * GEMM[1]) * 4   # A, B, C once
    assert min(us) * 1e3 >= nbytes / 38.4                                      # ns: never faster than the bus
    for (a, ra), (b, rb) in zip(zip(clocks, runs), zip(clocks[1:], runs[1:])):
        assert rb.cycles / ra.cycles == pytest.approx(b / a, rel=0.02)
