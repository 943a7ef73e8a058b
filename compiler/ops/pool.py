"""MaxPool, AveragePool, GlobalAveragePool and GlobalMaxPool on the vector unit over channels-last tiles
(:func:`compiler.kernels.vector.pooling.pool2d`): 1-D (NCL, as one row) and 2-D, any window, strides, pads,
dilations, ceil_mode and count_include_pad."""

from __future__ import annotations

import dataclasses

import numpy as np

from compiler.errors import UnsupportedOpError
from compiler.frontend.canonical import CanonContext, window_attrs, window_out
from compiler.ir import Graph, Node
from compiler.kernels.vector import pooling
from compiler.ops.context import LoweringContext
from compiler.ops.spec import F32_INT8, OpSpec


def lower_pool(low: LoweringContext, n: Node) -> None:
    """Any window, strides, pads, dilations and ceil_mode, 1-D (NCL as one row) or 2-D; a global pool is one window
    over the whole input."""
    x = low.want(n.inputs[0], "nhwc")
    one_d = len(x.shape) == 3
    N, C, H, W = (x.shape[0], x.shape[1], 1, x.shape[2]) if one_d else x.shape
    kind = "max" if n.op in ("MaxPool", "GlobalMaxPool") else "avg"
    if n.op.startswith("Global"):
        k, s, p, d, ceil, include = (H, W), (1, 1), (0,) * 4, (1, 1), False, True
    else:
        a = n.attrs
        k, s, p, d = a["kernel_shape"], a["strides"], a["pads"], a["dilations"]
        if one_d:   # the 2-D pool of one row
            k, s, p, d = (1, *k), (1, *s), (0, p[0], 0, p[1]), (1, *d)
        ceil, include = bool(a.get("ceil_mode", 0)), bool(a.get("count_include_pad", 0))
    OH, OW = (window_out(size, k[i], s[i], p[i], p[2 + i], d[i], ceil) for i, size in enumerate((H, W)))
    y = low.alloc((N, C, OW) if one_d else (N, C, OH, OW), "nhwc", x.dtype)
    # a pool of dequantized int8 divides by the count as onnxruntime does, so the requantized result is exact
    dq = getattr(low.graph.producer(n.inputs[0]), "op", None) == "DequantizeLinear"
    prog = pooling.pool2d(kind, N, H, W, C, tuple(k), tuple(s), tuple(p), x.dtype, low.target, include, divide=dq,
                         dilation=tuple(d), ceil=ceil)
    bind = {"X": ("ACT", x.offset), "Y": ("ACT", y.offset)}
    for r in prog.regions:
        if r.name in ("RC", "CNT"):   # an average whose count varies: its per-position reciprocals, or counts
            counts = pooling.avgpool_counts(H, W, k, s, p, d, (OH, OW), include)
            bind[r.name] = ("W", low.const(counts if r.name == "CNT" else (1.0 / counts).astype(np.float32)))
    low.emit(n, prog, bind)
    low.bind[n.outputs[0]] = y


def _pool_check(node: Node, graph: Graph) -> str | None:
    rank = len(graph.tensor(node.inputs[0]).shape)
    if rank not in (3, 4):
        return f"only 1-D and 2-D pooling (NCL or NCHW inputs), not rank {rank}"
    return None


def _pool_attrs(node: Node, ctx: CanonContext) -> dict:
    """A pool's window attributes and ceil_mode; refuses ceil_mode pools whose size ONNX and onnxruntime differ on."""
    sx, sy = ctx.shape(node.inputs[0]), ctx.shape(node.outputs[0])
    attrs = {**window_attrs(node, len(sx) - 2, (), node.attrs, sx[2:]),
             "ceil_mode": int(node.attrs.get("ceil_mode", 0))}
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


_WINDOW = "1-D and 2-D; vector unit over channels-last tiles; any window, strides, pads (auto_pad too), " \
          "dilations and ceil_mode (refused at import only where ONNX's output size differs from onnxruntime's)"
OPS = (
    OpSpec("MaxPool", lower_pool, _maxpool, _pool_check, dtypes=F32_INT8, nhwc=True, npu=_WINDOW + "; also int8"),
    OpSpec("AveragePool", lower_pool, _avgpool, _pool_check, nhwc=True,
           npu=_WINDOW + "; count_include_pad 0 or 1 (onnxruntime's counts)"),
    OpSpec("GlobalAveragePool", lower_pool, check=_pool_check, nhwc=True, npu="1-D and 2-D; vector unit"),
    OpSpec("GlobalMaxPool", lower_pool, check=_pool_check, nhwc=True, npu="1-D and 2-D; vector unit"),
)
