"""Rows of the perception bench for Sample2D (docs/perception.md#sample2d-cases): Resize R1-R3 and GridSample G1-G2 on
each preset, per variant — today's host fallback, class 1 (affine views), class 2 (constant tables + gather), class 3
(on-chip coordinates + gather) where each applies.

Like :mod:`npusim.app.driver` this module joins the compiler and the simulator: it builds each variant's programs with
:mod:`compiler.kernels.resample` / :mod:`compiler.kernels.grid_sample` and simulates them (timing-only for the large
cases; with values, checked bit for bit against :mod:`npusim.functional.sampling_reference`, for the small ones).
``bench/seed_ops.py`` prints them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from compiler.kernels import grid_sample as gs
from compiler.kernels import resample as sample2d
from compiler.kernels.common.target import Target
from isa import DType, HostCall
from isa.arch import Arch, load_arch, presets_by_size
from isa.cost import host_cost
from npusim.functional import sampling_reference as sampling
from npusim.sim.simulator import region_array, simulate


@dataclass(frozen=True)
class Case:
    """One bench case: a Resize (``scale``, ``ctm``) or a GridSample (``grid``: ``"slice"`` BEV re-gridding or
    ``"rotate"`` by ``angle`` degrees) of an ``(n, c, h, w)`` f32 image."""

    name: str
    op: str
    n: int
    c: int
    h: int
    w: int
    mode: str = "linear"
    scale: int = 2
    ctm: str = "half_pixel"
    grid: str = ""
    align_corners: int = 0
    angle: float = 10.0
    source: str = ""


CASES = (
    Case("R1a", "Resize", 5, 256, 50, 50, ctm="align_corners", source="UniAD CVT_Decoder 50->100, align_corners"),
    Case("R1b", "Resize", 5, 256, 100, 100, ctm="align_corners", source="UniAD CVT_Decoder 100->200"),
    Case("R2", "Resize", 1, 256, 25, 25, source="UniAD UpsamplingAdd x2 half_pixel"),
    Case("R3", "Resize", 1, 32, 25, 25, scale=8, source="UniAD get_attn_mask 25->200 (32 masks)"),
    Case("G1", "GridSample", 1, 256, 200, 200, grid="slice", align_corners=1, source="UniAD BevFeatureSlicer"),
    Case("G2", "GridSample", 1, 256, 200, 200, grid="rotate", source="BEVFormer rotate_prev_bev, bilinear"),
    Case("G2n", "GridSample", 1, 256, 200, 200, grid="rotate", mode="nearest",
         source="BEVFormer rotate_prev_bev, nearest"),
)
SMALL = (
    Case("r2-small", "Resize", 1, 32, 12, 10, source="R2 at 32 channels, 12x10"),
    Case("r1-small", "Resize", 2, 24, 9, 8, ctm="align_corners", source="R1 at 24 channels"),
    Case("g1-small", "GridSample", 1, 24, 16, 16, grid="slice", align_corners=1, source="G1 at 24 ch, 16x16"),
    Case("g2-small", "GridSample", 1, 24, 16, 16, grid="rotate", angle=33.0, source="G2 at 24 ch, 16x16"),
)


def case_grid(case: Case) -> np.ndarray:
    """The case's constant grid ``(n, h, w, 2)`` f32: BEV re-gridding (0.5 m cells over +-50 m read from 0.512 m
    cells over +-51.2 m) or a rotation about the centre (AffineGrid's, align_corners=0)."""
    h, w = case.h, case.w
    if case.grid == "slice":
        axis = lambda k: ((np.arange(k) + 0.5) * (100.0 / k) - 50.0) / (51.2 * (k - 1) / k)  # noqa: E731
        gy, gx = np.meshgrid(axis(h), axis(w), indexing="ij")
        g = np.stack([gx, gy], -1)
    else:
        a = math.radians(case.angle)
        theta = np.array([[[math.cos(a), -math.sin(a), 0.0], [math.sin(a), math.cos(a), 0.0]]], np.float32)
        g = sampling.affine_grid(theta, (1, case.c, h, w), 0)[0]
    return np.repeat(np.asarray(g, np.float32)[None], case.n, axis=0)


def resize_plan(case: Case) -> sample2d.ResizePlan:
    s, ho, wo = case.scale, case.h * case.scale, case.w * case.scale
    ax = lambda out, length: sample2d.resize_axis(case.mode, case.ctm, "round_prefer_floor", out, length,  # noqa
                                                  float(np.float32(out) / np.float32(length)) if s != 1 else 1.0)
    return sample2d.ResizePlan(case.n, case.c, case.h, case.w, ho, wo, ax(ho, case.h), ax(wo, case.w))


def grid_spec(case: Case) -> gs.GridSpec:
    return gs.GridSpec(case.n, case.c, case.h, case.w, case.h, case.w, case.mode, "zeros", case.align_corners)


def _host_cycles(case: Case, arch: Arch) -> tuple[int, int, int]:
    """(cycles, DRAM bytes read, written) of today's fallback: one host.call reading the inputs and writing the
    output, ops = elements read and written (compiler.ops.host.host_ops)."""
    x = case.n * case.c * case.h * case.w
    if case.op == "Resize":
        y, extra = x * case.scale ** 2, 0
    else:
        y, extra = x, case.n * case.h * case.w * 2
    rd, wr = (x + extra) * 4, y * 4
    return host_cost(HostCall(fn="host", rd=rd, wr=wr, ops=x + extra + y), arch).cycles, rd, wr


def _measure(results: list) -> dict:
    """Sum of the runs' cycles, DRAM bytes, vector busy, gather busy (vpu.gather + dma.ld.gather) and bank
    conflict stall cycles (every unit)."""
    out = dict(cycles=0, dram_rd=0, dram_wr=0, vector_busy=0, gather_busy=0, bank_conflict=0)
    for r in results:
        busy = r.busy_by_mnemonic()
        out["cycles"] += r.cycles
        out["dram_rd"] += r.dram_bytes_read
        out["dram_wr"] += r.dram_bytes_written
        out["vector_busy"] += r.unit["vector"].busy
        out["gather_busy"] += busy.get("vpu.gather", 0) + busy.get("dma.ld.gather", 0)
        out["bank_conflict"] += sum(u.stall["bank_conflict"] for u in r.units)
    return out


def variants(case: Case) -> list[str]:
    """The variants that apply to ``case``: the host fallback, class 1 where both axes of a Resize are affine by
    phase, class 2, and class 3 for GridSample (docs/perception.md#sample2d-classes)."""
    if case.op == "Resize":
        return ["host"] + (["class1"] if resize_plan(case).affine else []) + ["class2"]
    return ["host", "class2", "class3"]


def run_variant(case: Case, variant: str, arch: Arch, values: bool = False, seed: int = 0) -> dict:
    """One row: the case's ``variant`` on ``arch`` (timing-only unless ``values``; with values the output is
    compared with :mod:`npusim.functional.sampling_reference` bit for bit: ``validated`` is ``exact`` or
    ``MISMATCH``)."""
    row = dict(case=case.name, op=case.op, variant=variant, preset=arch.name)
    if variant == "host":
        cycles, rd, wr = _host_cycles(case, arch)
        return {**row, "cycles": cycles, "dram_rd": rd, "dram_wr": wr, "vector_busy": 0, "gather_busy": 0,
                "bank_conflict": 0, "validated": "-"}
    target = Target.of(arch)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((case.n, case.c, case.h, case.w)).astype(np.float32) if values else None
    xn = None if x is None else np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    if case.op == "Resize":
        plan = resize_plan(case)
        sp = sample2d.resize_program(plan, target, "affine" if variant == "class1" else "gather")
        res = [simulate(sp.program, arch, None if x is None else {"X": xn, "Wt": sp.consts}, timing_only=not values)]
        got = None if x is None else region_array(res[0], "Y", DType.F32, (plan.n, plan.ho, plan.wo, plan.c))
        want = None if x is None else sampling.resize(x, [1, 1, case.scale, case.scale], mode=case.mode,
                                                       coordinate_transformation_mode=case.ctm)
    else:
        spec, grid = grid_spec(case), case_grid(case)
        sample = gs.sample_points(spec, target)
        if variant == "class2":
            idx, wts = gs.grid_taps(spec, grid)
            res = [simulate(sample, arch, None if x is None else {"X": xn, "I": idx, "Wt": wts},
                            timing_only=not values)]
        else:
            coords = simulate(gs.grid_coordinates(spec, target), arch,
                              None if x is None else {"G": grid, "K": gs.grid_constants(spec)}, timing_only=not values)
            tables = None if x is None else {k: coords.outputs[k] for k in ("I", "Wt")}
            res = [coords, simulate(sample, arch, None if x is None else {"X": xn, **tables}, timing_only=not values)]
        got = None if x is None else region_array(res[-1], "Y", DType.F32, (spec.n, spec.ho, spec.wo, spec.c))
        want = None if x is None else sampling.grid_sample(x, grid, mode=case.mode, align_corners=case.align_corners)
    validated = "-"
    if x is not None:
        same = np.array_equal(got.transpose(0, 3, 1, 2).view(np.int32), np.asarray(want, np.float32).view(np.int32))
        validated = "exact" if same else "MISMATCH"
    return {**row, **_measure(res), "validated": validated}


def seed_sample_rows(cases=CASES, presets: Sequence[str] | None = None, values: bool = False,
                     progress=None) -> list[dict]:
    """Every (case, variant, preset) row: case, op, variant, preset, cycles, dram_rd, dram_wr (bytes),
    vector_busy, gather_busy, bank_conflict (cycles), validated. ``values``: simulate with values and check
    (small cases only). ``presets`` default: every preset, the smallest array first."""
    rows = []
    for case in cases:
        for preset in presets or presets_by_size():
            arch = load_arch(preset)
            for v in variants(case):
                rows.append(run_variant(case, v, arch, values))
                if progress:
                    progress(rows[-1])
    return rows
