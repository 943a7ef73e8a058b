"""The onnx package's own backend node tests (``onnx.backend.test.runner.Runner``) on npusim, mid32, for every op the
compiler's registry lowers to the NPU (:func:`npusim.conformance.claimed_ops`): a test runs when every node of its
model is a claimed op. Nodes must run on the NPU: the backend compiles without host fallback, so a node the NPU
cannot run fails its test (UnsupportedOpError) unless :data:`EXPECTED_FAILURES` lists it with the reason.

The node cases are built in memory once per session when this module is collected (onnx 1.23 ships them as code;
about 17 s of CPU, :func:`npusim.conformance.node_cases`).
"""

from __future__ import annotations

import unittest

import pytest
from onnx.backend.test.runner import Runner

from compiler.errors import UnsupportedOpsetError
from compiler.onnx_import import model_opset
from isa import NpuSimError
from npusim.conformance import case_ops, claimed_cases, claimed_ops
from npusim.onnx_backend import NpuBackend

CONSTANT_INPUTS: dict[str, tuple[int, ...]] = {
    "Conv": (1, 2), "Gemm": (1, 2), "Clip": (1, 2), "LayerNormalization": (1, 2), "Pad": (1, 2, 3),
    "QuantizeLinear": (1, 2), "DequantizeLinear": (1, 2), "QLinearMatMul": (1, 2, 3, 4, 5, 6, 7),
    "QLinearConv": (1, 2, 3, 4, 5, 6, 7, 8),
}
"""Input indices of each op that exported models carry as initializers (weights, biases, bounds, scales and zero
points) and the NPU compiler takes only as constants: a node test feeds them as graph inputs, the backend binds them
as constants with the test's values (as onnx-mlir's backend tests do). int64/bool inputs (shapes, axes, pads) are
always bound (:mod:`npusim.onnx_backend`)."""


def constant_inputs(model) -> list[str]:
    """The graph inputs of ``model`` that :data:`CONSTANT_INPUTS` binds as constants."""
    inputs = {i.name for i in model.graph.input}
    return sorted({n.input[i] for n in model.graph.node for i in CONSTANT_INPUTS.get(n.op_type, ())
                   if i < len(n.input) and n.input[i] in inputs})


def _refused_opset(case) -> bool:
    try:
        model_opset(case.model)
    except UnsupportedOpsetError:
        return True
    return False


EXPECTED_FAILURES: dict[str, dict[str, tuple[str, ...] | object]] = {
    "opset": {
        "the importer refuses the model's opset (accepting opsets 7-28 is issue 13 section 2)": _refused_opset,
    },
    "dtype": {
        "integer Add/Sub/Mul/Div/Clip run on the host: the vector unit's element-wise ops are float32 (int8 only "
        "through the quantized ops)": (
            "test_add_int8", "test_add_int16", "test_add_uint8", "test_sub_int8", "test_sub_int16", "test_sub_uint8",
            "test_mul_int8", "test_mul_int16", "test_mul_uint8", "test_div_int8", "test_div_int16", "test_div_uint8",
            "test_div_int32_trunc", "test_clip_default_int8_inbounds", "test_clip_default_int8_inbounds_expanded",
            "test_clip_default_int8_min", "test_clip_default_int8_max"),
        "uint16/uint32/uint64 tensors are refused by the importer (not a dtype of the ISA)": (
            "test_add_uint16", "test_add_uint32", "test_add_uint64", "test_sub_uint16", "test_sub_uint32",
            "test_sub_uint64", "test_mul_uint16", "test_mul_uint32", "test_mul_uint64", "test_div_uint16",
            "test_div_uint32", "test_div_uint64"),
        "optional-typed tensors are not supported": ("test_identity_opt",),
    },
    "attribute": {
        "Gelu approximate='tanh' is not lowered": ("test_gelu_tanh_1", "test_gelu_tanh_2"),
        "Gemm transA=1 is not lowered": ("test_gemm_all_attributes", "test_gemm_transposeA"),
        "LayerNormalization's Mean and InvStdDev outputs are not produced": tuple(
            f"test_layer_normalization_{t}" for t in (
                "2d_axis0", "2d_axis1", "2d_axis_negative_1", "2d_axis_negative_2", "3d_axis0_epsilon",
                "3d_axis1_epsilon", "3d_axis2_epsilon", "3d_axis_negative_1_epsilon", "3d_axis_negative_2_epsilon",
                "3d_axis_negative_3_epsilon", "4d_axis0", "4d_axis1", "4d_axis2", "4d_axis3", "4d_axis_negative_1",
                "4d_axis_negative_2", "4d_axis_negative_3", "4d_axis_negative_4", "default_axis")),
        "ReduceMean/ReduceSum over axes other than the last one only": tuple(
            f"test_reduce_{op}_{t}" for op in ("mean", "sum") for t in (
                "default_axes_keepdims_example", "default_axes_keepdims_random", "do_not_keepdims_example",
                "do_not_keepdims_random", "keepdims_example", "keepdims_random", "negative_axes_keepdims_example",
                "negative_axes_keepdims_random")) + ("test_reduce_sum_empty_set",) + tuple(
            f"test_reduce_sum_square_{t}_expanded" for t in (
                "default_axes_keepdims_example", "default_axes_keepdims_random", "do_not_keepdims_example",
                "do_not_keepdims_random", "keepdims_example", "keepdims_random", "negative_axes_keepdims_example",
                "negative_axes_keepdims_random", "empty_set")),
        "Softmax over an axis other than the last one": ("test_softmax_axis_0", "test_softmax_axis_1"),
    },
    "operand form": {
        "MatMul with broadcast batch dims or a 1-D operand": (
            "test_matmul_1d_1d", "test_matmul_1d_3d", "test_matmul_4d_1d", "test_matmul_bcast"),
    },
    "quantization": {
        "QLinearMatMul with a weight zero point other than 0 (asymmetric int8 weights)": (
            "test_qlinearmatmul_2D_int8_float16", "test_qlinearmatmul_2D_int8_float32",
            "test_qlinearmatmul_2D_uint8_float16", "test_qlinearmatmul_2D_uint8_float32",
            "test_qlinearmatmul_3D_int8_float16", "test_qlinearmatmul_3D_int8_float32",
            "test_qlinearmatmul_3D_uint8_float16", "test_qlinearmatmul_3D_uint8_float32"),
    },
    "shape": {
        "zero-size tensors (a dim of 0) are not supported": ("test_reduce_sum_empty_set_non_reduced_axis_zero",),
    },
}
"""Every claimed-op node test expected to fail, by group and reason: a tuple of test names (onnx's names, without
the ``_cpu`` the runner appends) or a predicate on the test case. They run as strict xfails that must fail cleanly
(:data:`CLEAN_FAILURES`): one that starts to pass fails the suite until its entry is removed here."""


CLEAN_FAILURES = (NpuSimError, AssertionError)
"""How an expected failure may fail: a clean refusal (NpuSimError) or onnx's runner's output check. Any other
exception (a crash inside the compiler) fails the test even when it is listed."""


def expected_failure(case) -> str | None:
    """``group: reason`` of the :data:`EXPECTED_FAILURES` entry listing ``case``, or None."""
    for group, reasons in EXPECTED_FAILURES.items():
        for reason, tests in reasons.items():
            if (case.name in tests) if isinstance(tests, tuple) else tests(case):
                return f"{group}: {reason}"
    return None


class NpuOnly(NpuBackend):
    """npusim on mid32 where a node the NPU cannot run is an error, not a host call."""

    fallback = False


CASES = claimed_cases()


def _test_class(cases) -> type:
    """A unittest class with the Runner's test of each case (``test_<name>_cpu``), strict xfail where expected."""
    runner = Runner(NpuOnly, __name__, test_kwargs={c.name: {"constant_inputs": constant_inputs(c.model)}
                                                    for c in cases})
    every = runner.test_cases["OnnxBackendNodeModelTest"]

    def node_test(case):
        fn = getattr(every, f"{case.name}_cpu")
        reason = expected_failure(case)
        return pytest.mark.xfail(reason=reason, strict=True, raises=CLEAN_FAILURES)(fn) if reason else fn

    return type("OnnxBackendNodeTest", (unittest.TestCase,),
                {f"{c.name}_cpu": node_test(c) for c in cases} | {"__module__": __name__})


OnnxBackendNodeTest = _test_class(CASES)


def test_selection_covers_every_claimed_op():
    """Every op the registry lowers has node tests in the selection, and the selection is not empty."""
    tested = {op for c in CASES for op in case_ops(c.model) if len(c.model.graph.node) == 1}
    assert claimed_ops() - tested == set()


def test_expected_failures_name_selected_tests():
    """No stale or misspelt entry: every test named in EXPECTED_FAILURES is a selected node test."""
    names = {c.name for c in CASES}
    listed = {t for reasons in EXPECTED_FAILURES.values() for tests in reasons.values()
              if isinstance(tests, tuple) for t in tests}
    assert listed - names == set()
