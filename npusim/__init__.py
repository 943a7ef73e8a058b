"""npusim: a cycle-accurate NPU simulator with real tensor values."""

from isa import NpuSimError
from isa.arch import Arch, load_arch, preset_names
from npusim.sim.simulator import SimResult, simulate

__version__ = "0.1.0"
__all__ = ["Arch", "NpuSimError", "SimResult", "from_torch", "load_arch", "preset_names", "simulate", "__version__"]


def __getattr__(name: str):
    """``npusim.from_torch`` (:func:`npusim.app.torch_entry.from_torch`), loaded on first use: ``import npusim``
    stays the simulator alone, without the compiler (pyproject.toml's import contracts ignore this one import)."""
    if name == "from_torch":
        from npusim.app.torch_entry import from_torch

        return from_torch
    raise AttributeError(f"module 'npusim' has no attribute {name!r}")
