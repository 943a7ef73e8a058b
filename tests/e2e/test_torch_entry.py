"""npusim.from_torch: the first exporter that works writes the model (dynamo, then TorchScript), the report says which
and why the others failed, and the model is compiled and run on the example inputs. The exporter choice is tested
with fake exporters (no torch needed); the tests at the end use torch's own exporters and are skipped without torch.
"""

import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from compiler.frontend.builder import GraphBuilder, to_onnx
from npusim.app.torch_entry import (
    DYNAMO,
    EXPORTERS,
    TORCHSCRIPT,
    Exported,
    ExportError,
    export_first,
    from_torch,
    input_names,
)

ROOT = Path(__file__).resolve().parents[2]
W = np.random.default_rng(3).standard_normal((4, 3, 3, 3)).astype(np.float32)


def _model(inputs=("x",)) -> onnx.ModelProto:
    """What an exporter of ``relu(conv(x, W))`` (plus each other input) writes."""
    b = GraphBuilder("exported")
    xs = [b.input(name, (1, 3, 8, 8)) for name in inputs]
    y = b.relu(b.conv(xs[0], W, pads=1, name="conv"), name="relu")
    for other in xs[1:]:
        y = b.add(y, b.conv(other, W, pads=1), name=f"add_{other}")
    b.output(y)
    return to_onnx(b.build())


def _fake(fail: dict[str, Exception], model: onnx.ModelProto | None = None, calls: list | None = None):
    """An export function: the exporters named in ``fail`` raise their exception, the others write ``model`` with
    its weights in a data file beside it (as the dynamo exporter does)."""
    def export(path: Path, exporter) -> None:
        if calls is not None:
            calls.append(exporter.name)
        if exporter.name in fail:
            raise fail[exporter.name]
        onnx.save(model or _model(), str(path), save_as_external_data=True, location=path.name + ".data",
                  size_threshold=0)
    return export


def test_dynamo_is_tried_first_and_nothing_else_when_it_works(tmp_path):
    calls = []
    exported = export_first(_fake({}, calls=calls), tmp_path)
    assert calls == ["dynamo"] and EXPORTERS == (DYNAMO, TORCHSCRIPT) and (DYNAMO.opset, TORCHSCRIPT.opset) == (20, 17)
    assert exported.exporter is DYNAMO and exported.failures == () and exported.path.exists()
    assert exported.note == "exported by the dynamo exporter (opset 20)"
    assert exported.inputs == ("x",) and exported.nodes == len(onnx.load(str(exported.path)).graph.node) == 2


def test_torchscript_exports_when_dynamo_fails_and_the_note_says_why(tmp_path):
    why = RuntimeError("Failed to export the model with torch.export.\nline two of the dump\n")
    exported = export_first(_fake({"dynamo": why}), tmp_path)
    assert exported.exporter is TORCHSCRIPT and exported.path == tmp_path / "torchscript" / "model.onnx"
    assert exported.note == ("exported by the torchscript exporter (opset 17); the dynamo exporter failed: "
                             "RuntimeError: Failed to export the model with torch.export.")
    assert exported.to_dict()["failures"] == [{"exporter": "dynamo", "reason": "RuntimeError: Failed to export the "
                                                                               "model with torch.export."}]


def test_a_file_onnx_cannot_read_counts_as_a_failed_export(tmp_path):
    def export(path: Path, exporter) -> None:
        path.write_bytes(b"\xff\xfenot a model") if exporter is DYNAMO else onnx.save(_model(), str(path))

    exported = export_first(export, tmp_path)
    assert exported.exporter is TORCHSCRIPT and exported.failures[0][0] == "dynamo"


def test_no_exporter_working_is_one_error_with_every_reason(tmp_path):
    class UnsupportedOperatorError(Exception):
        pass

    fail = {"dynamo": RuntimeError("torch.export cannot trace data-dependent control flow"),
            "torchscript": UnsupportedOperatorError("Exporting the operator 'aten::affine_grid_generator' to ONNX "
                                                    "opset version 17 is not supported.\n(graph dump)")}
    with pytest.raises(ExportError) as e:
        export_first(_fake(fail), tmp_path)
    assert str(e.value) == ("torch.onnx.export could not export the module: the dynamo exporter failed: RuntimeError: "
                            "torch.export cannot trace data-dependent control flow; the torchscript exporter failed: "
                            "UnsupportedOperatorError: Exporting the operator 'aten::affine_grid_generator' to ONNX "
                            "opset version 17 is not supported.")


def test_from_torch_compiles_and_runs_what_the_exporter_wrote(tmp_path):
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)
    run = from_torch(None, x, "edge16", names=["x"], onnx_path=tmp_path / "m.onnx", validate=True,
                     export=_fake({"dynamo": RuntimeError("no")}))
    assert isinstance(run.exported, Exported) and run.exported.exporter is TORCHSCRIPT
    assert run.report["exporter"] == {"name": "torchscript", "opset": 17, "path": str(tmp_path / "m.onnx"),
                                      "failures": [{"exporter": "dynamo", "reason": "RuntimeError: no"}]}
    assert (tmp_path / "m.onnx.data").exists() and run.result.cycles > 0
    assert run.report["validation"]["relu"]["ok"] and not run.report["host_ops"]
    want = np.maximum(_conv(x), 0)
    assert np.allclose(run.outputs["relu"], want, rtol=1e-4, atol=1e-5)


def _conv(x: np.ndarray) -> np.ndarray:
    """relu's input: the 3x3 convolution of x (pads 1) with W, in numpy."""
    p = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(p, (3, 3), axis=(2, 3))   # 1, 3, 8, 8, 3, 3
    return np.einsum("nchwrs,kcrs->nkhw", win, W)


def test_inputs_are_named_after_the_forward_and_an_unused_one_is_left_out(tmp_path):
    class Module:
        def forward(self, x, mask, scale=1.0):
            raise AssertionError("the fake exporter does not call it")

    assert input_names(Module(), 2) == ["x", "mask"] and input_names(Module(), 4) == [f"input_{i}" for i in range(4)]
    assert input_names(object(), 1) == ["input_0"]
    x, mask = np.ones((1, 3, 8, 8), np.float32), np.zeros((1, 3, 8, 8), np.float32)
    run = from_torch(Module(), (x, mask), "edge16", export=_fake({}))   # the model takes x only
    assert list(run.outputs) == ["relu"] and run.exported.exporter is DYNAMO
    with pytest.raises(Exception, match=r"^the exported model takes input 'y', which is none of the example inputs "
                                        r"\(x, mask\); pass names=\[...\] to name them as the model does$"):
        from_torch(Module(), (x, mask), "edge16", export=_fake({}, _model(("x", "y"))))
    with pytest.raises(Exception, match=r"^names gives 1 input names for 2 example inputs$"):
        from_torch(Module(), (x, mask), "edge16", names=["x"], export=_fake({}))


def test_import_npusim_loads_neither_the_compiler_nor_torch_until_from_torch_is_used():
    code = ("import sys, npusim; before = {'compiler', 'torch'} & set(sys.modules); f = npusim.from_torch; "
            "print(sorted(before), f.__module__, 'compiler' in sys.modules, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert out.stdout.split() == ["[]", "npusim.app.torch_entry", "True", "False"], out.stderr


# -- with torch ----------------------------------------------------------------------------------------------------

def test_a_torch_module_is_exported_by_dynamo_and_matches_torch(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnxscript")
    module = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.Flatten(),
                                 torch.nn.Linear(8 * 8 * 8, 10))
    module.train()
    x = torch.randn(1, 3, 8, 8)
    run = from_torch(module, (x,), "mid32", onnx_path=tmp_path / "m.onnx", validate=True)
    assert run.exported.exporter is DYNAMO and (tmp_path / "m.onnx").exists() and module.training
    (out,) = run.outputs.values()
    with torch.no_grad():
        want = module.eval()(x).numpy()
    assert np.allclose(out, want, rtol=1e-3, atol=1e-4) and all(v["ok"] for v in run.report["validation"].values())


def test_affine_grid_needs_dynamo_and_the_torchscript_failure_says_so():
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnxscript")
    import torch.nn.functional as F

    class Warp(torch.nn.Module):
        def forward(self, x, theta):
            return F.grid_sample(x, F.affine_grid(theta, list(x.shape), align_corners=False), align_corners=False)

    x, theta = torch.randn(1, 2, 8, 8), torch.tensor([[[0.9, 0.1, 0.05], [-0.1, 0.8, 0.0]]])
    run = from_torch(Warp(), (x, theta), "mid32", exporters=(TORCHSCRIPT, DYNAMO), validate=True)
    assert run.exported.exporter is DYNAMO and run.exported.failures[0][0] == "torchscript"
    assert "aten::affine_grid_generator" in run.exported.failures[0][1]
    assert all(v["ok"] for v in run.report["validation"].values())


def test_the_readme_example_runs():
    """README's PyTorch block (a ```py block: the suite's README test runs only ```python ones, which need no
    torch)."""
    pytest.importorskip("torchvision")
    pytest.importorskip("onnxscript")
    import re

    (block,) = re.findall(r"```py\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    exec(compile(block, "README.md", "exec"), {})
