"""A BEV perception network of the zoo, small enough to validate in the test suite: the operators of automotive
perception NPUs (ConvTranspose, Resize, GridSample, multi-scale deformable attention) in the forms their exporters
write."""

from __future__ import annotations

import math

import numpy as np

from compiler.errors import CompileError
from compiler.frontend.builder import GraphBuilder, to_onnx
from npusim.app.zoo.blocks import Init


class _Writer:
    """Seeded layers written into a builder (convs with bias, linears as MatMul + Add)."""

    def __init__(self, b: GraphBuilder, init: Init):
        self.b, self.init = b, init

    def conv(self, x: str, cin: int, cout: int, k: int, name: str, stride: int = 1, relu: bool = True) -> str:
        b = self.b
        w = b.const(f"{name}.weight", self.init.he((cout, cin, k, k)))
        y = b.conv(x, w, b.const(f"{name}.bias", self.init.normal((cout,), 0.05)), strides=stride, pads=k // 2,
                   name=name)
        return b.relu(y, name=f"{name}.relu") if relu else y

    def linear(self, x: str, cin: int, cout: int, name: str, std: float | None = None) -> str:
        b = self.b
        w = b.const(f"{name}.weight", self.init.normal((cin, cout), std or 1 / math.sqrt(cin)))
        return b.add(b.matmul(x, w, name=f"{name}.matmul"), b.const(f"{name}.bias", self.init.normal((cout,), 0.02)),
                     name=name)


def _bev_grid(bev: int, seed: int) -> np.ndarray:
    """A fixed camera-to-BEV sampling grid ``[1, bev, bev, 2]`` in [-1.1, 1.1] (a perspective-like warp with some
    points off the image, which GridSample's zero padding reads as 0)."""
    v, u = np.meshgrid(np.linspace(0.05, 1.0, bev), np.linspace(-1.0, 1.0, bev), indexing="ij")
    x = u / (0.35 + 0.65 * v) * 0.55
    y = 2.2 * v - 1.1
    jitter = np.random.default_rng(seed + 1).uniform(-0.01, 0.01, (bev, bev, 2))
    return (np.stack([x, y], -1) + jitter)[None].astype(np.float32)


def msda_pytorch(b: GraphBuilder, value: str, shapes: list[tuple[int, int]], locations: str, weights: str,
                 name: str) -> str:
    """mmcv's ``multi_scale_deformable_attn_pytorch`` as ``torch.onnx.export`` writes it.

    value ``[1, S, heads, dh]`` (S = sum of H*W over ``shapes``), locations ``[1, Q, heads, L, P, 2]`` in [0, 1],
    weights ``[1, Q, heads, L, P]``; the result ``[1, Q, heads*dh]``: per level the value is split off and made
    ``[heads, dh, H, W]``, the grid ``2 * loc - 1`` ``[heads, Q, P, 2]``, GridSample (bilinear, zeros,
    align_corners=0) gives ``[heads, dh, Q, P]``; the levels are stacked (Unsqueeze + Concat), flattened, weighted
    and summed over levels x points.
    """
    _, S, heads, dh = b.shape(value)
    _, Q, _, L, P, _ = b.shape(locations)
    parts = b.split(value, [h * w for h, w in shapes], 1, name=f"{name}.split")
    grids = b.sub(b.mul(locations, np.float32(2), name=f"{name}.grid.mul"), np.float32(1), name=f"{name}.grid")
    sampled = []
    for lvl, (h, w) in enumerate(shapes):
        v = parts[lvl]
        v = b.reshape(v, (1, h * w, heads * dh), name=f"{name}.value{lvl}.flatten")
        v = b.transpose(v, (0, 2, 1), name=f"{name}.value{lvl}.t")
        v = b.reshape(v, (heads, dh, h, w), name=f"{name}.value{lvl}.heads")
        g = b.node("Gather", [grids, np.array(lvl, np.int64)], (1, Q, heads, P, 2), name=f"{name}.grid{lvl}", axis=3)
        g = b.transpose(g, (0, 2, 1, 3, 4), name=f"{name}.grid{lvl}.t")
        g = b.reshape(g, (heads, Q, P, 2), name=f"{name}.grid{lvl}.flatten")
        s = b.node("GridSample", [v, g], (heads, dh, Q, P), name=f"{name}.sample{lvl}", mode="bilinear",
                   padding_mode="zeros", align_corners=0)
        sampled.append(b.node("Unsqueeze", [s, np.array([-2], np.int64)], (heads, dh, Q, 1, P),
                              name=f"{name}.sample{lvl}.unsqueeze"))
    stack = b.concat(sampled, -2, name=f"{name}.stack")
    stack = b.reshape(stack, (heads, dh, Q, L * P), name=f"{name}.stack.flatten")
    a = b.transpose(weights, (0, 2, 1, 3, 4), name=f"{name}.weights.t")
    a = b.reshape(a, (heads, 1, Q, L * P), name=f"{name}.weights.flatten")
    out = b.node("ReduceSum", [b.mul(stack, a, name=f"{name}.weighted"), np.array([-1], np.int64)], (heads, dh, Q),
                 name=f"{name}.sum", keepdims=0)
    out = b.reshape(out, (1, heads * dh, Q), name=f"{name}.view")
    return b.transpose(out, (0, 2, 1), name=f"{name}.out")


def bev_tiny(seed: int = 0, image: int = 64, width: int = 16, dims: int = 32, bev: int = 16, heads: int = 4,
             points: int = 4, classes: int = 3):
    """A BEV detector in miniature: conv backbone, FPN neck (Resize, ConvTranspose), GridSample view transform,
    deformable attention, heads; 1x3x64x64 -> 16x16 BEV.

    The neck upsamples by a nearest Resize top-down and a SECOND-FPN ConvTranspose deblock; the view transform is a
    GridSample from a constant grid; one multi-scale deformable attention block (mmcv's exported form, two levels)
    lets the BEV queries attend to the neck; heatmap and box heads run on the BEV grid.

    image, width, dims, bev, heads, points, classes: input size, backbone width, embedding width, BEV grid side,
    attention heads, sampling points per level and head, heatmap classes.
    """
    if image % 8 or dims % heads:
        raise CompileError(f"image={image} must be a multiple of 8 and dims={dims} a multiple of heads={heads}")
    b, init = GraphBuilder("bev_tiny"), Init(seed)
    nn = _Writer(b, init)
    x = b.input("image", (1, 3, image, image), np.float32)
    # backbone
    c2 = nn.conv(x, 3, width, 3, "backbone.stem", stride=2)
    c3 = nn.conv(c2, width, 2 * width, 3, "backbone.layer1", stride=2)           # /4
    c4 = nn.conv(c3, 2 * width, 4 * width, 3, "backbone.layer2", stride=2)       # /8
    h3, h4 = image // 4, image // 8
    # FPN neck: lateral 1x1s, nearest 2x top-down, a 3x3 smoothing; SECOND-FPN deblock of P4 by ConvTranspose
    p4 = nn.conv(c4, 4 * width, dims, 1, "neck.lateral4", relu=False)
    up = b.node("Resize", [p4, None, np.array([1, 1, 2, 2], np.float32)], (1, dims, h3, h3), name="neck.upsample4",
                mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    p3 = b.add(nn.conv(c3, 2 * width, dims, 1, "neck.lateral3", relu=False), up, name="neck.topdown3")
    p3 = nn.conv(p3, dims, dims, 3, "neck.smooth3")
    wt = b.const("neck.deblock4.weight", init.he((dims, dims, 2, 2)))
    de = b.node("ConvTranspose", [p4, wt, b.const("neck.deblock4.bias", init.normal((dims,), 0.05))],
                (1, dims, h3, h3), name="neck.deblock4", kernel_shape=(2, 2), strides=(2, 2))
    feat = nn.conv(b.concat([p3, b.relu(de, name="neck.deblock4.relu")], 1, name="neck.concat"), 2 * dims, dims, 1,
                   "neck.fuse")
    # BEV view transform: a fixed camera-to-BEV projection as a constant sampling grid
    grid = b.const("view.grid", _bev_grid(bev, seed))
    bev_feat = b.node("GridSample", [feat, grid], (1, dims, bev, bev), name="view.transform", mode="bilinear",
                      padding_mode="zeros", align_corners=0)
    # deformable attention: BEV queries attend to the neck's two levels
    Q, L, dh = bev * bev, 2, dims // heads
    q = b.transpose(b.reshape(bev_feat, (1, dims, Q), name="bev.flatten"), (0, 2, 1), name="bev.queries")
    q = b.add(q, b.const("bev.pos_embed", init.normal((1, Q, dims), 0.1)), name="bev.pos")
    levels = [(feat, h3), (p4, h4)]
    flat = [b.transpose(b.reshape(t, (1, dims, h * h), name=f"attn.level{i}.flatten"), (0, 2, 1),
                        name=f"attn.level{i}.tokens") for i, (t, h) in enumerate(levels)]
    value = nn.linear(b.concat(flat, 1, name="attn.value_in"), dims, dims, "attn.value_proj")
    value = b.reshape(value, (1, sum(h * h for _, h in levels), heads, dh), name="attn.value")
    off = nn.linear(q, dims, heads * L * points * 2, "attn.sampling_offsets", std=0.5 / math.sqrt(dims))
    off = b.reshape(off, (1, Q, heads, L, points, 2), name="attn.offsets")
    norm = np.array([[h, h] for _, h in levels], np.float32).reshape(1, 1, 1, L, 1, 2)
    ref = np.stack(np.meshgrid((np.arange(bev) + 0.5) / bev, (np.arange(bev) + 0.5) / bev, indexing="xy"), -1)
    ref = np.repeat(ref.reshape(1, Q, 1, 1, 1, 2), L, axis=3).astype(np.float32)
    loc = b.add(b.const("attn.reference_points", ref), b.div(off, b.const("attn.offset_normalizer", norm),
                                                              name="attn.offsets.normalized"), name="attn.locations")
    att = nn.linear(q, dims, heads * L * points, "attn.attention_weights")
    att = b.softmax(b.reshape(att, (1, Q, heads, L * points), name="attn.weights.heads"), -1, name="attn.softmax")
    att = b.reshape(att, (1, Q, heads, L, points), name="attn.weights")
    out = msda_pytorch(b, value, [(h, h) for _, h in levels], loc, att, "attn.msda")
    out = b.add(nn.linear(out, dims, dims, "attn.output_proj"), q, name="attn.residual")
    # heads on the BEV grid
    y = b.reshape(b.transpose(out, (0, 2, 1), name="head.t"), (1, dims, bev, bev), name="head.bev")
    y = nn.conv(y, dims, dims, 3, "head.shared")
    b.output(nn.conv(y, dims, classes, 1, "head.heatmap", relu=False), nn.conv(y, dims, 8, 1, "head.box", relu=False))
    return to_onnx(b.build())
