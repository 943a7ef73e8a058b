"""``If`` nodes resolved at compile time. A compiled program has one data flow, so an ``If`` whose condition is a
constant (an initializer, a Constant node, or a value constant folding computed: optimum's merged decoders take
``use_cache_branch`` as a graph input, which the step being compiled gives as a constant) is replaced by the nodes of
the branch it takes (:func:`inline_constant_ifs`); one whose condition is computed at run time is refused
(:func:`refuse_runtime_ifs`), naming the condition and how to give it.

ONNX names are unique across a graph and its subgraphs (a subgraph may not redefine a name of an enclosing scope),
so a branch's nodes and initializers join the main graph under their own names; only the branch's outputs are
renamed to the If's outputs (an Identity where the branch passes a tensor of the enclosing graph through)."""

from __future__ import annotations

import onnx
from onnx import helper, numpy_helper

from compiler.errors import UnsupportedOpError


def bind_hint(name: str) -> str:
    """How to give graph input ``name`` as a constant of the step being compiled."""
    return (f"bind it as a constant for the step being compiled (an initializer: npusim.app.onnx_backend."
            f"bind_constants(model, {{{name!r}: value}}), or NpuBackend.prepare(..., constant_inputs=[{name!r}]))")


def _constants(g: onnx.GraphProto) -> dict[str, onnx.TensorProto]:
    """The main graph's initializers and Constant nodes' tensors, by name."""
    found = {i.name: i for i in g.initializer}
    for on in g.node:
        if on.op_type == "Constant" and on.domain in ("", "ai.onnx") and on.attribute and on.attribute[0].HasField("t"):
            found[on.output[0]] = on.attribute[0].t
    return found


def _condition(on: onnx.NodeProto, consts: dict[str, onnx.TensorProto]) -> bool | None:
    """The value of If node ``on``'s condition when it is a constant of one element, else None."""
    t = consts.get(on.input[0]) if on.input else None
    if t is None:
        return None
    value = numpy_helper.to_array(t)
    return bool(value.reshape(-1)[0]) if value.size == 1 else None


def _inlined(on: onnx.NodeProto, branch: onnx.GraphProto) -> tuple[list[onnx.NodeProto], list[onnx.ValueInfoProto]]:
    """The nodes of ``branch`` computing If node ``on``'s outputs, and the branch's value infos (renamed alike)."""
    rename = {b.name: o for b, o in zip(branch.output, on.output) if o}
    produced = {o for n in branch.node for o in n.output}
    nodes = []
    for n in branch.node:
        copy = onnx.NodeProto()
        copy.CopyFrom(n)
        copy.output[:] = [rename.get(o, o) if o in produced else o for o in n.output]
        copy.input[:] = [rename.get(i, i) if i in produced else i for i in n.input]
        nodes.append(copy)
    for b, o in rename.items():
        if b not in produced:   # a tensor of the enclosing graph (or a branch initializer) passed through
            nodes.append(helper.make_node("Identity", [b], [o], name=f"{on.name or 'if'}/{o}"))
    infos = []
    for vi in branch.value_info:
        copy = onnx.ValueInfoProto()
        copy.CopyFrom(vi)
        copy.name = rename.get(vi.name, vi.name)
        infos.append(copy)
    return nodes, infos


def inline_constant_ifs(m: onnx.ModelProto) -> onnx.ModelProto:
    """``m`` with every If of the main graph whose condition is a constant replaced by the branch it takes (again,
    for Ifs the taken branch holds); ``m`` itself when there is none."""
    out = m
    while True:
        g = out.graph
        consts = _constants(g)
        ifs = [(k, on, c) for k, on in enumerate(g.node) if on.op_type == "If" and on.domain in ("", "ai.onnx")
               and (c := _condition(on, consts)) is not None]
        if not ifs:
            return out
        k, on, cond = ifs[0]
        branch = next(a.g for a in on.attribute if a.name == ("then_branch" if cond else "else_branch"))
        nodes, infos = _inlined(on, branch)
        new = onnx.ModelProto()
        new.CopyFrom(out)
        del new.graph.node[:]
        new.graph.node.extend([*g.node[:k], *nodes, *g.node[k + 1:]])
        new.graph.initializer.extend(branch.initializer)
        new.graph.value_info.extend(infos)
        out = new


class RuntimeIfError(UnsupportedOpError):
    """An If whose condition is computed at run time: a program has one data flow."""


def refuse_runtime_ifs(m: onnx.ModelProto) -> None:
    """RuntimeIfError for the first If of the main graph (its condition is not a constant, or it would have
    been inlined), naming its condition and how to give it."""
    inputs = {i.name for i in m.graph.input}
    for k, on in enumerate(m.graph.node):
        if on.op_type == "If" and on.domain in ("", "ai.onnx"):
            cond = on.input[0]
            what = "a graph input" if cond in inputs else "computed at run time"
            raise RuntimeIfError(on.name or f"if_{k}", "If", f"its condition {cond!r} is {what}; a program takes "
                                     f"one branch, chosen when compiling: {bind_hint(cond)}")

