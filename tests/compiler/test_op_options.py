"""Op options: declared in the registry (OpSpec.options), validated once per compile, read by their op's lowering."""

import numpy as np
import pytest
from onnx import TensorProto, helper

from compiler.compile import compile_model
from compiler.errors import CompileError
from compiler.frontend.onnx_import import import_onnx
from compiler.ops import OPTIONS, REGISTRY, OpOption, OpOptions, validated_options
from isa.arch import load_arch


def test_every_option_is_declared_once_with_a_default_it_takes_and_a_line_of_doc():
    declared = [o for spec in REGISTRY.values() for o in spec.options]
    assert sorted(o.name for o in declared) == sorted(OPTIONS)
    for o in declared:
        assert o.default in o.values and o.doc and "\n" not in o.doc
    assert {"conv_transpose", "msda_tables"} <= set(OPTIONS)
    with pytest.raises(ValueError, match="default 'c' is not one of its values"):
        OpOption("x", ("a", "b"), "c", "a bad declaration")


def test_validated_options_fill_defaults_and_keywords_win():
    everything = validated_options()
    assert everything.as_dict() == {name: o.default for name, o in OPTIONS.items()}
    chosen = validated_options(validated_options(conv_transpose="swell_spm", msda_tables="dram"), msda_tables="spm")
    assert chosen[OPTIONS["conv_transpose"]] == "swell_spm" and chosen[OPTIONS["msda_tables"]] == "spm"
    assert OpOptions()[OPTIONS["conv_transpose"]] == OPTIONS["conv_transpose"].default   # unset: the default


def _convt_graph():
    rng = np.random.default_rng(0)
    w = helper.make_tensor("w", TensorProto.FLOAT, (8, 4, 3, 3), rng.standard_normal((8, 4, 3, 3)).astype(np.float32)
                           .ravel())
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2], pads=[1, 1, 1, 1],
                            output_padding=[1, 1])
    g = helper.make_graph([node], "ct", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 8, 6, 6))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    return import_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))


def test_the_options_object_and_the_keyword_compile_the_same_program():
    g, arch = _convt_graph(), load_arch("edge16")
    by_keyword = compile_model(g, arch, conv_transpose="swell_spm").program
    by_object = compile_model(g, arch, options=validated_options(conv_transpose="swell_spm")).program
    assert by_keyword == by_object != compile_model(g, arch).program


@pytest.mark.parametrize("kwargs, error, match", [
    ({"conv_transpose": "gather"}, CompileError, "conv_transpose must be one of split, swell_spm, swell_dram, not "
                                                 "'gather'"),
    ({"msda_tables": "hbm"}, CompileError, "msda_tables must be one of auto, spm, dram, not 'hbm'"),
    ({"conv_transpos": "split"}, TypeError, "unknown op option.*conv_transpos; the registry's op options are "
                                            "attention, conv_transpose, msda_tables"),
])
def test_a_bad_option_is_refused_naming_the_option_and_what_it_takes(kwargs, error, match):
    with pytest.raises(error, match=match):
        compile_model(_convt_graph(), load_arch("edge16"), **kwargs)
