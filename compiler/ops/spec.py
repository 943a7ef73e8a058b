"""One op's entry in the registry: :class:`OpSpec`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from compiler.frontend.canonical import CanonContext
from compiler.frontend.dtypes import npu_view
from compiler.ir import Graph, Node, short_dtype
from compiler.ops.context import LoweringContext
from compiler.ops.options import OpOption

Lower = Callable[[LoweringContext, Node], None]
"""Lowers one node: allocates its outputs, appends its segments, binds its outputs (may raise UnsupportedOpError
for a case only found while lowering; the node then runs on the host)."""

Canonical = Callable[[Node, CanonContext], Node]
"""The IR form of an imported ONNX node (defaults filled in, axes non-negative, constant operands checked); raises
UnsupportedOpError for a form the compiler does not take (the node then runs on the host)."""

Check = Callable[[Node, Graph], str | None]
"""Why a canonical node cannot run on the NPU (a short reason naming the attribute or shape), or None."""

Contract = Callable[[Node, Graph], str | None]
"""Why an imported node breaks what ONNX requires of its operand shapes beyond shape inference (onnxruntime refuses
such a model), or None (:mod:`compiler.frontend.contracts`)."""

F32 = frozenset({np.dtype(np.float32)})
F32_INT8 = F32 | {np.dtype(np.int8), np.dtype(np.uint8)}
NUMBERS = frozenset(np.dtype(d) for d in (np.float32, np.float16, np.int8, np.uint8, np.int16, np.int32))
"""Every element type the NPU holds a tensor in (as it holds them: int64 as int32, bool as uint8; bfloat16 aside),
for ops that move or select elements whatever they are."""


def keep(node: Node, ctx: CanonContext) -> Node:
    """The canonical form of an op with no attributes to normalise: the node as it is."""
    return node


@dataclass(frozen=True)
class OpSpec:
    """Everything the compiler knows of one default-domain ONNX op: its IR form, whether and when it runs on the NPU,
    and how it is lowered there. ``docs/ops.md`` is generated from these entries."""

    op: str
    lower: Lower | None
    """How it runs on the NPU; None: the compiler takes the op but only a pass or constant folding removes it (what
    is left runs on the host)."""
    canonical: Canonical = keep
    check: Check | None = None
    """Conditions on attributes and shapes for the NPU, checked before lowering."""
    dtypes: frozenset[np.dtype] | None = F32
    """Element types its activations (non-constant inputs and outputs) may have on the NPU, as the NPU holds them
    (:func:`compiler.frontend.dtypes.npu_view`: a float64 tensor is float32 there, an int64 one int32, a bool
    uint8); None: the lowering checks its own."""
    const_operands: bool = False
    """Constant operands of any type are fine (shapes, starts, pads, indices): only activations are checked."""
    nhwc: bool = False
    """It works on channels-last 4-D activations (a graph input that is its first input is stored NHWC)."""
    npu: str = ""
    """When it runs on the NPU and how, in a few words (for ``docs/ops.md``)."""
    contract: Contract | None = None
    """The operand contract the importer checks before anything reads the operands (a violation is a CompileError:
    the model is invalid, wherever the node would run)."""
    decomposed: bool = False
    """The importer decomposes it into ops the NPU runs (:mod:`compiler.passes.composites`; ``lower`` is None): it runs
    on the NPU as those, or whole on the host where the decomposition refuses it."""
    options: tuple[OpOption, ...] = ()
    """The choices its lowering offers a compile (``compile_model(NAME=VALUE)``); the lowering reads its value as
    ``low.options[OPTION]`` (:mod:`compiler.ops.options`)."""
    empty_inputs: bool = False
    """An input with a dimension of 0 is fine (KVAppend's empty past in a prefill); else the node runs on the host."""

    def unsupported(self, node: Node, graph: Graph) -> str | None:
        """Why ``node`` cannot run on the NPU, or None."""
        if self.lower is None:
            return self.npu or "not lowered to the NPU"
        if self.dtypes is not None:
            for t in (*node.present_inputs, *(o for o in node.outputs if o)):
                if (not graph.is_const(t) or not self.const_operands) and \
                        npu_view(graph.tensor(t).dtype) not in self.dtypes:
                    return self._dtype_refusal(t, graph.tensor(t).dtype)
        return self.check(node, graph) if self.check else None

    def _dtype_refusal(self, tensor: str, dtype: np.dtype) -> str:
        """Why tensor ``tensor`` of ``dtype`` keeps the node off the NPU: the types it takes, as the NPU holds them."""
        if self.dtypes in (F32, F32_INT8):
            kinds = "float32 tensors" + (" (and int8/uint8)" if self.dtypes == F32_INT8 else "")
            return f"only {kinds} are lowered, not {dtype} ({tensor!r}); int8 through the quantized ops"
        kinds = ", ".join(sorted(short_dtype(d) for d in self.dtypes))
        return f"only {kinds} tensors are lowered, not {dtype} ({tensor!r})"
