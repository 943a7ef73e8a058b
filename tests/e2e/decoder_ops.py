"""What the tests of decoder ops share (``test_decoder_*.py``): tiny models built with onnx.helper, run through the
normal compile + simulate with values and compared with onnxruntime at float32 tolerance (max |error| at most 1e-5
of max |reference|), with no op left to the host."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from isa.arch import load_arch
from npusim.app.driver import ort_session, run_model

F32, I64, I32, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT32, TensorProto.BOOL
PRESETS = ("edge16", "mid32", "dc128")
RTOL = 1e-5


def model(nodes, inputs, outputs, inits=(), opset: int = 23, contrib: bool = False) -> onnx.ModelProto:
    """A model of ``nodes``: ``inputs`` and ``outputs`` as (name, element type, shape or None), ``inits`` initializers
    by name; the default domain at ``opset`` (and com.microsoft 1 with ``contrib``)."""
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in dict(inits).items()])
    opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid("com.microsoft", 1)] if contrib else [])
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def reference(m: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """onnxruntime's outputs of ``m`` by name."""
    sess = ort_session(m)
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


def rel_error(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| / max |want| (0 where both are the same infinity)."""
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    err = np.where(g == w, 0.0, np.abs(g - w))
    return float(err.max(initial=0) / max(float(np.abs(w[np.isfinite(w)]).max(initial=0)), 1e-30))


def check(m: onnx.ModelProto, feeds: dict[str, np.ndarray], arch: str = "mid32", **options):
    """Simulate ``m`` on ``feeds`` with values on preset ``arch``, assert no host op and every output within
    :data:`RTOL` of onnxruntime's; (compiled model, report)."""
    compiled, _, outputs, report = run_model(m, load_arch(arch), feeds, cache=False, **options)
    assert report["host_ops"] == [], report["host_ops"]
    for name, want in reference(m, feeds).items():
        assert outputs[name].shape == want.shape, (name, outputs[name].shape, want.shape)
        assert rel_error(outputs[name], want) <= RTOL, (name, rel_error(outputs[name], want))
    return compiled, report
