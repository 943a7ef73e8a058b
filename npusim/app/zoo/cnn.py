"""Convolutional networks of the zoo: ResNet-18/50 (torchvision topology), MobileNetV2, and a QLinear int8 ResNet-18."""

from __future__ import annotations

import numpy as np

from compiler.frontend.builder import GraphBuilder, to_onnx
from npusim.app.zoo.blocks import ConvBN, Init

RESNET_LAYERS = {18: ("basic", (2, 2, 2, 2)), 50: ("bottleneck", (3, 4, 6, 3))}
RESIDUAL_GAMMA = 0.5
"""Scale of the last BN of each residual branch, so the variance grows by ~1.25x per block, not 2x."""


class _ResNetWriter:
    """Writes a ResNet into a builder in one of three forms, drawing the same weights in the same order:

    - ``bn``: conv, BatchNormalization, Relu nodes (the float model);
    - ``folded``: BN folded into conv weights and biases; records each activation to quantise in ``points``;
    - ``qlinear``: the folded model in QLinear form: QLinearConv (int8 per-channel weights, int32 biases), int8
      MaxPool, residual adds as DequantizeLinear -> Add -> Relu -> QuantizeLinear, DequantizeLinear ->
      GlobalAveragePool -> QuantizeLinear, QLinearMatMul -> DequantizeLinear -> Add(bias) classifier. Activation
      scales come from ``maxabs`` (one value per point, from a ``folded`` run), rounded up to a power of two, so
      float sums of dequantized values are exact in any order (onnxruntime's pooling sums in its own order);
      outputs of a Relu use zero point -128 (the int8 range is [0, max]), others 0.
    """

    def __init__(self, b: GraphBuilder, seed: int, mode: str, maxabs: list[float] | None = None):
        self.b, self.init, self.mode = b, Init(seed), mode
        self.maxabs = iter(maxabs or ())
        self.points: list[str] = []
        self.q: dict[str, tuple[np.float32, np.int8]] = {}

    def _params(self, relu: bool) -> tuple[np.float32, np.int8]:
        """The next calibrated point's (scale, zero point)."""
        top = max(next(self.maxabs), 1e-6) / (255 if relu else 127)
        return np.float32(2.0 ** np.ceil(np.log2(top))), np.int8(-128 if relu else 0)

    def act(self, t: str, relu: bool = False) -> str:
        """A quantisation point: record it (folded) or QuantizeLinear it with the calibrated parameters (qlinear)."""
        if self.mode == "folded":
            self.points.append(t)
        elif self.mode == "qlinear":
            s, z = self._params(relu)
            t = self.b.quantize(t, s, z, name=f"{t}.q")
            self.q[t] = (s, z)
        return t

    def dq(self, t: str) -> str:
        return self.b.dequantize(t, *self.q[t], name=f"{t}.dq") if self.mode == "qlinear" else t

    def conv(self, x: str, cin: int, cout: int, k: int, stride: int, relu: bool, name: str, gamma: float = 1.0,
             group: int = 1) -> str:
        p = ConvBN.draw(self.init, cin, cout, k, group, gamma)
        b, pad = self.b, k // 2
        if self.mode == "bn":
            y = p.emit(b, x, name, stride, pad, group)
            return b.relu(y, name=f"{name}.relu") if relu else y
        w, bias = p.folded()
        if self.mode == "qlinear":
            sw = (np.maximum(np.abs(w).reshape(cout, -1).max(1), 1e-8) / 127).astype(np.float32)
            wq = np.clip(np.rint(w / sw[:, None, None, None]), -127, 127).astype(np.int8)
            xs, xz = self.q[x]
            bq = np.rint(bias / (xs * sw)).astype(np.int32)
            ys, yz = self._params(relu)
            y = b.qlinear_conv(x, xs, xz, b.const(f"{name}.weight_q", wq), sw, np.zeros(cout, np.int8), ys, yz,
                               b.const(f"{name}.bias_q", bq), strides=stride, pads=pad, group=group, name=name)
            self.q[y] = (ys, yz)
            return y
        y = b.conv(x, w, bias, strides=stride, pads=pad, group=group, name=name)
        return self.act(b.relu(y, name=f"{name}.relu") if relu else y, relu)

    def maxpool(self, x: str) -> str:
        y = self.b.maxpool(x, 3, 2, 1, name="maxpool")
        if x in self.q:
            self.q[y] = self.q[x]
        return y

    def add_relu(self, a: str, c: str, name: str) -> str:
        y = self.b.relu(self.b.add(self.dq(a), self.dq(c), name=name), name=f"{name}.relu")
        return y if self.mode == "bn" else self.act(y, relu=True)

    def fc(self, x: str, cin: int, cout: int, name: str) -> str:
        b = self.b
        w, bias = self.init.he((cout, cin), gain=1.0), self.init.normal((cout,), 0.01)
        if self.mode == "bn":
            return b.gemm(x, b.const(f"{name}.weight", w), b.const(f"{name}.bias", bias), trans_b=True, name=name)
        if self.mode == "folded":
            return b.add(self.act(b.matmul(x, b.const(f"{name}.weight", np.ascontiguousarray(w.T)), name=name)),
                         b.const(f"{name}.bias", bias), name=f"{name}.add")
        sw = np.float32(np.abs(w).max() / 127)
        wq = np.clip(np.rint(w.T / sw), -127, 127).astype(np.int8)
        ys, yz = self._params(False)
        y = b.qlinear_matmul(x, *self.q[x], b.const(f"{name}.weight_q", wq), sw, np.int8(0), ys, yz, name=name)
        self.q[y] = (ys, yz)
        return b.add(self.dq(y), b.const(f"{name}.bias", bias), name=f"{name}.add")

    def resnet(self, depth: int, classes: int = 1000, image: int = 224, width: int = 64) -> str:
        """The network on a ``1x3ximageximage`` input, stage widths ``width * (1, 2, 4, 8)`` channels."""
        b = self.b
        kind, layers = RESNET_LAYERS[depth]
        exp = 4 if kind == "bottleneck" else 1
        x = self.act(b.input("x", (1, 3, image, image), np.float32))
        h = self.maxpool(self.conv(x, 3, width, 7, 2, True, "conv1"))
        cin, widths = width, (width, 2 * width, 4 * width, 8 * width)
        for li, (width, blocks) in enumerate(zip(widths, layers), 1):
            for bi in range(blocks):
                stride, p = (2 if li > 1 and bi == 0 else 1), f"layer{li}.{bi}"
                if kind == "basic":
                    t = self.conv(h, cin, width, 3, stride, True, f"{p}.conv1")
                    t = self.conv(t, width, width, 3, 1, False, f"{p}.conv2", RESIDUAL_GAMMA)
                else:
                    t = self.conv(h, cin, width, 1, 1, True, f"{p}.conv1")
                    t = self.conv(t, width, width, 3, stride, True, f"{p}.conv2")
                    t = self.conv(t, width, width * exp, 1, 1, False, f"{p}.conv3", RESIDUAL_GAMMA)
                short = h
                if stride != 1 or cin != width * exp:
                    short = self.conv(h, cin, width * exp, 1, stride, False, f"{p}.downsample")
                h, cin = self.add_relu(t, short, f"{p}.add"), width * exp
        pooled = self.act(b.global_avgpool(self.dq(h), name="avgpool"), relu=True)
        flat = b.flatten(pooled, 1, name="flatten")
        if pooled in self.q:
            self.q[flat] = self.q[pooled]
        y = self.fc(flat, cin, classes, "fc")
        b.output(y)
        return y


def resnet18(seed: int = 0, image: int = 224, width: int = 64, classes: int = 1000):
    """ResNet-18 (torchvision), 1x3x224x224 -> 1x1000, conv + BatchNormalization + Relu, 11.7M weights.

    image, width, classes: a smaller variant (input ``image`` pixels square, first stage ``width`` channels).
    """
    b = GraphBuilder("resnet18")
    _ResNetWriter(b, seed, "bn").resnet(18, classes, image, width)
    return to_onnx(b.build())


def resnet50(seed: int = 0, image: int = 224, width: int = 64, classes: int = 1000):
    """ResNet-50 (torchvision v1.5, stride in the 3x3), 1x3x224x224 -> 1x1000, BatchNormalization nodes, 25.6M
    weights.

    image, width, classes: a smaller variant (input ``image`` pixels square, first stage ``width`` channels).
    """
    b = GraphBuilder("resnet50")
    _ResNetWriter(b, seed, "bn").resnet(50, classes, image, width)
    return to_onnx(b.build())


def resnet18_int8(seed: int = 0):
    """ResNet-18 in QLinear int8 form: QLinearConv (per-channel int8 weights, int32 biases), QLinearMatMul, int8
    activations calibrated on a seeded input.

    BN is folded; activation scales are powers of two; the float weights are those of ``resnet18(seed)``."""
    import onnxruntime as ort

    cal = GraphBuilder("resnet18_calibration")
    w = _ResNetWriter(cal, seed, "folded")
    w.resnet(18)
    cal.output(*w.points)
    sess = ort.InferenceSession(to_onnx(cal.build()).SerializeToString(), providers=["CPUExecutionProvider"])
    x = np.random.default_rng(seed).standard_normal((1, 3, 224, 224), np.float32)
    outs = sess.run(w.points, {"x": x})
    b = GraphBuilder("resnet18_int8")
    q = _ResNetWriter(b, seed, "qlinear", [float(np.abs(o).max()) for o in outs])
    q.resnet(18)
    assert next(q.maxabs, None) is None, "every calibrated scale is used once"
    return to_onnx(b.build())


MOBILENET_V2 = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                (6, 320, 1, 1))
"""Inverted-residual stages: expansion t, output channels c, blocks n, first stride s."""


def mobilenet_v2(seed: int = 0, classes: int = 1000):
    """MobileNetV2 (1.0x), 1x3x224x224 -> 1x1000: inverted residuals, depthwise 3x3 convs (group = channels),
    BatchNormalization, Clip(0, 6) as ReLU6, 3.5M weights."""
    b, init = GraphBuilder("mobilenet_v2"), Init(seed)

    def cbr(x: str, cin: int, cout: int, k: int, stride: int, name: str, group: int = 1, relu6: bool = True,
            gamma: float = 1.0) -> str:
        y = ConvBN.draw(init, cin, cout, k, group, gamma).emit(b, x, name, stride, k // 2, group)
        return b.clip(y, 0.0, 6.0, name=f"{name}.relu6") if relu6 else y

    h = cbr(b.input("x", (1, 3, 224, 224), np.float32), 3, 32, 3, 2, "features.0")
    cin, idx = 32, 1
    for t, c, n, s in MOBILENET_V2:
        for i in range(n):
            stride, p, hidden = (s if i == 0 else 1), f"features.{idx}", cin * t
            y = cbr(h, cin, hidden, 1, 1, f"{p}.expand") if t != 1 else h
            y = cbr(y, hidden, hidden, 3, stride, f"{p}.dw", group=hidden)
            residual = stride == 1 and cin == c
            y = cbr(y, hidden, c, 1, 1, f"{p}.project", relu6=False, gamma=0.5 if residual else 1.0)
            h = b.add(h, y, name=f"{p}.add") if residual else y
            cin, idx = c, idx + 1
    h = cbr(h, cin, 1280, 1, 1, f"features.{idx}")
    flat = b.flatten(b.global_avgpool(h, name="avgpool"), 1, name="flatten")
    w, bias = init.he((classes, 1280), gain=1.0), init.normal((classes,), 0.01)
    b.output(b.gemm(flat, b.const("classifier.weight", w), b.const("classifier.bias", bias), trans_b=True,
                    name="classifier"))
    return to_onnx(b.build())
