"""CumSum and Trilu on the NPU against onnxruntime, bit for bit: CumSum on every axis position, negative axes,
exclusive and reverse, float32 and int32; Trilu upper and lower with k on either side of the diagonal (beyond it
too), square and wide and tall matrices, batched, NaN and inf among what it clears."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from isa.arch import load_arch
from isa.races import find_races
from npusim.app.driver import run_model
from tests.compiler.util import model, ort_run, vi

RNG = np.random.default_rng(21)


def _run(m, feeds: dict, preset: str = "mid32") -> dict:
    compiled, _, outputs, report = run_model(m, load_arch(preset), feeds)
    assert report["host_ops"] == [], report["host_ops"]
    assert find_races(compiled.program) == []
    names = [o.name for o in m.graph.output]
    for name, ref in zip(names, ort_run(m, feeds)):
        assert outputs[name].dtype == ref.dtype, name
        np.testing.assert_array_equal(outputs[name], ref, err_msg=name)
    return {lr.op for lr in compiled.layers}


CUMSUM = [((9,), 0), ((4, 33), 1), ((4, 33), -2), ((2, 5, 6, 7), 2), ((1, 300, 5), 1), ((3, 2, 4000), -1),
          ((1, 2, 128, 128), 1)]


@pytest.mark.parametrize("shape, axis", CUMSUM, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_cumsum_matches_onnxruntime(shape, axis, dtype):
    elem = TensorProto.FLOAT if dtype == np.float32 else TensorProto.INT32
    nodes = [helper.make_node("CumSum", ["x", "axis"], [f"y{e}{r}"], exclusive=e, reverse=r)
             for e in (0, 1) for r in (0, 1)]
    outs = [vi(f"y{e}{r}", None, elem) for e in (0, 1) for r in (0, 1)]
    m = model(nodes, [vi("x", list(shape), elem)], outs, 17, [numpy_helper.from_array(np.array(axis, np.int64),
                                                                                      "axis")])
    x = (RNG.standard_normal(shape) * 50).astype(dtype)
    assert _run(m, {"x": x}) == {"CumSum"}


@pytest.mark.parametrize("shape", [(6, 6), (3, 5, 9), (2, 2, 9, 4), (1, 40, 300)], ids=str)
def test_trilu_matches_onnxruntime(shape):
    rows, cols = shape[-2:]
    ks = sorted({0, 1, -1, cols - 1, -(rows + 2), cols + 3})
    nodes, outs, inits = [], [], []
    for j, k in enumerate(ks):
        inits.append(numpy_helper.from_array(np.array(k, np.int64), f"k{j}"))
        for upper in (0, 1):
            nodes.append(helper.make_node("Trilu", ["x", f"k{j}"], [f"y{j}_{upper}"], upper=upper))
            outs.append(vi(f"y{j}_{upper}", None))
    nodes.append(helper.make_node("Trilu", ["x"], ["y_default"]))   # k absent: 0, upper
    m = model(nodes, [vi("x", list(shape))], outs + [vi("y_default", None)], 17, inits)
    x = RNG.standard_normal(shape).astype(np.float32)
    x.reshape(-1)[::7] = np.nan
    x.reshape(-1)[3::11] = -np.inf
    assert _run(m, {"x": x}) == {"Trilu"}
