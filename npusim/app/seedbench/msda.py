"""Rows of the perception bench for multi-scale deformable attention (docs/perception.md#deformable-attention-cases): M1
BEVFormer-base TSA, M2 BEVFormer-tiny TSA, M3 a Deformable-DETR encoder on BEVFormer-base's FPN, each as mmcv's exported
graph (:func:`npusim.app.zoo.msda.msda_mmcv`) compiled unfused (every GridSample, the stack, Mul and ReduceSum lowered
on their own) and fused (:mod:`compiler.passes.fuse_msda`; level tables in the SPM or gathered from DRAM), on each
preset.

Like :mod:`npusim.app.driver` this module joins the compiler and the simulator (through the driver). Large cases run
timing-only; with ``values`` a run is checked against :func:`npusim.functional.sampling_reference.ms_deform_attn_mmcv`:
the fused form bit for bit (``exact``), the unfused one within the bound of docs/perception.md#msda-error-bound
(``tol``), else ``MISMATCH``. ``bench/seed_ops.py`` prints them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from isa import NpuSimError
from isa.arch import Arch, load_arch, presets_by_size
from npusim.app.driver import run_model
from npusim.app.zoo.msda import msda_inputs, msda_mmcv
from npusim.functional import sampling_reference as sampling

VARIANTS = ("unfused", "fused", "fused-spm", "fused-dram")


@dataclass(frozen=True)
class MsdaCase:
    """One bench case: ``bs`` value maps (BEV frames) of ``levels``, ``heads`` x ``dims`` channels, ``queries`` x
    ``points`` samples per level."""

    name: str
    bs: int
    levels: tuple[tuple[int, int], ...]
    queries: int
    points: int
    heads: int = 8
    dims: int = 32
    source: str = ""

    @property
    def sampled_bytes(self) -> int:
        """The unfused graph's sampled tensor ``(bs*heads, D, Q, L*P)`` f32, in bytes."""
        return self.bs * self.heads * self.dims * self.queries * len(self.levels) * self.points * 4

    def model(self):
        return msda_mmcv(self.bs, self.heads, self.dims, self.levels, self.points, self.queries)


CASES = (
    MsdaCase("M2", 2, ((50, 50),), 2500, 4, source="BEVFormer-tiny TSA: 2 BEV frames x 50x50, 1 level x 4 points"),
    MsdaCase("M1", 2, ((200, 200),), 40000, 4, source="BEVFormer-base TSA: 2 BEV frames x 200x200"),
    MsdaCase("M3", 1, ((116, 200), (58, 100), (29, 50), (15, 25)), 30825, 4,
             source="Deformable-DETR encoder on BEVFormer-base's FPN (one camera), 4 levels x 4 points"),
)
SMALL = (
    MsdaCase("m-small", 1, ((6, 5), (3, 3)), 7, 2, heads=2, dims=8, source="2 levels, 2 heads x 8 channels"),
    MsdaCase("m3-small", 1, ((12, 20), (6, 10), (3, 5), (2, 3)), 40, 4, heads=2, dims=16,
             source="M3's 4 levels x 4 points at 2 heads x 16 channels"),
)


def run_variant(case: MsdaCase, variant: str, arch: Arch, values: bool = False, seed: int = 0) -> dict:
    """One row: the whole exported graph of ``case`` compiled as ``variant`` (``unfused``, ``fused`` (tables as
    chosen), ``fused-spm``, ``fused-dram``) on ``arch``: cycles, DRAM bytes read and written, vector busy, gather
    busy (vpu.gather + dma.ld.gather), bank-conflict stalls (cycles), SPM peak (bytes), which tables the fused
    program used, validated."""
    model = case.model()
    inputs = msda_inputs(model, seed)
    tables = {"fused-spm": "spm", "fused-dram": "dram"}.get(variant, "auto")
    compiled, res, out, _ = run_model(model, arch, inputs, timing_only=not values, fuse=variant != "unfused",
                                      msda_tables=tables)
    busy = res.busy_by_mnemonic()
    fused = [n for n in compiled.graph.nodes if n.op == "MSDeformAttn"]
    if variant != "unfused" and not fused:
        raise RuntimeError(f"{case.name}: fuse_msda did not fuse the exported graph on {arch.name}")
    used = "-" if not fused else "dram" if any(lr.name.endswith(".coords") for lr in compiled.layers) else "spm"
    validated = "-"
    if values:
        want = sampling.ms_deform_attn_mmcv(inputs["value"], case.levels, inputs["sampling_locations"],
                                            inputs["attention_weights"])
        got = out["output"]
        if variant != "unfused":
            validated = "exact" if np.array_equal(got.view(np.int32), want.view(np.int32)) else "MISMATCH"
        else:
            validated = "tol" if _within_bound(case, inputs, got) else "MISMATCH"
    return dict(case=case.name, op="MSDeformAttn", variant=variant, preset=arch.name, tables=used, cycles=res.cycles,
                dram_rd=res.dram_bytes_read, dram_wr=res.dram_bytes_written, vector_busy=res.unit["vector"].busy,
                gather_busy=busy.get("vpu.gather", 0) + busy.get("dma.ld.gather", 0),
                bank_conflict=sum(u.stall["bank_conflict"] for u in res.units),
                spm_peak=compiled.program.spm_top(), sampled_bytes=case.sampled_bytes, validated=validated)


def _within_bound(case: MsdaCase, inputs: dict, got: np.ndarray) -> bool:
    """Whether ``got (bs, Q, heads*D)`` is within the bound (docs/perception.md#msda-error-bound) of the reference."""
    value, loc, aw = inputs["value"], inputs["sampling_locations"], inputs["attention_weights"]
    bs, _, heads, d = value.shape
    q, n_l, p = loc.shape[1], loc.shape[3], loc.shape[4]
    starts = np.cumsum([0] + [h * w for h, w in case.levels])
    grid = loc * np.float32(2) - np.float32(1)
    vals = [value[:, starts[i]:starts[i + 1]].transpose(0, 2, 3, 1).reshape(bs * heads, d, h, w)
            for i, (h, w) in enumerate(case.levels)]
    grids = [grid[:, :, :, i].transpose(0, 2, 1, 3, 4).reshape(bs * heads, q, p, 2) for i in range(n_l)]
    attn = aw.transpose(0, 2, 1, 3, 4).reshape(bs * heads, q, n_l * p)
    ref = sampling.ms_deform_attn(vals, grids, attn).reshape(bs, heads * d, q).transpose(0, 2, 1)
    bound = sampling.ms_deform_attn_bound(vals, grids, attn).reshape(bs, heads * d, q).transpose(0, 2, 1)
    return bool(np.all(np.abs(got.astype(np.float64) - ref) <= bound))


def msda_rows(cases=CASES, presets: Sequence[str] | None = None, variants=("unfused", "fused"), values: bool = False,
              gather_rows=(1,), progress=None) -> list[dict]:
    """Every (case, variant, preset, G) row of :func:`run_variant` (``G`` = ``vector.gather_rows``, the G sweep); a
    variant that cannot run there (SPM tables that do not fit, an unfused GridSample beyond the ISA's extents) gets
    ``refused: <reason>`` as ``validated``. ``presets`` default: every preset, the smallest array first."""
    rows = []
    for case in cases:
        for preset in presets or presets_by_size():
            for g in gather_rows:
                arch = load_arch(preset, [f"vector.gather_rows={g}"] if g != 1 else [])
                for v in variants:
                    try:
                        rows.append({**run_variant(case, v, arch, values), "G": g})
                    except NpuSimError as e:   # e.g. the SPM tables do not fit this preset
                        rows.append(dict(case=case.name, op="MSDeformAttn", variant=v, preset=arch.name, G=g,
                                         validated=f"refused: {e}"))
                    if progress:
                        progress(rows[-1])
    return rows

