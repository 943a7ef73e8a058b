"""``FusedAttention``, the node :mod:`compiler.passes.fuse_attention` makes of scaled dot-product attention: one
flash-style program per node (:mod:`compiler.kernels.attention`, its tiling from
:func:`compiler.kernels.attention_search.search_attention`), or, with ``compile_model(attention="unfused")`` or
when no tiling of it fits, its parts lowered as the layers they were (scores MatMul, scale, mask Add, Softmax,
context MatMul)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from compiler.errors import TilingError
from compiler.ir import Graph, Node, Tensor
from compiler.kernels import attention as kernel
from compiler.kernels.attention_mask import MaskInfo
from compiler.kernels.attention_search import search_attention
from compiler.ops.context import LoweringContext
from compiler.ops.options import OpOption
from compiler.ops.spec import OpSpec

MODE = OpOption("attention", ("fused", "unfused"), "fused",
                "how a fused attention (FusedAttention, made by the fuse_attention pass) is lowered: fused (one "
                "flash-style program; the scores never reach DRAM) or unfused (its MatMuls, scale, mask Add and "
                "Softmax each a layer of its own, as without the pass)")
"""The FusedAttention option (``compile_model(attention=...)``)."""


def _lead_map(lead: tuple[int, ...], out: tuple[int, ...]) -> tuple[int, ...] | None:
    """For each head of the scores' leading dims ``out`` (flattened), the index of its block in an operand with
    leading dims ``lead`` (broadcast); None when ``lead`` does not broadcast to ``out``."""
    lead = (1,) * (len(out) - len(lead)) + tuple(lead)
    if len(lead) != len(out) or any(a not in (1, b) for a, b in zip(lead, out)):
        return None
    idx = np.arange(math.prod(lead)).reshape(lead)
    return tuple(int(i) for i in np.broadcast_to(idx, out).reshape(-1))


def attention_spec(node: Node, graph: Graph) -> tuple[kernel.AttentionSpec, MaskInfo | None] | str:
    """The kernel's spec and mask of a ``FusedAttention`` node, or why its shapes are not an attention."""
    if len(node.inputs) != 4:
        return f"FusedAttention takes Q, K, V and a mask (or ''), not {len(node.inputs)} inputs"
    q, k, v = (graph.tensor(t).shape for t in node.inputs[:3])
    out = graph.tensor(node.outputs[0]).shape
    if min(len(q), len(k), len(v), len(out)) < 2:
        return "Q, K and V must have at least 2 dims"
    lq, d, lk, dv = q[-2], q[-1], k[-1], v[-1]
    lead = out[:-2]
    if k[-2] != d or v[-2] != lk or out[-2:] != (lq, dv):
        return f"shapes Q {q}, K {k}, V {v} -> {out} are not [.., Lq, d], [.., d, Lk], [.., Lk, dv] -> [.., Lq, dv]"
    maps = [_lead_map(s[:-2], lead) for s in (q, k, v)]
    if any(m is None for m in maps):
        return f"the leading dims of Q {q}, K {k} and V {v} do not broadcast to {lead}"
    mask = None
    if node.inputs[3]:
        m = graph.tensor(node.inputs[3])
        if not m.is_const or m.rank > len(out) or _lead_map(m.shape, lead + (lq, lk)) is None:
            return f"the mask must be a constant broadcastable to the scores {lead + (lq, lk)}, not {m.shape}"
        mask = MaskInfo.of_mask(m.data, lead, lq, lk)
    a = node.attrs
    spec = kernel.AttentionSpec(lq, lk, d, dv, *maps, float(a.get("scale", 1.0)), bool(a.get("divide", 0)))
    why = spec.check()
    return why if why else (spec, mask)


def _check(node: Node, graph: Graph) -> str | None:
    got = attention_spec(node, graph)
    return got if isinstance(got, str) else None


def lower_attention(low: LoweringContext, n: Node) -> None:
    """The fused program; its parts as their own layers when the option says so or no fused tiling fits."""
    if low.options[MODE] == "unfused":
        return _unfused(low, n)
    saved = low.snapshot()
    try:
        _fused(low, n)
    except TilingError:
        low.restore(saved)
        _unfused(low, n)


def _operand(low: LoweringContext, name: str) -> tuple[str, int]:
    """Where the kernel reads ``name``: a constant's image in W, an activation row-major in ACT."""
    if low.graph.is_const(name):
        return "W", low.const(np.ascontiguousarray(low.data(name), np.float32))
    return "ACT", low.want(name, "rm").offset


def _fused(low: LoweringContext, n: Node) -> None:
    spec, mask = attention_spec(n, low.graph)
    tiling = search_attention(spec, low.target, mask)
    prog = kernel.attention_program(spec, low.target, tiling, mask)
    out = low.alloc(low.graph.tensor(n.outputs[0]).shape, "rm")
    bind = {r: _operand(low, t) for r, t in zip("QKV", n.inputs[:3])} | {"O": ("ACT", out.offset)}
    table = kernel.mask_table(mask, tiling)
    if table is not None:
        bind["Mk"] = ("W", low.const(table))
    low.emit(n, prog, bind, spec.n * spec.lq * spec.lk * (spec.d + spec.dv))
    low.bind[n.outputs[0]] = out


def unfused_nodes(n: Node, graph: Graph) -> tuple[list[Node], dict[str, Tensor]]:
    """The layers a ``FusedAttention`` node stands for, as the passes leave them without it (the scale of a Div in
    the scores MatMul's epilogue), with the tensors between them (named ``<node>/scores`` ...)."""
    q, k, v, mask = n.inputs
    mm, scale_name, add_name, sm_name = n.attrs.get("parts", (f"{n.name}/scores_mm", "", "", f"{n.name}/softmax"))
    shape = graph.tensor(n.outputs[0]).shape[:-2] + (graph.tensor(q).shape[-2], graph.tensor(k).shape[-1])
    t = {name: Tensor(name, shape, np.float32) for name in (f"{n.name}/{x}" for x in ("scores", "scaled", "masked",
                                                                                       "probs"))}
    scale, divide = float(n.attrs.get("scale", 1.0)), bool(n.attrs.get("divide", 0))
    x = f"{n.name}/scores"
    nodes = [Node(mm, "MatMul", (q, k), (x,), {"divisor": scale} if divide else {})]
    if scale_name and not divide:
        c = Tensor.const(f"{n.name}/scale", np.float32(scale))
        t[c.name] = c
        nodes.append(Node(scale_name, "Mul", (x, c.name), (f"{n.name}/scaled",)))
        x = f"{n.name}/scaled"
    if mask:
        nodes.append(Node(add_name or f"{n.name}/mask", "Add", (x, mask), (f"{n.name}/masked",)))
        x = f"{n.name}/masked"
    nodes += [Node(sm_name, "Softmax", (x,), (f"{n.name}/probs",), {"axis": len(shape) - 1}),
              Node(n.name, "MatMul", (f"{n.name}/probs", v), n.outputs)]
    return nodes, t


def _unfused(low: LoweringContext, n: Node) -> None:
    """Each part lowered by its own op's lowering, on a graph with the tensors between them."""
    from compiler.ops import REGISTRY  # (the registry holds this module's entry)

    nodes, tensors = unfused_nodes(n, low.graph)
    graph = low.graph
    low.graph = replace(graph, tensors={**graph.tensors, **tensors})
    try:
        for part in nodes:
            REGISTRY[part.op].lower(low, part)
    finally:
        low.graph = graph


OPS = (
    OpSpec("FusedAttention", lower_attention, check=_check, options=(MODE,),
           npu="not an ONNX op: made by the fuse_attention pass of MatMul(Q, K), a constant scale (Div or Mul), an "
               "additive constant mask, Softmax and MatMul(P, V); one flash-style program: per head and query tile, "
               "the key tiles on the matrix unit, the online softmax on the vector unit, key tiles the mask kills "
               "(above a causal diagonal) skipped; the scores never reach DRAM"),
)
