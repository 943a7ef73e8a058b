"""Fuse an activation into the op that feeds it: a Conv, a ConvTranspose or an element-wise Add/Sub/Mul/Div whose only
consumer is a Relu, or a Clip with constant bounds, takes the activation as ``attrs["activation"]`` (``("relu",)`` or
``("clamp", lo, hi)``) and the activation's output; the lowering applies it to each tile before the store (for a
Conv, after the bias, on the accumulator tile)."""

from __future__ import annotations

from dataclasses import replace

from compiler.ir import Graph

PRODUCERS = ("Conv", "ConvTranspose", "Add", "Sub", "Mul", "Div")


def fuse_activation(graph: Graph) -> Graph:
    nodes, drop = {n.name: n for n in graph.nodes}, set()
    for act in graph.nodes:
        if act.op not in ("Relu", "Clip"):
            continue
        conv = graph.producer(act.inputs[0])
        if conv is None or conv.op not in PRODUCERS or len(graph.consumers(act.inputs[0])) != 1 \
                or act.inputs[0] in graph.outputs or "activation" in conv.attrs:
            continue
        if act.op == "Relu":
            fused = ("relu",)
        else:
            bounds = list(act.inputs[1:]) + ["", ""]
            if any(b and not graph.is_const(b) for b in bounds[:2]):
                continue
            lo = float(graph.tensor(bounds[0]).data) if bounds[0] else float(act.attrs.get("min", -3.4e38))
            hi = float(graph.tensor(bounds[1]).data) if bounds[1] else float(act.attrs.get("max", 3.4e38))
            fused = ("clamp", lo, hi)
        nodes[conv.name] = replace(conv, attrs={**conv.attrs, "activation": fused}, outputs=act.outputs)
        drop.add(act.name)
    if not drop:
        return graph
    tensors = dict(graph.tensors)
    for name in drop:
        tensors.pop(graph.node(name).inputs[0], None)
    return replace(graph, nodes=tuple(nodes[n.name] for n in graph.nodes if n.name not in drop), tensors=tensors)


def fuse_residual(graph: Graph) -> Graph:
    """Fold a residual Add into the Conv that feeds it: ``Add(Conv(x), r)`` (with any activation fused into the Add)
    becomes one Conv with input 3 = ``r`` and ``attrs["residual"] = True``, placed where the Add was; its lowering
    loads ``r``'s tile into the accumulators before the first product, so the sum costs no pass of its own.

    Only Convs the NPU lowers directly (:func:`compiler.kernels.conv2d.conv2d`: 1-D or 2-D, any strides, pads, dilations
    and groups, not depthwise or patch embedding, no activation yet), whose output feeds only this Add, with ``r`` of
    the same shape."""
    nodes, moved, drop = {n.name: n for n in graph.nodes}, {}, set()
    for add in graph.nodes:
        if add.op != "Add" or len(add.present_inputs) != 2:
            continue
        for k in (0, 1):
            conv = graph.producer(add.inputs[k])
            other = add.inputs[1 - k]
            if conv is None or not _direct_conv(conv, graph) or conv.name in moved or conv.name in drop \
                    or len(graph.consumers(add.inputs[k])) != 1 or add.inputs[k] in graph.outputs \
                    or graph.tensor(other).shape != graph.tensor(add.inputs[k]).shape or graph.is_const(other):
                continue
            attrs = {**conv.attrs, "residual": True}
            if "activation" in add.attrs:
                attrs["activation"] = add.attrs["activation"]
            inputs = tuple(conv.inputs) + ("",) * (3 - len(conv.inputs)) + (other,)
            moved[conv.name] = add.name
            nodes[add.name] = replace(conv, attrs=attrs, inputs=inputs, outputs=add.outputs)
            break
    if not moved:
        return graph
    tensors = dict(graph.tensors)
    for conv in moved:
        tensors.pop(graph.node(conv).outputs[0], None)
    kept = [nodes[n.name] for n in graph.nodes if n.name not in moved]
    return replace(graph, nodes=tuple(kept), tensors=tensors)


def _direct_conv(n, graph: Graph) -> bool:
    """Whether ``n`` is a Conv that :func:`compiler.kernels.conv2d.conv2d` lowers (1-D or 2-D, not depthwise, not
    patchify)."""
    from compiler.kernels.depthwise import is_depthwise
    from compiler.kernels.patchify import is_patchify

    a = n.attrs
    if n.op != "Conv" or "activation" in a or "residual" in a or len(n.present_inputs) < 2 \
            or not graph.is_const(n.inputs[1]) or len(graph.tensor(n.inputs[0]).shape) not in (3, 4):
        return False
    channels, filters = graph.tensor(n.inputs[0]).shape[1], graph.tensor(n.inputs[1]).shape[0]
    return not is_depthwise(channels, filters, a.get("group", 1)) and not is_patchify(n, graph)
