"""Per-inference figures divide by the batch the model declares (issue 24, finding 4), and the report says where that
batch came from: a symbolic batch dim, the leading dim of the inputs of rank 3 or more, the caller, or none (1)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from isa import NpuSimError
from isa.arch import load_arch
from npusim.app.batch import is_batch_name, model_batch
from npusim.app.cli import main
from npusim.app.driver import load_model, run_model

ARCH = load_arch("edge16")


def _matmul(shape, name="x"):
    """``name`` (``shape``, f32; symbolic dims as strings) @ a constant 64 x 32 -> y."""
    w = np.random.default_rng(0).standard_normal((64, 32)).astype(np.float32)
    out = [*shape[:-1], 32]
    g = helper.make_graph([helper.make_node("MatMul", [name, "w"], ["y"], name="mm")], "mm",
                          [helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out)],
                          initializer=[numpy_helper.from_array(w, "w")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _two_inputs(a, b):
    g = helper.make_graph([helper.make_node("Add", ["a", "b"], ["y"], name="add")], "add",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, list(a)),
                           helper.make_tensor_value_info("b", TensorProto.FLOAT, list(b))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(np.broadcast_shapes(a, b)))])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_finding4_per_inference_uses_declared_batch():
    # 196 tokens x 64 features: a 2-D input's first dim is not a batch (it divided the energy by 196)
    _, _, _, report = run_model(_matmul((196, 64)), ARCH, timing_only=True, cache=False)
    e = report["energy"]
    assert e["inferences"] == 1 and e["per_inference_pj"] == e["total_pj"]
    assert report["batch"] == {"size": 1, "source": "batch 1: no batch dimension declared (no symbolic batch dim, "
                                                    "no input of rank 3 or more)"}
    # the caller's batch wins
    _, _, _, given = run_model(_matmul((196, 64)), ARCH, timing_only=True, cache=False, batch=4)
    assert given["energy"]["per_inference_pj"] == pytest.approx(given["energy"]["total_pj"] / 4)
    assert given["batch"] == {"size": 4, "source": "batch 4 given by the caller (--batch)"}
    # a symbolic batch dim fixed with --dim, even on a 2-D input
    _, _, _, sym = run_model(_matmul(("batch_size", 64)), ARCH, timing_only=True, cache=False,
                             dims={"batch_size": 3})
    assert sym["energy"]["per_inference_pj"] == pytest.approx(sym["energy"]["total_pj"] / 3)
    assert sym["batch"]["source"] == "batch 3 from the symbolic dim 'batch_size' (--dim batch_size=3)"
    # B x L x D sequences: the leading dim
    _, _, _, seq = run_model(_matmul((2, 49, 64)), ARCH, timing_only=True, cache=False)
    assert seq["batch"] == {"size": 2, "source": "batch 2 from input 'x' dim 0"}
    assert seq["energy"]["per_inference_pj"] == pytest.approx(seq["energy"]["total_pj"] / 2)


def test_rank_three_inputs_must_agree_and_symbolic_names():
    agree = load_model(_two_inputs((2, 3, 4, 4), (2, 3, 4, 4)))
    assert model_batch(agree).size == 2 and "and the 1 other inputs" in model_batch(agree).source
    split = load_model(_two_inputs((1, 3, 4, 4), (3, 4, 4)))   # broadcasts: 1 and 3 lead
    assert model_batch(split).size == 1 and "disagree ('a' 1, 'b' 3)" in model_batch(split).source
    assert model_batch(split, {"N": 2, "seq": 9}).size == 2
    assert model_batch(split, {"N": 2, "batch": 4}).source.startswith("batch 1: the symbolic batch dims disagree")
    assert [is_batch_name(n) for n in ("N", "b", "BS", "batch", "Batch_Size", "seq", "n_tokens", "s0")] == \
        [True, True, True, True, True, False, False, False]
    for bad in (0, -1, 1.5, True):
        with pytest.raises(NpuSimError, match=r"batch must be a positive integer"):
            model_batch(split, batch=bad)


def test_run_batch_option_and_summary(tmp_path, capsys):
    import onnx

    path = tmp_path / "m.onnx"
    onnx.save(_matmul(("N", 64)), path)
    assert main(["run", str(path), "--arch", "edge16", "--timing-only", "--quiet", "--no-cache", "--dim", "N=2",
                 "--json", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["batch"]["size"] == 2
    assert "per inference (batch 2 from the symbolic dim 'N' (--dim N=2))" in out
    with pytest.raises(SystemExit) as exit_:
        main(["run", str(path), "--batch", "0"])
    assert exit_.value.code == 2 and "--batch: must be a batch size >= 1, not 0" in capsys.readouterr().err
