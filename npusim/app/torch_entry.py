"""``npusim.from_torch``: a PyTorch module exported to ONNX by the exporter that works for it, compiled and run.

torch is an optional extra (``pip install npusim[torch]``) and is imported only inside :func:`torch_exporters`: the
rest of npusim, and this module's exporter choice (:func:`export_first`), never need it.

The exporters, in the order tried (:data:`EXPORTERS`): the dynamo exporter (``torch.onnx.export(..., dynamo=True)``,
opset 20, weights in a ``.onnx.data`` file beside the model; it exports ``aten::affine_grid_generator``, which the
TorchScript exporter cannot at opset 17), then the TorchScript exporter (``dynamo=False``, opset 17; it exports some
modules ``torch.export`` cannot trace). The run's report says which one exported the module and why those before it
failed.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import tempfile
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from compiler.compile import CompiledModel
from isa import NpuSimError
from isa.arch import Arch, load_arch
from npusim.app.driver import run_model
from npusim.sim.simulator import SimResult


@dataclass(frozen=True)
class Exporter:
    """One of torch's ONNX exporters: its ``name`` and the ``opset`` it exports at."""

    name: str
    opset: int


DYNAMO = Exporter("dynamo", 20)
TORCHSCRIPT = Exporter("torchscript", 17)
EXPORTERS = (DYNAMO, TORCHSCRIPT)
"""The order :func:`from_torch` tries them in."""


class ExportError(NpuSimError):
    """No exporter could export the module; the message gives each one's reason."""


@dataclass(frozen=True)
class Exported:
    """An ONNX file written by one exporter: its ``path``, the ``exporter`` that wrote it, the one-line reason of each
    exporter tried before it (``failures``: (name, reason)), and what the file holds as read when it was checked: the
    graph's run-time ``inputs`` (those not initializers, in order) and its number of ``nodes``."""

    path: Path
    exporter: Exporter
    failures: tuple[tuple[str, str], ...] = ()
    inputs: tuple[str, ...] = ()
    nodes: int = 0

    @property
    def note(self) -> str:
        """Which exporter wrote the model, and why the ones before it did not."""
        said = f"exported by the {self.exporter.name} exporter (opset {self.exporter.opset})"
        return said + "".join(f"; the {name} exporter failed: {why}" for name, why in self.failures)

    def to_dict(self) -> dict:
        return {"name": self.exporter.name, "opset": self.exporter.opset, "path": str(self.path),
                "failures": [{"exporter": name, "reason": why} for name, why in self.failures]}


ExportFn = Callable[[Path, Exporter], None]
"""Writes the module's ONNX model to a path with an exporter (raises whatever the exporter raises)."""


def first_line(e: BaseException) -> str:
    """``Type: first line of the message`` (torch's export errors run to pages of graph dump)."""
    text = next((line.strip() for line in str(e).splitlines() if line.strip()), "")
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def export_first(export: ExportFn, directory: Path, exporters: Sequence[Exporter] = EXPORTERS,
                 path: Path | None = None) -> Exported:
    """Export with each exporter in turn until one writes a model that onnx can load: an :class:`Exported` that
    names it and the reasons of those that failed. Each writes ``directory/<name>/model.onnx`` (its data file
    beside it), or ``path`` when given. ExportError with every reason when none succeeds."""
    import onnx

    failures: list[tuple[str, str]] = []
    for exporter in exporters:
        out = Path(path) if path is not None else Path(directory) / exporter.name / "model.onnx"
        out.parent.mkdir(parents=True, exist_ok=True)
        try:
            export(out, exporter)
            graph = onnx.load(str(out), load_external_data=False).graph   # it wrote a model, not half of one
        except Exception as e:   # torch raises its own error types (TorchExportError, UnsupportedOperatorError, ...)
            failures.append((exporter.name, first_line(e)))
            continue
        inits = {i.name for i in graph.initializer}
        return Exported(out, exporter, tuple(failures), tuple(i.name for i in graph.input if i.name not in inits),
                        len(graph.node))
    raise ExportError("torch.onnx.export could not export the module: " +
                      "; ".join(f"the {name} exporter failed: {why}" for name, why in failures))


def torch_exporters(module, args: tuple, input_names: list[str]) -> ExportFn:
    """An :data:`ExportFn` calling ``torch.onnx.export(module, args, path, ...)`` with the exporter's ``dynamo``
    flag and opset, the inputs named ``input_names``, in eval mode (the module's mode is restored), torch's
    progress lines and warnings kept off the terminal."""
    import torch

    def export(path: Path, exporter: Exporter) -> None:
        kw = dict(dynamo=True, external_data=True) if exporter is DYNAMO else dict(dynamo=False)
        was = module.training
        module.eval()
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()), \
                    warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(module, args, str(path), opset_version=exporter.opset, input_names=input_names,
                                  verbose=False, **kw)
        finally:
            module.train(was)
    return export


def input_names(module, count: int) -> list[str]:
    """The names of the first ``count`` positional parameters of ``module.forward`` (``input_ids``, ``x``, ...), or
    ``input_0``, ``input_1``, ... where it has fewer or none."""
    try:
        params = [p.name for p in inspect.signature(module.forward).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (AttributeError, TypeError, ValueError):
        params = []
    return params[:count] if len(params) >= count else [f"input_{i}" for i in range(count)]


def as_arrays(example_inputs) -> tuple[tuple, list[np.ndarray]]:
    """(the positional arguments, as a tuple, the export is traced with; each as a numpy array)."""
    args = tuple(example_inputs) if isinstance(example_inputs, list | tuple) else (example_inputs,)
    arrays = [a.detach().cpu().numpy() if hasattr(a, "detach") else np.asarray(a) for a in args]
    return args, arrays


@dataclass(frozen=True)
class TorchRun:
    """What :func:`from_torch` returns: how the module was ``exported``, and :func:`npusim.app.driver.run_model`'s
    ``compiled`` model, simulation ``result``, ``outputs`` by ONNX name and ``report`` (with ``exporter``:
    :meth:`Exported.to_dict`)."""

    exported: Exported
    compiled: CompiledModel
    result: SimResult
    outputs: dict[str, np.ndarray]
    report: dict


def export_module(module, example_inputs, directory: Path, *, names: Sequence[str] | None = None,
                  export: ExportFn | None = None, exporters: Sequence[Exporter] = EXPORTERS,
                  path: Path | None = None) -> tuple[Exported, dict[str, np.ndarray]]:
    """Export ``module`` on ``example_inputs`` with the first of ``exporters`` that works (:func:`export_first`, into
    ``directory`` or to ``path``): the :class:`Exported` and the example inputs the model takes, by its input names
    (:func:`feeds`). ``names`` and ``export`` as :func:`from_torch`'s."""
    args, arrays = as_arrays(example_inputs)
    names = list(names) if names is not None else input_names(module, len(args))
    if len(names) != len(args):
        raise NpuSimError(f"names gives {len(names)} input names for {len(args)} example inputs")
    exported = export_first(export or torch_exporters(module, args, names), directory, exporters, path)
    return exported, feeds(exported.inputs, dict(zip(names, arrays)))


def from_torch(module, example_inputs, arch: Arch | str = "mid32", *, onnx_path: str | Path | None = None,
               names: Sequence[str] | None = None, export: ExportFn | None = None,
               exporters: Sequence[Exporter] = EXPORTERS, **run_options) -> TorchRun:
    """Export ``module`` (a ``torch.nn.Module``) on ``example_inputs`` (a tensor or a tuple of them, the positional
    arguments of its forward) to ONNX with the first exporter that works (:data:`EXPORTERS`: dynamo, then
    TorchScript), compile it for ``arch`` (an Arch or a preset name) and simulate it on those inputs.

    ``run_options`` go to :func:`npusim.app.driver.run_model` (``validate=True`` compares every output with
    onnxruntime; ``timing_only``, ``fallback``, ``limits``, ...). ``onnx_path``: keep the exported model there (its
    ``.onnx.data`` beside it), else it is written to a temporary directory and removed. ``names``: the ONNX input
    names (default: the forward's parameter names). ``export``: what writes the model (default: torch's exporters,
    :func:`torch_exporters`). Raises ExportError when no exporter can export the module, and what ``run_model``
    raises (every error an NpuSimError).
    """
    arch = load_arch(arch) if isinstance(arch, str) else arch
    with tempfile.TemporaryDirectory(prefix="npusim-torch-") as tmp:
        exported, inputs = export_module(module, example_inputs, Path(tmp), names=names, export=export,
                                         exporters=exporters, path=None if onnx_path is None else Path(onnx_path))
        compiled, result, outputs, report = run_model(str(exported.path), arch, inputs, **run_options)
    report["exporter"] = exported.to_dict()
    return TorchRun(exported, compiled, result, outputs, report)


def feeds(wanted: Sequence[str], arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The example inputs an exported model takes (``wanted``: its run-time input names, :attr:`Exported.inputs`; an
    exporter drops inputs the module does not use); an NpuSimError naming an input it takes that none of the example
    inputs is."""
    missing = [n for n in wanted if n not in arrays]
    if missing:
        raise NpuSimError(f"the exported model takes input {missing[0]!r}, which is none of the example inputs "
                          f"({', '.join(arrays)}); pass names=[...] to name them as the model does")
    return {n: arrays[n] for n in wanted}
