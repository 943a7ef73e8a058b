"""Resampling ops: Resize (nearest, linear) and AffineGrid on the NPU (:mod:`compiler.kernels.resample`).

Resize keeps the image channels-last (its source pixels are rows of C channels) and runs as Sample2D (class 1:
strided views; class 2: constant index tables + ``vpu.gather``) + one weighting pass in onnxruntime's float32
order, bit for bit. Cubic mode, antialias and exclude_outside stay on the host. AffineGrid of a run-time theta is
three vector instructions per block of grid rows; of a constant theta it is folded
(:func:`compiler.kernels.resample.affine_grid_values`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from compiler.errors import CompileError, UnsupportedOpError
from compiler.frontend.canonical import CanonContext
from compiler.ir import Graph, Node
from compiler.kernels import grid_sample
from compiler.kernels import resample as sample2d
from compiler.ops.context import LoweringContext
from compiler.ops.spec import OpSpec
from isa import DType

F32 = np.float32


# ---------------------------------------------------------------------------------------------------- Resize

def _resize(node: Node, ctx: CanonContext) -> Node:
    """Resize's constant roi/scales/sizes (opsets 11-19, ``axes`` of opset 18 included) as the full-rank float32
    ``scales`` onnxruntime samples with and the ``roi`` (starts, then ends) of every axis; the output shape they
    give checked against the inferred one."""
    a, shape, out = node.attrs, ctx.shape(node.inputs[0]), ctx.shape(node.outputs[0])
    rank = len(shape)
    roi, scales, sizes = (ctx.const(node, i, w) for i, w in ((1, "roi"), (2, "scales"), (3, "sizes")))
    axes = [int(x) % rank for x in a.get("axes") or range(rank)]
    full = [F32(1)] * rank
    if scales is not None and scales.size:
        for ax, s in zip(axes, np.asarray(scales, F32).ravel()):
            full[ax] = F32(s)
        want = tuple(int(s * F32(n)) for s, n in zip(full, shape))
    elif sizes is not None and sizes.size:
        want = list(shape)
        for ax, s in zip(axes, np.asarray(sizes).ravel()):
            want[ax] = int(s)
        full = [F32(F32(o) / F32(n)) if n else F32(1) for o, n in zip(want, shape)]
        policy = a.get("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            s = (min if policy == "not_larger" else max)(full[ax] for ax in axes)
            full = [s if ax in axes else F32(1) for ax in range(rank)]
            want = [int(np.floor(np.float64(s * F32(n)) + 0.5)) if ax in axes else n for ax, n in enumerate(shape)]
        want = tuple(want)
    else:
        raise UnsupportedOpError(node.name, node.op, "Resize needs scales or sizes")
    if want != tuple(out):
        raise UnsupportedOpError(node.name, node.op, f"onnxruntime makes a {want} output, ONNX shape inference "
                                 f"{tuple(out)}")
    starts, ends = [0.0] * rank, [1.0] * rank
    if roi is not None and roi.size and a.get("coordinate_transformation_mode") == "tf_crop_and_resize":
        r = np.asarray(roi, F32).ravel()
        for k, ax in enumerate(axes):
            starts[ax], ends[ax] = float(r[k]), float(r[len(axes) + k])
    attrs = {k: a.get(k, d) for k, d in (("mode", "nearest"), ("coordinate_transformation_mode", "half_pixel"),
                                         ("nearest_mode", "round_prefer_floor"), ("extrapolation_value", 0.0),
                                         ("antialias", 0), ("exclude_outside", 0), ("cubic_coeff_a", -0.75))}
    return dataclasses.replace(node, attrs={**attrs, "scales": tuple(float(s) for s in full),
                                            "roi": tuple(starts + ends)})


def resize_plan(node: Node, graph: Graph) -> sample2d.ResizePlan:
    """The :class:`~compiler.kernels.resample.ResizePlan` of a canonical 4-D Resize (CompileError if its taps cannot be
    laid out)."""
    a = node.attrs
    n, c, h, w = graph.tensor(node.inputs[0]).shape
    _, _, ho, wo = graph.tensor(node.outputs[0]).shape
    s, roi = a["scales"], a["roi"]
    mode, ctm, nm = a["mode"], a["coordinate_transformation_mode"], a["nearest_mode"]
    ty = sample2d.resize_axis(mode, ctm, nm, ho, h, s[2], (roi[2], roi[6]))
    tx = sample2d.resize_axis(mode, ctm, nm, wo, w, s[3], (roi[3], roi[7]))
    return sample2d.ResizePlan(n, c, h, w, ho, wo, ty, tx, float(a["extrapolation_value"]))


def _resize_check(node: Node, graph: Graph) -> str | None:
    a = node.attrs
    if a["mode"] not in ("nearest", "linear") or a["antialias"] or a["exclude_outside"]:
        return "cubic mode, antialias and exclude_outside run on the host"
    if len(a["scales"]) != 4 or a["scales"][0] != 1.0 or a["scales"][1] != 1.0:
        return f"only 2-D resizes of NCHW tensors (scales 1 on N and C), not scales {a['scales']}"
    if a["coordinate_transformation_mode"] not in sample2d.COORDINATE_MODES or \
            a["nearest_mode"] not in sample2d.NEAREST_MODES:
        return f"coordinate_transformation_mode {a['coordinate_transformation_mode']!r} / nearest_mode " \
               f"{a['nearest_mode']!r} is not one onnxruntime knows"
    try:
        resize_plan(node, graph)
    except CompileError as e:
        return str(e)
    return None


def lower_resize(low: LoweringContext, n: Node) -> None:
    """Class 1 (affine views) when both axes are affine by phase, else class 2 (index tables + vpu.gather), on the
    channels-last input (:func:`compiler.kernels.resample.resize_program`)."""
    plan = resize_plan(n, low.graph)
    x = low.want(n.inputs[0], "nhwc")
    y = low.alloc(low.graph.tensor(n.outputs[0]).shape, "nhwc")
    sp = sample2d.resize_program(plan, low.target)
    low.emit(n, sp.program, {"X": ("ACT", x.offset), "Y": ("ACT", y.offset), "Wt": ("W", low.const(sp.consts))})
    low.bind[n.outputs[0]] = y


# ------------------------------------------------------------------------------------------------ AffineGrid

def _affine_grid(node: Node, ctx: CanonContext) -> Node:
    size = ctx.const(node, 1, "size")
    return dataclasses.replace(node, attrs={"align_corners": int(node.attrs.get("align_corners", 0)),
                                            "size": tuple(int(v) for v in np.asarray(size).ravel())})


def _affine_grid_check(node: Node, graph: Graph) -> str | None:
    size = node.attrs["size"]
    if len(size) != 4:
        return f"only 2-D grids (size of 4 values), not size {size}"
    if graph.tensor(node.inputs[0]).shape != (size[0], 2, 3):
        return f"theta must have shape {(size[0], 2, 3)} for size {size}"
    return None


def lower_affine_grid(low: LoweringContext, n: Node) -> None:
    """The grid of a run-time theta on the vector unit (:func:`compiler.kernels.resample.affine_grid`)."""
    nb, _, h, w = n.attrs["size"]
    ac = n.attrs["align_corners"]
    theta = low.want(n.inputs[0], "rm")
    g = low.alloc(low.graph.tensor(n.outputs[0]).shape, "rm")
    base = np.concatenate([sample2d.affine_base(w, ac), sample2d.affine_base(h, ac)])
    low.emit(n, sample2d.affine_grid(nb, h, w, ac, low.target),
             {"T": ("ACT", theta.offset), "B": ("W", low.const(base)), "G": ("ACT", g.offset)})
    low.bind[n.outputs[0]] = g


# ------------------------------------------------------------------------------------------------ GridSample

def _grid_sample(node: Node, ctx: CanonContext) -> Node:
    """Opset 16's mode names (bilinear, bicubic) as opset 20's (linear, cubic); the defaults written out."""
    a = node.attrs
    mode = a.get("mode", "linear")
    return dataclasses.replace(node, attrs={"mode": {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode),
                                            "padding_mode": a.get("padding_mode", "zeros"),
                                            "align_corners": int(a.get("align_corners", 0))})


def grid_spec(node: Node, graph: Graph) -> grid_sample.GridSpec:
    n, c, h, w = graph.tensor(node.inputs[0]).shape
    _, ho, wo, _ = graph.tensor(node.inputs[1]).shape
    a = node.attrs
    return grid_sample.GridSpec(n, c, h, w, ho, wo, a["mode"], a["padding_mode"], a["align_corners"])


def _grid_sample_check(node: Node, graph: Graph) -> str | None:
    a = node.attrs
    if a["mode"] not in grid_sample.MODES:
        return f"GridSample mode {a['mode']!r} (cubic) runs on the host"
    if a["padding_mode"] not in grid_sample.PADDINGS:
        return f"unknown padding_mode {a['padding_mode']!r}"
    xs, gs = graph.tensor(node.inputs[0]).shape, graph.tensor(node.inputs[1]).shape
    if len(xs) != 4 or len(gs) != 4 or gs[-1] != 2 or gs[0] != xs[0]:
        return f"only 2-D GridSample (X (N, C, H, W), grid (N, Ho, Wo, 2)), not {xs} and {gs}"
    if a["padding_mode"] == "reflection" and not graph.is_const(node.inputs[1]):
        return "reflection padding of a run-time grid runs on the host (a constant grid is gathered on the NPU)"
    if xs[2] * xs[3] > grid_sample.MAX_TABLE_ROWS:
        return f"an image of {xs[2] * xs[3]} pixels is more than a gather table holds"
    return None


def lower_grid_sample(low: LoweringContext, n: Node) -> None:
    """Class 2 (a constant grid: index and weight tables computed here) or class 3 (a run-time grid: a coordinate
    program on the vector unit writes them), then the gather + weighting program
    (:mod:`compiler.kernels.grid_sample`)."""
    spec = grid_spec(n, low.graph)
    x = low.want(n.inputs[0], "nhwc")
    y = low.alloc(low.graph.tensor(n.outputs[0]).shape, "nhwc")
    if low.graph.is_const(n.inputs[1]):
        idx, wts = grid_sample.grid_taps(spec, low.data(n.inputs[1]))
        tables = {"I": ("W", low.const(idx)), "Wt": ("W", low.const(wts if spec.taps > 1 else wts[:1, :1]))}
    else:
        g = low.want(n.inputs[1], "rm")
        ib = low.alloc((spec.n, spec.points, spec.taps), "rm", DType.I32)
        wb = low.alloc((spec.n, spec.points, 4 if spec.taps > 1 else 1), "rm")
        low.emit(n, grid_sample.grid_coordinates(spec, low.target),
                 {"G": ("ACT", g.offset), "K": ("W", low.const(grid_sample.grid_constants(spec))),
                  "I": ("ACT", ib.offset), "Wt": ("ACT", wb.offset)}, suffix=".coords")
        tables = {"I": ("ACT", ib.offset), "Wt": ("ACT", wb.offset)}
    low.emit(n, grid_sample.sample_points(spec, low.target),
             {"X": ("ACT", x.offset), "Y": ("ACT", y.offset), **tables})
    low.bind[n.outputs[0]] = y


OPS = (
    OpSpec("Resize", lower_resize, _resize, _resize_check, const_operands=True, nhwc=True,
           npu="Sample2D + vector weighting on channels-last tiles, bit-exact with onnxruntime; nearest and linear, "
               "2-D (N and C unscaled), every coordinate and nearest mode: strided views where both axes are affine "
               "by phase (power-of-two half_pixel/pytorch_half_pixel/asymmetric, integer down-sampling), else "
               "constant index tables + vpu.gather; cubic, antialias and exclude_outside run on the host"),
    OpSpec("GridSample", lower_grid_sample, _grid_sample, _grid_sample_check, const_operands=True, nhwc=True,
           npu="row gathers from the channels-last image (dma.ld.gather) + vector weighting, bit-exact with "
               "onnxruntime; nearest and linear, zeros/border/reflection, align_corners 0/1, 2-D: a constant grid's "
               "index and weight tables are computed at compile time, a run-time grid's on the vector unit "
               "(reflection there runs on the host); cubic runs on the host"),
    OpSpec("AffineGrid", lower_affine_grid, _affine_grid, _affine_grid_check, const_operands=True,
           npu="vector unit, 2-D, bit-exact with onnxruntime; a constant theta is folded"),
)
