"""``npusim warm``: compile the simulator's numba functions (the value kernels and the compiled timing run) into
their on-disk cache once, so that the first real run does not pay for it: 73 CPU s on this project's 2-core
machine, after which the demo's first run took 5.5 CPU s instead of 61 (2026-11-25). ``make`` runs it after
installing; without it the first runs compile what they use.

It runs, with values, a float CNN, an int8 CNN, a transformer layer and the perception model from the zoo, through
the driver as a user's run goes, so what is compiled is what such runs need (convolution, matrix, vector, gather
and sampling kernels); a run that needs a kernel signature none of them used compiles it the first time.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from isa.arch import load_arch

WORKLOADS = (("resnet18", "mid32"), ("resnet18_int8", "edge16"), ("bert_layer", "dc128"), ("bev_tiny", "mid32"))
"""(zoo model, preset) of each warm-up run, with values."""


def warm(report: Callable[[str], None] | None = None) -> float:
    """Run :data:`WORKLOADS` (compiles and caches the numba functions they use) and return the CPU seconds taken;
    ``report(line)`` is called after each run."""
    from npusim.app.driver import run_model, zoo_model

    t0 = time.process_time()
    for name, preset in WORKLOADS:
        t = time.process_time()
        run_model(zoo_model(name), load_arch(preset), cache=False)
        if report is not None:
            report(f"{name} on {preset}: {time.process_time() - t:.1f} CPU s")
    return time.process_time() - t0
