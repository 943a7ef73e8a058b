"""Run inputs are checked before anything runs: a program's by DRAM region (name, numeric dtype, size), a model's by
input (name, shape, dtype exactly); .npy holds the one input of a one-input program or model."""

import numpy as np
import pytest

from compiler.frontend.builder import GraphBuilder
from isa import InputError
from isa.arch import load_arch
from isa.asm import parse_program
from npusim import simulate
from npusim.app.driver import run_model
from npusim.sim.inputs import load_file
from tests.fuzz.fixtures import EXAMPLES, gemm_inputs, tiny_graph, tiny_inputs

EDGE = load_arch("edge16")
GEMM = parse_program((EXAMPLES / "gemm_int8.s").read_text())


@pytest.mark.parametrize("inputs,message", [
    ({"Q": np.zeros(4, np.int8)}, "input 'Q' names no DRAM region; the program declares A, B, C"),
    ({"A": np.array(["a", "b"])}, "input 'A' must hold numbers (bool, int, uint or float), not <U1 (text)"),
    ({"A": np.array([1, "b", None], dtype=object)}, "input 'A' must hold numbers (bool, int, uint or float), not "
                                                    "object (objects)"),
    ({"A": np.zeros(3, np.complex64)}, "input 'A' must hold numbers (bool, int, uint or float), not complex64 "
                                       "(complex numbers)"),
    ({"A": np.zeros((96, 112), np.float32)}, "input 'A' has 43,008 bytes but region A holds 10,752"),
    ({"A": [[1, 2], [3]]}, "input 'A' must be an array of numbers, not list"),
    (np.zeros(4, np.int8), "one unnamed input array needs a program with exactly one input, not 3 (A, B, C): pass "
                           "them by name (a dict, or an .npz: numpy.savez(path, A=..., B=..., C=...))"),
])
@pytest.mark.parametrize("timing_only", [False, True])
def test_bad_program_inputs_are_refused_even_timing_only(inputs, message, timing_only):
    with pytest.raises(InputError) as e:
        simulate(GEMM, EDGE, inputs, timing_only=timing_only)
    assert str(e.value).startswith(message)


def test_good_program_inputs_run_and_foreign_byte_order_is_converted():
    want = simulate(GEMM, EDGE, gemm_inputs())
    a = gemm_inputs()["A"].astype(">i1")        # single bytes: byte order does not matter, but big-endian i4 does
    got = simulate(GEMM, EDGE, {"A": a, "B": gemm_inputs()["B"]})
    assert (got.outputs["C"] == want.outputs["C"]).all()
    one = parse_program(".config rows=16 cols=16 spm=262144 acc=65536\n.region X r0 64\n"
                        "dma.ld shape[16] dst=spm:0x0<i32>{4} src=dram:X+0x0<i32>{4}\n"
                        "dma.st shape[16] dst=dram:X+0x0<i32>{4} src=spm:0x0<i32>{4}\n")
    x = np.arange(16, dtype=">i4")
    res = simulate(one, EDGE, x)                # one region: a bare array fills it, in native byte order
    assert (res.outputs["X"].view(np.int32) == np.arange(16)).all()


GRAPH = tiny_graph()


@pytest.mark.parametrize("change,message", [
    # the fuzzer's ValueError "axes don't match array" (a wrong shape reached the compiled layout code)
    (lambda d: d | {"x": d["x"][0]}, "input 'x' must be float32 of shape (1, 4, 8, 8), not float32 of shape "
                                     "(4, 8, 8)"),
    # a wrong dtype used to run (exit 0) on values converted silently
    (lambda d: d | {"x": d["x"].astype(np.float64)}, "input 'x' must be float32 of shape (1, 4, 8, 8), not "
                                                     "float64 of shape (1, 4, 8, 8) (convert with "
                                                     ".astype(numpy.float32))"),
    (lambda d: d | {"x": d["x"].astype(object)}, "input 'x' must hold numbers (bool, int, uint or float), not object"),
    (lambda d: d | {"w": d["x"]}, "input 'w' is not an input of the model; its inputs are x, z"),
    (lambda d: {"x": d["x"]}, "inputs lack z; the model's inputs are x, z"),
    (lambda d: d["x"], "one unnamed input array needs a model with exactly one input, not 2 (x, z)"),
])
@pytest.mark.parametrize("timing_only", [False, True])
def test_bad_model_inputs_are_refused_before_compiling(change, message, timing_only):
    with pytest.raises(InputError) as e:
        run_model(GRAPH, EDGE, change(tiny_inputs()), timing_only=timing_only)
    assert str(e.value).startswith(message)


def test_a_one_input_model_takes_a_bare_array():
    b = GraphBuilder("one")
    x = b.input("x", (2, 16), np.float32)
    b.output(b.relu(x))
    g = b.build()
    arr = np.linspace(-1, 1, 32, dtype=np.float32).reshape(2, 16)
    _, _, outputs, report = run_model(g, EDGE, arr, validate=True)
    assert all(v["ok"] for v in report["validation"].values())
    assert (next(iter(outputs.values())) == np.maximum(arr, 0)).all()


def test_files(tmp_path):
    np.savez(tmp_path / "ok.npz", A=np.zeros(3, np.int8))
    np.save(tmp_path / "one.npy", np.ones(2, np.float32))
    np.savez(tmp_path / "obj.npz", A=np.array([None], dtype=object))
    (tmp_path / "bad.npz").write_bytes(b"PK\x03\x04" + bytes(60))
    (tmp_path / "text.npz").write_text("A = 1\n")
    assert list(load_file(tmp_path / "ok.npz")) == ["A"]
    assert (load_file(tmp_path / "one.npy") == 1).all()
    for name in ("obj.npz", "bad.npz", "text.npz"):
        with pytest.raises(InputError, match=rf"^cannot read inputs {tmp_path / name}: not an \.npz or \.npy of "
                                             r"numeric arrays \("):
            load_file(tmp_path / name)
    with pytest.raises(InputError, match=r"^cannot read inputs .*missing\.npz: No such file or directory$"):
        load_file(tmp_path / "missing.npz")
