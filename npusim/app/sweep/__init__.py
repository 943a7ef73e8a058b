"""Architecture sweeps: every workload of a spec compiled and simulated on every Arch point, in parallel on a
dask.distributed cluster, each result stored as it finishes, gathered into one tidy pandas DataFrame
(docs/sweep.md). ``npusim sweep SPEC.toml`` is :func:`sweep` on the command line.

>>> df = sweep({"arch": "mid32", "grid": {"matrix.rows,matrix.cols": [16, 32]},
...             "workloads": [{"gemm": {"M": 64, "N": 64, "K": 64}}]}, scheduler="synchronous")
>>> pareto(df, ["cycles", "matrix.rows"])
"""

from npusim.app.sweep.llm_plot import LlmPlot, plot_llm
from npusim.app.sweep.llm_workload import LlmPoint
from npusim.app.sweep.pareto import pareto, pareto_mask
from npusim.app.sweep.pareto_plot import ParetoPlot, plot_pareto, plot_pareto_3d
from npusim.app.sweep.run import METRICS, evaluate, row_metrics, sweep, write_table
from npusim.app.sweep.spec import SweepSpec, grid_points, load_spec
from npusim.app.sweep.store import ResultStore, code_fingerprint, point_key
from npusim.app.sweep.workloads import COMPILE_FREE_FIELDS, Conv, Gemm, OnnxModel, SpecError, Topology, compile_view

__all__ = ["COMPILE_FREE_FIELDS", "METRICS", "Conv", "Gemm", "LlmPlot", "LlmPoint", "OnnxModel", "ParetoPlot",
           "ResultStore", "SpecError", "SweepSpec", "Topology", "code_fingerprint", "compile_view", "evaluate",
           "grid_points", "load_spec", "pareto", "pareto_mask", "plot_llm", "plot_pareto", "plot_pareto_3d",
           "point_key", "row_metrics", "sweep", "write_table"]
