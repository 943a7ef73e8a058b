"""The onnx package's own backend node tests (``onnx.backend.test.runner.Runner``) on npusim, mid32, for every op the
compiler's registry lowers to the NPU (:func:`npusim.app.conformance.claimed_ops`): a test runs when every node of its
model is a claimed op. Nodes must run on the NPU: the backend compiles without host fallback, so a node the NPU
cannot run fails its test (UnsupportedOpError) unless :data:`EXPECTED_FAILURES` lists it with the reason.

The node cases are built in memory once per session when this module is collected (onnx 1.23 ships them as code;
about 17 s of CPU, :func:`npusim.app.conformance.node_cases`).
"""

from __future__ import annotations

import unittest

import pytest
from onnx.backend.test.runner import Runner

from isa import NpuSimError
from npusim.app.conformance import case_ops, claimed_cases, claimed_ops, constant_inputs
from npusim.app.onnx_backend import NpuBackend

EXPECTED_FAILURES: dict[str, dict[str, tuple[str, ...]]] = {
    "dtype": {
        "integer and float16 Add/Sub/Mul/Div/Max/Min/Clip/Identity/Pad run on the host: the vector unit's element-wise "
        "ops and copies are lowered for float32 (int8 only through the quantized ops)": (
            *(f"test_{op}_{t}" for op in ("add", "sub", "mul", "div") for t in ("int8", "int16", "uint8")),
            *(f"test_{op}_{t}" for op in ("max", "min") for t in ("int8", "int16", "int32", "uint8", "float16")),
            "test_swiglu_float16_expanded", "test_div_int32_trunc", "test_clip_default_int8_inbounds",
            "test_clip_default_int8_min", "test_clip_default_int8_max", "test_edge_pad", "test_reflect_pad",
            "test_wrap_pad"),
        "uint16/uint32/uint64 Add/Sub/Mul/Div/Max/Min run on the host: the NPU holds them as int32 "
        "(compiler/frontend/dtypes.py), and its element-wise ops are lowered for float32": (
            *(f"test_{op}_uint{b}" for op in ("add", "sub", "mul", "div", "max", "min") for b in (16, 32, 64)),),
        "optional and sequence tensors are not supported": ("test_identity_opt", "test_identity_sequence"),
        "string tensors are not taken (Equal of strings)": ("test_equal_string", "test_equal_string_broadcast"),
        "float8, float4, int4/uint4 and int2/uint2 tensors are not taken (Cast to or from them)": (
            "test_cast_FLOAT16_to_FLOAT4E2M1",
            "test_cast_FLOAT16_to_FLOAT8E4M3FN",
            "test_cast_FLOAT16_to_FLOAT8E4M3FNUZ",
            "test_cast_FLOAT16_to_FLOAT8E5M2",
            "test_cast_FLOAT16_to_FLOAT8E5M2FNUZ",
            "test_cast_FLOAT16_to_INT2",
            "test_cast_FLOAT16_to_INT4",
            "test_cast_FLOAT16_to_UINT2",
            "test_cast_FLOAT16_to_UINT4",
            "test_cast_FLOAT4E2M1_to_FLOAT",
            "test_cast_FLOAT4E2M1_to_FLOAT16",
            "test_cast_FLOAT8E4M3FNUZ_to_FLOAT",
            "test_cast_FLOAT8E4M3FNUZ_to_FLOAT16",
            "test_cast_FLOAT8E4M3FN_to_FLOAT",
            "test_cast_FLOAT8E4M3FN_to_FLOAT16",
            "test_cast_FLOAT8E5M2FNUZ_to_FLOAT",
            "test_cast_FLOAT8E5M2FNUZ_to_FLOAT16",
            "test_cast_FLOAT8E5M2_to_FLOAT",
            "test_cast_FLOAT8E5M2_to_FLOAT16",
            "test_cast_FLOAT_to_FLOAT4E2M1",
            "test_cast_FLOAT_to_FLOAT8E4M3FN",
            "test_cast_FLOAT_to_FLOAT8E4M3FNUZ",
            "test_cast_FLOAT_to_FLOAT8E5M2",
            "test_cast_FLOAT_to_FLOAT8E5M2FNUZ",
            "test_cast_FLOAT_to_INT2",
            "test_cast_FLOAT_to_INT4",
            "test_cast_FLOAT_to_UINT2",
            "test_cast_FLOAT_to_UINT4",
            "test_cast_INT2_to_FLOAT",
            "test_cast_INT2_to_FLOAT16",
            "test_cast_INT2_to_INT8",
            "test_cast_INT4_to_FLOAT",
            "test_cast_INT4_to_FLOAT16",
            "test_cast_INT4_to_INT8",
            "test_cast_UINT2_to_FLOAT",
            "test_cast_UINT2_to_FLOAT16",
            "test_cast_UINT2_to_UINT8",
            "test_cast_UINT4_to_FLOAT",
            "test_cast_UINT4_to_FLOAT16",
            "test_cast_UINT4_to_UINT8",
            "test_cast_e8m0_FLOAT16_to_FLOAT8E8M0",
            "test_cast_e8m0_FLOAT8E8M0_to_FLOAT",
            "test_cast_e8m0_FLOAT8E8M0_to_FLOAT16",
            "test_cast_e8m0_FLOAT_to_FLOAT8E8M0",
            "test_cast_no_saturate_FLOAT16_to_FLOAT8E4M3FN",
            "test_cast_no_saturate_FLOAT16_to_FLOAT8E4M3FNUZ",
            "test_cast_no_saturate_FLOAT16_to_FLOAT8E5M2",
            "test_cast_no_saturate_FLOAT16_to_FLOAT8E5M2FNUZ",
            "test_cast_no_saturate_FLOAT_to_FLOAT8E4M3FN",
            "test_cast_no_saturate_FLOAT_to_FLOAT8E4M3FNUZ",
            "test_cast_no_saturate_FLOAT_to_FLOAT8E5M2",
            "test_cast_no_saturate_FLOAT_to_FLOAT8E5M2FNUZ",
            "test_castlike_FLOAT16_to_FLOAT4E2M1_expanded",
            "test_castlike_FLOAT16_to_FLOAT8E4M3FNUZ_expanded",
            "test_castlike_FLOAT16_to_FLOAT8E4M3FN_expanded",
            "test_castlike_FLOAT16_to_FLOAT8E5M2FNUZ_expanded",
            "test_castlike_FLOAT16_to_FLOAT8E5M2_expanded",
            "test_castlike_FLOAT16_to_INT2_expanded",
            "test_castlike_FLOAT16_to_INT4_expanded",
            "test_castlike_FLOAT16_to_UINT2_expanded",
            "test_castlike_FLOAT16_to_UINT4_expanded",
            "test_castlike_FLOAT4E2M1_to_FLOAT16_expanded",
            "test_castlike_FLOAT4E2M1_to_FLOAT_expanded",
            "test_castlike_FLOAT8E4M3FNUZ_to_FLOAT16_expanded",
            "test_castlike_FLOAT8E4M3FNUZ_to_FLOAT_expanded",
            "test_castlike_FLOAT8E4M3FN_to_FLOAT16_expanded",
            "test_castlike_FLOAT8E4M3FN_to_FLOAT_expanded",
            "test_castlike_FLOAT8E5M2FNUZ_to_FLOAT16_expanded",
            "test_castlike_FLOAT8E5M2FNUZ_to_FLOAT_expanded",
            "test_castlike_FLOAT8E5M2_to_FLOAT16_expanded",
            "test_castlike_FLOAT8E5M2_to_FLOAT_expanded",
            "test_castlike_FLOAT_to_FLOAT4E2M1_expanded",
            "test_castlike_FLOAT_to_FLOAT8E4M3FNUZ_expanded",
            "test_castlike_FLOAT_to_FLOAT8E4M3FN_expanded",
            "test_castlike_FLOAT_to_FLOAT8E5M2FNUZ_expanded",
            "test_castlike_FLOAT_to_FLOAT8E5M2_expanded",
            "test_castlike_FLOAT_to_INT2_expanded",
            "test_castlike_FLOAT_to_INT4_expanded",
            "test_castlike_FLOAT_to_UINT2_expanded",
            "test_castlike_FLOAT_to_UINT4_expanded",
            "test_castlike_INT2_to_FLOAT16_expanded",
            "test_castlike_INT2_to_FLOAT_expanded",
            "test_castlike_INT2_to_INT8_expanded",
            "test_castlike_INT4_to_FLOAT16_expanded",
            "test_castlike_INT4_to_FLOAT_expanded",
            "test_castlike_INT4_to_INT8_expanded",
            "test_castlike_UINT2_to_FLOAT16_expanded",
            "test_castlike_UINT2_to_FLOAT_expanded",
            "test_castlike_UINT2_to_UINT8_expanded",
            "test_castlike_UINT4_to_FLOAT16_expanded",
            "test_castlike_UINT4_to_FLOAT_expanded",
            "test_castlike_UINT4_to_UINT8_expanded",
            "test_castlike_no_saturate_FLOAT16_to_FLOAT8E4M3FNUZ_expanded",
            "test_castlike_no_saturate_FLOAT16_to_FLOAT8E4M3FN_expanded",
            "test_castlike_no_saturate_FLOAT16_to_FLOAT8E5M2FNUZ_expanded",
            "test_castlike_no_saturate_FLOAT16_to_FLOAT8E5M2_expanded",
            "test_castlike_no_saturate_FLOAT_to_FLOAT8E4M3FNUZ_expanded",
            "test_castlike_no_saturate_FLOAT_to_FLOAT8E4M3FN_expanded",
            "test_castlike_no_saturate_FLOAT_to_FLOAT8E5M2FNUZ_expanded",
            "test_castlike_no_saturate_FLOAT_to_FLOAT8E5M2_expanded",
        ),
        "bfloat16 Cast runs on the host (a bfloat16 input is not taken by the run)": (
            "test_cast_BFLOAT16_to_FLOAT", "test_cast_FLOAT_to_BFLOAT16", "test_castlike_BFLOAT16_to_FLOAT_expanded",
            "test_castlike_FLOAT_to_BFLOAT16_expanded"),
        "TopK ranks float32 values on the NPU (uint64 runs on the host)": ("test_top_k_uint64",),
        "float16 and bfloat16 Attention runs on the host (its GEMMs and softmax are lowered for float32)": (
            "test_attention_3d_causal_bf16", "test_attention_4d_attn_mask_causal_bf16",
            "test_attention_4d_causal_bf16", "test_attention_4d_causal_fp16", "test_attention_4d_fp16",
            "test_attention_4d_gqa_with_past_and_present_fp16",
            "test_attention_24_qk_matmul_output_mode3_softmax_precision"),
        "Attention's softmax_precision other than float32 runs on the host": (
            "test_attention_local_window_gqa_rank4_mask",),
    },
    "attribute": {
        "cubic Resize/GridSample, antialias and exclude_outside run on the host": (
            "test_gridsample_bicubic", "test_gridsample_bicubic_align_corners_0_additional_1",
            "test_gridsample_bicubic_align_corners_1_additional_1",
            "test_resize_downsample_scales_cubic_A_n0p5_exclude_outside",
            "test_resize_downsample_scales_cubic_align_corners", "test_resize_downsample_scales_cubic_antialias",
            "test_resize_downsample_scales_linear_antialias", "test_resize_downsample_sizes_cubic",
            "test_resize_downsample_sizes_cubic_antialias", "test_resize_downsample_sizes_linear_antialias",
            "test_resize_upsample_scales_cubic_A_n0p5_exclude_outside",
            "test_resize_upsample_scales_cubic_align_corners", "test_resize_upsample_sizes_cubic",),
        "GridSample reflection padding of a run-time grid runs on the host": (
            "test_gridsample_reflection_padding",),
        "ConvTranspose output_shape larger than the uncropped output (negative pads) runs on the host": (
            "test_convtranspose_output_shape",),
        "MaxPool's Indices output is not produced": (
            "test_maxpool_with_argmax_2d_precomputed_pads", "test_maxpool_with_argmax_2d_precomputed_strides"),
        "Gemm transA=1 is not lowered": ("test_gemm_all_attributes", "test_gemm_transposeA"),
        "LayerNormalization's Mean and InvStdDev outputs are not produced": tuple(
            f"test_layer_normalization_{t}" for t in (
                "2d_axis0", "2d_axis1", "2d_axis_negative_1", "2d_axis_negative_2", "3d_axis0_epsilon",
                "3d_axis1_epsilon", "3d_axis2_epsilon", "3d_axis_negative_1_epsilon", "3d_axis_negative_2_epsilon",
                "3d_axis_negative_3_epsilon", "4d_axis0", "4d_axis1", "4d_axis2", "4d_axis3", "4d_axis_negative_1",
                "4d_axis_negative_2", "4d_axis_negative_3", "4d_axis_negative_4", "default_axis")),
        "Pow with an exponent that is not one scalar": (
            "test_pow", "test_pow_bcast_array", "test_pow_example", *(f"test_pow_types_{t}" for t in (
                "float32_int32", "float32_int64", "float32_uint32", "float32_uint64", "int32_float32", "int32_int32"))),
        "ScatterND's reductions add, mul, max and min run on the host (reduction none runs on the NPU)": (
            "test_scatternd_add", "test_scatternd_multiply", "test_scatternd_max", "test_scatternd_min",
            "test_scatternd_max_with_element_indices", "test_scatternd_min_with_element_indices"),
        "BatchNormalization training_mode=1": (
            "test_batchnorm_epsilon_training_mode", "test_batchnorm_example_training_mode"),
        "Attention's qk_matmul_output (mode 2) with a causal mask: the masked scores are the lowest float32, as "
        "onnxruntime writes them, where onnx's reference writes -inf": (
            "test_attention_4d_with_past_and_present_qk_matmul_bias_3d_mask_causal",
            "test_attention_4d_with_past_and_present_qk_matmul_bias_4d_mask_causal"),
    },
    "rank": {
        "3-D ConvTranspose runs on the host": (
            "test_convtranspose_3d",),
        "3-D (volumetric) GridSample and AffineGrid run on the host": (
            "test_affine_grid_3d", "test_affine_grid_3d_align_corners",
            "test_gridsample_volumetric_bilinear_align_corners_0",
            "test_gridsample_volumetric_bilinear_align_corners_1",
            "test_gridsample_volumetric_nearest_align_corners_0",
            "test_gridsample_volumetric_nearest_align_corners_1",),
        "pooling is 1-D and 2-D only (3-D inputs run on the host)": (
            "test_averagepool_3d_default",
            *(f"test_averagepool_3d_dilations_large_count_include_pad_is_{i}_ceil_mode_is_{c}"
              for i in (0, 1) for c in (False, True)), "test_averagepool_3d_dilations_small",
            "test_maxpool_3d_default", "test_maxpool_3d_dilations", "test_maxpool_3d_dilations_use_ref_impl",
            "test_maxpool_3d_dilations_use_ref_impl_large"),
        "MatMul with a 1-D operand or broadcast batch dims": (
            "test_matmul_1d_1d", "test_matmul_1d_3d", "test_matmul_4d_1d", "test_matmul_bcast"),
    },
    "quantization": {
        "asymmetric int8 weights (weight zero point other than 0)": (
            "test_qlinearconv", *(f"test_qlinearmatmul_2D_{t}" for t in (
                "int8_float16", "int8_float32", "uint8_float16", "uint8_float32"))),
        "QLinearMatMul with a 3-D B": tuple(
            f"test_qlinearmatmul_3D_{t}" for t in ("int8_float16", "int8_float32", "uint8_float16", "uint8_float32")),
        "per-axis and blocked scales (one scale per tensor only)": (
            "test_quantizelinear_axis", "test_dequantizelinear_axis", "test_quantizelinear_blocked_asymmetric",
            "test_quantizelinear_blocked_symmetric", "test_dequantizelinear_blocked"),
        "quantized types other than int8/uint8 (int16, uint16, 2- and 4-bit, float8, float4)": (
            *(f"test_{q}_{t}" for q in ("quantizelinear", "dequantizelinear")
              for t in ("int16", "uint16", "int2", "uint2", "int4", "uint4", "e5m2")),
            "test_quantizelinear_e4m3fn", "test_quantizelinear_float4e2m1", "test_dequantizelinear_e4m3fn",
            "test_dequantizelinear_e4m3fn_float16", "test_dequantizelinear_e4m3fn_zero_point",
            "test_dequantizelinear_float4e2m1"),
    },
    "shape": {
        "a tensor with a dim of 0 runs its node on the host": (
            "test_reduce_sum_empty_set_non_reduced_axis_zero", "test_reduce_sum_empty_set",
            "test_reduce_sum_square_empty_set", "test_reduce_sum_square_empty_set_expanded", "test_reduce_l1_empty_set",
            "test_reduce_l1_empty_set_expanded", "test_reduce_l2_empty_set", "test_reduce_log_sum_empty_set",
            "test_reduce_log_sum_empty_set_expanded", "test_reduce_max_empty_set", "test_reduce_min_empty_set",
            "test_reshape_allowzero_reordered", "test_slice_start_out_of_bounds", "test_split_zero_size_splits_opset13",
            "test_split_zero_size_splits_opset18"),
    },
    "inputs": {
        "Attention with nonpad_kv_seqlen (a KV cache updated outside the op) runs on the host": (
            "test_attention_4d_causal_nonpad_attn_mask_composition", "test_attention_4d_causal_nonpad_batch_prefill",
            "test_attention_4d_causal_nonpad_continued_prefill",
            "test_attention_4d_causal_nonpad_negative_offset_structural_empty",
            "test_attention_4d_causal_padded_kv_bf16",
            "test_attention_4d_diff_heads_mask4d_padded_kv", "test_attention_4d_gqa_causal_nonpad_decode",
            "test_attention_4d_gqa_causal_nonpad_decode_fp16", "test_attention_4d_padded_kv_bf16",
            "test_attention_local_window_ext_cache_float16_mask", "test_attention_local_window_ext_cache_rank2_mask",
            "test_attention_local_window_ext_cache_rank3_head_mask",
            "test_attention_local_window_ext_cache_rank4_batch_mask"),
        "Resize scales, sizes or roi given as run-time inputs (exporters write them as constants)": (
            "test_resize_downsample_scales_cubic", "test_resize_downsample_scales_linear",
            "test_resize_downsample_scales_linear_align_corners",
            "test_resize_downsample_scales_linear_half_pixel_symmetric", "test_resize_downsample_scales_nearest",
            "test_resize_tf_crop_and_resize", "test_resize_tf_crop_and_resize_axes_2_3",
            "test_resize_tf_crop_and_resize_axes_3_2", "test_resize_tf_crop_and_resize_extrapolation_value",
            "test_resize_upsample_scales_cubic", "test_resize_upsample_scales_cubic_asymmetric",
            "test_resize_upsample_scales_linear", "test_resize_upsample_scales_linear_align_corners",
            "test_resize_upsample_scales_linear_half_pixel_symmetric", "test_resize_upsample_scales_nearest",
            "test_resize_upsample_scales_nearest_axes_2_3", "test_resize_upsample_scales_nearest_axes_3_2",),
        "CumSum's axis given as a run-time int32 input (exporters write it as a constant)": tuple(
            f"test_cumsum_{t}" for t in ("1d", "1d_exclusive", "1d_int32_exclusive", "1d_reverse",
                                         "1d_reverse_exclusive", "2d_axis_0", "2d_axis_1", "2d_int32",
                                         "2d_negative_axis")),
        "ConvTranspose weights and bias given as run-time inputs (exporters write them as constants)": (
            "test_convtranspose", "test_convtranspose_1d", "test_convtranspose_autopad_same",
            "test_convtranspose_dilations", "test_convtranspose_group_2", "test_convtranspose_group_2_image_3",
            "test_convtranspose_kernel_shape", "test_convtranspose_pad", "test_convtranspose_pads",),
    },
    "bug": {},
}
"""Every claimed-op node test expected to fail, by group and reason (onnx's test names, without the ``_cpu`` the
runner appends). They run as strict xfails that must fail cleanly
(:data:`CLEAN_FAILURES`): one that starts to pass fails the suite until its entry is removed here."""


CLEAN_FAILURES = (NpuSimError, AssertionError)
"""How an expected failure may fail: a clean refusal (NpuSimError) or onnx's runner's output check. Any other
exception (a crash inside the compiler) fails the test even when it is listed, except in the ``bug`` group: known
crashes, listed until they are fixed."""


def expected_failure(case) -> str | None:
    """``group: reason`` of the :data:`EXPECTED_FAILURES` entry listing ``case``, or None."""
    for group, reasons in EXPECTED_FAILURES.items():
        for reason, tests in reasons.items():
            if case.name in tests:
                return f"{group}: {reason}"
    return None


class NpuOnly(NpuBackend):
    """npusim on mid32 where a node the NPU cannot run is an error, not a host call; every run also asserts that the
    report's host_ops is empty."""

    fallback = False

    @classmethod
    def prepare(cls, model, device="CPU", **kwargs):
        rep = super().prepare(model, device, **kwargs)
        run = rep.run

        def on_the_npu(inputs, **kw):
            outputs = run(inputs, **kw)
            assert rep.report["host_ops"] == [], f"ran on the host: {rep.report['host_ops']}"
            return outputs

        rep.run = on_the_npu
        return rep


CASES = claimed_cases()


def _test_class(cases) -> type:
    """A unittest class with the Runner's test of each case (``test_<name>_cpu``), strict xfail where expected."""
    runner = Runner(NpuOnly, __name__, test_kwargs={c.name: {"constant_inputs": constant_inputs(c.model)}
                                                    for c in cases})
    every = runner.test_cases["OnnxBackendNodeModelTest"]

    def node_test(case):
        fn = getattr(every, f"{case.name}_cpu")
        reason = expected_failure(case)
        clean = None if reason and reason.startswith("bug:") else CLEAN_FAILURES
        return pytest.mark.xfail(reason=reason, strict=True, raises=clean)(fn) if reason else fn

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
    listed = [t for reasons in EXPECTED_FAILURES.values() for tests in reasons.values() for t in tests]
    assert len(listed) == len(set(listed)), "a test listed twice"
    assert set(listed) - names == set()
