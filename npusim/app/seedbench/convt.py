"""ConvTranspose by phase splitting against input swelling: the rows of ``bench/seed_ops.py``
(docs/perception.md#convtranspose-cases).

Each row is one whole ONNX ConvTranspose layer compiled with ``compile_model(conv_transpose=variant)`` and simulated:
``split`` (phase splitting, the interleave included), ``swell_spm`` (each window zero-inserted in SPM) and
``swell_dram`` (the zero-inserted input written to DRAM by its own segment, then the convolution; both segments
counted). Columns (cycles, bytes, MACs):

- ``useful_macs``: the split's count (:attr:`compiler.kernels.conv_transpose2d.ConvTransposeShape.macs`), the same for
  every variant, and ``util`` = useful MACs / (cycles * rows * cols); ``instr_macs``: what the matrix unit ran.
- ``input_tensor``: bytes of the input the convolution runs over: X itself under splitting, the zero-inserted and
  padded input under swelling (:func:`input_tensor_bytes`; docs/perception.md#input-swelling).
- ``input_bytes``: input bytes the DMA wrote into the SPM windows the matrix unit streams (inserted zeros and halo
  re-reads included; the swell segment excluded), i.e. ``input_tensor`` times the times the tiling reads it.
- ``dram_rd``, ``dram_wr``: all DRAM traffic (weights, swell pass, output); ``spm_peak``: one past the highest SPM
  byte any instruction touches.
- ``resident=False``: the swelled input of ``swell_dram`` goes to DRAM on every preset (dc128's activation arena
  would otherwise keep it on chip; the split and swell_spm layers read and write only graph inputs and outputs,
  which stay in DRAM anyway).
- ``validated``: ``tol`` (within run_model's float check against onnxruntime), the error, or ``-`` (timing only).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from compiler.kernels.conv_transpose2d import MODES, ConvTransposeShape, swell_shape
from isa import DmaCopy, DmaFill, Space
from isa.arch import load_arch, presets_by_size
from isa.cost import instr_cost
from npusim.app.driver import run_model

CASES: dict[str, ConvTransposeShape] = {
    "A": ConvTransposeShape(1, 256, 90, 90, 256, 2, 2, 2),
    "B": ConvTransposeShape(1, 128, 100, 100, 128, 4, 4, 2, 1),
    "C": ConvTransposeShape(1, 128, 25, 25, 128, 3, 3, 2, 1, output_padding=1),
}
"""The 2x upsampling shapes of the bench (fp32, N = 1; docs/perception.md#convtranspose-cases): A BEVFusion
SECONDFPN (k = s = 2), B a BEV decoder (k = 4, s = 2, p = 1), C UniAD's occupancy Bottleneck (k = 3, s = 2, p = 1,
output_padding 1)."""

SOURCES: dict[str, str] = {
    "A": "BEVFusion's lidar SECONDFPN deconvolution (kernel = stride = 2) on its 180x180 BEV at 256 channels",
    "B": "a generic BEV 2x decoder upsampling (chosen, not taken from a model)",
    "C": "the upsampling Bottleneck of UniAD's occupancy head at the head's width (256 halved inside the Bottleneck)",
}
"""Where each of :data:`CASES` comes from (docs/perception.md's case table)."""

SMALL_CASES = ("C",)
"""The cases small enough to validate against onnxruntime in the test suite; the others run timing-only."""

VARIANTS = ("swell_dram", "swell_spm", "split")

COLUMNS = ("case", "variant", "preset", "cycles", "useful_macs", "util", "instr_macs", "input_tensor", "input_bytes",
           "dram_rd", "dram_wr", "spm_peak", "vector_busy", "gather_busy", "bank_conflict", "validated")


def conv_transpose_model(ct: ConvTransposeShape, opset: int = 17, bias: bool = True, seed: int = 0):
    """A one-node float32 ONNX model of 2-D ``ct``: seeded standard-normal weights (and bias), NCHW input ``x``,
    output ``y``."""
    rng = np.random.default_rng(seed)
    w = numpy_helper.from_array(rng.standard_normal((ct.C, ct.Kg, ct.R, ct.S)).astype(np.float32), "w")
    inits = [w] + [numpy_helper.from_array(rng.standard_normal(ct.K).astype(np.float32), "b")] * bias
    node = helper.make_node("ConvTranspose", ["x", "w"] + ["b"] * bias, ["y"], kernel_shape=[ct.R, ct.S],
                            strides=list(ct.stride), pads=list(ct.pad), dilations=list(ct.dilation),
                            output_padding=list(ct.output_padding), group=ct.groups)
    graph = helper.make_graph([node], "conv_transpose",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [ct.N, ct.C, ct.H, ct.W])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [ct.N, ct.K, ct.OH, ct.OW])],
                              initializer=inits)
    opsets = [helper.make_opsetid("", opset)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=helper.find_min_ir_version_for(opsets))


def input_tensor_bytes(ct: ConvTransposeShape, variant: str, es: int = 4) -> int:
    """Bytes of the input the ``variant``'s convolution runs over (``es`` bytes an element): ``ct``'s input for
    ``split``, :func:`compiler.kernels.conv_transpose2d.swell_shape`'s zero-inserted, padded input for the swelling
    ones."""
    if variant == "split":
        return ct.N * ct.C * ct.H * ct.W * es
    cs = swell_shape(ct)
    return cs.N * cs.C * cs.H * cs.W * es


def input_window_bytes(program, layers, arch) -> int:
    """Bytes the DMA wrote into SPM from the activations (region ACT, or SPM) or as fills, outside ``.swell``
    segments: the input windows of a ConvTranspose layer (its weights and constants come from region W)."""
    skip = {pc for lr in layers if lr.name.endswith(".swell") for pc in range(lr.start, lr.end)}
    total = 0
    for pc, i in enumerate(program.instrs):
        if pc in skip or type(i) not in (DmaCopy, DmaFill) or i.dst.space is not Space.SPM:
            continue
        if type(i) is DmaFill or i.src.space is Space.SPM or i.src.region == "ACT":
            total += instr_cost(i, arch).spm_write
    return total


def conv_transpose_row(case: str, variant: str, preset: str, *, timing_only: bool | None = None) -> dict:
    """One bench row (:data:`COLUMNS`) of ``CASES[case]`` lowered as ``variant`` on ``preset``; ``timing_only``
    defaults to True outside :data:`SMALL_CASES`."""
    if variant not in MODES:
        raise ValueError(f"variant must be one of {', '.join(MODES)}, not {variant!r}")
    ct = CASES[case]
    arch = load_arch(preset)
    timing_only = case not in SMALL_CASES if timing_only is None else timing_only
    compiled, result, _, report = run_model(conv_transpose_model(ct), arch, timing_only=timing_only,
                                            validate=not timing_only, conv_transpose=variant, resident=False)
    if report["host_ops"]:
        raise RuntimeError(f"ConvTranspose case {case} ran on the host: {report['host_ops']}")
    v = report.get("validation", {}).get("y")
    validated = "-" if v is None else "tol" if v["ok"] else f"rel {v['max_rel_error']:.2e}"
    return {"case": case, "variant": variant, "preset": preset, "cycles": result.cycles, "useful_macs": ct.macs,
            "util": ct.macs / (result.cycles * arch.peak_macs_per_cycle), "instr_macs": result.macs,
            "input_tensor": input_tensor_bytes(ct, variant),
            "input_bytes": input_window_bytes(compiled.program, compiled.layers, arch),
            "dram_rd": result.dram_bytes_read, "dram_wr": result.dram_bytes_written,
            "spm_peak": compiled.program.spm_top(), "vector_busy": result.unit["vector"].busy, "gather_busy": 0,
            "bank_conflict": sum(u.stall["bank_conflict"] for u in result.units), "validated": validated}


def conv_transpose_rows(cases=tuple(CASES), presets: Sequence[str] | None = None, variants=VARIANTS, *,
                        timing_only: bool | None = None, progress=None) -> list[dict]:
    """Every (case, preset, variant) row, in that order (``progress(row)`` after each); ``presets`` default: every
    preset, the smallest array first."""
    rows = []
    for case in cases:
        for preset in presets or presets_by_size():
            for variant in variants:
                rows.append(conv_transpose_row(case, variant, preset, timing_only=timing_only))
                if progress:
                    progress(rows[-1])
    return rows


def gains(rows: list[dict]) -> list[dict]:
    """Per (case, preset): split against each swelling variant, as fractions: input tensor and window bytes
    (``-0.75`` is -75%),
    utilization (``+0.5`` is +50%), cycles (speed-up ``swelled / split``)."""
    by = {(r["case"], r["preset"], r["variant"]): r for r in rows}
    out = []
    for (case, preset, variant), s in by.items():
        if variant != "split":
            continue
        for base in ("swell_dram", "swell_spm"):
            b = by.get((case, preset, base))
            if b:
                out.append({"case": case, "preset": preset, "against": base,
                            "input_tensor": s["input_tensor"] / b["input_tensor"] - 1,
                            "input_bytes": s["input_bytes"] / b["input_bytes"] - 1,
                            "util": s["util"] / b["util"] - 1, "speedup": b["cycles"] / s["cycles"],
                            "spm_peak": s["spm_peak"] / b["spm_peak"] - 1})
    return out
