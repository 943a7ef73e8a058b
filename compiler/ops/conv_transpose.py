"""ConvTranspose on the NPU (:mod:`compiler.kernels.conv_transpose2d`): 1-D and 2-D, any strides, pads, output_padding,
output_shape, auto_pad, dilations and groups, bias; a fused Relu/Clip (:mod:`compiler.passes.fuse`); int8 through QDQ
graphs (:mod:`compiler.passes.qdq` fuses ``DequantizeLinear -> ConvTranspose -> QuantizeLinear`` into a quantized
ConvTranspose, since ONNX has no QLinearConvTranspose).

Lowered by phase splitting unless the compile asks for a baseline (``compile_model(conv_transpose=...)``:
:data:`compiler.kernels.conv_transpose2d.MODES`): ``swell_spm`` zero-inserts each window in SPM, ``swell_dram`` writes
the zero-inserted, padded input to DRAM (segment ``<name>.swell``) and runs the direct convolution on it with the kernel
rotated."""

from __future__ import annotations

import dataclasses

import numpy as np

from compiler.errors import CompileError, UnsupportedOpError
from compiler.frontend.canonical import CanonContext
from compiler.ir import Graph, Node
from compiler.kernels.conv2d import Epilogue, conv2d, conv_on_array, pack_weights
from compiler.kernels.conv_transpose2d import (
    MODES,
    ConvTransposeShape,
    conv_transpose2d,
    conv_transpose_on_array,
    pack_transposed_weights,
    phase_bias,
    phase_tap_sums,
    swell_input,
    swell_shape,
    swell_weights,
    transpose_pads,
)
from compiler.ops.context import LoweringContext
from compiler.ops.options import OpOption
from compiler.ops.quant import bias_i32, check_matrix_types, requant_scale
from compiler.ops.spec import OpSpec
from isa import DType

F32 = DType.F32
MODE = OpOption("conv_transpose", MODES, "split",
                "how ConvTranspose is lowered: split (phase splitting), or the baselines it is measured against, "
                "swell_spm (each window zero-inserted in SPM) and swell_dram (the zero-inserted input written to "
                "DRAM, then a convolution)")
"""The ConvTranspose option (``compile_model(conv_transpose=...)``)."""


def transpose_shape(n: Node, x_shape: tuple[int, ...], w_shape: tuple[int, ...]) -> ConvTransposeShape:
    """The ConvTransposeShape of canonical node ``n`` on an NCHW (or NCL: H = R = 1) input and ONNX's
    ``(C, K/g, R, S)`` (or ``(C, K/g, L)``) weights."""
    a = n.attrs
    g = a["group"]
    if len(x_shape) == 3:
        (s,), (d,), (p0, p1), (op,) = a["strides"], a["dilations"], a["pads"], a["output_padding"]
        (N, C, L), (_, Kg, S) = x_shape, w_shape
        return ConvTransposeShape(N, C, 1, L, Kg * g, 1, S, (1, s), (0, p0, 0, p1), (1, d), (0, op), g)
    N, C, H, W = x_shape
    return ConvTransposeShape(N, C, H, W, w_shape[1] * g, w_shape[2], w_shape[3], tuple(a["strides"]),
                              tuple(a["pads"]), tuple(a["dilations"]), tuple(a["output_padding"]), g)


def out_shape(ct: ConvTransposeShape, rank: int) -> tuple[int, ...]:
    return (ct.N, ct.K, ct.OW) if rank == 3 else (ct.N, ct.K, ct.OH, ct.OW)


def _canonical(node: Node, ctx: CanonContext) -> Node:
    """Defaults filled in, ``output_shape`` and ``auto_pad`` resolved to explicit pads with ONNX's formula (which
    onnxruntime follows); attributes ``kernel_shape, strides, pads, dilations, output_padding, group``."""
    x, w = ctx.shape(node.inputs[0]), ctx.shape(node.inputs[1])
    a, k = node.attrs, len(w) - 2
    kernel = tuple(a.get("kernel_shape") or w[2:])
    if kernel != tuple(w[2:]):
        raise UnsupportedOpError(node.name, node.op, f"kernel_shape {kernel} differs from the weights' {w[2:]}")
    auto = a.get("auto_pad", "NOTSET")
    if auto not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise UnsupportedOpError(node.name, node.op, f"attribute auto_pad={auto!r} is not valid")
    strides = tuple(a.get("strides") or (1,) * k)
    dilations = tuple(a.get("dilations") or (1,) * k)
    op = tuple(a.get("output_padding") or (0,) * k)
    pads = (0,) * 2 * k if auto == "VALID" else tuple(a.get("pads") or (0,) * 2 * k)
    wanted = tuple(a.get("output_shape") or ())[-k:] if a.get("output_shape") else None
    if wanted is None and auto.startswith("SAME"):
        wanted = tuple(size * s for size, s in zip(x[2:], strides))
    if wanted is not None:
        try:
            both = [transpose_pads(*v, auto) for v in zip(x[2:], kernel, strides, dilations, op, wanted)]
        except CompileError as e:
            raise UnsupportedOpError(node.name, node.op, str(e)) from None
        pads = tuple(b for b, _ in both) + tuple(e for _, e in both)
    attrs = {"kernel_shape": kernel, "strides": strides, "pads": pads, "dilations": dilations,
             "output_padding": op, "group": int(a.get("group", 1))}
    out = dataclasses.replace(node, attrs=attrs)
    if len(x) in (3, 4) and len(w) == len(x):
        try:
            ours = out_shape(transpose_shape(out, x, w), len(x))
        except CompileError as e:
            raise UnsupportedOpError(node.name, node.op, str(e)) from None
        inferred = ctx.shape(node.outputs[0])
        if tuple(inferred) != ours:
            raise UnsupportedOpError(node.name, node.op, f"ONNX shape inference gives output shape {inferred}, "
                                     f"onnxruntime and the ONNX formula {ours} (auto_pad SAME_* with "
                                     f"output_padding); give output_shape or explicit pads")
    return out


def _check(node: Node, graph: Graph) -> str | None:
    """1-D or 2-D, constant weights and bias, float32 (or the quantized form of :mod:`compiler.passes.qdq`)."""
    x, w = graph.tensor(node.inputs[0]), graph.tensor(node.inputs[1])
    if len(x.shape) not in (3, 4) or len(w.shape) != len(x.shape):
        return f"only 1-D and 2-D transposed convolutions (NCL or NCHW inputs), not rank {len(x.shape)}"
    if not all(graph.is_const(t) for t in node.inputs[1:3] if t):
        return "the weights and bias must be constants"
    types = {x.dtype, w.dtype, graph.tensor(node.outputs[0]).dtype}
    if "quant" not in node.attrs and types != {np.dtype(np.float32)}:
        return f"only float32 tensors are lowered, not {', '.join(sorted(map(str, types)))}; int8 through QDQ " \
               f"(DequantizeLinear -> ConvTranspose -> QuantizeLinear)"
    try:
        transpose_shape(node, x.shape, w.shape)
    except CompileError as e:
        return str(e)
    return None


def lower_conv_transpose(low: LoweringContext, n: Node) -> None:
    """Phase splitting (or the compile's baseline), bias and activation fused into the accumulator epilogue; the
    quantized form requantizes there too."""
    if "quant" in n.attrs:
        return _lower_quantized(low, n)
    mode = low.options[MODE]
    x = low.want(n.inputs[0], "nhwc")
    w = low.data(n.inputs[1]).astype(np.float32)
    ct = transpose_shape(n, x.shape, w.shape)
    w = w.reshape(ct.C, ct.Kg, ct.R, ct.S)
    act = n.attrs.get("activation")
    bias = low.data(n.inputs[2]).astype(np.float32) if len(n.inputs) > 2 and n.inputs[2] else None
    ep = Epilogue(bias=bias is not None, act=act[0] if act else None, lo=act[1] if act and len(act) > 1 else 0.0,
                  hi=act[2] if act and len(act) > 1 else 0.0)
    y = low.alloc(out_shape(ct, len(x.shape)), "nhwc")
    target = low.target
    if mode == "swell_dram":
        cs = swell_shape(ct)
        xs = low.alloc((cs.N, cs.C, cs.H, cs.W), "nhwc")
        low.emit(n, swell_input(ct, F32, target), {"X": ("ACT", x.offset), "Xs": ("ACT", xs.offset)},
                 suffix=".swell")
        target, tiling = conv_on_array(cs, F32, target, ep, low.prefetched, blocks=not low.prefetched)
        wt = pack_weights(swell_weights(w, ct), cs, target.rows, target.cols, tiling.im2col, tiling.pack,
                          tiling.gpack)
        bind = {"X": ("ACT", xs.offset), "Wt": ("W", low.const(wt)), "Y": ("ACT", y.offset)}
        prog = conv2d(cs, F32, target, tiling, ep)
    else:
        target, tiling = conv_transpose_on_array(ct, F32, target, ep, mode, hidden_constants=low.prefetched,
                                                 blocks=not low.prefetched)
        prog = conv_transpose2d(ct, F32, target, tiling, ep, mode=mode)
        wt = pack_transposed_weights(w, ct, target.rows, target.cols, mode, tiling.gpack)
        bind = {"X": ("ACT", x.offset), "Wt": ("W", low.const(wt)), "Y": ("ACT", y.offset)}
    if bias is not None:
        bind["Bias"] = ("W", low.const(bias))
    low.emit(n, prog, bind, ct.macs)
    low.bind[n.outputs[0]] = y


def _lower_quantized(low: LoweringContext, n: Node) -> None:
    """The quantized form: i8 x i8 products accumulate in i32 (bias included, the input zero point folded in per
    phase since each phase sums its own taps), then the QLinearConv requantization (:mod:`compiler.ops.quant`)."""
    q = n.attrs["quant"]
    xd, wd = (DType.from_numpy(low.graph.tensor(t).dtype) for t in n.inputs[:2])
    check_matrix_types(low, n, xd, wd)
    x = low.want(n.inputs[0], "nhwc")
    w = np.asarray(low.data(n.inputs[1]))
    ct = transpose_shape(n, x.shape, w.shape)
    w = w.reshape(ct.C, ct.Kg, ct.R, ct.S)
    yd = DType.from_numpy(low.graph.tensor(n.outputs[0]).dtype)
    bias = low.data(n.inputs[2]).astype(np.int64) if len(n.inputs) > 2 and n.inputs[2] else np.zeros(ct.K, np.int64)
    per_phase = q["x_zp"] != 0
    table = phase_bias(bias, ct) - q["x_zp"] * phase_tap_sums(w, ct).ravel() if per_phase else bias
    w_scale = np.resize(np.asarray(q["w_scale"], np.float32), ct.K)   # per output channel of a group, every group
    ep = Epilogue(bias=True, out=yd, zp=q["y_zp"])
    target = low.target
    target, tiling = conv_transpose_on_array(ct, xd, target, ep, per_phase_bias=per_phase,
                                             hidden_constants=low.prefetched, blocks=not low.prefetched)
    prog = conv_transpose2d(ct, xd, target, tiling, ep, pad_value=q["x_zp"], per_phase_bias=per_phase)
    y = low.alloc(out_shape(ct, len(x.shape)), "nhwc", yd)
    low.emit(n, prog, {"X": ("ACT", x.offset),
                       "Wt": ("W", low.const(pack_transposed_weights(w, ct, target.rows, target.cols,
                                                                     gpack=tiling.gpack))),
                       "Y": ("ACT", y.offset), "Bias": ("W", low.const(bias_i32(table, n))),
                       "Scale": ("W", low.const(requant_scale(np.float32([q["x_scale"]]), w_scale,
                                                           np.float32([q["y_scale"]]), ct.K)))}, ct.macs)
    low.bind[n.outputs[0]] = y


OPS = (
    OpSpec("ConvTranspose", lower_conv_transpose, _canonical, _check, dtypes=None, nhwc=True, options=(MODE,),
           npu="1-D and 2-D, any strides, pads, output_padding, output_shape, auto_pad, dilations and groups; matrix "
               "unit by phase splitting (all phases of a tile from one input window, outputs interleaved in the "
               "accumulators; bias and activation fused); int8 through DequantizeLinear -> ConvTranspose -> "
               "QuantizeLinear"),
)
