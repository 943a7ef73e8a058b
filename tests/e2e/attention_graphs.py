"""ONNX graphs of scaled dot-product attention as exporters write it (``MatMul(Q, K) -> Div|Mul -> Add(mask) ->
Softmax -> MatMul(P, V)``), for the fuse_attention tests."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def causal_mask(lq: int, lk: int, value: float = -np.inf) -> np.ndarray:
    """``[lq, lk]``: query i (at position ``lk - lq + i``, the last of the keys) sees keys up to its position; the
    others get ``value``."""
    keys, pos = np.arange(lk)[None, :], np.arange(lk - lq, lk)[:, None]
    return np.where(keys <= pos, np.float32(0), np.float32(value)).astype(np.float32)


def attention_model(batch: int = 1, heads: int = 2, lq: int = 5, lk: int = 7, d: int = 8, dv: int | None = None, *,
                    scale: str | None = "div", mask: np.ndarray | None = None, k_form: str = "transposed",
                    mask_first: bool = False, kv_heads: int | None = None, extra_outputs: tuple[str, ...] = (),
                    opset: int = 17) -> onnx.ModelProto:
    """Inputs ``q [batch, heads, lq, d]``, ``k`` (``[batch, kv_heads, d, lk]``, or ``[.., lk, d]`` made ``[.., d, lk]``
    by a Transpose with ``k_form="transpose"``), ``v [batch, kv_heads, lk, dv]``; output ``out``. ``scale``: ``div``
    (by sqrt(d)), ``mul`` (by 1/sqrt(d)), ``mul_first`` (the constant first) or None; ``mask``: a constant added to
    the scores (``mask_first``: as the Add's first operand); ``extra_outputs``: intermediate tensors (``scores``,
    ``scaled``, ``masked``, ``probs``) also returned."""
    dv, kv = dv or d, kv_heads or heads
    nodes, inits = [], []
    k_shape = (batch, kv, lk, d) if k_form == "transpose" else (batch, kv, d, lk)
    k = "k"
    if k_form == "transpose":
        nodes.append(helper.make_node("Transpose", ["k"], ["kt"], perm=(0, 1, 3, 2), name="k_t"))
        k = "kt"
    nodes.append(helper.make_node("MatMul", ["q", k], ["scores"], name="scores_mm"))
    x = "scores"
    if scale is not None:
        c = np.float32(np.sqrt(d)) if scale == "div" else np.float32(1 / np.sqrt(d))
        inits.append(numpy_helper.from_array(np.asarray(c), "scale_c"))
        ins = ["scale_c", x] if scale == "mul_first" else [x, "scale_c"]
        nodes.append(helper.make_node("Div" if scale == "div" else "Mul", ins, ["scaled"], name="scale"))
        x = "scaled"
    if mask is not None:
        inits.append(numpy_helper.from_array(np.asarray(mask, np.float32), "mask_c"))
        nodes.append(helper.make_node("Add", ["mask_c", x] if mask_first else [x, "mask_c"], ["masked"], name="mask"))
        x = "masked"
    nodes.append(helper.make_node("Softmax", [x], ["probs"], axis=-1, name="softmax"))
    nodes.append(helper.make_node("MatMul", ["probs", "v"], ["out"], name="context"))
    shapes = {"scores": (batch, heads, lq, lk), "scaled": (batch, heads, lq, lk), "masked": (batch, heads, lq, lk),
              "probs": (batch, heads, lq, lk)}
    outputs = [helper.make_tensor_value_info("out", F, (batch, heads, lq, dv))]
    outputs += [helper.make_tensor_value_info(t, F, shapes[t]) for t in extra_outputs]
    graph = helper.make_graph(nodes, "attention", [helper.make_tensor_value_info("q", F, (batch, heads, lq, d)),
                                                   helper.make_tensor_value_info("k", F, k_shape),
                                                   helper.make_tensor_value_info("v", F, (batch, kv, lk, dv))],
                              outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def attention_inputs(model: onnx.ModelProto, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded normal inputs for :func:`attention_model`'s ``q``, ``k`` and ``v``."""
    rng = np.random.default_rng(seed)
    return {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
            for i in model.graph.input}
