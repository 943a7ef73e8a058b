"""``MSDeformAttn``, the node :mod:`compiler.passes.fuse_msda` makes of mmcv's exported deformable attention:
one fused program per node (:mod:`compiler.kernels.msda`), its level tables held in the SPM per head or gathered from
DRAM after a coordinate program (:func:`compiler.kernels.msda.choose_tables`, or as the compile asks:
``msda_tables``)."""

from __future__ import annotations

from compiler.ir import Graph, Node
from compiler.kernels import msda
from compiler.ops.context import LoweringContext
from compiler.ops.options import OpOption
from compiler.ops.spec import OpSpec
from isa import DType

TABLES = OpOption("msda_tables", ("auto", *msda.TABLES), "auto",
                  "where a fused deformable attention keeps its level tables: auto (the placement the cost model "
                  "prices faster), spm (per head, when they fit) or dram (gathered after a coordinate program)")
"""The MSDeformAttn option (``compile_model(msda_tables=...)``)."""


def msda_spec(node: Node, graph: Graph) -> msda.MsdaSpec:
    """The :class:`~compiler.kernels.msda.MsdaSpec` of an ``MSDeformAttn`` node: planar (inputs ``X_l``, grids, weights)
    or, with a ``heads`` attribute, mmcv's layouts (inputs value, sampling grids, attention weights)."""
    a = node.attrs
    if a.get("heads"):
        bs, _, heads, d = graph.tensor(node.inputs[0]).shape
        _, q, _, _, p, _ = graph.tensor(node.inputs[1]).shape
        return msda.MsdaSpec(bs * heads, d, q, p, tuple(a["shapes"]), heads)
    nl = a["levels"]
    xs = [graph.tensor(t).shape for t in node.inputs[:nl]]
    n, d, _, _ = xs[0]
    _, q, p, _ = graph.tensor(node.inputs[nl]).shape
    return msda.MsdaSpec(n, d, q, p, tuple((s[2], s[3]) for s in xs))


def _check(node: Node, graph: Graph) -> str | None:
    nl = node.attrs.get("levels", 0)
    want = 3 if node.attrs.get("heads") else 2 * nl + 1
    if len(node.inputs) != want or nl < 1:
        return f"MSDeformAttn of {nl} levels takes {want} inputs, not {len(node.inputs)}"
    if not node.attrs.get("heads") and len(graph.tensor(node.outputs[0]).shape) != 3:
        return "only the ReduceSum without keepdims ((N, D, Q), stored channels-last) is lowered"
    return msda_spec(node, graph).check()


def lower_msda(low: LoweringContext, n: Node) -> None:
    """The fused program (:func:`compiler.kernels.msda.msda_program`), after
    :func:`compiler.kernels.msda.msda_coordinates` when the level tables stay in DRAM. Planar: channels-last level
    tables, the output ``(N, D, Q)`` stored channels-last ``(N, Q, D)``; mmcv's layouts: every tensor as it is, the
    output ``(bs, Q, heads*D)`` row-major."""
    spec = msda_spec(n, low.graph)
    nl = len(spec.levels)
    tables = msda.choose_tables(spec, low.target) if low.options[TABLES] == "auto" else low.options[TABLES]
    shape = low.graph.tensor(n.outputs[0]).shape
    if spec.heads:
        values = {"V": ("ACT", low.want(n.inputs[0], "rm").offset)}
        grids = {"G": ("ACT", low.want(n.inputs[1], "rm").offset)}
        y = low.alloc(shape, "rm")
    else:
        values = {f"X{i}": ("ACT", low.want(t, "nhwc").offset) for i, t in enumerate(n.inputs[:nl])}
        grids = {f"G{i}": ("ACT", low.want(t, "rm").offset) for i, t in enumerate(n.inputs[nl:2 * nl])}
        y = low.alloc(shape, "nhwc")
    bind = {**values, "A": ("ACT", low.want(n.inputs[-1], "rm").offset), "Y": ("ACT", y.offset)}
    k = {"K": ("W", low.const(msda.msda_constants(spec)))}
    if tables == "spm":
        bind |= grids | k
    else:
        tabs = {}
        for i in range(nl):
            tabs[f"I{i}"] = ("ACT", low.alloc((spec.n, spec.q * spec.p, 4), "rm", DType.I32).offset)
            tabs[f"W{i}"] = ("ACT", low.alloc((spec.n, spec.q * spec.p, 4), "rm").offset)
        low.emit(n, msda.msda_coordinates(spec, low.target), grids | k | tabs, suffix=".coords")
        bind |= tabs
    low.emit(n, msda.msda_program(spec, low.target, tables), bind)
    low.bind[n.outputs[0]] = y


OPS = (
    OpSpec("MSDeformAttn", lower_msda, check=_check, options=(TABLES,),
           npu="not an ONNX op: made by the fuse_msda pass of mmcv's exported multi-scale deformable attention "
               "(GridSample per level, stack, Mul by the weights, ReduceSum); one pass per (head, query tile), "
               "coordinates on the vector unit, taps gathered from the level tables (held in the SPM per head or "
               "gathered from DRAM, whichever the cost model prices faster), bilinear in onnxruntime's order, "
               "weighted sum over levels x points in sequence; the sampled tensor never leaves the SPM"),
)
