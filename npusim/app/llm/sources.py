"""Where a decoder's step graphs come from: a named config (:class:`ConfigDecoder`: the zoo's graphs, one layer
standing for each of the decoder's layers) or an exported decoder ONNX file with a KV cache (:class:`OnnxDecoder`:
the whole model, its symbolic dimensions fixed for each step). Both give, for a step of ``q`` new tokens over
``past`` cached ones, the :class:`StepPiece` list that the workload simulates."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import onnx

from npusim.app.llm.configs import LlmConfig
from npusim.app.llm.decoder import embed_model, head_chunks, head_model, layer_model


@dataclass(frozen=True)
class StepPiece:
    """A graph of one step: ``build()`` makes it (an ONNX model or path; ``dims`` fixes its symbolic dims),
    simulated once and counted ``repeat`` times; ``varies``: its cost depends on the cached tokens (a decode step
    simulates it at each sampled context, the others once)."""

    name: str
    build: Callable[[], onnx.ModelProto | str]
    repeat: int = 1
    varies: bool = False
    dims: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class ConfigDecoder:
    """A named config's graphs (:mod:`npusim.app.llm.decoder`) with every linear weight in ``weights``."""

    config: LlmConfig
    weights: str

    cache_layout = "keys [batch, kv_heads, head_dim, tokens] (transposed), values [batch, kv_heads, tokens, head_dim]"

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def layers(self) -> int:
        return self.config.layers

    @property
    def max_positions(self) -> int:
        return self.config.max_positions

    def kv_bytes_per_token(self, element: int) -> int:
        """Bytes of keys and values one token adds to the cache over all layers (``element`` bytes each)."""
        return self.config.kv_bytes_per_token(element)

    def pieces(self, batch: int, q: int, past: int) -> list[StepPiece]:
        cfg, fmt = self.config, self.weights
        heads = [StepPiece(f"head{i}", lambda i=i: head_model(cfg, fmt, batch, i)) for i in range(self.head_count)]
        return [StepPiece("embed", lambda: embed_model(cfg, batch, q, past)),
                StepPiece("layer", lambda: layer_model(cfg, fmt, batch, q, past), cfg.layers, True), *heads]

    @property
    def head_count(self) -> int:
        return head_chunks(self.config, self.weights)

    def embedding_rows_bytes(self, batch: int) -> int:
        """DRAM bytes of the embedding rows one decode step looks up (f32 rows)."""
        return batch * self.config.hidden * 4

    def unread_bytes(self, piece: str, image: int) -> int:
        """Bytes of piece ``piece``'s weights image (``image`` bytes) a decode step does not read: the embedding
        table (the step reads its rows, :meth:`embedding_rows_bytes`)."""
        return image if piece == "embed" else 0


class OnnxDecoderError(ValueError):
    """An ONNX file that is not a decoder step with a KV cache ``npusim llm`` can drive."""


@dataclass(frozen=True)
class OnnxDecoder:
    """An exported decoder with a KV cache: ``input_ids [batch, seq]`` (int64), ``past_key_values.*`` (or any
    ``past*``) inputs ``[batch, kv_heads, past, head_dim]``, optional ``attention_mask [batch, past + seq]`` and
    ``position_ids [batch, seq]``; ``dims`` maps the roles ``batch``, ``seq``, ``past``, ``total`` to the file's
    symbolic dimension names (:func:`onnx_decoder` reads them)."""

    path: str
    dims: tuple[tuple[str, str], ...]
    past_inputs: tuple[tuple[str, int, int], ...]   # (name, kv heads, head dim)
    tables: tuple[tuple[int, int], ...] = ()        # embedding tables a step gathers rows of: (bytes, row bytes)

    @property
    def name(self) -> str:
        return Path(self.path).stem

    layers = 1
    max_positions = 1 << 30

    def kv_bytes_per_token(self, element: int) -> int:
        return sum(h * d for _, h, d in self.past_inputs) * element

    def pieces(self, batch: int, q: int, past: int) -> list[StepPiece]:
        sizes = {"batch": batch, "seq": q, "past": past, "total": past + q}
        dims = tuple((sym, sizes[role]) for role, sym in self.dims)
        return [StepPiece("model", lambda: self.path, 1, True, dims)]

    head_count = 0

    def embedding_rows_bytes(self, batch: int) -> int:
        return batch * sum(row for _, row in self.tables)

    def unread_bytes(self, piece: str, image: int) -> int:
        return sum(t for t, _ in self.tables)


def _sym(t: onnx.ValueInfoProto, axis: int) -> str | None:
    dims = t.type.tensor_type.shape.dim
    return dims[axis].dim_param or None if axis < len(dims) else None


def onnx_decoder(path: str) -> OnnxDecoder:
    """The decoder step in ONNX file ``path``: its past KV inputs and which symbolic dims are batch, new tokens,
    cached tokens and their total; OnnxDecoderError (one line, what is missing) otherwise."""
    m = onnx.load(path, load_external_data=False)
    inputs = {i.name: i for i in m.graph.input if i.name not in {x.name for x in m.graph.initializer}}
    ids = inputs.get("input_ids")
    past = [i for n, i in inputs.items() if n.startswith("past")]
    if ids is None or not past:
        raise OnnxDecoderError(f"{path}: not a decoder step with a KV cache: it needs an 'input_ids' input and "
                               f"past_key_values.* inputs (export with use_cache=True)")
    roles = {"batch": _sym(ids, 0), "seq": _sym(ids, 1), "past": _sym(past[0], 2)}
    mask = inputs.get("attention_mask")
    if mask is not None:
        roles["total"] = _sym(mask, 1)
    missing = [r for r in ("batch", "seq", "past") if roles[r] is None]
    if missing:
        raise OnnxDecoderError(f"{path}: the {', '.join(missing)} dimension of input_ids / past inputs is not "
                               f"symbolic; npusim llm sets them per step (export with dynamic axes)")
    heads = []
    for i in past:
        shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
        if len(shape) != 4 or not shape[1] or not shape[3]:
            raise OnnxDecoderError(f"{path}: past input {i.name!r} must be [batch, kv_heads, past, head_dim] with "
                                   f"fixed kv_heads and head_dim")
        heads.append((i.name, shape[1], shape[3]))
    return OnnxDecoder(path, tuple((r, s) for r, s in roles.items() if s), tuple(heads), _gathered_tables(m))


def _gathered_tables(m: onnx.ModelProto) -> tuple[tuple[int, int], ...]:
    """(bytes as the NPU holds them, bytes of one row) of each constant table a Gather along axis 0 reads rows of
    with run-time indices: an embedding a step does not read whole."""
    consts = {t.name: tuple(t.dims) for t in m.graph.initializer}
    out = []
    for n in m.graph.node:
        attrs = {a.name: a.i for a in n.attribute}
        if n.op_type == "Gather" and n.input[0] in consts and n.input[1] not in consts and not attrs.get("axis", 0):
            shape = consts[n.input[0]]
            out.append((math.prod(shape) * 4, math.prod(shape[1:]) * 4))
    return tuple(out)
