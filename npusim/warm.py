"""``npusim warm``: compile the simulator's numba functions into their on-disk cache once, so that the first real
run does not pay for it (about a minute of CPU on 2 cores for the compiled timing run and the value kernels; a cached
run then starts in well under a second). ``make`` runs it after installing; without it the first runs compile
what they use.

It runs, with values, zoo workloads that between them use every kind of instruction the compiler emits: a float
CNN, an int8 CNN, a transformer layer and the perception model (convolution, matrix, vector, gather and sampling
kernels, and the compiled timing run that runs with values). Each run goes through the driver, as a user's run does,
so what is compiled is what a run of the same kind needs.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from isa.arch import load_arch

WORKLOADS = (("resnet18", "mid32", False), ("resnet18_int8", "edge16", False),
             ("bert_layer", "dc128", False), ("bev_tiny", "mid32", False))
"""(zoo model, preset, timing only) of each warm-up run."""


def warm(report: Callable[[str], None] | None = None) -> float:
    """Run :data:`WORKLOADS` (compiles and caches the numba functions they use) and return the CPU seconds taken;
    ``report(line)`` is called after each run."""
    from compiler.zoo import MODELS

    from .driver import run_model

    t0 = time.process_time()
    for name, preset, timing_only in WORKLOADS:
        t = time.process_time()
        run_model(MODELS[name](), load_arch(preset), timing_only=timing_only, cache=False)
        if report is not None:
            mode = "timing-only" if timing_only else "values"
            report(f"{name} on {preset}, {mode}: {time.process_time() - t:.1f} CPU s")
    return time.process_time() - t0
