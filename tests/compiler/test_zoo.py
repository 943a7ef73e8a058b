"""The model zoo: every model checks, runs in onnxruntime with sane outputs, and imports with onnxruntime's shapes."""

from __future__ import annotations

import functools

import numpy as np
import onnx
import pytest

from compiler.frontend.onnx_import import import_onnx
from npusim.app.zoo import MODELS, describe
from tests.compiler.util import ort_run

SLOW = {"resnet50", "resnet18_int8"}


@functools.cache
def built(name: str) -> onnx.ModelProto:
    return MODELS[name]()


def feed(m: onnx.ModelProto) -> dict[str, np.ndarray]:
    (x,) = m.graph.input
    shape = tuple(d.dim_value for d in x.type.tensor_type.shape.dim)
    return {x.name: np.random.default_rng(123).standard_normal(shape).astype(np.float32)}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW else n for n in MODELS])
def test_zoo_model_checks_runs_and_imports_with_onnxruntime_shapes(name):
    m = built(name)
    onnx.checker.check_model(m, full_check=True)
    assert [(o.domain, o.version) for o in m.opset_import] == [("", 17)]
    g = import_onnx(m)
    assert len(g.nodes) == len(m.graph.node) and not any(n.on_host for n in g.nodes)
    assert g.tensor(g.inputs[0]).shape[0] == 1
    # every intermediate tensor as an output: onnxruntime's shapes must be the IR's
    names = [k for k, t in g.tensors.items() if not t.is_const and k not in g.inputs]
    probe = onnx.ModelProto()
    probe.CopyFrom(m)
    info = {v.name: v for v in probe.graph.value_info}
    probe.graph.output.extend(info[k] for k in names if k not in g.outputs)
    order = [o.name for o in probe.graph.output]
    values = dict(zip(order, ort_run(probe, feed(m))))
    assert {k: values[k].shape for k in names} == {k: g.tensor(k).shape for k in names}
    for y in (values[o] for o in g.outputs):
        assert np.isfinite(y).all() and 1e-3 < float(y.std()) < 1e3


def test_descriptions():
    assert set(MODELS) == {"resnet18", "resnet50", "mobilenet_v2", "bert_layer", "vit_block", "resnet18_int8",
                           "bev_tiny"}
    for name in MODELS:
        text = describe(name)
        assert text and "\n" not in text and len(text) < 200
    with pytest.raises(KeyError, match="no zoo model 'vgg'"):
        describe("vgg")


def test_zoo_is_seeded():
    a, b = MODELS["bert_layer"](seed=3), MODELS["bert_layer"](seed=3)
    assert a.SerializeToString() == b.SerializeToString()
    assert MODELS["bert_layer"](seed=4).SerializeToString() != a.SerializeToString()


@pytest.mark.slow
def test_resnet18_int8_is_qlinear_and_tracks_the_float_model():
    g = import_onnx(built("resnet18_int8"))
    convs = [n for n in g.nodes if n.op == "QLinearConv"]
    assert len(convs) == 20 and not [n for n in g.nodes if n.op == "Conv"]
    for conv in convs:
        x, w, w_scale, bias = (g.tensor(conv.inputs[i]) for i in (0, 3, 4, 8))
        assert x.dtype == w.dtype == np.int8 and bias.dtype == np.int32 and w_scale.shape == (w.shape[0],)
        for scale in (conv.inputs[1], conv.inputs[6]):   # power-of-two activation scales
            assert np.log2(float(g.tensor(scale).data)).is_integer()
    assert [n.op for n in g.nodes].count("QLinearMatMul") == 1
    x = feed(built("resnet18"))
    (ref,), (q,) = ort_run(built("resnet18"), x), ort_run(built("resnet18_int8"), x)
    assert np.corrcoef(ref.ravel(), q.ravel())[0, 1] > 0.99
