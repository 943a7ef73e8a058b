"""``MSDeformAttn``, the node :mod:`compiler.passes.fuse_msda` makes of mmcv's exported deformable attention:
one fused program per node (:mod:`compiler.msda`), its level tables in the SPM when two heads' fit, else gathered
from DRAM after a coordinate program per level."""

from __future__ import annotations

from isa import DType

from .. import grid_sample as gs
from .. import msda
from ..ir import Graph, Node
from .context import LoweringContext
from .spec import OpSpec


def msda_spec(node: Node, graph: Graph) -> msda.MsdaSpec:
    """The :class:`~compiler.msda.MsdaSpec` of an ``MSDeformAttn`` node (inputs ``X_l``, grids, weights)."""
    nl = node.attrs["levels"]
    xs = [graph.tensor(t).shape for t in node.inputs[:nl]]
    n, d, _, _ = xs[0]
    _, q, p, _ = graph.tensor(node.inputs[nl]).shape
    return msda.MsdaSpec(n, d, q, p, tuple((s[2], s[3]) for s in xs))


def _check(node: Node, graph: Graph) -> str | None:
    nl = node.attrs.get("levels", 0)
    if len(node.inputs) != 2 * nl + 1 or nl < 1:
        return f"MSDeformAttn takes the levels' values, their grids and the weights: {2 * nl + 1} inputs"
    if len(graph.tensor(node.outputs[0]).shape) != 3:
        return "only the ReduceSum without keepdims ((N, D, Q), stored channels-last) is lowered"
    return msda_spec(node, graph).check()


def lower_msda(low: LoweringContext, n: Node, tables: str | None = None) -> None:
    """The fused program on channels-last level tables; its output ``(N, D, Q)`` (or ``(N, D, Q, 1)``) is stored
    channels-last ``(N, Q, D)``."""
    spec = msda_spec(n, low.graph)
    nl = len(spec.levels)
    tables = tables or msda.msda_tables(spec, low.target)
    xs = [low.want(t, "nhwc") for t in n.inputs[:nl]]
    grids = [low.want(t, "rm") for t in n.inputs[nl:2 * nl]]
    a = low.want(n.inputs[-1], "rm")
    shape = low.graph.tensor(n.outputs[0]).shape
    y = low.alloc(shape, "nhwc")
    bind = {f"X{i}": ("ACT", x.offset) for i, x in enumerate(xs)}
    bind |= {"A": ("ACT", a.offset), "Y": ("ACT", y.offset)}
    if tables == "spm":
        bind |= {f"G{i}": ("ACT", g.offset) for i, g in enumerate(grids)}
        bind["K"] = ("W", low.const(msda.msda_constants(spec)))
    else:
        for i, g in enumerate(grids):
            lv = spec.level(i)
            ib = low.alloc((spec.n, spec.q * spec.p, 4), "rm", DType.I32)
            wb = low.alloc((spec.n, spec.q * spec.p, 4), "rm")
            low.emit(n, gs.grid_coordinates(lv, low.target),
                     {"G": ("ACT", g.offset), "K": ("W", low.const(gs.grid_constants(lv))),
                      "I": ("ACT", ib.offset), "Wt": ("ACT", wb.offset)}, suffix=f".coords{i}")
            bind |= {f"I{i}": ("ACT", ib.offset), f"W{i}": ("ACT", wb.offset)}
    low.emit(n, msda.msda_program(spec, low.target, tables), bind)
    low.bind[n.outputs[0]] = y


OPS = (
    OpSpec("MSDeformAttn", lower_msda, check=_check,
           npu="not an ONNX op: made by the fuse_msda pass of mmcv's exported multi-scale deformable attention "
               "(GridSample per level, stack, Mul by the weights, ReduceSum); one pass per (head, query tile), "
               "coordinates on the vector unit, taps gathered from the level tables (in the SPM when two heads' "
               "fit, else from DRAM), bilinear in onnxruntime's order, weighted sum over levels x points in "
               "sequence; the sampled tensor never leaves the SPM"),
)
