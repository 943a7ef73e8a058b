"""npusim: a cycle-accurate NPU simulator with real tensor values."""

from isa import NpuSimError
from isa.arch import Arch, load_arch, preset_names
from npusim.sim.simulator import SimResult, simulate

__version__ = "0.1.0"
__all__ = ["Arch", "NpuSimError", "SimResult", "load_arch", "preset_names", "simulate", "__version__"]
