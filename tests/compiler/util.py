"""Helpers shared by the compiler tests."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper


def ort_run(model: onnx.ModelProto, feeds: dict[str, np.ndarray], outputs: list[str] | None = None) -> list:
    """Run ``model`` on the CPU provider with ``feeds``; the named outputs (all graph outputs by default)."""
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    so.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(outputs, feeds)


def model(nodes: list, inputs: list, outputs: list, opset: int = 17, inits: list | None = None,
          value_info: list | None = None, extra_opsets: list | None = None) -> onnx.ModelProto:
    """A one-graph ONNX model from helper-made parts."""
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=inits or [], value_info=value_info or [])
    opsets = [helper.make_opsetid("", opset)]
    return helper.make_model(g, opset_imports=opsets + (extra_opsets or []),
                             ir_version=helper.find_min_ir_version_for(opsets))


def vi(name: str, shape: list | None, elem: int = TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, elem, shape)


def linear_fit_tcb(cs, t, es: int, rows: int, cols: int, spm: int, acc: int) -> int:
    """The most input-channel blocks per step with which conv tiling ``t`` fits, by trying every count from the top
    with ``compiler.kernels.conv2d.tiling_fits`` (the oracle of ``fit_tcb``'s closed form and of the search's
    ranking)."""
    from dataclasses import replace

    from compiler.kernels.conv2d import grouped, tiling_fits

    gs = grouped(cs, t.gpack)
    kc = t.pack * (gs.R * gs.S * gs.Cg if t.im2col else gs.Cg)
    return next((tcb for tcb in range(-(-kc // rows), 0, -1)
                 if tiling_fits(cs, replace(t, tcb=tcb), es, rows, cols, spm, acc)), 0)
