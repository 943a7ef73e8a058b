"""LLM inference on the NPU (``npusim llm``): named decoder configs (:mod:`~npusim.app.llm.configs`), their step
graphs (:mod:`~npusim.app.llm.decoder`), the prefill and decode simulation (:mod:`~npusim.app.llm.workload`) and
its report (:mod:`~npusim.app.llm.report`). :func:`simulate_llm` is the Python entry point."""

from __future__ import annotations

from collections.abc import Callable

from isa.arch import Arch
from npusim.app.llm.configs import MODELS, LlmConfig, llm_config
from npusim.app.llm.decoder import WEIGHT_FORMATS
from npusim.app.llm.report import llm_report, llm_rows, llm_summary
from npusim.app.llm.sources import ConfigDecoder, OnnxDecoder, StepPiece, onnx_decoder
from npusim.app.llm.workload import KV_FORMATS, LlmRun, LlmWorkload, PieceRun, simulate_pieces


def decoder_of(model: str | LlmConfig, weights: str) -> ConfigDecoder | OnnxDecoder:
    """The decoder ``model`` names: an exported decoder ``.onnx`` file (its own weights), a config name of
    :data:`MODELS` or an :class:`LlmConfig` (with every linear weight in ``weights``)."""
    if weights not in WEIGHT_FORMATS:
        raise ValueError(f"weights must be one of {', '.join(WEIGHT_FORMATS)}, not {weights!r}")
    if isinstance(model, str) and model.endswith(".onnx"):
        return onnx_decoder(model)
    return ConfigDecoder(llm_config(model) if isinstance(model, str) else model, weights)


def simulate_llm(model: str | LlmConfig, arch: Arch, *, prompt: int = 128, generate: int = 32, batch: int = 1,
                 weights: str = "i4", kv: str = "f32", samples: int = 5, timing_only: bool = True,
                 cache: bool = True, progress: Callable[[str], None] | None = None) -> dict:
    """Simulate ``prompt`` tokens of prefill and ``generate - 1`` decode steps of ``model`` (a config name of
    :data:`MODELS`, an :class:`LlmConfig` or an exported decoder ``.onnx`` with a KV cache) on ``arch``; returns
    :func:`~npusim.app.llm.report.llm_report`'s dict. ``weights``: every linear weight's format (configs only);
    ``samples``: decode contexts simulated, the rest interpolated (0: every step); ``timing_only``: no values
    (same cycles); ``cache``: the disk compile cache; ``progress(what)`` is called before each simulated piece."""
    from npusim.app.driver import run_model

    workload = LlmWorkload(decoder_of(model, weights), prompt, generate, batch, kv, samples)

    def run(piece: StepPiece, what: str) -> PieceRun:
        if progress is not None:
            progress(what)
        _, _, _, report = run_model(piece.build(), arch, timing_only=timing_only, cache=cache, fallback=False,
                                    dims=dict(piece.dims) or None)
        return PieceRun.of(report)

    return llm_report(simulate_pieces(workload, run), arch)


__all__ = ["KV_FORMATS", "MODELS", "WEIGHT_FORMATS", "LlmConfig", "LlmRun", "LlmWorkload", "decoder_of", "llm_config",
           "llm_rows", "llm_summary", "simulate_llm"]
