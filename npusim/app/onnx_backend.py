"""npusim as an ONNX backend (:class:`onnx.backend.base.Backend`): a model runs through
:func:`npusim.app.driver.run_model` (compile for one Arch preset, then simulate with values), so the onnx package's own
backend tests can run on it.

>>> rep = NpuBackend.prepare(model)              # mid32, host fallback for what the NPU cannot run
>>> (y,) = rep.run([x])                          # outputs in the graph's output order
>>> rep.report["host_ops"], rep.report["cycles"]

Every run compiles the model: the compiler needs static shapes and constant weights, and a node test feeds those as
graph inputs. Inputs named by ``constant_inputs`` (and every int64/bool input: in a node test they are shapes, axes,
pads, indices or masks, which a model exported for inference carries as constants; a model's run-time int64/bool
inputs, such as token ids, are taken as inputs by ``npusim run``) are bound as initializers with the values of that
run. ``fallback=False`` makes a node the NPU cannot run an error (UnsupportedOpError) instead of
a host call: the conformance suite uses it to prove a node ran on the NPU.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.backend.base import Backend, BackendRep, Device, DeviceType, namedtupledict

from isa.arch import Arch, load_arch
from npusim.app import driver

DEFAULT_ARCH = "mid32"
HOST_DTYPES = (np.dtype(np.int64), np.dtype(np.bool_))
"""Input element types a node test binds as constants by default (its shape, index and mask operands)."""


def graph_inputs(model: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    """The model's real inputs (graph inputs that are not initializers), in order: what ``run`` is given."""
    inits = {i.name for i in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def bind_constants(model: onnx.ModelProto, values: dict[str, np.ndarray]) -> onnx.ModelProto:
    """A copy of ``model`` with the inputs ``values`` names turned into initializers of those values."""
    if not values:
        return model
    bound = onnx.ModelProto()
    bound.CopyFrom(model)
    keep = [i for i in bound.graph.input if i.name not in values]
    del bound.graph.input[:]
    bound.graph.input.extend(keep)
    bound.graph.initializer.extend(numpy_helper.from_array(np.asarray(v), name) for name, v in values.items())
    return bound


class NpuBackendRep(BackendRep):
    """A prepared model: :meth:`run` compiles it for the Arch with the run's constant inputs bound and simulates it.
    After a run, ``compiled``, ``result`` and ``report`` (:func:`npusim.app.driver.run_model`'s) describe it."""

    def __init__(self, model: onnx.ModelProto, arch: Arch, *, fallback: bool = True,
                 constant_inputs: Collection[int | str] = (), options: dict[str, Any] | None = None):
        self.model, self.arch, self.fallback, self.options = model, arch, fallback, dict(options or {})
        self.inputs = graph_inputs(model)
        names = [i.name for i in self.inputs]
        bad = [c for c in constant_inputs if not (0 <= c < len(names) if isinstance(c, int) else c in names)]
        if bad:
            raise ValueError(f"constant_inputs {bad} are not inputs of the model; its inputs are {names}")
        self.constants = {names[c] if isinstance(c, int) else c for c in constant_inputs}
        self.compiled = self.result = self.report = None

    def _is_constant(self, name: str, value: np.ndarray) -> bool:
        return name in self.constants or value.dtype in HOST_DTYPES

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        """Outputs in graph output order for ``inputs``: a list in graph input order, or a dict by name."""
        if isinstance(inputs, dict):
            values = {k: np.asarray(v) for k, v in inputs.items()}
        else:
            inputs = [inputs] if isinstance(inputs, np.ndarray) else list(inputs)
            values = {vi.name: np.asarray(v) for vi, v in zip(self.inputs, inputs)}
        consts = {k: v for k, v in values.items() if self._is_constant(k, v)}
        model = bind_constants(self.model, consts)
        feeds = {k: v for k, v in values.items() if k not in consts}
        self.compiled, self.result, outputs, self.report = driver.run_model(
            model, self.arch, feeds, fallback=self.fallback, **self.options | kwargs)
        names = [o.name for o in self.model.graph.output]
        return namedtupledict("Outputs", names)(*(outputs[n] for n in names))


class NpuBackend(Backend):
    """The onnx backend API on npusim: :meth:`prepare` a model for one Arch (``arch``: a preset name, a TOML path or
    an :class:`~isa.arch.Arch`; default mid32). Runs on the device "CPU" only (the simulated NPU plus host fallback;
    onnx's backend tests know no other device type). Subclasses may change the class defaults."""

    arch: str | Arch = DEFAULT_ARCH
    fallback: bool = True

    @classmethod
    def prepare(cls, model: onnx.ModelProto, device: str = "CPU", *, arch: str | Arch | None = None,
                fallback: bool | None = None, constant_inputs: Collection[int | str] = (),
                **kwargs: Any) -> NpuBackendRep:
        """Check ``model`` and return its rep. ``constant_inputs``: input indices or names bound as constants at
        each run (weights a node test feeds as inputs); other keywords go to :func:`npusim.app.driver.run_model`
        (``rtol``/``atol`` that onnx's test runner passes are ignored)."""
        if not cls.supports_device(device):
            raise ValueError(f"npusim runs on device 'CPU' (simulated NPU with host fallback), not {device!r}")
        onnx.checker.check_model(model)
        arch = arch if arch is not None else cls.arch
        arch = arch if isinstance(arch, Arch) else load_arch(arch)
        options = {k: v for k, v in kwargs.items() if k not in ("rtol", "atol")}
        return NpuBackendRep(model, arch, fallback=cls.fallback if fallback is None else fallback,
                             constant_inputs=constant_inputs, options=options)

    @classmethod
    def run_model(cls, model: onnx.ModelProto, inputs: Any, device: str = "CPU",
                  **kwargs: Any) -> tuple[np.ndarray, ...]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: onnx.NodeProto, inputs: Sequence[np.ndarray], device: str = "CPU",
                 outputs_info: Sequence[tuple[np.dtype, tuple[int, ...]]] | None = None,
                 **kwargs: Any) -> tuple[np.ndarray, ...]:
        """Run one node on ``inputs`` (in the node's input order). ``outputs_info`` (dtype, shape) per output types
        the outputs; without it shape inference does. ``opset_version``: the default-domain opset (default: the one
        that introduced the op's newest form, as onnx's node tests use)."""
        opset = kwargs.pop("opset_version", None) or \
            onnx.defs.get_schema(node.op_type, domain=node.domain).since_version
        present = [n for n in node.input if n]
        ins = [onnx.helper.make_tensor_value_info(n, onnx.helper.np_dtype_to_tensor_dtype(np.asarray(v).dtype),
                                                  np.shape(v)) for n, v in zip(present, inputs)]
        if outputs_info is None:
            outs = [onnx.helper.make_empty_tensor_value_info(n) for n in node.output if n]
        else:
            outs = [onnx.helper.make_tensor_value_info(n, onnx.helper.np_dtype_to_tensor_dtype(np.dtype(t)), s)
                    for n, (t, s) in zip([n for n in node.output if n], outputs_info)]
        graph = onnx.helper.make_graph([node], f"{node.op_type}_node", ins, outs)
        opsets = [onnx.helper.make_opsetid("", opset)]
        model = onnx.helper.make_model(graph, opset_imports=opsets,
                                       ir_version=onnx.helper.find_min_ir_version_for(opsets))
        if outputs_info is None:
            model = onnx.shape_inference.infer_shapes(model, strict_mode=True)
        return cls.run_model(model, list(inputs), device, **kwargs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        try:
            return Device(device).type == DeviceType.CPU
        except AttributeError:
            return False


prepare = NpuBackend.prepare
run_model = NpuBackend.run_model
run_node = NpuBackend.run_node
supports_device = NpuBackend.supports_device
