"""Building blocks of the zoo's models: seeded weight initialisers, conv + BatchNormalization parameters, GELU."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from compiler.frontend.builder import GraphBuilder


class Init:
    """Seeded float32 weights; draws happen in call order, so the same calls with the same seed give the same
    weights."""

    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)

    def normal(self, shape: tuple[int, ...], std: float) -> np.ndarray:
        return self.rng.standard_normal(shape, np.float32) * np.float32(std)

    def he(self, shape: tuple[int, ...], gain: float = 2.0) -> np.ndarray:
        """N(0, gain / fan_in) with fan_in = prod(shape[1:]) (conv ``[K, C, R, S]``); gain 2 keeps ReLU nets' scale."""
        return self.normal(shape, math.sqrt(gain / math.prod(shape[1:])))

    def uniform(self, lo: float, hi: float, n: int) -> np.ndarray:
        return self.rng.uniform(lo, hi, n).astype(np.float32)


@dataclass(frozen=True)
class ConvBN:
    """A bias-free conv's weight ``[K, C/group, R, S]`` and its BatchNormalization's per-channel parameters."""

    w: np.ndarray
    gamma: np.ndarray
    beta: np.ndarray
    mean: np.ndarray
    var: np.ndarray
    eps: float = 1e-5

    @classmethod
    def draw(cls, init: Init, cin: int, cout: int, k: int, group: int = 1, gamma: float = 1.0) -> ConvBN:
        """He-initialised weights; BN statistics near identity (scale ``gamma`` times U(0.8, 1.2))."""
        return cls(init.he((cout, cin // group, k, k)), init.uniform(0.8, 1.2, cout) * np.float32(gamma),
                   init.normal((cout,), 0.1), init.normal((cout,), 0.1), init.uniform(0.5, 1.5, cout))

    def folded(self) -> tuple[np.ndarray, np.ndarray]:
        """The BN folded into the conv: weight and bias of ``conv(x, w', b') == bn(conv(x, w))``."""
        s = self.gamma / np.sqrt(self.var + np.float32(self.eps))
        return (self.w * s[:, None, None, None]).astype(np.float32), (self.beta - self.mean * s).astype(np.float32)

    def emit(self, b: GraphBuilder, x: str, name: str, stride: int, pad: int, group: int = 1) -> str:
        """Conv then BatchNormalization nodes, named ``<name>`` and ``<name>.bn``."""
        w = b.const(f"{name}.weight", self.w)
        y = b.conv(x, w, strides=stride, pads=pad, group=group, name=name)
        ps = [b.const(f"{name}.bn.{k}", getattr(self, k)) for k in ("gamma", "beta", "mean", "var")]
        return b.batchnorm(y, *ps, epsilon=self.eps, name=f"{name}.bn")


def gelu_erf(b: GraphBuilder, x: str, name: str) -> str:
    """GELU as opset-17 nodes: ``0.5 * x * (1 + Erf(x / sqrt 2))``."""
    t = b.erf(b.div(x, np.float32(math.sqrt(2.0)), name=f"{name}.div"), name=f"{name}.erf")
    t = b.mul(x, b.add(t, np.float32(1.0), name=f"{name}.add"), name=f"{name}.mul")
    return b.mul(t, np.float32(0.5), name=name)
