"""The fuse_attention pass at the graph level: every form of the chain becomes one FusedAttention node reading Q, K, V
and the mask, and every near miss (an intermediate returned or read elsewhere, a scale that is not a constant scalar,
a mask that is not a constant or broadcasts the scores, Softmax over another axis) leaves the graph as it was."""

import numpy as np
import pytest
from onnx import helper

from compiler.frontend.onnx_import import import_onnx
from compiler.passes import run_passes
from compiler.passes.fuse_attention import fuse_attention
from tests.e2e.attention_graphs import attention_model, causal_mask

SKIP = ("fuse_attention", "fuse_activation", "fuse_residual", "fuse_matmul", "fuse_msda", "bind_kv_cache")


def _before(model):
    """The graph as fuse_attention receives it."""
    return run_passes(import_onnx(model), skip=SKIP)


def _ops(g):
    return [n.op for n in g.nodes]


@pytest.mark.parametrize("scale", ["div", "mul", "mul_first", None])
@pytest.mark.parametrize("masked,mask_first", [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("k_form", ["transposed", "transpose"])
def test_every_form_of_the_chain_becomes_one_node(scale, masked, mask_first, k_form):
    mask = causal_mask(5, 7) if masked else None
    g = fuse_attention(_before(attention_model(scale=scale, mask=mask, mask_first=mask_first, k_form=k_form)))
    assert _ops(g) == (["Transpose"] if k_form == "transpose" else []) + ["FusedAttention"]
    node = g.nodes[-1]
    assert node.name == "context" and node.outputs == ("out",)
    assert node.inputs == ("q", "kt" if k_form == "transpose" else "k", "v", "mask_c" if masked else "")
    want = {"div": (np.sqrt(8), 1), "mul": (1 / np.sqrt(8), 0), "mul_first": (1 / np.sqrt(8), 0), None: (1.0, 0)}
    assert node.attrs["scale"] == float(np.float32(want[scale][0])) and node.attrs["divide"] == want[scale][1]
    assert node.attrs["parts"] == ("scores_mm", "scale" if scale else "", "mask" if masked else "", "softmax")
    gone = {"scores", "scaled", "masked", "probs"}
    assert not gone & set(g.tensors)


@pytest.mark.parametrize("extra", ["scores", "scaled", "masked", "probs"])
def test_an_intermediate_that_is_also_a_graph_output_keeps_the_chain(extra):
    model = attention_model(scale="div", mask=causal_mask(5, 7), extra_outputs=(extra,))
    g = _before(model)
    out = fuse_attention(g)
    assert _ops(out) == _ops(g) == ["MatMul", "Div", "Add", "Softmax", "MatMul"]


def test_an_intermediate_read_elsewhere_keeps_the_chain():
    model = attention_model(scale="mul", mask=causal_mask(5, 7))
    model.graph.node.append(helper.make_node("Relu", ["scaled"], ["r"], name="other"))
    model.graph.output.append(helper.make_tensor_value_info("r", 1, (1, 2, 5, 7)))
    g = _before(model)
    assert _ops(fuse_attention(g)) == _ops(g)


def _replace_init(model, name, value):
    from onnx import numpy_helper
    for i, t in enumerate(model.graph.initializer):
        if t.name == name:
            model.graph.initializer[i].CopyFrom(numpy_helper.from_array(np.asarray(value, np.float32), name))
    return model


def test_near_misses_keep_the_chain():
    # a scale per key (not a scalar): the Div stays, and so does the chain (the MatMul does not feed the Softmax)
    m = _replace_init(attention_model(scale="div"), "scale_c", np.full(7, 2.0))
    g = _before(m)
    assert _ops(fuse_attention(g)) == _ops(g)
    # a mask that broadcasts the scores to more heads
    m = attention_model(heads=1, scale="div", mask=np.zeros((3, 5, 7), np.float32))
    m.graph.output[0].type.tensor_type.shape.dim[1].dim_value = 3
    g = _before(m)
    assert _ops(fuse_attention(g)) == _ops(g)
    # Softmax over the queries
    m = attention_model(scale=None)
    m.graph.node[1].attribute[0].i = 2
    g = _before(m)
    assert _ops(fuse_attention(g)) == _ops(g)
    # a mask computed at run time (not a constant)
    m = attention_model(scale=None)
    m.graph.node.insert(1, helper.make_node("Add", ["scores", "scores"], ["doubled"], name="double"))
    m.graph.node[2].input[0] = "doubled"
    g = _before(m)
    assert _ops(fuse_attention(g)) == _ops(g)


def test_broadcast_heads_and_a_per_head_mask_are_taken():
    # one key/value head for four query heads (its leading dims broadcast), a mask that differs per head
    mask = np.random.default_rng(0).standard_normal((1, 4, 5, 7)).astype(np.float32)
    g = fuse_attention(_before(attention_model(heads=4, kv_heads=1, mask=mask, scale="mul")))
    assert _ops(g) == ["FusedAttention"]


def test_the_decoders_chain_is_fused_in_prefill_and_decode():
    from npusim.app.llm.configs import llm_config
    from npusim.app.llm.decoder import layer_model
    for q, past in ((6, 0), (1, 6)):
        g = run_passes(import_onnx(layer_model(llm_config("tiny-llama"), "f32", 1, q, past)))
        fused = [n for n in g.nodes if n.op == "FusedAttention"]
        assert len(fused) == 1 and "Softmax" not in _ops(g)
        assert bool(fused[0].inputs[3]) == (q > 1)   # the causal mask of a prefill
