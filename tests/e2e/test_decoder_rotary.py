"""Rotary position embeddings on the NPU, equal to onnxruntime: ONNX RotaryEmbedding (opset 23) and onnxruntime's
com.microsoft.RotaryEmbedding, interleaved and rotate-half, 3-D and 4-D inputs, run-time or constant position ids,
cos/sin per token, partial rotation."""

import numpy as np
import pytest
from onnx import helper

from compiler.frontend.onnx_import import import_onnx
from tests.e2e.decoder_ops import F32, I64, PRESETS, check, model

B, H, S, D, MAX_POS = 2, 4, 5, 8, 16
rng = np.random.default_rng(11)


def _caches(rd: int) -> tuple[np.ndarray, np.ndarray]:
    angles = rng.standard_normal((MAX_POS, rd // 2))
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def _onnx(four: bool, interleaved: bool, rd: int = 0, positions: str = "input"):
    """ONNX RotaryEmbedding of (B, H, S, D) or (B, S, H * D); positions: "input" (run time), "const", or "none"
    (cos/sin given per token)."""
    cos, sin = _caches(rd or D)
    shape = [B, H, S, D] if four else [B, S, H * D]
    attrs = {"interleaved": int(interleaved), **({"rotary_embedding_dim": rd} if rd else {}),
             **({} if four else {"num_heads": H})}
    pos = rng.integers(0, MAX_POS, (B, S)).astype(np.int64)
    inits, inputs, feeds = {"c": cos, "s": sin}, [("x", F32, shape)], {"x": rng.standard_normal(shape).astype(
        np.float32)}
    names = ["x", "c", "s", "pos"]
    if positions == "input":
        inputs.append(("pos", I64, [B, S]))
        feeds["pos"] = pos
    elif positions == "const":
        inits["pos"] = pos
    else:
        inits, names = {"c": cos[pos], "s": sin[pos]}, names[:3]
    m = model([helper.make_node("RotaryEmbedding", names, ["y"], **attrs)], inputs, [("y", F32, shape)], inits)
    return m, feeds


@pytest.mark.parametrize("four", [True, False])
@pytest.mark.parametrize("interleaved", [False, True])
def test_onnx_rotary_embedding_with_run_time_position_ids(four, interleaved):
    check(*_onnx(four, interleaved))


@pytest.mark.parametrize("arch", PRESETS)
def test_onnx_rotary_embedding_on_every_preset(arch):
    check(*_onnx(True, False), arch)


@pytest.mark.parametrize("four, interleaved", [(True, False), (False, True)])
def test_partial_rotation_keeps_the_other_features(four, interleaved):
    check(*_onnx(four, interleaved, rd=4))


def test_constant_position_ids_fold_the_table_gather():
    m, feeds = _onnx(True, False, positions="const")
    assert [n.op for n in import_onnx(m).nodes] == ["Gather", "Mul", "Mul", "Add"]   # the swap, then x*C + r*S
    check(m, feeds)


def test_cos_and_sin_given_per_token():
    check(*_onnx(False, True, positions="none"))


def _contrib(four: bool, interleaved: bool, positions: str = "input", heads: bool = True, rd: int = 0):
    """com.microsoft RotaryEmbedding (input, position_ids, cos_cache, sin_cache); positions "input" (B, S) or
    "offset" (one constant start)."""
    cos, sin = _caches(rd or D)
    shape = [B, H, S, D] if four else [B, S, H * D]
    attrs = {"interleaved": int(interleaved), **({"rotary_embedding_dim": rd, "num_heads": H} if rd else {}),
             **({"num_heads": H} if heads and not four and not rd else {})}
    inits, inputs = {"c": cos, "s": sin}, [("x", F32, shape)]
    feeds = {"x": rng.standard_normal(shape).astype(np.float32)}
    if positions == "input":
        inputs.append(("pos", I64, [B, S]))
        feeds["pos"] = rng.integers(0, MAX_POS - S, (B, S)).astype(np.int64)
    else:
        inits["pos"] = np.array([3], np.int64)
    node = helper.make_node("RotaryEmbedding", ["x", "pos", "c", "s"], ["y"], domain="com.microsoft", **attrs)
    return model([node], inputs, [("y", F32, shape)], inits, opset=17, contrib=True), feeds


@pytest.mark.parametrize("four, interleaved", [(True, False), (False, True), (False, False)])
def test_contrib_rotary_embedding(four, interleaved):
    check(*_contrib(four, interleaved), "dc128" if four else "mid32")


def test_contrib_rotary_embedding_from_an_offset_without_num_heads():
    check(*_contrib(False, False, positions="offset", heads=False), "edge16")


def test_contrib_partial_rotation():
    check(*_contrib(False, True, rd=4))


def test_a_run_time_position_offset_stays_on_the_host_with_the_reason():
    m, _ = _contrib(False, False, positions="offset")
    offset = m.graph.initializer.pop(next(i for i, t in enumerate(m.graph.initializer) if t.name == "pos"))
    m.graph.input.append(helper.make_tensor_value_info("pos", I64, list(offset.dims)))
    node = next(n for n in import_onnx(m, allow_unknown=True).nodes if n.op == "RotaryEmbedding")
    assert node.unsupported == (f"position_ids of shape (1,) for {B} x {S} tokens: only (batch, sequence) ids or a "
                                f"constant offset are taken")
