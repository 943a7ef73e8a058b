"""Models in the forms torch.onnx writes (TorchScript and dynamo exporters), built with onnx.helper so no torch is
needed: int64 token and position ids, bool masks built from constants, int64 shape arithmetic, symbolic dims an
exporter leaves in a static model, constant subgraphs of any op (folded by onnx's reference evaluator), int64 and
bool outputs and float64 models. Each is compiled, simulated with values and compared with onnxruntime."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from compiler.errors import CompileError, ValueRangeError
from compiler.frontend.onnx_import import import_onnx
from compiler.passes.fold_constants import FOLDERS
from isa import DType
from isa.arch import load_arch
from npusim.app.cli import main
from npusim.app.driver import random_inputs, run_model

ARCH = load_arch("mid32")
I64, F32, BOOL = TensorProto.INT64, TensorProto.FLOAT, TensorProto.BOOL
VOCAB, SEQ, HID = 40, 8, 16
rng = np.random.default_rng(5)


def _model(nodes, inputs, outputs, consts=(), opset=17, value_info=()):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
                              [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in dict(consts).items()],
                              value_info=[helper.make_tensor_value_info(n, t, s) for n, t, s in value_info])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _const(name, value):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(value), name))


def _run(m, inputs=None, host=frozenset()):
    """Simulate ``m`` with values and check every output against onnxruntime; the host may run only ``host`` ops."""
    compiled, _, outputs, report = run_model(m, ARCH, inputs, validate=True, cache=False)
    assert {h["op"] for h in report["host_ops"]} <= set(host), report["host_ops"]
    for name, check in report["validation"].items():
        assert check["ok"], (name, check)
    return compiled, outputs, report


def _embedding_model():
    """``input_ids`` (int64) -> Reshape (GPT-2's ``view``) -> word embedding Gather + position embedding Gather of
    ``Range(0, seq)`` built from ``Shape(input_ids)`` (the dynamo form) -> MatMul."""
    nodes = [helper.make_node("Reshape", ["input_ids", "view"], ["ids"]),
             helper.make_node("Gather", ["wte", "ids"], ["tok"]),
             helper.make_node("Shape", ["input_ids"], ["shape"]),
             helper.make_node("Gather", ["shape", "one"], ["seq"], axis=0),
             helper.make_node("Range", ["zero", "seq", "one"], ["pos"]),
             helper.make_node("Unsqueeze", ["pos", "axes0"], ["position_ids"]),
             helper.make_node("Gather", ["wpe", "position_ids"], ["posemb"]),
             helper.make_node("Add", ["tok", "posemb"], ["h"]),
             helper.make_node("MatMul", ["h", "w"], ["y"])]
    consts = {"wte": rng.standard_normal((VOCAB, HID)).astype(np.float32),
              "wpe": rng.standard_normal((SEQ, HID)).astype(np.float32),
              "w": rng.standard_normal((HID, HID)).astype(np.float32),
              "zero": np.array(0, np.int64), "one": np.array(1, np.int64), "axes0": np.array([0], np.int64),
              "view": np.array([-1, SEQ], np.int64)}
    return _model(nodes, [("input_ids", I64, [1, SEQ])], [("y", F32, None)], consts)


def test_int64_input_ids_feed_the_embedding_and_position_ids_fold():
    m = _embedding_model()
    graph = import_onnx(m, allow_unknown=True)
    assert graph.tensor("input_ids").dtype == np.int64
    # Shape -> Gather -> Range -> Unsqueeze -> Gather(wpe) fold to the position embedding itself
    assert [n.op for n in graph.nodes] == ["Reshape", "Gather", "Add", "MatMul"] and graph.is_const("posemb")
    ids = rng.integers(0, VOCAB, (1, SEQ)).astype(np.int64)
    compiled, outputs, _ = _run(m, {"input_ids": ids})   # the Reshape of the ids: a free alias
    assert outputs["y"].dtype == np.float32
    assert compiled.inputs["input_ids"].dtype is DType.I32   # held as int32 on the NPU
    # the random inputs are ids within the vocabulary (the Gather's axis), as a tokenizer's are
    drawn = random_inputs(graph, seed=3)["input_ids"]
    assert drawn.dtype == np.int64 and 0 <= drawn.min() and drawn.max() < VOCAB
    _run(m)


def test_int64_inputs_outside_int32_are_refused_naming_the_input_and_value(tmp_path, capsys):
    m = _embedding_model()
    ids = np.zeros((1, SEQ), np.int64)
    ids[0, 3] = 2 ** 33
    with pytest.raises(ValueRangeError, match=r"^input 'input_ids' holds 8589934592, outside the NPU's i32 range "):
        run_model(m, ARCH, {"input_ids": ids}, cache=False)
    path, npz = tmp_path / "ids.onnx", tmp_path / "ids.npz"
    onnx.save(m, path)
    np.savez(npz, input_ids=ids)
    assert main(["run", str(path), "--arch", "mid32", "--inputs", str(npz), "--quiet", "--no-cache"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("npusim: error: input 'input_ids' holds 8589934592") and "\n" not in err


def test_a_bool_attention_mask_built_from_constants_folds():
    # causal mask the exporters' way: Trilu of ones -> Equal 0 -> Not -> Where(mask, scores, -inf) -> Softmax
    n = 6
    nodes = [helper.make_node("Trilu", ["ones"], ["tri"], upper=0),
             helper.make_node("Equal", ["tri", "zero"], ["masked"]),
             helper.make_node("Not", ["masked"], ["keep"]),
             helper.make_node("Where", ["keep", "x", "neg"], ["scores"]),
             helper.make_node("Softmax", ["scores"], ["y"], axis=-1)]
    consts = {"ones": np.ones((n, n), np.float32), "zero": np.array(0, np.float32),
              "neg": np.array(-np.inf, np.float32)}
    m = _model(nodes, [("x", F32, [1, 2, n, n])], [("y", F32, None)], consts)
    graph = import_onnx(m)
    assert [node.op for node in graph.nodes] == ["Where", "Softmax"]
    assert graph.tensor(graph.nodes[0].inputs[0]).dtype == np.bool_
    _run(m)


def _vit_cls_model(stale_dims: bool):
    """The torchvision ViT class-token concat as TorchScript writes it: the Expand target from ConstantOfShape,
    Mul, Equal and Where of constants, the patch tokens from Shape arithmetic and Reshape; with ``stale_dims`` the
    exporter's value infos give the intermediate tensors symbolic dims (``unk__2``) in this fully static model."""
    nodes = [helper.make_node("Conv", ["x", "wp"], ["patches"], kernel_shape=[4, 4], strides=[4, 4]),
             helper.make_node("Shape", ["patches"], ["ps"]),
             helper.make_node("Slice", ["ps", "s0", "s2", "s0"], ["nc"]),
             helper.make_node("Concat", ["nc", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["patches", "target"], ["flat"]),
             helper.make_node("Transpose", ["flat"], ["tokens"], perm=[0, 2, 1]),
             _const("c4", np.array([3], np.int64)),
             helper.make_node("ConstantOfShape", ["c4"], ["ones3"],
                              value=numpy_helper.from_array(np.array([1], np.int64))),
             _const("c5", np.array(-1, np.int64)),
             helper.make_node("Mul", ["ones3", "c5"], ["minus"]),
             _const("c3", np.array([1, -1, -1], np.int64)),
             helper.make_node("Equal", ["c3", "minus"], ["eq"]),
             helper.make_node("Where", ["eq", "ones3", "c3"], ["expand_to"]),
             helper.make_node("Expand", ["cls", "expand_to"], ["cls_tokens"]),
             helper.make_node("Concat", ["cls_tokens", "tokens"], ["seq"], axis=1),
             helper.make_node("MatMul", ["seq", "w"], ["y"])]
    consts = {"wp": rng.standard_normal((8, 3, 4, 4)).astype(np.float32),
              "cls": rng.standard_normal((1, 1, 8)).astype(np.float32),
              "w": rng.standard_normal((8, 8)).astype(np.float32), "s0": np.array([0], np.int64),
              "s2": np.array([2], np.int64), "minus1": np.array([-1], np.int64)}
    stale = [("cls_tokens", F32, [1, "unk__1", 8]), ("seq", F32, [1, "unk__2", 8]),
             ("flat", F32, ["unk__3", 8, "unk__4"])] if stale_dims else []
    out = [("y", F32, [1, "unk__5", 8] if stale_dims else None)]
    return _model(nodes, [("x", F32, [1, 3, 16, 16])], out, consts, value_info=stale)


@pytest.mark.parametrize("stale_dims", [False, True])
def test_shape_arithmetic_and_symbolic_dims_of_a_static_model_become_static(stale_dims):
    m = _vit_cls_model(stale_dims)
    graph = import_onnx(m)
    assert graph.tensor("seq").shape == (1, 17, 8) and graph.tensor("y").shape == (1, 17, 8)
    assert graph.is_const("cls_tokens") and graph.is_const("target")
    _run(m)


def test_a_truly_dynamic_model_still_names_the_dim_to_fix():
    m = _model([helper.make_node("Relu", ["x"], ["y"])], [("x", F32, ["batch", 4])], [("y", F32, None)])
    with pytest.raises(CompileError, match=r"tensor 'x' \(a graph input\) has symbolic dim 0 \('batch'\) in shape "
                                           r"\(batch, 4\); fix it with --dim batch=SIZE"):
        import_onnx(m)
    assert import_onnx(m, dims={"batch": 2}).tensor("y").shape == (2, 4)


A = rng.standard_normal((2, 3, 4)).astype(np.float32)
IDX = np.array([[0, 2], [1, 1]], np.int64)
FOLDED = {   # op -> (node's inputs as constants, attributes); its output is Cast to float and added to x
    "GreaterOrEqual": ([A, np.float32(0)], {}),
    "LessOrEqual": ([A, A[:1]], {}),
    "And": ([A > 0, A < 1], {}),
    "Or": ([A > 0, A < -1], {}),
    "Xor": ([A > 0, A > 0.5], {}),
    "IsNaN": ([np.where(A > 0, np.nan, A).astype(np.float32)], {}),
    "IsInf": ([np.where(A > 1, np.inf, A).astype(np.float32)], {}),
    "Sign": ([A], {}),
    "Round": ([A * 3], {}),
    "Exp": ([A], {}),
    "Sin": ([A], {}),
    "Mod": ([np.arange(24, dtype=np.int64).reshape(2, 3, 4), np.int64(5)], {}),
    "CumSum": ([A, np.int64(2)], {}),
    "Trilu": ([A], {"upper": 1}),
    "Softmax": ([A], {"axis": -1}),
    "ScatterND": ([np.zeros((2, 3, 4), np.float32), np.array([[0, 1], [1, 2]], np.int64),
                   np.ones((2, 4), np.float32)], {}),
    "GatherElements": ([A, np.zeros((2, 3, 4), np.int64)], {"axis": 1}),
    "Tile": ([A[:, :1], np.array([1, 3, 1], np.int64)], {}),
    "Pad": ([A[:, :, :2], np.array([0, 0, 1, 0, 0, 1], np.int64)], {}),
    "Clip": ([A, np.float32(-0.5), np.float32(0.5)], {}),
    "ArgMax": ([np.broadcast_to(A, (2, 3, 4)).copy(), ], {"axis": 2, "keepdims": 1}),
    "Einsum": ([A, np.ones((4, 4), np.float32)], {"equation": "bij,jk->bik"}),
    "OneHot": ([np.array([[0, 1, 2], [3, 0, 1]], np.int64), np.int64(4), np.array([0, 1], np.float32)], {}),
    "Conv": ([A[None], np.ones((3, 2, 1, 1), np.float32)], {}),
    "GatherND": ([A, IDX], {"batch_dims": 0}),
}


@pytest.mark.parametrize("op", sorted(FOLDED))
def test_a_constant_subgraph_of_any_op_folds(op):
    assert op not in FOLDERS   # the compiler has no numpy folder: onnx's reference evaluator computes it
    values, attrs = FOLDED[op]
    names = [f"c{k}" for k in range(len(values))]
    nodes = [helper.make_node(op, names, ["v"], **attrs),
             helper.make_node("Cast", ["v"], ["vf"], to=F32),
             helper.make_node("Add", ["x", "vf"], ["y"])]
    shape = list(ReferenceEvaluator(_model(nodes[:2], [], [("vf", F32, None)],
                                                          dict(zip(names, values)))).run(None, {})[0].shape)
    m = _model(nodes, [("x", F32, shape)], [("y", F32, None)], dict(zip(names, values)))
    graph = import_onnx(m)
    assert [n.op for n in graph.nodes] == ["Add"]
    _run(m)


def test_folding_that_fails_is_one_line_naming_the_node():
    nodes = [helper.make_node("ScatterND", ["data", "idx", "upd"], ["s"], name="bad_scatter"),
             helper.make_node("Add", ["x", "s"], ["y"])]
    m = _model(nodes, [("x", F32, [3])], [("y", F32, None)],
               {"data": np.ones(3, np.float32), "idx": np.array([[7]], np.int64), "upd": np.ones(1, np.float32)})
    with pytest.raises(CompileError, match=r"^node 'bad_scatter' \(ScatterND\): constant folding fails on its "
                                           r"constant inputs: [^\n]*7[^\n]* \(onnx.reference\); [^\n]* "
                                           r"\(onnxruntime\)$"):
        import_onnx(m)


def test_where_the_reference_evaluator_fails_onnxruntime_folds():
    # HF BERT's token types: GatherElements of a (1, 512) buffer by (1, seq) positions; onnx.reference's
    # GatherElements fails on an index axis shorter than the data's ("cannot reshape array of size 1")
    nodes = [helper.make_node("GatherElements", ["buffer", "positions"], ["types"], axis=1),
             helper.make_node("Gather", ["emb", "types"], ["te"]),
             helper.make_node("Add", ["x", "te"], ["y"])]
    m = _model(nodes, [("x", F32, [1, SEQ, HID])], [("y", F32, None)],
               {"buffer": np.arange(64, dtype=np.int64)[None] % 2, "positions": np.arange(SEQ, dtype=np.int64)[None],
                "emb": rng.standard_normal((2, HID)).astype(np.float32)}, opset=20)
    one_node = _model(nodes[:1], [], [("types", I64, None)], {"buffer": np.arange(64, dtype=np.int64)[None] % 2,
                                                              "positions": np.arange(SEQ, dtype=np.int64)[None]},
                      opset=20)
    with pytest.raises(ValueError):   # the premise: onnx.reference alone cannot fold it
        ReferenceEvaluator(one_node).run(None, {})
    graph = import_onnx(m)
    assert [n.op for n in graph.nodes] == ["Add"]
    _run(m)


def test_int64_and_bool_outputs_come_back_in_the_models_dtype():
    nodes = [helper.make_node("ArgMax", ["x"], ["idx"], axis=1, keepdims=0),
             helper.make_node("Mod", ["idx", "three"], ["idx_mod"]),
             helper.make_node("Greater", ["x", "zero"], ["pos"])]
    m = _model(nodes, [("x", F32, [3, 5])], [("idx_mod", I64, None), ("pos", BOOL, None)],
               {"three": np.array(3, np.int64), "zero": np.array(0, np.float32)})
    _, outputs, _ = _run(m, host={"Mod"})   # ArgMax and Greater on the NPU; int64 Mod on the host
    assert outputs["idx_mod"].dtype == np.int64 and outputs["pos"].dtype == np.bool_


def test_a_float64_model_runs_in_float32_on_the_npu_with_a_note():
    nodes = [helper.make_node("Mul", ["x", "s"], ["xs"]), helper.make_node("Relu", ["xs"], ["y"])]
    m = _model(nodes, [("x", TensorProto.DOUBLE, [4, 8])], [("y", TensorProto.DOUBLE, None)],
               {"s": np.array(0.5, np.float64)})
    compiled, outputs, report = _run(m)
    assert outputs["y"].dtype == np.float64 and compiled.narrowed == ("x", "y")   # (the Relu fused into the Mul)
    assert report["notes"] == ["float64 computed in float32 on the NPU (narrowed; outputs widened back to "
                               "float64): 'x', 'y'"]
