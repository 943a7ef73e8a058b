"""Rotate an NCHW feature map on the NPU: AffineGrid (opset 20) + GridSample, as torchvision's tensor rotate and
BEVFormer's ``rotate_prev_bev`` export (docs/perception.md#rotation).

Two forms of the same graph:

- ``constant``: theta is an initializer (a fixed angle). Constant folding computes the grid, so GridSample runs
  with a constant grid: index and weight tables made at compile time, then row gathers + weighting (class 2).
- ``runtime``: theta is a graph input (the yaw of the frame). AffineGrid runs on the vector unit, a coordinate
  program turns the grid into indices and weights on chip, then the same gathers + weighting (class 3).

Both run entirely on the NPU and equal onnxruntime bit for bit::

    python examples/rotate.py --size 32 --channels 16 --angle 30 --preset mid32
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from onnx import TensorProto, helper, numpy_helper


def rotation(angle_deg: float, batch: int = 1) -> np.ndarray:
    """theta ``(batch, 2, 3)`` f32 rotating a square image by ``angle_deg`` about its centre."""
    a = math.radians(angle_deg)
    t = np.array([[math.cos(a), -math.sin(a), 0.0], [math.sin(a), math.cos(a), 0.0]], np.float32)
    return np.repeat(t[None], batch, axis=0)


def rotate_model(size: int, channels: int, theta: np.ndarray | None, mode: str = "linear"):
    """The ONNX model ``y = GridSample(x, AffineGrid(theta, size))`` (zeros padding, align_corners=0); ``theta`` a
    constant, or None for a graph input ``theta (1, 2, 3)``."""
    shape = [1, channels, size, size]
    inits = [numpy_helper.from_array(np.array(shape, np.int64), "size")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)]
    if theta is None:
        inputs.append(helper.make_tensor_value_info("theta", TensorProto.FLOAT, [1, 2, 3]))
    else:
        inits.append(numpy_helper.from_array(theta, "theta"))
    nodes = [helper.make_node("AffineGrid", ["theta", "size"], ["grid"], align_corners=0),
             helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode, padding_mode="zeros", align_corners=0)]
    graph = helper.make_graph(nodes, "rotate", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


def run(size: int = 32, channels: int = 16, angle: float = 30.0, preset: str = "mid32", mode: str = "linear") -> list:
    """Both forms on ``preset``, validated: one dict per form (cycles, DRAM bytes, NPU layers, host ops, max error
    against onnxruntime)."""
    from isa.arch import load_arch
    from npusim.app.driver import run_model

    x = np.random.default_rng(0).standard_normal((1, channels, size, size)).astype(np.float32)
    theta = rotation(angle)
    rows = []
    for form, m, inputs in (("constant", rotate_model(size, channels, theta, mode), {"x": x}),
                            ("runtime", rotate_model(size, channels, None, mode), {"x": x, "theta": theta})):
        compiled, result, _, report = run_model(m, load_arch(preset), inputs, validate=True)
        rows.append({"form": form, "cycles": result.cycles, "dram_read": result.dram_bytes_read,
                     "dram_written": result.dram_bytes_written, "layers": [lr.name for lr in compiled.layers],
                     "host_ops": [h["op"] for h in report["host_ops"]],
                     "max_abs_error": max(v["max_abs_error"] for v in report["validation"].values())})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=32)
    ap.add_argument("--channels", type=int, default=16)
    ap.add_argument("--angle", type=float, default=30.0)
    ap.add_argument("--preset", default="mid32")
    ap.add_argument("--mode", default="linear", choices=("linear", "nearest"))
    a = ap.parse_args()
    for r in run(a.size, a.channels, a.angle, a.preset, a.mode):
        print(f"{r['form']:8s} cycles={r['cycles']:>9,d}  DRAM rd={r['dram_read']:>9,d} B "
              f"wr={r['dram_written']:>9,d} B  host={r['host_ops'] or 'none'}  max|err|={r['max_abs_error']:g}\n"
              f"         layers: {', '.join(r['layers'])}")


if __name__ == "__main__":
    main()
