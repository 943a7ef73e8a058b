"""The intended use of the row gather (compiler/kernels/bilinear_gather.py): bilinear samples of an NHWC table with a
zero halo by 2 gathers + vpu.mul + vpu.mul.sum, bit for bit against numpy in onnxruntime's product order and against
onnxruntime's GridSample itself; timing-only gives the same cycles."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from compiler.errors import CompileError
from compiler.kernels.bilinear_gather import bilinear_sample, bilinear_taps
from compiler.kernels.common.target import Target
from isa import DType, Gather, Queue
from isa.arch import load_arch
from isa.asm import mnemonic
from npusim import simulate
from npusim.report.trace import chrome_trace
from npusim.sim.simulator import region_array

H, W, C = 5, 7, 8


def grid_points(rng, n: int) -> np.ndarray:
    """Random points in [-1.3, 1.3]^2 (some outside the image) plus points on pixel centres, the image border and
    half-way between pixels: (n + 12, 2) f32, x then y."""
    centres = [(2 * (i + 0.5) / W - 1, 2 * (j + 0.5) / H - 1) for i, j in ((0, 0), (W - 1, H - 1), (3, 2))]
    edges = [(-1.0, -1.0), (1.0, 1.0), (-1.0 - 1 / W, 0.0), (1.0 + 1 / W, 0.2), (0.0, -1.0 - 2 / H),
             (2 * 3 / W - 1, 2 * 2 / H - 1), (1.25, -1.25), (-1.29, 1.29), (0.0, 0.0)]
    pts = rng.uniform(-1.3, 1.3, (n, 2))
    return np.concatenate([pts, centres, edges]).astype(np.float32)


def reference(x: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """GridSample bilinear, zeros, align_corners=0 in float32, onnxruntime's order
    (docs/perception.md#gridsample-numerics): ``((w11*p11 + w12*p12) + w21*p21) + w22*p22``, a neighbour outside the
    image reading 0."""
    h, w, _ = x.shape
    f = np.float32
    out = []
    for gx, gy in grid:
        px = ((gx + f(1)) * f(w) - f(1)) / f(2)
        py = ((gy + f(1)) * f(h) - f(1)) / f(2)
        x1, y1 = np.floor(px), np.floor(py)
        dx1, dx2, dy1, dy2 = px - x1, (x1 + f(1)) - px, py - y1, (y1 + f(1)) - py

        def pix(yy, xx):
            yy, xx = int(yy), int(xx)
            return x[yy, xx] if 0 <= yy < h and 0 <= xx < w else np.zeros(x.shape[2], f)

        taps = [(dy2 * dx2, pix(y1, x1)), (dy2 * dx1, pix(y1, x1 + 1)), (dy1 * dx2, pix(y1 + 1, x1)),
                (dy1 * dx1, pix(y1 + 1, x1 + 1))]
        acc = taps[0][0] * taps[0][1]
        for wt, p in taps[1:]:
            acc = acc + wt * p
        out.append(acc.astype(f))
    return np.stack(out)


def onnxruntime_grid_sample(x: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """onnxruntime's GridSample (opset 16, bilinear, zeros, align_corners=0) of NHWC ``x`` at points ``grid``."""
    h, w, c = x.shape
    p = grid.shape[0]
    node = helper.make_node("GridSample", ["X", "G"], ["Y"], mode="bilinear", padding_mode="zeros", align_corners=0)
    graph = helper.make_graph([node], "gs", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, c, h, w]),
                                             helper.make_tensor_value_info("G", TensorProto.FLOAT, [1, 1, p, 2])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, c, 1, p])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(onnx._serialize(model) if hasattr(onnx, "_serialize") else model.SerializeToString(),
                                opts, providers=["CPUExecutionProvider"])
    y = sess.run(None, {"X": x.transpose(2, 0, 1)[None], "G": grid.reshape(1, 1, p, 2)})[0]
    return y[0, :, 0, :].T


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and np.array_equal(a.view(np.int32), b.view(np.int32))


@pytest.mark.parametrize("table", ["spm", "dram"])
@pytest.mark.parametrize("preset", ["edge16", "mid32"])
def test_bilinear_sample_is_bit_exact(table, preset):
    rng = np.random.default_rng(7)
    x = rng.standard_normal((H, W, C)).astype(np.float32)
    x[0, 0, :2] = -0.0                                  # signed zeros survive the weighting
    grid = grid_points(rng, 52)
    arch = load_arch(preset)
    p = bilinear_sample(H, W, C, grid.shape[0], Target.of(arch), table=table)
    gathers = [i for i in p.instrs if isinstance(i, Gather)]
    assert len(gathers) == 2 and all(str(g).startswith("vpu.gather" if table == "spm" else "dma.ld.gather")
                                     for g in gathers)
    idx, weights = bilinear_taps(grid, H, W)
    assert (idx == -1).any() and (idx >= 0).any()       # some pairs wholly outside the halo read fill
    image = x if table == "spm" else np.pad(x, ((1, 1), (1, 1), (0, 0)))
    res = simulate(p, arch, {"X": image, "I": idx, "Wt": weights})
    y = region_array(res, "Y", DType.F32, (grid.shape[0], C))
    assert same_bits(y, reference(x, grid))
    assert same_bits(y, onnxruntime_grid_sample(x, grid))
    assert res.cycles == simulate(p, arch, timing_only=True).cycles


@pytest.mark.parametrize("table,unit", [("spm", "vector"), ("dram", "dma_load")])
def test_stats_and_traces_name_the_gathers(table, unit):
    arch = load_arch("edge16")
    p = bilinear_sample(H, W, C, 40, Target.of(arch), table=table)
    res = simulate(p, arch, timing_only=True)
    name = "vpu.gather" if table == "spm" else "dma.ld.gather"
    busy = res.busy_by_mnemonic()
    gathers = [pc for pc, i in enumerate(p.instrs) if isinstance(i, Gather)]
    assert busy[name] == sum(res.costs[pc].cycles - res.costs[pc].conflict - res.costs[pc].dram_latency
                             for pc in gathers) > 0
    queue = {"vector": Queue.VPU, "dma_load": Queue.DMA_LD}[unit]
    assert sum(busy[k] for k in {mnemonic(i) for i in p.instrs if i.queue is queue}) == res.unit[unit].busy
    spans = [e for e in chrome_trace(res)["traceEvents"] if e.get("cat") == "instr" and e["name"] == name]
    assert sorted(e["args"]["pc"] for e in spans) == gathers
    assert all(e["args"]["asm"].startswith(name + " shape[40] row=16 ") for e in spans)
    if table == "dram":   # the DRAM side: its bytes in the span and in the run's counters
        assert [e["args"]["dram_bytes"] for e in spans] == [40 * 2 * C * 4] * 2
        assert res.dram_bytes_read == 2 * 40 * 2 * C * 4 + 2 * 40 * 4 + 40 * 4 * 4


def test_indices_of_pairs_at_the_halo():
    # x1 = -1 and x1 = W - 1 pair a halo pixel with an image pixel; x1 = -2 or W pairs two halo or outside pixels
    grid = np.array([[-1.0, 0.0], [1.0, 0.0], [-1.0 - 2.0 / W, 0.0], [1.0 + 2.0 / W, 0.0]], np.float32)
    idx, w = bilinear_taps(grid, H, W)   # y = (1 * 5 - 1) / 2 = 2: top pair in padded row 3, bottom in row 4
    assert idx.tolist() == [[3 * (W + 2) + 0, 3 * (W + 2) + W, -1, -1], [4 * (W + 2) + 0, 4 * (W + 2) + W, -1, -1]]
    assert w[0].tolist() == [0.5, 0.5, 0.0, 0.0]     # x = -0.5: dx1 = dx2 = 0.5; y = 2 exactly: dy1 = 0


def test_too_big_for_the_target_is_a_compile_error():
    with pytest.raises(CompileError, match=r"needs \d+ bytes of SPM, the target has 262144; sample fewer points"):
        bilinear_sample(100, 100, 16, 64, Target.of(load_arch("edge16")))
    with pytest.raises(CompileError, match="table must be 'spm' or 'dram', not 'acc'"):
        bilinear_sample(H, W, C, 4, Target.of(load_arch("edge16")), table="acc")
