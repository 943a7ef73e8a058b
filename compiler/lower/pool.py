"""MaxPool, AveragePool and GlobalAveragePool on the vector unit over channels-last tiles
(:func:`compiler.vector.pool2d`)."""

from __future__ import annotations

import dataclasses

from .. import vector
from ..canonical import CanonContext, window_attrs, window_out
from ..errors import UnsupportedOpError
from ..ir import Graph, Node
from .context import LoweringContext
from .spec import F32_INT8, OpSpec


def lower_pool(low: LoweringContext, n: Node) -> None:
    """A square window, equal strides, symmetric pads; a global average pool is one window over a square input."""
    x = low.want(n.inputs[0], "nhwc")
    N, C, H, W = x.shape
    if n.op == "GlobalAveragePool":
        k, s, p, include = H, 1, 0, True
    else:
        a = n.attrs
        k, s, p, include = a["kernel_shape"][0], a["strides"][0], a["pads"][0], bool(a.get("count_include_pad", 0))
    kind = "max" if n.op == "MaxPool" else "avg"
    OH, OW = (H + 2 * p - k) // s + 1, (W + 2 * p - k) // s + 1
    y = low.alloc((N, C, OH, OW), "nhwc", x.dtype)
    bind = {"X": ("ACT", x.offset), "Y": ("ACT", y.offset)}
    if kind == "avg" and not include:
        bind["RC"] = ("W", low.const(vector.avgpool_reciprocals(H, W, k, s, p)))
    # a pool of dequantized int8 divides by the count as onnxruntime does, so the requantized result is exact
    dq = getattr(low.graph.producer(n.inputs[0]), "op", None) == "DequantizeLinear"
    low.emit(n, vector.pool2d(kind, N, H, W, C, k, s, p, x.dtype, low.target, include, divide=dq), bind)
    low.bind[n.outputs[0]] = y


def _pool_check(node: Node, graph: Graph) -> str | None:
    shape = graph.tensor(node.inputs[0]).shape
    if len(shape) != 4:
        return f"only 2-D pooling (NCHW inputs), not rank {len(shape)}"
    if node.op == "GlobalAveragePool":
        return None if shape[2] == shape[3] else f"only square inputs, not {shape[2]}x{shape[3]}"
    a = node.attrs
    ks, ss, ps = a["kernel_shape"], a["strides"], a["pads"]
    if len(set(ks)) != 1 or len(set(ss)) != 1 or len(set(ps)) != 1 or a.get("ceil_mode", 0) \
            or any(d != 1 for d in a.get("dilations", (1, 1))):
        return "only square windows, equal strides, symmetric pads, ceil_mode=0 and no dilation"
    return None


def _pool_attrs(node: Node, ctx: CanonContext) -> dict:
    """A pool's window attributes and ceil_mode; refuses ceil_mode pools whose size ONNX and onnxruntime differ on."""
    sx, sy = ctx.shape(node.inputs[0]), ctx.shape(node.outputs[0])
    attrs = {**window_attrs(node, len(sx) - 2, (), node.attrs), "ceil_mode": int(node.attrs.get("ceil_mode", 0))}
    k = len(attrs["kernel_shape"])
    for i in range(k) if attrs["ceil_mode"] else ():
        ours = window_out(sx[2 + i], attrs["kernel_shape"][i], attrs["strides"][i], attrs["pads"][i],
                          attrs["pads"][k + i], attrs["dilations"][i], True)
        if ours != sy[2 + i]:
            raise UnsupportedOpError(node.name, node.op, f"ceil_mode=1 makes the last window of spatial dim {i} "
                                     f"start in the end padding: ONNX shape inference gives {sy[2 + i]} outputs, "
                                     f"onnxruntime and PyTorch {ours}; use ceil_mode=0 and explicit pads")
    return attrs


def _maxpool(node: Node, ctx: CanonContext) -> Node:
    attrs = {**_pool_attrs(node, ctx), "storage_order": int(node.attrs.get("storage_order", 0))}
    return dataclasses.replace(node, attrs=attrs, outputs=ctx.drop_extra_outputs(node, "the Indices output"))


def _avgpool(node: Node, ctx: CanonContext) -> Node:
    attrs = {**_pool_attrs(node, ctx), "count_include_pad": int(node.attrs.get("count_include_pad", 0))}
    return dataclasses.replace(node, attrs=attrs)


_WINDOW = "vector unit over channels-last tiles; square window, equal strides, symmetric pads, no dilation, " \
          "ceil_mode=0"
OPS = (
    OpSpec("MaxPool", lower_pool, _maxpool, _pool_check, dtypes=F32_INT8, nhwc=True, npu=_WINDOW + "; also int8"),
    OpSpec("AveragePool", lower_pool, _avgpool, _pool_check, nhwc=True, npu=_WINDOW),
    OpSpec("GlobalAveragePool", lower_pool, check=_pool_check, nhwc=True, npu="vector unit; square inputs"),
)
