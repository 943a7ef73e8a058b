"""The ``npusim`` CLI on models nobody here wrote and on malformed files: no Python traceback ever reaches stderr,
and a refusal is a non-zero exit status with one line. Exotic models come from the onnx wheel's corpus
(onnx/backend/test/data) and from onnx's node tests (control flow, strings, data-dependent shapes, FFTs, ops the
compiler does not know), each run with ``run --timing-only`` and ``run --validate`` through the CLI's ``main`` in this
process; the malformed files and one model-zoo classic run the CLI as its own process."""

from __future__ import annotations

import subprocess
import sys
import traceback
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from npusim.app.cli import main
from npusim.app.conformance import DATA, node_cases

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

KNOWN_FAILURES: dict[tuple[str, str], str] = {}
"""(model, mode) pairs that fail the check today, with the reason: strict xfails, removed once fixed."""


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


def _npusim(*args: str) -> tuple[int, str]:
    """``npusim ARGS`` as its own process: (exit status, stderr)."""
    r = subprocess.run([sys.executable, "-m", "npusim", *args], capture_output=True, text=True, timeout=600)
    return r.returncode, r.stderr


def _npusim_here(capfd, *args: str) -> tuple[int, str]:
    """``npusim ARGS`` through :func:`npusim.app.cli.main` in this process (no interpreter start-up: the exotic models
    are many): (exit status, stderr at the file-descriptor level, so onnxruntime's own C++ log counts). An exception
    escaping ``main`` is what the console script would print as a traceback, and is returned as one."""
    capfd.readouterr()
    try:
        rc = main(list(args))
    except SystemExit as e:
        rc = e.code
    except Exception:
        return 1, capfd.readouterr().err + traceback.format_exc()
    return rc, capfd.readouterr().err


def _check(rc: int, stderr: str, what: str) -> None:
    """No traceback; a failure exits non-zero with one line (3 is a validation mismatch, reported in the table)."""
    assert "Traceback" not in stderr, f"{what}: traceback on stderr:\n{stderr[-3000:]}"
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    if rc not in (0, 3):
        assert len(lines) == 1 and lines[0].startswith("npusim: "), f"{what}: exit {rc}, stderr {lines}"


def _known(request, name: str, mode: str) -> None:
    if (name, mode) in KNOWN_FAILURES:
        request.applymarker(pytest.mark.xfail(reason=KNOWN_FAILURES[name, mode], strict=True))


@pytest.mark.parametrize("mode", ["--timing-only", "--validate"])
@pytest.mark.parametrize("name", CORPUS)
def test_corpus_models(name, mode, request, capfd):
    _known(request, name, mode)
    path = DATA / name / "model.onnx"
    assert path.exists(), f"{path} is not in the onnx wheel"
    _check(*_npusim_here(capfd, "run", str(path), mode), f"{name} {mode}")


@pytest.mark.parametrize("mode", ["--timing-only", "--validate"])
@pytest.mark.parametrize("name", NODE_TESTS)
def test_node_test_models(name, mode, tmp_path, request, capfd):
    _known(request, name, mode)
    case = {c.name: c for c in node_cases()[0]}[name]
    path = tmp_path / f"{name}.onnx"
    path.write_bytes(case.model.SerializeToString())
    _check(*_npusim_here(capfd, "run", str(path), mode), f"{name} {mode}")


def test_light_model_timing_only():
    """A model-zoo classic (AlexNet: LRN, Dropout, 11x11 convolutions) at its original opset 9."""
    _check(*_npusim("run", str(DATA / "light" / "light_bvlc_alexnet.onnx"), "--timing-only"), "alexnet")


def test_malformed_files_are_refused_in_one_line(tmp_path):
    failures = []
    for what, path in _malformed(tmp_path).items():
        rc, err = _npusim("run", str(path), "--timing-only")
        lines = [ln for ln in err.splitlines() if ln.strip()]
        if rc == 0 or "Traceback" in err or len(lines) != 1 or not lines[0].startswith("npusim: "):
            failures.append(f"{what}: exit {rc}, stderr {err[-2000:]!r}")
    assert not failures, "\n".join(failures)
