"""The batch a model declares: how many inferences one run makes, for its per-inference figures (energy per
inference). Decided from the model, in this order (docs/energy.md, "Totals"):

1. a batch the caller gives (``run_model(batch=N)``, ``npusim run --batch N``);
2. a symbolic input dimension named as a batch (:func:`is_batch_name`: ``N``, ``B``, ``bs``, ``batch``,
   ``batch_size``, ...) that the caller fixed (``--dim batch=4``);
3. the leading dimension of the inputs of rank 3 or more (N of NCHW images, B of B x L x D sequences), when they all
   agree;
4. otherwise 1: a 2-D input's first dimension (196 tokens of a 196 x 768 input, say) is not a batch.

:class:`Batch` says which rule gave the size, and the report carries it (``batch.source``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from compiler.ir import Graph
from isa import NpuSimError

BATCH_NAMES = ("n", "b", "bs")
"""Symbolic dimension names (lower case) that mean a batch besides those starting with ``batch``."""


def is_batch_name(name: str) -> bool:
    """True for a symbolic dimension name that means a batch: ``N``, ``B``, ``bs`` or one starting with ``batch``
    (``batch``, ``batch_size``, ``batchsize``), in any case."""
    low = name.strip().lower()
    return low in BATCH_NAMES or low.startswith("batch")


@dataclass(frozen=True)
class Batch:
    """How many inferences a run makes (``size``) and where that number came from (``source``, for the report)."""

    size: int
    source: str

    def to_dict(self) -> dict:
        return {"size": self.size, "source": self.source}


def checked_batch(batch) -> int | None:
    """A batch the caller gives: None, or a positive integer (NpuSimError saying what is wrong otherwise)."""
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int) or batch < 1):
        raise NpuSimError(f"batch must be a positive integer (the inferences one run makes), not {batch!r}")
    return batch


def model_batch(graph: Graph, dims: Mapping[str, int] | None = None, batch: int | None = None) -> Batch:
    """The batch of a run of ``graph`` (its inputs' static shapes), whose symbolic input dimensions the caller fixed
    with ``dims`` (name -> size), unless the caller gives ``batch`` (rules in the module docstring)."""
    if checked_batch(batch) is not None:
        return Batch(batch, f"batch {batch} given by the caller (--batch)")
    named = {name: size for name, size in (dims or {}).items() if is_batch_name(name)}
    if len(set(named.values())) == 1:
        name, size = next(iter(named.items()))
        return Batch(size, f"batch {size} from the symbolic dim {name!r} (--dim {name}={size})")
    if named:
        given = ", ".join(f"{n}={s}" for n, s in named.items())
        return Batch(1, f"batch 1: the symbolic batch dims disagree ({given}); give --batch")
    leading = {name: graph.tensor(name).shape[0] for name in graph.inputs if len(graph.tensor(name).shape) >= 3}
    if not leading:
        return Batch(1, "batch 1: no batch dimension declared (no symbolic batch dim, no input of rank 3 or more)")
    first, size = next(iter(leading.items()))
    if len(set(leading.values())) > 1:
        shown = ", ".join(f"{n!r} {s}" for n, s in leading.items())
        return Batch(1, f"batch 1: the leading dims of the inputs of rank 3 or more disagree ({shown}); give --batch")
    more = f" (and the {len(leading) - 1} other inputs of rank 3 or more)" if len(leading) > 1 else ""
    return Batch(size, f"batch {size} from input {first!r} dim 0{more}")
