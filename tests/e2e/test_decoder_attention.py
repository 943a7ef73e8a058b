"""Attention on the NPU, equal to onnxruntime: ONNX Attention (opsets 23-25: 3-D and 4-D inputs, grouped-query
heads, is_causal with a past, bool and float masks, past/present key and value, scale, softcap, the sliding window,
qk_matmul_output) and com.microsoft.GroupQueryAttention in the forms onnxruntime-genai writes (prefill and decode
steps, past/present KV, do_rotary, packed QKV, a shared buffer, local_window_size, softcap, attention_bias). The
query heads of a key/value head are the rows of one GEMM: no node repeats K or V."""

import numpy as np
import pytest
from onnx import helper, numpy_helper

from compiler.frontend.onnx_import import import_onnx
from npusim.app.onnx_backend import bind_constants
from tests.e2e.decoder_ops import BOOL, F32, I32, I64, PRESETS, check, model

B, HQ, HKV, S, PAST, D = 1, 4, 2, 5, 3, 8
rng = np.random.default_rng(13)


def _attention(three: bool = False, batch: int = B, seq: int = S, past: int = PAST, mask=None, mask_input=True,
               present: bool = True, qk_mode: int | None = None, opset: int = 23, **attrs):
    """An ONNX Attention node's model and feeds; ``mask`` a bool or float array (a graph input, or a constant)."""
    attrs = {"is_causal": 1, **attrs, **({"q_num_heads": HQ, "kv_num_heads": HKV} if three else {})}
    qs, ks = ([batch, seq, HQ * D], [batch, seq, HKV * D]) if three else ([batch, HQ, seq, D], [batch, HKV, seq, D])
    feeds = {n: rng.standard_normal(s).astype(np.float32) for n, s in (("q", qs), ("k", ks), ("v", ks))}
    inputs, names, inits = [("q", F32, qs), ("k", F32, ks), ("v", F32, ks)], ["q", "k", "v", ""], {}
    if mask is not None:
        names[3] = "m"
        if mask_input:
            inputs.append(("m", BOOL if mask.dtype == bool else F32, list(mask.shape)))
            feeds["m"] = mask
        else:
            inits["m"] = mask
    if past:
        cache = [batch, HKV, past, D]
        names += ["pk", "pv"]
        inputs += [("pk", F32, cache), ("pv", F32, cache)]
        feeds |= {"pk": rng.standard_normal(cache).astype(np.float32),
                  "pv": rng.standard_normal(cache).astype(np.float32)}
    outs = ["y"] + (["present_k", "present_v"] if present and past else ["", ""] if qk_mode is not None else [])
    if qk_mode is not None:
        attrs["qk_matmul_output_mode"] = qk_mode
        outs.append("qk")
    node = helper.make_node("Attention", names, outs, **attrs)
    return model([node], inputs, [(o, F32, None) for o in outs if o], inits, opset), feeds


@pytest.mark.parametrize("arch", PRESETS)
@pytest.mark.parametrize("seq", [S, 1])
def test_grouped_query_attention_with_a_past_on_every_preset(arch, seq):
    compiled, _ = check(*_attention(seq=seq), arch)
    assert "Expand" not in {lr.op for lr in compiled.layers}


@pytest.mark.parametrize("batch, seq, past", [(1, S, PAST), (2, 1, PAST), (1, S, 0)])
def test_three_dimensional_inputs(batch, seq, past):
    check(*_attention(three=True, batch=batch, seq=seq, past=past))


def test_one_kv_head_for_every_query_head_and_no_causal_mask():
    check(*_attention(three=True, past=0, is_causal=0))


@pytest.mark.parametrize("kind", ["bool input", "float input", "bool constant"])
def test_masks(kind):
    mask = rng.random((S, S + PAST)) < 0.7 if kind.startswith("bool") else \
        rng.standard_normal((1, HQ, S, S + PAST)).astype(np.float32)
    check(*_attention(mask=mask, mask_input=kind.endswith("input")))


@pytest.mark.parametrize("mask_input", [True, False])
def test_a_query_row_no_key_may_attend_gives_zeros_as_onnxruntime(mask_input):
    mask = np.ones((S, S + PAST), bool)
    mask[1] = False
    check(*_attention(mask=mask, mask_input=mask_input, is_causal=0))


def test_a_batch_of_padding_masks():
    check(*_attention(batch=2, mask=rng.random((2, 1, S, S + PAST)) < 0.8), "dc128")


def test_scale_and_softcap():
    check(*_attention(scale=0.3, softcap=2.0))


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_qk_matmul_output(mode):
    check(*_attention(qk_mode=mode, softcap=1.5, mask=rng.random((S, S + PAST)) < 0.7))


def test_the_sliding_window_of_opset_25():
    check(*_attention(opset=25, left_window_size=2))


def test_an_external_cache_stays_on_the_host_with_the_reason():
    m, _ = _attention(opset=24)
    m.graph.node[0].input.append("nonpad")
    m.graph.input.append(helper.make_tensor_value_info("nonpad", I64, [B]))
    node = import_onnx(m, allow_unknown=True).nodes[0]
    assert node.unsupported == "nonpad_kv_seqlen (an external KV cache) is not supported"


# -- com.microsoft.GroupQueryAttention ----------------------------------------------------------------------------

def _gqa(batch: int = B, seq: int = S, past: int = 0, buffer: int = 0, rotary: bool = False,
         interleaved: bool = False, packed: bool = False, bias: bool = False, lengths_input: bool = False, **attrs):
    """A GroupQueryAttention node as onnxruntime-genai writes it: query/key/value (B, S, hidden), past/present KV
    (B, Hkv, past or buffer, D), seqlens_k and total_sequence_length constants of the step (every sequence dense)."""
    total, cache_len = past + seq, buffer or past
    attrs = {"num_heads": HQ, "kv_num_heads": HKV, **attrs, **({"do_rotary": 1, "rotary_interleaved": int(
        interleaved)} if rotary else {})}
    feeds, inputs = {}, []

    def add(name, shape, kind=F32):
        inputs.append((name, kind, list(shape)))
        feeds[name] = rng.standard_normal(shape).astype(np.float32)

    if packed:
        add("qkv", (batch, seq, (HQ + 2 * HKV) * 2 * D))
        names = ["qkv", "", ""]
    else:
        add("q", (batch, seq, HQ * 2 * D))
        add("k", (batch, seq, HKV * 2 * D))
        add("v", (batch, seq, HKV * 2 * D))
        names = ["q", "k", "v"]
    if cache_len:
        add("pk", (batch, HKV, cache_len, 2 * D))
        add("pv", (batch, HKV, cache_len, 2 * D))
        names += ["pk", "pv"]
    else:
        names += ["", ""]
    inits = {"seqlens_k": np.full(batch, total - 1, np.int32), "total": np.array(total, np.int32)}
    names += ["seqlens_k", "total"]
    if rotary:
        angles = rng.standard_normal((32, D))
        inits |= {"cos": np.cos(angles).astype(np.float32), "sin": np.sin(angles).astype(np.float32)}
        names += ["cos", "sin"]
    if bias:
        names += [""] * (10 - len(names)) + ["bias"]   # (cos, sin, position_ids absent)
        add("bias", (batch, 1, seq, total))
    if lengths_input:
        inputs.append(("seqlens_k", I32, [batch]))
        feeds["seqlens_k"] = inits.pop("seqlens_k")
    outs = ["y", "present_k", "present_v"]
    node = helper.make_node("GroupQueryAttention", names, outs, domain="com.microsoft", **attrs)
    return model([node], inputs, [(o, F32, None) for o in outs], inits, opset=21, contrib=True), feeds


@pytest.mark.parametrize("arch", PRESETS)
def test_gqa_prefill_and_decode_on_every_preset(arch):
    check(*_gqa(rotary=True), arch)
    check(*_gqa(seq=1, past=PAST, rotary=True), arch)


@pytest.mark.parametrize("kw", [dict(seq=1, past=PAST, batch=2), dict(seq=3, past=PAST),
                                dict(seq=1, past=PAST, rotary=True, interleaved=True),
                                dict(seq=1, past=PAST, packed=True), dict(seq=1, past=PAST, buffer=8),
                                dict(seq=4, buffer=8), dict(local_window_size=2), dict(seq=1, past=PAST, softcap=3.0),
                                dict(seq=1, past=PAST, bias=True)],
                         ids=["batch2", "chunk", "interleaved", "packed", "buffer", "prefill-buffer", "window",
                              "softcap", "bias"])
def test_gqa_forms(kw):
    check(*_gqa(**kw))


def test_gqa_with_sequence_lengths_computed_at_run_time_stays_on_the_host_with_the_reason():
    m, _ = _gqa(seq=1, past=PAST, lengths_input=True)
    node = import_onnx(m, allow_unknown=True).nodes[0]
    assert node.unsupported.startswith("seqlens_k ('seqlens_k') is computed at run time: the NPU program is "
                                       "compiled for one step; bind it")


def test_gqa_with_a_ragged_batch_stays_on_the_host_with_the_reason():
    m, _ = _gqa(seq=1, past=PAST, batch=2)
    lengths = next(t for t in m.graph.initializer if t.name == "seqlens_k")
    lengths.CopyFrom(helper.make_tensor("seqlens_k", I32, [2], [PAST, PAST - 1]))
    node = import_onnx(m, allow_unknown=True).nodes[0]
    assert node.unsupported == (f"seqlens_k [{PAST}, {PAST - 1}] with total_sequence_length {PAST + 1}, 1 new "
                                f"tokens and a past of {PAST}: only dense batches (every seqlens_k = total - 1) are "
                                f"lowered")


def _genai_lengths(batch: int, seq: int, past: int):
    """A decode or prefill step as onnxruntime-genai writes it: seqlens_k and total_sequence_length computed from the
    int64 attention_mask input (ReduceSum - 1, Shape[1], each Cast to int32)."""
    m, feeds = _gqa(batch=batch, seq=seq, past=past, rotary=True)
    g = m.graph
    for name in ("seqlens_k", "total"):
        g.initializer.pop(next(i for i, t in enumerate(g.initializer) if t.name == name))
    g.initializer.extend([numpy_helper.from_array(np.array([1], np.int64), "axis1"),
                          numpy_helper.from_array(np.array(1, np.int64), "one")])
    g.node.extend([helper.make_node("ReduceSum", ["attention_mask", "axis1"], ["sum"], keepdims=0),
                   helper.make_node("Sub", ["sum", "one"], ["last"]),
                   helper.make_node("Cast", ["last"], ["seqlens_k"], to=I32),
                   helper.make_node("Shape", ["attention_mask"], ["mask_shape"]),
                   helper.make_node("Gather", ["mask_shape", "one"], ["total64"], axis=0),
                   helper.make_node("Cast", ["total64"], ["total"], to=I32)])
    g.node.append(g.node.pop(0))   # the attention after what it reads
    g.input.append(helper.make_tensor_value_info("attention_mask", I64, [batch, past + seq]))
    return m, feeds


@pytest.mark.parametrize("seq, past", [(S, 0), (1, PAST)], ids=["prefill", "decode"])
def test_gqa_as_onnxruntime_genai_writes_it_runs_on_the_npu_once_the_step_binds_its_attention_mask(seq, past):
    m, feeds = _genai_lengths(2, seq, past)
    step = bind_constants(m, {"attention_mask": np.ones((2, past + seq), np.int64)})
    assert [n.op for n in import_onnx(step).nodes if n.op == "GroupQueryAttention"] == []
    check(step, feeds)
    unbound = import_onnx(m, allow_unknown=True)
    assert next(n for n in unbound.nodes if n.op == "GroupQueryAttention").unsupported.startswith(
        "seqlens_k ('seqlens_k') is computed at run time")
