"""The ``npusim`` CLI on models nobody here wrote and on malformed files: no Python traceback ever reaches stderr,
and a refusal is a non-zero exit status with one line. Exotic models come from the onnx wheel's corpus
(onnx/backend/test/data) and from onnx's node tests (control flow, strings, data-dependent shapes, FFTs, ops the
compiler does not know), each run with ``run --timing-only`` and ``run --validate``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from npusim.conformance import DATA, node_cases

pytestmark = pytest.mark.slow

CORPUS = ("pytorch-converted/test_ConvTranspose2d", "pytorch-converted/test_PReLU_1d_multiparam",
          "pytorch-converted/test_Embedding", "pytorch-converted/test_Conv3d_dilated_strided",
          "pytorch-converted/test_PixelShuffle", "pytorch-operator/test_operator_repeat_dim_overflow",
          "pytorch-operator/test_operator_non_float_params", "pytorch-operator/test_operator_add_broadcast",
          "simple/test_sequence_model1", "simple/test_strnorm_model_monday_casesensintive_lower",
          "simple/test_gradient_of_add", "simple/test_expand_shape_model1")
"""Exotic models of the onnx wheel's corpus (ConvTranspose, per-channel PRelu, Gather, 3-D conv, float64 and int64
tensors, sequences, strings, the training domain, a runtime shape)."""

NODE_TESTS = ("test_if", "test_nonzero_example", "test_string_concat", "test_stft", "test_dft",
              "test_regex_full_match_basic", "test_bitwise_and_i32_2d", "test_resize_upsample_scales_linear",
              "test_gelu_tanh_2", "test_col2im", "test_affine_grid_2d", "test_matmul_1d_1d",
              "test_reduce_sum_empty_set_non_reduced_axis_zero", "test_clip_min_greater_than_max",
              "test_ai_onnx_ml_label_encoder_string_int")
"""Exotic models of onnx's node tests, most at opsets the importer takes today."""

KNOWN_TRACEBACKS = {
    ("test_bitwise_and_i32_2d", "--validate"): "host fallback rebuilds the node at opset 17, where onnxruntime has no "
                                               "BitwiseAnd (issue 13 section 2: run host nodes at the model's opset)",
    ("test_resize_upsample_scales_linear", "--validate"): "host fallback rebuilds the node at opset 17, which "
                                                          "onnxruntime rejects (issue 13 section 2)",
}
"""(model, mode) pairs that print a traceback today, with the reason: strict xfails, removed once fixed."""


def _model(nodes, inputs, outputs, inits=(), opset: int = 17) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "malformed", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _f32(name: str, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _malformed(tmp: Path) -> dict[str, Path]:
    """Files that are not models npusim can run, by what is wrong with them."""
    real = (DATA / "light" / "light_squeezenet.onnx").read_bytes()
    relu = helper.make_node("Relu", ["x"], ["y"])
    external = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    onnx.external_data_helper.set_external_data(external, "missing_weights.bin")
    external.data_location = TensorProto.EXTERNAL
    external.ClearField("raw_data")
    files = {
        "empty": b"",
        "text": b"this is not an onnx model\n",
        "truncated": real[: len(real) // 2],
        "tensor, not a model": numpy_helper.from_array(np.ones(3, np.float32)).SerializeToString(),
        "dangling input": _model([helper.make_node("Add", ["x", "nowhere"], ["y"])], [_f32("x", [2])],
                                 [_f32("y", [2])]).SerializeToString(),
        "cycle": _model([helper.make_node("Add", ["x", "b"], ["a"]), helper.make_node("Relu", ["a"], ["b"])],
                        [_f32("x", [2])], [_f32("a", [2])]).SerializeToString(),
        "opset 99": _model([relu], [_f32("x", [2])], [_f32("y", [2])], opset=99).SerializeToString(),
        "shapes that do not broadcast": _model([helper.make_node("Add", ["x", "z"], ["y"])],
                                               [_f32("x", [2, 3]), _f32("z", [4, 5])],
                                               [_f32("y", [2, 3])]).SerializeToString(),
        "unknown domain": _model([helper.make_node("Foo", ["x"], ["y"], domain="com.example")], [_f32("x", [2])],
                                 [_f32("y", [2])]).SerializeToString(),
        "missing external data": _model([helper.make_node("MatMul", ["x", "w"], ["y"])], [_f32("x", [2, 4])],
                                        [_f32("y", [2, 4])], [external]).SerializeToString(),
    }
    paths = {}
    for what, data in files.items():
        paths[what] = tmp / (what.replace(" ", "_").replace(",", "") + ".onnx")
        paths[what].write_bytes(data)
    paths["a directory"] = tmp
    paths["no such file"] = tmp / "absent.onnx"
    return paths


def _npusim(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "npusim", *args], capture_output=True, text=True, timeout=600)


def _check(r: subprocess.CompletedProcess, what: str) -> None:
    """No traceback; a failure exits non-zero with one line (3 is a validation mismatch, reported in the table)."""
    assert "Traceback" not in r.stderr, f"{what}: traceback on stderr:\n{r.stderr[-3000:]}"
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    if r.returncode not in (0, 3):
        assert len(lines) == 1 and lines[0].startswith("npusim: "), f"{what}: exit {r.returncode}, stderr {lines}"


@pytest.mark.parametrize("mode", ["--timing-only", "--validate"])
@pytest.mark.parametrize("name", CORPUS)
def test_corpus_models(name, mode):
    path = DATA / name / "model.onnx"
    assert path.exists(), f"{path} is not in the onnx wheel"
    _check(_npusim("run", str(path), mode), f"{name} {mode}")


@pytest.mark.parametrize("mode", ["--timing-only", "--validate"])
@pytest.mark.parametrize("name", NODE_TESTS)
def test_node_test_models(name, mode, tmp_path, request):
    if (name, mode) in KNOWN_TRACEBACKS:
        request.applymarker(pytest.mark.xfail(reason=KNOWN_TRACEBACKS[name, mode], strict=True))
    case = {c.name: c for c in node_cases()[0]}[name]
    path = tmp_path / f"{name}.onnx"
    path.write_bytes(case.model.SerializeToString())
    _check(_npusim("run", str(path), mode), f"{name} {mode}")


def test_light_model_timing_only():
    """A model-zoo classic (AlexNet: LRN, Dropout, 11x11 convolutions) at its original opset 9."""
    _check(_npusim("run", str(DATA / "light" / "light_bvlc_alexnet.onnx"), "--timing-only"), "alexnet")


def test_malformed_files_are_refused_in_one_line(tmp_path):
    failures = []
    for what, path in _malformed(tmp_path).items():
        r = _npusim("run", str(path), "--timing-only")
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        if r.returncode == 0 or "Traceback" in r.stderr or len(lines) != 1 or not lines[0].startswith("npusim: "):
            failures.append(f"{what}: exit {r.returncode}, stderr {r.stderr[-2000:]!r}")
    assert not failures, "\n".join(failures)
