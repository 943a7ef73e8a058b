"""ONNX models written the way ``torch.onnx.export`` writes them at opsets 11 to 18 (no torch needed): scalars as
``Constant`` nodes, parameters as initializers, nodes named ``/scope/Op`` with outputs ``/scope/Op_output_0``,
``nn.Linear`` as ``Add(bias, MatMul(x, W^T))``, ``nn.LayerNorm`` below opset 17 as ReduceMean/Sub/Pow/ReduceMean/
Add/Sqrt/Div/Mul/Add (ReduceMean's axes an input from opset 18), ``F.gelu`` below opset 20 in its erf or tanh form,
``nn.SiLU`` as ``Mul(x, Sigmoid(x))``, and attention scores divided by ``sqrt(d)``."""

from __future__ import annotations

import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class Exporter:
    """Collects nodes and initializers as torch.onnx.export names them."""

    def __init__(self, opset: int, seed: int = 3):
        self.opset, self.nodes, self.inits = opset, [], []
        self.rng = np.random.default_rng(seed)

    def node(self, op: str, ins: list[str], scope: str, **attrs) -> str:
        base = f"/{scope}/{op}" if scope else f"/{op}"
        names = {n.name for n in self.nodes}
        name = next(n for k in range(len(names) + 1) if (n := base if k == 0 else f"{base}_{k}") not in names)
        self.nodes.append(helper.make_node(op, ins, [name + "_output_0"], name=name, **attrs))
        return name + "_output_0"

    def const(self, value, scope: str, dtype=np.float32) -> str:
        return self.node("Constant", [], scope, value=numpy_helper.from_array(np.asarray(value, dtype)))

    def param(self, name: str, shape: tuple[int, ...], std: float) -> str:
        self.inits.append(numpy_helper.from_array((self.rng.standard_normal(shape) * std).astype(np.float32), name))
        return name

    def linear(self, x: str, cin: int, cout: int, scope: str) -> str:
        w = self.param(f"onnx::MatMul_{len(self.inits)}", (cin, cout), 1 / math.sqrt(cin))
        return self.node("Add", [self.param(f"{scope.replace('/', '.')}.bias", (cout,), 0.02),
                                 self.node("MatMul", [x, w], scope)], scope)

    def gelu(self, x: str, scope: str) -> str:
        e = self.node("Erf", [self.node("Div", [x, self.const(math.sqrt(2), scope)], scope)], scope)
        m = self.node("Mul", [x, self.node("Add", [e, self.const(1.0, scope)], scope)], scope)
        return self.node("Mul", [m, self.const(0.5, scope)], scope)

    def gelu_tanh(self, x: str, scope: str) -> str:
        cube = self.node("Mul", [x, self.node("Mul", [x, x], scope)], scope)
        inner = self.node("Add", [x, self.node("Mul", [self.const(0.044715, scope), cube], scope)], scope)
        t = self.node("Tanh", [self.node("Mul", [self.const(math.sqrt(2 / math.pi), scope), inner], scope)], scope)
        one_plus = self.node("Add", [self.const(1.0, scope), t], scope)
        return self.node("Mul", [self.const(0.5, scope), self.node("Mul", [x, one_plus], scope)], scope)

    def silu(self, x: str, scope: str) -> str:
        return self.node("Mul", [x, self.node("Sigmoid", [x], scope)], scope)

    def _reduce(self, op: str, x: str, scope: str) -> str:
        if self.opset >= 18 or (op == "ReduceSum" and self.opset >= 13):
            return self.node(op, [x, self.const([-1], scope, np.int64)], scope, keepdims=1)
        return self.node(op, [x], scope, axes=[-1], keepdims=1)

    def layernorm(self, x: str, h: str, scope: str, eps: float = 1e-5) -> str:
        d = self.node("Sub", [x, self._reduce("ReduceMean", x, scope)], scope)
        var = self._reduce("ReduceMean", self.node("Pow", [d, self.const(2.0, scope)], scope), scope)
        std = self.node("Sqrt", [self.node("Add", [var, self.const(eps, scope)], scope)], scope)
        n = self.node("Div", [d, std], scope)
        w = self.param(f"{scope}.weight", (h,), 0.1)
        return self.node("Add", [self.node("Mul", [n, w], scope), self.param(f"{scope}.bias", (h,), 0.1)], scope)

    def softmax(self, x: str, scope: str, stable: bool = True) -> str:
        """Softmax written out (as TF-style exporters do), with or without subtracting the row maximum."""
        if stable:
            x = self.node("Sub", [x, self._reduce("ReduceMax", x, scope)], scope)
        e = self.node("Exp", [x], scope)
        return self.node("Div", [e, self._reduce("ReduceSum", e, scope)], scope)

    def model(self, x: str, shape: list[int], y: str) -> onnx.ModelProto:
        g = helper.make_graph(self.nodes, "main_graph", [helper.make_tensor_value_info(x, TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info(y, TensorProto.FLOAT, None)], initializer=self.inits)
        opsets = [helper.make_opsetid("", self.opset)]
        return helper.make_model(g, opset_imports=opsets, ir_version=helper.find_min_ir_version_for(opsets),
                                 producer_name="pytorch")


def encoder_block(opset: int, act: str = "gelu", stable_softmax: bool = True, seq: int = 16, h: int = 32,
                  heads: int = 2, ffn: int = 64) -> onnx.ModelProto:
    """A pre-LayerNorm transformer block ``[1, seq, h] -> [1, seq, h]``: LayerNorm, q/k/v projections, scores
    divided by sqrt(d), softmax written out, output projection + residual, LayerNorm, MLP with ``act`` (gelu,
    gelu_tanh or silu) + residual."""
    e = Exporter(opset)
    d = h // heads

    def heads_of(t: str, perm: list[int], scope: str) -> str:
        shape = e.const([1, seq, heads, d], scope, np.int64)
        return e.node("Transpose", [e.node("Reshape", [t, shape], scope)], scope, perm=perm)

    n1 = e.layernorm("input", h, "ln1")
    q = heads_of(e.linear(n1, h, h, "attn/q"), [0, 2, 1, 3], "attn/q")
    k = heads_of(e.linear(n1, h, h, "attn/k"), [0, 2, 3, 1], "attn/k")
    v = heads_of(e.linear(n1, h, h, "attn/v"), [0, 2, 1, 3], "attn/v")
    scores = e.node("Div", [e.node("MatMul", [q, k], "attn"), e.const(math.sqrt(d), "attn")], "attn")
    ctx = e.node("Transpose", [e.node("MatMul", [e.softmax(scores, "attn/softmax", stable_softmax), v], "attn")],
                 "attn", perm=[0, 2, 1, 3])
    ctx = e.node("Reshape", [ctx, e.const([1, seq, h], "attn", np.int64)], "attn")
    hid = e.node("Add", ["input", e.linear(ctx, h, h, "attn/o")], "")
    f = getattr(e, act)(e.linear(e.layernorm(hid, h, "ln2"), h, ffn, "mlp/fc1"), "mlp/act")
    return e.model("input", [1, seq, h], e.node("Add", [hid, e.linear(f, ffn, h, "mlp/fc2")], ""))
