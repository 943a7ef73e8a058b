"""Multi-scale deformable attention as mmcv's ``multi_scale_deformable_attn_pytorch`` exports it to ONNX
(docs/perception.md#deformable-attention): an operator graph, not a zoo network (it is not in ``MODELS``), built node
for node the way ``torch.onnx.export`` writes that function at opset 16-17:

- ``value (bs, sum H_l*W_l, heads, D)`` -> ``Split`` per level -> ``Reshape (bs, H_l*W_l, heads*D)`` ->
  ``Transpose (0, 2, 1)`` -> ``Reshape (bs*heads, D, H_l, W_l)``;
- ``grid = 2*loc - 1`` (``Mul``, ``Sub``) -> ``Gather(axis=3, level)`` -> ``Transpose (0, 2, 1, 3, 4)`` -> ``Reshape
  (bs*heads, Q, P, 2)``;
- ``GridSample(bilinear, zeros, align_corners=0)`` per level -> ``(bs*heads, D, Q, P)``;
- ``torch.stack(dim=-2)`` (``Unsqueeze`` + ``Concat``) -> ``flatten(-2)`` (``Reshape (bs*heads, D, Q, L*P)``) ->
  ``Mul`` by the attention weights (``Transpose (0, 2, 1, 3, 4)`` -> ``Reshape (bs*heads, 1, Q, L*P)``) ->
  ``ReduceSum(axes=[-1], keepdims=0)`` -> ``Reshape (bs, heads*D, Q)`` -> ``Transpose (0, 2, 1)``: ``(bs, Q,
  heads*D)``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def msda_mmcv(bs: int = 1, heads: int = 2, dims: int = 8, levels: Sequence[tuple[int, int]] = ((6, 5), (3, 3)),
              points: int = 2, queries: int = 7, opset: int = 17) -> onnx.ModelProto:
    """The exported graph of ``multi_scale_deformable_attn_pytorch(value, levels, sampling_locations,
    attention_weights)``: inputs ``value (bs, sum H*W, heads, dims)``, ``sampling_locations (bs, queries, heads, L,
    points, 2)`` (x, y in [0, 1]), ``attention_weights (bs, queries, heads, L, points)``; output ``output (bs,
    queries, heads*dims)``. ``levels``: ``(H_l, W_l)`` per level."""
    lv = [tuple(map(int, hw)) for hw in levels]
    n_l, hw = len(lv), [h * w for h, w in lv]
    bh, lp = bs * heads, n_l * points
    nodes, inits = [], []

    def const(name: str, value) -> str:
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def node(op: str, inputs: list[str], out: str, **attrs) -> str:
        nodes.append(helper.make_node(op, inputs, [out], name=f"/{out}", **attrs))
        return out

    value_parts = [f"value_{i}" for i in range(n_l)]
    nodes.append(helper.make_node("Split", ["value", const("split_sizes", np.array(hw, np.int64))], value_parts,
                                  name="/value_split", axis=1))
    g2 = node("Mul", ["sampling_locations", const("two", np.array(2.0, np.float32))], "loc2")
    grids = node("Sub", [g2, const("one", np.array(1.0, np.float32))], "sampling_grids")
    sampled = []
    for i, (h, w) in enumerate(lv):
        flat = node("Reshape", [value_parts[i], const(f"flat_shape_{i}", np.array([bs, h * w, heads * dims],
                                                                                  np.int64))], f"value_flat_{i}")
        vt = node("Transpose", [flat], f"value_t_{i}", perm=[0, 2, 1])
        v = node("Reshape", [vt, const(f"value_shape_{i}", np.array([bh, dims, h, w], np.int64))], f"value_l_{i}")
        g = node("Gather", [grids, const(f"level_{i}", np.array(i, np.int64))], f"grid_sel_{i}", axis=3)
        gt = node("Transpose", [g], f"grid_t_{i}", perm=[0, 2, 1, 3, 4])
        gl = node("Reshape", [gt, const(f"grid_shape_{i}", np.array([bh, queries, points, 2], np.int64))],
                  f"grid_l_{i}")
        s = node("GridSample", [v, gl], f"sampled_{i}", mode="bilinear", padding_mode="zeros", align_corners=0)
        sampled.append(node("Unsqueeze", [s, const(f"stack_axis_{i}", np.array([3], np.int64))], f"stacked_{i}"))
    st = node("Concat", sampled, "stack", axis=3)
    fl = node("Reshape", [st, const("flat_lp", np.array([bh, dims, queries, lp], np.int64))], "sampled_lp")
    at = node("Transpose", ["attention_weights"], "attn_t", perm=[0, 2, 1, 3, 4])
    a = node("Reshape", [at, const("attn_shape", np.array([bh, 1, queries, lp], np.int64))], "attn")
    m = node("Mul", [fl, a], "weighted")
    r = node("ReduceSum", [m, const("sum_axes", np.array([-1], np.int64))], "summed", keepdims=0)
    o = node("Reshape", [r, const("out_shape", np.array([bs, heads * dims, queries], np.int64))], "out_view")
    node("Transpose", [o], "output", perm=[0, 2, 1])
    f32 = TensorProto.FLOAT
    graph = helper.make_graph(
        nodes, "msda_mmcv",
        [helper.make_tensor_value_info("value", f32, [bs, sum(hw), heads, dims]),
         helper.make_tensor_value_info("sampling_locations", f32, [bs, queries, heads, n_l, points, 2]),
         helper.make_tensor_value_info("attention_weights", f32, [bs, queries, heads, n_l, points])],
        [helper.make_tensor_value_info("output", f32, [bs, queries, heads * dims])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="npusim")
    onnx.checker.check_model(model, full_check=True)
    return model


def msda_inputs(model: onnx.ModelProto, seed: int = 0, spread: float = 0.1) -> dict[str, np.ndarray]:
    """Random inputs of :func:`msda_mmcv`'s graph as the module computes them: standard normal values, sampling
    locations uniform over ``[-spread, 1 + spread]`` (some points partly or wholly outside the map), attention
    weights softmaxed over levels x points."""
    rng = np.random.default_rng(seed)
    shape = {i.name: [d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input}
    value = rng.standard_normal(shape["value"]).astype(np.float32)
    loc = rng.uniform(-spread, 1 + spread, shape["sampling_locations"]).astype(np.float32)
    aw = shape["attention_weights"]
    logits = rng.standard_normal((*aw[:3], aw[3] * aw[4]))
    e = np.exp(logits - logits.max(-1, keepdims=True))
    attn = (e / e.sum(-1, keepdims=True)).reshape(aw).astype(np.float32)
    return {"value": value, "sampling_locations": loc, "attention_weights": attn}
