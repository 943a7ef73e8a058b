"""Finding 3 of issue 24 (host fallback hiding in sweeps): the zoo models compiled over a grid of arrays and SPM
sizes (base mid32), shared by the ``test_finding3_*`` files (split so that ``pytest -n 2 --dist loadfile`` runs
them side by side)."""

from functools import lru_cache

from compiler.compile import compile_model
from compiler.ir import Graph
from isa.arch import Arch, load_arch
from npusim.app.driver import load_model, zoo_model

ARRAYS = (4, 16, 32, 64, 128, 256)
"""Square arrays of the grid (rows = cols)."""
SPMS = (128 << 10, 256 << 10, 1 << 20)
"""SPM sizes of the grid, bytes."""


def grid_arch(array: int, spm: int) -> Arch:
    """mid32 with an ``array x array`` matrix unit and ``spm`` bytes of SPM."""
    return load_arch("mid32", [f"matrix.rows={array}", f"matrix.cols={array}", f"spm.size={spm}"])


@lru_cache(maxsize=8)
def zoo_graph(name: str) -> Graph:
    """The zoo model ``name`` at its default size, imported (once per test process)."""
    return load_model(zoo_model(name))


def host_ops(name: str, array: int, spm: int) -> list[tuple[str, str, str]]:
    """(node, op, reason) of every node of zoo model ``name`` that runs on the host on :func:`grid_arch`."""
    compiled = compile_model(zoo_graph(name), grid_arch(array, spm))
    return [(h.node.name, h.node.op, h.reason) for h in compiled.host_ops]
