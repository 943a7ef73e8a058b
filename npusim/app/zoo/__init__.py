"""The model zoo: networks built in code with seeded weights (no downloads), each a function returning an
``onnx.ModelProto`` (opset 17, static shapes, batch 1) that passes ``onnx.checker`` and runs in onnxruntime.

``MODELS`` maps a name to its function (each takes ``seed=0``); :func:`describe` gives the one-line description.
"""

from __future__ import annotations

from collections.abc import Callable

from npusim.app.zoo.cnn import mobilenet_v2, resnet18, resnet18_int8, resnet50
from npusim.app.zoo.perception import bev_tiny
from npusim.app.zoo.transformer import bert_layer, vit_block

MODELS: dict[str, Callable] = {f.__name__: f for f in (resnet18, resnet50, mobilenet_v2, bert_layer, vit_block,
                                                         resnet18_int8, bev_tiny)}


def describe(name: str) -> str:
    """The one-line description of zoo model ``name`` (the first paragraph of its docstring, on one line)."""
    try:
        doc = MODELS[name].__doc__ or ""
    except KeyError:
        raise KeyError(f"no zoo model {name!r}; models: {', '.join(MODELS)}") from None
    return " ".join(doc.split("\n\n")[0].split())


__all__ = ["MODELS", "describe", "bert_layer", "bev_tiny", "mobilenet_v2", "resnet18", "resnet18_int8", "resnet50",
           "vit_block"]
