"""Lowering: one registry of what the compiler knows of each ONNX op, and the context lowerings share.

:data:`REGISTRY` maps each default-domain op to its :class:`OpSpec`: its canonical IR form (read by the importer),
whether and when it runs on the NPU (read by the host-fallback decision, :func:`npu_unsupported`) and its lowering.
``docs/ops.md`` is generated from it. A lowering is ``fn(ctx, node)`` on a :class:`LoweringContext`.
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

from compiler.frontend.contracts import CONTRACTS
from compiler.ir import Graph, Node
from compiler.ops import (
    attention,
    cast,
    composite,
    conv,
    conv_transpose,
    elementwise,
    folded,
    index,
    kv_cache,
    layout,
    logic,
    matmul,
    msda,
    norm,
    pool,
    quant,
    ranking,
    reduce,
    rows,
    scan,
    weight_quant,
)
from compiler.ops import sampling as sample
from compiler.ops.context import ALIGN, Binding, LoweringContext
from compiler.ops.options import OpOption, OpOptions
from compiler.ops.spec import OpSpec

REGISTRY: MappingProxyType[str, OpSpec] = MappingProxyType(
    {spec.op: replace(spec, contract=CONTRACTS.get(spec.op, spec.contract))
     for module in (conv, conv_transpose, matmul, elementwise, pool, rows, reduce, norm, layout, quant, folded, sample,
                   msda, attention, logic, scan, ranking, index, cast, weight_quant, kv_cache, composite)
     for spec in module.OPS})
"""Every default-domain op the compiler takes, by ONNX name."""

OPTIONS: MappingProxyType[str, OpOption] = MappingProxyType({o.name: o for spec in REGISTRY.values()
                                                             for o in spec.options})
"""Every op option the registry declares, by name (:attr:`OpSpec.options`; names are unique)."""
assert len(OPTIONS) == sum(len(s.options) for s in REGISTRY.values()), "two ops declare an option of one name"


def validated_options(options: OpOptions | None = None, **values: str) -> OpOptions:
    """The op options of one compile, validated against the registry: ``options``' values, then ``values`` (option
    name -> value) over them, every other option at its default. Raises TypeError for a name no op declares and
    CompileError naming the option and what it takes for a value it does not."""
    return OpOptions.of(OPTIONS, {**(options.as_dict() if options else {}), **values})


def contract_violation(node: Node, graph: Graph) -> str | None:
    """Why imported ``node`` breaks its op's operand contract (:attr:`OpSpec.contract`), or None."""
    spec = REGISTRY.get(node.op) if node.domain in ("", "ai.onnx") else None
    return spec.contract(node, graph) if spec is not None and spec.contract is not None else None


def npu_unsupported(node: Node, graph: Graph) -> str | None:
    """Why ``node`` (canonical) cannot run on the NPU, or None."""
    if node.unsupported:
        return node.unsupported
    spec = REGISTRY.get(node.op) if node.domain in ("", "ai.onnx") else None
    if spec is None:
        return "not lowered to the NPU yet"
    empty = next((t for t in (*(() if spec.empty_inputs else node.present_inputs), *node.outputs)
                  if t and not graph.is_const(t) and 0 in graph.tensor(t).shape), None)
    if empty and spec.lower is not None:
        return f"tensor {empty!r} is empty (shape {graph.tensor(empty).shape})"
    if spec.lower is not None and node.present_inputs and all(graph.is_const(t) for t in node.present_inputs):
        return "every input is a constant (and constant folding does not compute this op)"
    return spec.unsupported(node, graph)


def unsupported_nodes(graph: Graph) -> list[tuple[Node, str]]:
    """(node, reason) for every node of ``graph`` the NPU cannot run (:func:`npu_unsupported`), in graph order."""
    return [(n, why) for n in graph.nodes if (why := npu_unsupported(n, graph)) is not None]


__all__ = ["ALIGN", "OPTIONS", "REGISTRY", "Binding", "LoweringContext", "OpOption", "OpOptions", "OpSpec",
           "contract_violation", "npu_unsupported", "unsupported_nodes", "validated_options"]
