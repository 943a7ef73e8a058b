"""The ONNX-graph fuzz surface: small valid models (built with ``onnx.helper`` at realistic opsets) mutated in their
structure, attributes, initializers, types and opsets.

A case's data is the serialized model (bytes). Whether it is bad is decided when it runs, by onnxruntime: a model
onnxruntime refuses (at session creation or when it runs on random inputs) must be refused by npusim with its own
error; a model onnxruntime runs must either be refused or compile, simulate and give onnxruntime's outputs (and the
same cycles timing-only).
"""

from __future__ import annotations

import functools

import numpy as np
from hypothesis import strategies as st

MUTATIONS = ("structure", "attribute", "initializer", "type", "opset")


def _model(nodes, inputs, outputs, inits=(), opset: int = 17):
    from onnx import helper

    g = helper.make_graph(nodes, "fuzz", inputs, outputs, list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


@functools.cache
def seed_models() -> tuple[bytes, ...]:
    """Serialized small valid models (each compiles, simulates and validates in well under a second)."""
    from onnx import TensorProto as T
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(0)

    def init(name: str, shape, dtype=np.float32, scale: float = 0.5):
        a = rng.standard_normal(shape) * scale if np.dtype(dtype).kind == "f" else rng.integers(-3, 4, shape)
        return numpy_helper.from_array(np.asarray(a).astype(dtype), name)

    vi = helper.make_tensor_value_info
    x4 = vi("x", T.FLOAT, [1, 4, 8, 8])
    x2 = vi("x", T.FLOAT, [4, 16])
    y = vi("y", T.FLOAT, None)
    models = [
        _model([helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1], strides=[1, 1]),
                helper.make_node("Relu", ["c"], ["r"], name="relu"),
                helper.make_node("Add", ["r", "z"], ["y"], name="add")],
               [x4, vi("z", T.FLOAT, [1, 8, 8, 8])], [y], [init("w", (8, 4, 3, 3)), init("b", (8,))], 13),
        _model([helper.make_node("Gemm", ["x", "w", "b"], ["g"], name="gemm", transB=1, alpha=1.0),
                helper.make_node("Softmax", ["g"], ["y"], name="softmax", axis=-1)],
               [x2], [y], [init("w", (8, 16)), init("b", (8,))], 17),
        _model([helper.make_node("BatchNormalization", ["x", "s", "bb", "m", "v"], ["n"], name="bn", epsilon=1e-5),
                helper.make_node("MaxPool", ["n"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
                helper.make_node("GlobalAveragePool", ["p"], ["q"], name="gap"),
                helper.make_node("Flatten", ["q"], ["y"], name="flatten", axis=1)],
               [x4], [y], [init("s", (4,)), init("bb", (4,)), init("m", (4,)),
                           numpy_helper.from_array(np.abs(rng.standard_normal(4)).astype(np.float32) + 0.5, "v")], 15),
        _model([helper.make_node("LayerNormalization", ["x", "s", "b"], ["n"], name="ln", axis=-1, epsilon=1e-5),
                helper.make_node("MatMul", ["n", "w"], ["m"], name="matmul"),
                helper.make_node("Reshape", ["m", "shape"], ["r"], name="reshape"),
                helper.make_node("Transpose", ["r"], ["y"], name="transpose", perm=[1, 0, 2])],
               [x2], [y], [init("s", (16,)), init("b", (16,)), init("w", (16, 8)),
                           numpy_helper.from_array(np.array([4, 2, 4], np.int64), "shape")], 17),
        _model([helper.make_node("PRelu", ["x", "slope"], ["a"], name="prelu"),
                helper.make_node("Clip", ["a", "lo", "hi"], ["b"], name="clip"),
                helper.make_node("Mul", ["b", "k"], ["c"], name="mul"),
                helper.make_node("ReduceMean", ["c"], ["y"], name="mean", axes=[2, 3], keepdims=1)],
               [x4], [y], [init("slope", (4, 1, 1)), numpy_helper.from_array(np.array(-1.0, np.float32), "lo"),
                           numpy_helper.from_array(np.array(1.5, np.float32), "hi"), init("k", (1, 4, 1, 1))], 13),
        _model([helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["q"], name="quant"),
                helper.make_node("QLinearConv", ["q", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["qc"],
                                 name="qconv", pads=[1, 1, 1, 1]),
                helper.make_node("DequantizeLinear", ["qc", "ys", "yz"], ["y"], name="dequant")],
               [x4], [y], [numpy_helper.from_array(np.array(0.05, np.float32), "xs"),
                           numpy_helper.from_array(np.array(0, np.int8), "xz"), init("w", (8, 4, 3, 3), np.int8),
                           numpy_helper.from_array(np.array(0.02, np.float32), "ws"),
                           numpy_helper.from_array(np.array(0, np.int8), "wz"),
                           numpy_helper.from_array(np.array(0.1, np.float32), "ys"),
                           numpy_helper.from_array(np.array(0, np.int8), "yz"), init("b", (8,), np.int32)], 13),
    ]
    return tuple(m.SerializeToString() for m in models)


OPS = ("Relu", "Add", "Mul", "Conv", "Gemm", "MatMul", "Softmax", "Sigmoid", "Transpose", "Reshape", "Concat",
       "BatchNormalization", "MaxPool", "Identity", "Sin", "NonZero", "Foo", "If")
ATTR_VALUES = (0, -1, 1, 2, 3, 7, 2**31, -(2**40), 1.5, -0.0, float("nan"), "same", b"\xff", (), (0,), (1, 1),
               (1, 1, 1, 1), (-1, 0), (3, 3, 3), (2**40, 1), (1.5, 2.5), ("a", "b"))
ATTR_NAMES = ("pads", "strides", "dilations", "group", "kernel_shape", "axis", "axes", "perm", "alpha", "beta",
              "transA", "transB", "epsilon", "keepdims", "auto_pad", "ceil_mode", "mode", "bogus")
DTYPES = ("FLOAT", "DOUBLE", "FLOAT16", "INT8", "UINT8", "INT32", "INT64", "BOOL", "STRING", "BFLOAT16",
          "UNDEFINED")
OPSETS = (1, 6, 7, 9, 10, 11, 12, 13, 14, 15, 17, 18, 19, 21, 22, 23, 24, 99, 0, -1)


def _mutate(draw, m) -> str:
    """Apply one mutation of a drawn kind to ModelProto ``m`` in place; returns what was done."""
    from onnx import TensorProto, helper, numpy_helper

    g = m.graph
    kind = draw(st.sampled_from(MUTATIONS))
    pick = lambda seq: seq[draw(st.integers(0, len(seq) - 1))]   # noqa: E731
    if kind == "structure":
        what = draw(st.sampled_from(("drop", "swap", "rewire", "dangling", "dup_node", "dup_name", "op", "domain",
                                     "no_outputs", "extra_output", "drop_input", "self_loop")))
        nodes = list(g.node)
        if not nodes:
            return "structure: empty"
        n = pick(nodes)
        if what == "drop":
            g.node.remove(n)
        elif what == "swap" and len(nodes) > 1:
            i, j = draw(st.integers(0, len(nodes) - 1)), draw(st.integers(0, len(nodes) - 1))
            nodes[i], nodes[j] = nodes[j], nodes[i]
            del g.node[:]
            g.node.extend(nodes)
        elif what == "rewire" and n.input:
            names = [i.name for i in g.input] + [o for k in g.node for o in k.output] + [i.name for i in g.initializer]
            n.input[draw(st.integers(0, len(n.input) - 1))] = pick(names)
        elif what == "dangling" and n.input:
            n.input[draw(st.integers(0, len(n.input) - 1))] = "nowhere"
        elif what == "dup_node":
            g.node.append(n)
        elif what == "dup_name" and len(nodes) > 1:
            pick(nodes).name = nodes[0].name
        elif what == "op":
            n.op_type = draw(st.sampled_from(OPS))
        elif what == "domain":
            n.domain = draw(st.sampled_from(("com.microsoft", "ai.onnx.ml", "bogus")))
        elif what == "no_outputs":
            del g.output[:]
        elif what == "extra_output":
            g.output.append(helper.make_tensor_value_info(pick([o for k in g.node for o in k.output]),
                                                          TensorProto.FLOAT, None))
        elif what == "drop_input" and len(n.input) > 1:
            del n.input[-1]
        elif what == "self_loop" and n.input and n.output:
            n.input[0] = n.output[0]
        return f"structure: {what} {n.name}"
    if kind == "attribute":
        n = pick(list(g.node)) if len(g.node) else None
        if n is None:
            return "attribute: no node"
        name = draw(st.sampled_from([a.name for a in n.attribute] + list(ATTR_NAMES)))
        keep = [a for a in n.attribute if a.name != name]
        del n.attribute[:]
        n.attribute.extend(keep)
        if draw(st.integers(0, 4)):        # else: the attribute removed
            value = draw(st.sampled_from(ATTR_VALUES))
            try:
                n.attribute.append(helper.make_attribute(name, list(value) if isinstance(value, tuple) and value
                                                         else value))
            except (ValueError, TypeError):
                n.attribute.append(helper.make_attribute(name, 1))
        return f"attribute: {n.name}.{name}"
    if kind == "initializer":
        if not g.initializer:
            return "initializer: none"
        t = pick(list(g.initializer))
        if t.data_location == TensorProto.EXTERNAL:
            return f"initializer: {t.name} external already"
        a = numpy_helper.to_array(t)
        what = draw(st.sampled_from(("shape", "shape", "rank", "dtype", "scalar", "empty", "drop", "values",
                                     "external")))
        if what == "shape":
            shape = list(a.shape) or [1]
            k = draw(st.integers(0, len(shape) - 1))
            shape[k] = draw(st.sampled_from((1, 2, 3, 5, shape[k] + 1, max(1, shape[k] - 1), shape[k] * 2)))
            b = np.resize(a, shape)
        elif what == "rank":
            b = a.reshape((1,) + a.shape) if draw(st.booleans()) else a.reshape(-1)
        elif what == "dtype":
            b = a.astype(draw(st.sampled_from((np.float64, np.float16, np.int64, np.int32, np.int8, np.uint8,
                                               np.bool_))))
        elif what == "scalar":
            b = np.asarray(a.reshape(-1)[:1].reshape(()) if a.size else np.zeros((), a.dtype))
        elif what == "empty":
            b = a.reshape(-1)[:0]
        elif what == "drop":
            g.initializer.remove(t)
            return f"initializer: drop {t.name}"
        elif what == "values":
            b = a.astype(np.float64) * draw(st.sampled_from((0, -1, 1000, 1e-3)))
            if a.dtype.kind in "iu":
                b = np.clip(np.rint(b), np.iinfo(a.dtype).min, np.iinfo(a.dtype).max)
            b = b.astype(a.dtype)
        else:                               # data said to be in a file that is not there
            t.ClearField("raw_data")
            for f in ("float_data", "int32_data", "int64_data", "double_data"):
                t.ClearField(f)
            t.data_location = TensorProto.EXTERNAL
            e = t.external_data.add()
            e.key, e.value = "location", "missing.bin"
            return f"initializer: external {t.name}"
        t.CopyFrom(numpy_helper.from_array(np.ascontiguousarray(b), t.name))
        return f"initializer: {what} {t.name} {a.shape}->{b.shape} {b.dtype}"
    if kind == "type":
        vis = list(g.input) + list(g.output)
        v = pick(vis)
        tt = v.type.tensor_type
        what = draw(st.sampled_from(("dtype", "dim", "symbolic", "rank", "no_shape")))
        if what == "dtype":
            tt.elem_type = getattr(TensorProto, draw(st.sampled_from(DTYPES)))
        elif what == "dim" and tt.HasField("shape") and tt.shape.dim:
            d = tt.shape.dim[draw(st.integers(0, len(tt.shape.dim) - 1))]
            d.dim_value = draw(st.sampled_from((0, 1, 2, 3, 7, 9, 16, 33)))
        elif what == "symbolic" and tt.HasField("shape") and tt.shape.dim:
            tt.shape.dim[draw(st.integers(0, len(tt.shape.dim) - 1))].dim_param = draw(st.sampled_from(("N", "")))
        elif what == "rank" and tt.HasField("shape"):
            tt.shape.dim.add().dim_value = 1
        elif what == "no_shape":
            tt.ClearField("shape")
        return f"type: {what} {v.name}"
    what = draw(st.sampled_from(("version", "version", "ir", "extra", "none")))
    if what == "version" and m.opset_import:
        m.opset_import[0].version = draw(st.sampled_from(OPSETS))
    elif what == "ir":
        m.ir_version = draw(st.sampled_from((1, 3, 4, 7, 8, 9, 10, 11, 99)))
    elif what in ("extra", "version"):
        m.opset_import.append(helper.make_opsetid(draw(st.sampled_from(("com.microsoft", "ai.onnx.ml", ""))), 1))
    else:
        del m.opset_import[:]
    return f"opset: {what} {[(o.domain, o.version) for o in m.opset_import]} ir {m.ir_version}"


@st.composite
def onnx_cases(draw):
    """A seed model with 0-3 mutations, serialized (a :class:`~tests.fuzz.cases.Case`)."""
    import onnx

    from .cases import Case  # (cases.py lists this strategy with the others)

    m = onnx.ModelProto()
    m.ParseFromString(draw(st.sampled_from(seed_models())))
    done = [_mutate(draw, m) for _ in range(draw(st.sampled_from((0, 1, 1, 1, 2, 2, 3))))]
    return Case("onnx", "model", m.SerializeToString(), None, "; ".join(done) or "seed")
