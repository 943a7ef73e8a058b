"""Graph-to-graph passes over :class:`compiler.ir.Graph`; each returns a new graph.

:data:`PASSES` is the pass list: every pass by name, in the order :func:`run_passes` (and so
:func:`compiler.compile.compile_model`) applies them. A new pass is a module here and an entry in :data:`PASSES`.
"""

from __future__ import annotations

from collections.abc import Callable

from compiler.errors import CompileError
from compiler.ir import Graph
from compiler.passes.fold_batchnorm import fold_batchnorm
from compiler.passes.fold_constants import fold_constants, fold_node, remove_dead
from compiler.passes.fuse import fuse_activation, fuse_residual
from compiler.passes.fuse_attention import fuse_attention
from compiler.passes.fuse_gelu import fuse_gelu
from compiler.passes.fuse_layernorm import fuse_layernorm
from compiler.passes.fuse_matmul import fuse_matmul
from compiler.passes.fuse_msda import fuse_msda
from compiler.passes.fuse_repeat_kv import fuse_repeat_kv
from compiler.passes.fuse_rmsnorm import fuse_rmsnorm
from compiler.passes.fuse_silu import fuse_silu
from compiler.passes.fuse_softmax import fuse_softmax
from compiler.passes.kv_cache import bind_kv_cache
from compiler.passes.qdq import fuse_qdq_conv_transpose

PASSES: dict[str, Callable[[Graph], Graph]] = {
    "fold_constants": fold_constants, "fold_batchnorm": fold_batchnorm, "fuse_qdq": fuse_qdq_conv_transpose,
    "fuse_gelu": fuse_gelu, "fuse_silu": fuse_silu, "fuse_layernorm": fuse_layernorm,
    "fuse_rmsnorm": fuse_rmsnorm, "fuse_softmax": fuse_softmax, "fuse_attention": fuse_attention,
    "fuse_activation": fuse_activation, "fuse_residual": fuse_residual, "fuse_matmul": fuse_matmul,
    "fuse_repeat_kv": fuse_repeat_kv, "fuse_msda": fuse_msda, "bind_kv_cache": bind_kv_cache}
"""The graph passes by name, in the order they run (``--dump-after NAME`` prints the graph after one)."""
FUSION_PASSES = ("fuse_gelu", "fuse_silu", "fuse_layernorm", "fuse_rmsnorm", "fuse_softmax", "fuse_attention",
                 "fuse_activation", "fuse_residual", "fuse_matmul", "fuse_repeat_kv", "fuse_msda")
"""The passes ``compile_model(fuse=False)`` skips (``fuse_qdq`` is how an int8 ConvTranspose is lowered at all)."""


def run_passes(graph: Graph, dump_after: str | None = None, dump: Callable[[str], None] = print,
               skip: tuple[str, ...] = ()) -> Graph:
    """Apply the graph passes in order, but those named in ``skip``; print the IR after ``dump_after`` (a pass
    name)."""
    if dump_after is not None and dump_after not in PASSES:
        raise CompileError(f"--dump-after must be one of {', '.join(PASSES)}, not {dump_after!r}")
    unknown = [s for s in skip if s not in PASSES]
    if unknown:
        raise CompileError(f"cannot skip unknown pass(es) {', '.join(unknown)}; passes: {', '.join(PASSES)}")
    for name, fn in PASSES.items():
        if name in skip:
            continue
        graph = fn(graph)
        if name == dump_after:
            dump(graph.dump())
    return graph


__all__ = ["FUSION_PASSES", "PASSES", "fold_constants", "fold_node", "remove_dead", "run_passes"]
