"""The driver: the only place (with the CLI) that joins the compiler and the simulator."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from compiler.compile import CompiledModel, compile_model, run_passes
from compiler.errors import CompileError, TilingError, no_tiling
from compiler.frontend.dtypes import is_narrowed
from compiler.ir import Graph
from compiler.kernels.common.target import Target
from compiler.kernels.conv2d import (
    ConvShape,
    choose_conv_tiling,
    conv2d,
    conv_inputs,
    conv_instructions,
    conv_on_array,
    conv_reference,
)
from compiler.kernels.conv_transpose2d import (
    ConvTransposeShape,
    TransposeTiling,
    conv_transpose2d,
    conv_transpose_inputs,
    conv_transpose_on_array,
    conv_transpose_reference,
)
from compiler.kernels.gemm import (
    ACC_TYPE,
    GemmTiling,
    gemm_inputs,
    gemm_on_array,
    gemm_reference,
    gemm_tolerance,
    pack_b,
    slot_bytes,
    tiled_gemm,
)
from compiler.link.linker import LayerRange
from compiler.ops import OpOptions, validated_options
from compiler.ops.kv_cache import CacheBinding, appended_by
from compiler.ops.quant import QUANT_OPS
from compiler.ops.weight_quant import OP as WEIGHT_QUANT_OP
from isa import DType, LimitError, SimulationError
from isa.arch import Arch
from isa.dtypes import to_compute
from isa.energy import layer_energy
from isa.machine import machine_units
from npusim.app.batch import Batch, checked_batch, model_batch
from npusim.report.intervals import time_split
from npusim.sim.inputs import for_model
from npusim.sim.limits import ACC_UPDATE, LIMITS, Limits, Work, work_of
from npusim.sim.simulator import SimResult, region_array, simulate


@dataclass
class Validation:
    """How a simulated result compares with the reference: max absolute/relative error and whether it is in bound."""

    max_abs_error: float
    max_rel_error: float
    ok: bool
    rule: str

    def to_dict(self) -> dict:
        return {"max_abs_error": self.max_abs_error, "max_rel_error": self.max_rel_error, "ok": self.ok,
                "rule": self.rule}


def ideal_memory_arch(M: int, N: int, K: int, dtype: DType, arch: Arch) -> Arch:
    """``arch`` with SRAMs large enough for the whole GEMM in one tile and ``matrix.max_rows >= M``.

    This is SCALE-Sim's ideal-memory setting: every operand is on chip, so each fold streams the whole M (ws), K (os)
    or N (is) and the matrix unit's cycles can be compared with SCALE-Sim's.
    """
    a, b, acc = slot_bytes(GemmTiling(M, N, K), dtype, Target.of(arch))

    def line(mem, need: int) -> int:
        q = mem.banks * mem.bank_width
        return max(mem.size, -(-need // q) * q)

    return arch.with_overrides([f"spm.size={line(arch.spm, 2 * (a + b))}", f"acc.size={line(arch.acc, 2 * acc)}",
                                f"matrix.max_rows={max(M, arch.matrix.max_rows)}"])


def _positive(**dims: int) -> None:
    for name, v in dims.items():
        if isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1:
            raise CompileError(f"{name} must be a positive integer, not {v!r}")


def _regions_fit(what: str, **sizes: int) -> None:
    """A LimitError unless every DRAM region fits the ISA's 32-bit region sizes."""
    for name, size in sizes.items():
        if size >= 1 << 32:
            raise LimitError(f"{what}: region {name} would be {size:,} bytes; a DRAM region holds less than 4 GiB")


def layer_work(outputs: int, macs: int, dram: int, arch: Arch, instructions: int | None = None) -> Work:
    """What one layer with ``outputs`` accumulator elements, ``macs`` and ``dram`` bytes of inputs and outputs needs
    (at least): a step's output tile must fit half the accumulator (two tiles overlap), and each step is at least one
    instruction (``instructions``, if the caller knows better); the matrix unit updates each output once per
    ``arch.matrix.rows`` MACs of it, the DMA moves every byte once; the host keeps the inputs and the reference."""
    steps = -(-outputs * 4 * 2 // arch.acc.size) if instructions is None else instructions
    matmul = macs + ACC_UPDATE * -(-macs // arch.matrix.rows)
    return work_of(steps, {"matmul": matmul, "dma": dram}, arch.spm.size + arch.acc.size + 3 * dram + 16 * outputs)


def run_gemm(M: int, N: int, K: int, dtype: DType, arch: Arch, *, timing_only: bool = False,
             ideal_memory: bool = False, seed: int = 0, progress=None,
             limits: Limits | None = LIMITS) -> tuple[SimResult, Validation | None]:
    """Compile ``C = A @ B`` for ``arch``, simulate it on seeded random inputs and check C against numpy.

    ideal_memory: the whole GEMM is one tile in SRAMs sized to hold it, and data movement is free (see
    :func:`ideal_memory_arch`); the matrix unit's busy cycles then follow SCALE-Sim's accounting. limits: the layer's
    instructions, time with values and memory are estimated before anything is built (LimitError above them).
    """
    _positive(M=M, N=N, K=K)
    if limits is not None:
        limits.check(f"GEMM {M}x{N}x{K}", layer_work(M * N, M * N * K, (M * K + K * N) * dtype.size + M * N * 4,
                                                     arch), timing_only)
    _regions_fit(f"GEMM {M}x{N}x{K}", A=M * K * dtype.size, B=K * N * dtype.size, C=M * N * 4)
    packed = not ideal_memory   # B pre-blocked offline, as weights are (ideal memory keeps SCALE-Sim's setting)
    if ideal_memory:
        arch = ideal_memory_arch(M, N, K, dtype, arch)
    target = Target.of(arch)
    target, tiling = (target, GemmTiling(M, N, K)) if ideal_memory else \
        _tiled(gemm_on_array, M, N, K, dtype, target, packed)
    program = tiled_gemm(M, N, K, dtype, target, tiling, b_packed=packed)
    inputs = None if timing_only else gemm_inputs(M, N, K, dtype, seed)
    dram = None if inputs is None else dict(inputs, B=pack_b(inputs["B"], K, N, dtype, target, tiling)) \
        if packed else inputs
    result = simulate(program, arch, dram, timing_only=timing_only, ideal_memory=ideal_memory, progress=progress)
    if timing_only:
        return result, None
    got = region_array(result, "C", DType.F32 if dtype.is_float else DType.I32, (M, N))
    bound = None
    if dtype.is_float:
        a, b = to_compute(inputs["A"], dtype).astype(np.float64), to_compute(inputs["B"], dtype).astype(np.float64)
        bound = gemm_tolerance(K, dtype, np.abs(a) @ np.abs(b))
    return result, _validate(got, gemm_reference(inputs, dtype), bound)


def _tiled(search, *args, **kwargs):
    """``search(*args, **kwargs)`` (a tiling search that may fall back to a block of the array); when no tiling fits
    at all, TilingError with the reason a model compile gives (:func:`compiler.errors.no_tiling`)."""
    try:
        return search(*args, **kwargs)
    except TilingError as e:
        raise TilingError(no_tiling(e)) from None


def _validate(got: np.ndarray, want: np.ndarray, bound: np.ndarray | None) -> Validation:
    """Exact comparison (``bound`` None) or elementwise ``|got - want| <= bound``."""
    got, want = got.astype(np.float64), want.astype(np.float64)
    err = np.abs(got - want)
    rel = float((err / np.maximum(np.abs(want), 1e-30)).max()) if err.size else 0.0
    if bound is None:
        return Validation(float(err.max(initial=0)), rel, bool((err == 0).all()), "exact")
    return Validation(float(err.max(initial=0)), rel, bool((err <= bound).all()),
                      "|err| <= (K+1) * eps32 * sum|products| (fp32 accumulation of K products)")


def run_conv(cs: ConvShape, dtype: DType, arch: Arch, *, timing_only: bool = False, ideal_memory: bool = False,
             seed: int = 0, progress=None, limits: Limits | None = LIMITS) -> tuple[SimResult, Validation | None]:
    """Compile one convolution for ``arch``, simulate it on seeded random inputs and check Y against numpy.
    limits: as :func:`run_gemm`'s, checked before the tiling search."""
    what = f"conv {cs.N}x{cs.C}x{cs.H}x{cs.W} * {cs.K}x{cs.Cg}x{cs.R}x{cs.S}"
    outputs, target = cs.N * cs.K * cs.OH * cs.OW, Target.of(arch)
    if limits is not None:
        dram = (cs.N * cs.C * cs.H * cs.W + cs.K * cs.Cg * cs.R * cs.S) * dtype.size + outputs * 4
        try:
            tallest = choose_conv_tiling(cs, dtype, target)
            steps = conv_instructions(cs, tallest, dtype.size, target.rows, target.cols, target.spm)
        except TilingError:   # (narrower, im2col or array-block tiles: at least a step per accumulator tile)
            steps = None
        limits.check(what, layer_work(outputs, cs.macs, dram, arch, steps), timing_only)
    _regions_fit(what, X=cs.N * cs.C * cs.H * cs.W * dtype.size, Wt=cs.K * cs.Cg * cs.R * cs.S * dtype.size,
                 Y=outputs * 4)
    target, tiling = _tiled(conv_on_array, cs, dtype, target)
    program = conv2d(cs, dtype, target, tiling)
    inputs, x, w = conv_inputs(cs, dtype, target.rows, target.cols, seed, tiling.im2col, tiling.pack, tiling.gpack)
    result = simulate(program, arch, None if timing_only else inputs, timing_only=timing_only,
                      ideal_memory=ideal_memory, progress=progress)
    if timing_only:
        return result, None
    got = region_array(result, "Y", ACC_TYPE[dtype], (cs.N, cs.OH, cs.OW, cs.K)).transpose(0, 3, 1, 2)
    xs, ws = to_compute(x, dtype), to_compute(w, dtype)
    want = conv_reference(xs, ws, cs)
    bound = None
    if dtype.is_float:
        bound = (cs.Cg * cs.R * cs.S + 1) * np.finfo(np.float32).eps * conv_reference(np.abs(xs), np.abs(ws), cs)
    return result, _validate(got, want, bound)


def run_conv_transpose(ct: ConvTransposeShape, dtype: DType, arch: Arch, *, mode: str = "split",
                       tiling: TransposeTiling | None = None, timing_only: bool = False, seed: int = 0,
                       progress=None) -> tuple[SimResult, Validation | None]:
    """Compile one transposed convolution (:func:`compiler.kernels.conv_transpose2d.conv_transpose2d`, ``mode`` split or
    swell_spm) for ``arch``, simulate it on seeded random inputs and check Y against the float64/int64 scatter
    reference (floats within the fp32 accumulation bound of the taps each output sums)."""
    target = Target.of(arch)
    if tiling is None:
        target, tiling = _tiled(conv_transpose_on_array, ct, dtype, target, mode=mode)
    program = conv_transpose2d(ct, dtype, target, tiling, mode=mode)
    inputs, x, w = conv_transpose_inputs(ct, dtype, target.rows, target.cols, seed, mode, tiling.gpack)
    result = simulate(program, arch, None if timing_only else inputs, timing_only=timing_only, progress=progress)
    if timing_only:
        return result, None
    got = region_array(result, "Y", ACC_TYPE[dtype], (ct.N, ct.OH, ct.OW, ct.K)).transpose(0, 3, 1, 2)
    xs, ws = to_compute(x, dtype), to_compute(w, dtype)
    want = conv_transpose_reference(xs, ws, ct)
    bound = None
    if dtype.is_float:
        taps = ct.Cg * -(-ct.R // ct.stride[0]) * -(-ct.S // ct.stride[1])
        bound = (taps + 1) * np.finfo(np.float32).eps * conv_transpose_reference(np.abs(xs), np.abs(ws), ct)
    return result, _validate(got, want, bound)


def run_topology(layers, arch: Arch, *, dtype: DType = DType.I8, ideal_memory: bool = False,
                 progress=None) -> dict:
    """Simulate every layer's GEMM view (timing only) in one process; per-layer and total cycles.

    Returns the JSON-ready report: ``cycles`` (sum over layers), ``layers[]`` with ``name, M, N, K, cycles, macs,
    units`` and ``wall_seconds``.
    """
    import time

    t0 = time.perf_counter()
    out = []
    for layer in layers:
        res, _ = run_gemm(layer.M, layer.N, layer.K, dtype, arch, timing_only=True, ideal_memory=ideal_memory)
        out.append({"name": layer.name, "M": layer.M, "N": layer.N, "K": layer.K, "cycles": res.cycles,
                    "macs": res.macs, "mac_utilization": res.mac_utilization(layer.M * layer.N * layer.K),
                    "units": {u.name: u.to_dict(res.cycles) for u in res.units}})
        if progress is not None:
            progress(out[-1])
    return {"cycles": sum(x["cycles"] for x in out), "layers": out, "arch": arch.to_dict(),
            "ideal_memory": ideal_memory, "wall_seconds": time.perf_counter() - t0}


def load_model(model, fallback: bool = True, dims: dict[str, int] | None = None,
               serialized: bytes | None = None) -> Graph:
    """A Graph from an ONNX file path, an onnx.ModelProto or a Graph; with ``fallback``, ops the compiler does not
    know are kept (marked for the host CPU) instead of refused (without it, unless the fusion passes remove every
    such node: an exported LayerNorm's Pow and Sqrt, a written-out softmax's Exp); ``dims`` fixes symbolic input
    dimensions by name; ``serialized``: the model's bytes, if the caller has them (the importer checks them as they
    are)."""
    if isinstance(model, Graph):
        return model
    from compiler.errors import UnsupportedOpError
    from compiler.frontend.onnx_import import import_onnx

    try:
        return import_onnx(model, allow_unknown=fallback, dims=dims, serialized=serialized)
    except UnsupportedOpError:
        if fallback:
            raise
        graph = import_onnx(model, allow_unknown=True, dims=dims)
        if any(n.unsupported for n in run_passes(graph).nodes):
            raise
        return graph


def host_functions(compiled: CompiledModel) -> dict[str, Callable]:
    """The callables behind a compiled model's ``host.call`` instructions: each reads its node's inputs from DRAM,
    runs the node alone in onnxruntime and writes its outputs back to DRAM."""
    if not compiled.host_ops:
        return {}
    from compiler.frontend.builder import to_onnx

    fns = {}
    for h in compiled.host_ops:
        what = f"node {h.node.name!r} ({h.node.qualified_op}) runs on the host, but onnxruntime"
        sess = ort_session(to_onnx(h.subgraph(compiled.graph)), what=what)
        fed = h.fed(compiled.graph)

        def run(dram, h=h, sess=sess, what=what, fed=fed):
            feeds = {t.name: t.read(dram) for t in fed}
            try:
                values = sess.run([t.name for t in h.outputs], feeds)
            except Exception as e:   # onnxruntime's own error types, one per failure kind
                raise SimulationError(f"{what} fails on it: {_first_line(e)}") from None
            for t, value in zip(h.outputs, values):
                t.write(dram, value)
        fns[h.fn] = run
    return fns


def ort_session(model, options=None, what: str = "onnxruntime"):
    """An onnxruntime CPU session for ``model`` (ModelProto, bytes or the path of an ONNX file, which onnxruntime
    reads itself, external data included) that logs only fatal errors (its warnings about unused initializers and the
    like would otherwise reach the user's terminal on every host call); a CompileError ``<what> rejects the model:
    <reason>`` when onnxruntime cannot load it."""
    import onnxruntime as ort

    opts = options or ort.SessionOptions()
    opts.log_severity_level = 4   # errors too: a session that fails to load is reported in our one line
    data = os.fspath(model) if isinstance(model, str | os.PathLike) else model if isinstance(model, bytes) \
        else model.SerializeToString()
    try:
        return ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])
    except Exception as e:   # onnxruntime raises its own Fail/InvalidGraph/NotImplemented types
        raise CompileError(f"{what} rejects the model: {_first_line(e)}") from None


def _first_line(e: BaseException) -> str:
    """The first line of an exception's message, without onnxruntime's ``[ONNXRuntimeError] : N : KIND :`` prefix."""
    text = (str(e).strip().splitlines() or [type(e).__name__])[0]
    return text.split(" : ", 3)[-1] if text.startswith("[ONNXRuntimeError]") else text


def layer_report(result: SimResult, layers) -> list[dict]:
    """Per layer: its program counters ``[start, end)``, its instructions' first start and last retire, cycles, MACs,
    MAC utilization, DRAM bytes, the split of its cycles (:func:`npusim.report.intervals.time_split`) and what bounds
    it (host: it ran on the host CPU; compute: the matrix or vector unit was the busiest; memory: the DMA was), and its
    energy (:func:`isa.energy.layer_energy`: pJ in all and by kind)."""
    out = []
    peak = result.arch.peak_macs_per_cycle
    units, unit = machine_units(result.arch), result.unit_index.tolist()
    part = [units[u].role.time_part if u >= 0 else "" for u in unit]   # per pc
    for lr in layers:
        pcs = [pc for pc in range(lr.start, lr.end) if result.end[pc] >= 0]
        starts, ends = result.start[pcs], result.end[pcs]
        start, end = int(starts.min()), int(ends.max())
        busy = [0] * len(units)
        for pc, s, e in zip(pcs, starts, ends):
            busy[unit[pc]] += int(e - s)
        most = {p: max([b for u, b in zip(units, busy) if u.role.time_part == p], default=0)
                for p in ("compute", "memory_stall", "host")}
        cycles = end - start
        costs = [result.costs[pc] for pc in pcs if part[pc] == "memory_stall"]
        out.append({"name": lr.name, "op": lr.op, "start": start, "end": end, "cycles": cycles, "macs": lr.macs,
                    "mac_utilization": lr.macs / (cycles * peak) if cycles else 0.0,
                    "bound": "host" if most["host"] else "compute" if most["compute"] >= most["memory_stall"]
                    else "memory",
                    "pcs": [lr.start, lr.end], "dram_bytes": sum(k.dram_read + k.dram_write for k in costs),
                    "time_split": time_split([part[pc] for pc in pcs], starts, ends, (start, end))})
    energies = layer_energy(result.energy, [(lr.start, lr.end, row["cycles"]) for lr, row in zip(layers, out)])
    return [row | e for row, e in zip(out, energies)]


def single_layer_report(result: SimResult, name: str, op: str) -> list[dict]:
    """:func:`layer_report` of a single-op program: one layer spanning every instruction."""
    return layer_report(result, [LayerRange(name, op, 0, len(result.program.instrs), result.macs)])


def model_inputs(graph: Graph) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """A graph's inputs: name -> (shape, dtype)."""
    return {n: (graph.tensor(n).shape, graph.tensor(n).dtype) for n in graph.inputs}


def zoo_model(name: str):
    """The ONNX model of zoo entry ``name`` (seeded, default sizes)."""
    from npusim.app.zoo import MODELS

    return MODELS[name]()


def model_report(result: SimResult, compiled: CompiledModel, instructions: bool = True,
                 batch: Batch | None = None) -> dict:
    """The JSON report of a model run: :meth:`SimResult.to_dict` (energy per inference over ``batch``, by default
    the one the model declares: :func:`npusim.app.batch.model_batch`) plus ``batch`` (its size and where it came
    from), ``weight_bytes`` (the DRAM weights image, bytes), ``layers`` (:func:`layer_report`), the model's ``macs``
    and ``mac_utilization`` (its MACs over the peak) and ``host_ops``."""
    batch = batch or model_batch(compiled.graph)
    report = result.to_dict(instructions, inferences=batch.size)
    report["batch"] = batch.to_dict()
    report["layers"] = layer_report(result, compiled.layers)
    # the model's MACs: the instructions' also count the zero blocks of pixel-packed convolutions
    report["macs"] = sum(lr.macs for lr in compiled.layers)
    report["weight_bytes"] = int(compiled.weights.nbytes)   # the DRAM weights image (int4: half a byte per weight)
    report["kv_cache"] = kv_cache_report(compiled)
    report["mac_utilization"] = result.mac_utilization(report["macs"])
    report["host_ops"] = [{"name": h.node.name, "op": h.node.op, "fn": h.fn, "reason": h.reason}
                          for h in compiled.host_ops]
    floats = [n for n in compiled.narrowed if compiled.graph.tensor(n).dtype.kind == "f"]
    report["notes"] = [narrowed_note(floats)] if floats else []
    return report


def kv_cache_report(compiled: CompiledModel) -> list[dict]:
    """The KV caches bound in place (:mod:`compiler.ops.kv_cache`), one entry per past input: ``past``,
    ``present``, the present buffer's ``bytes`` and the ``appended_bytes`` the step writes into it (its new tokens);
    empty for a model without one."""
    out = []
    for name, b in compiled.inputs.items():
        if isinstance(b, CacheBinding):
            past = math.prod(b.shape) * b.dtype.size
            out.append({"past": name, "present": appended_by(compiled.graph, name).outputs[0], "bytes": b.nbytes,
                        "appended_bytes": b.nbytes - past})
    return out


def narrowed_note(names: list[str]) -> str:
    """The report's note on float64 run-time tensors (computed in float32 on the NPU), naming the first few."""
    shown = ", ".join(repr(n) for n in names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
    return f"float64 computed in float32 on the NPU (narrowed; outputs widened back to float64): {shown}"


INDEX_OPS = {"Gather": 1, "GatherElements": 1, "GatherND": 1}
"""Ops reading an integer operand as indices into their first input: input position of the indices."""


def random_inputs(graph: Graph, seed: int = 0) -> dict[str, np.ndarray]:
    """Seeded inputs for ``graph``, in input order from one generator: standard normal for float and the NPU's own
    integer types (i8, u8, i16, i32: cast from it, as always), uniform bools, and for the wider integers (int64 ids,
    positions, masks) integers in [0, n) where n is the size of the axis an index op (Gather) reads them along, else
    [0, 2) (a mask's or token type's values)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name in graph.inputs:
        t = graph.tensor(name)
        if t.dtype == np.bool_:
            out[name] = rng.random(t.shape) < 0.5
        elif t.dtype.kind in "iu" and is_narrowed(t.dtype) or t.dtype == np.uint16:
            out[name] = rng.integers(0, _index_bound(graph, name), t.shape).astype(t.dtype)
        else:
            out[name] = rng.standard_normal(t.shape).astype(t.dtype)
    return out


def _index_bound(graph: Graph, name: str) -> int:
    """The smallest axis size an index op reads input ``name`` along, else 2."""
    bounds = [graph.tensor(u.inputs[0]).shape[u.attrs.get("axis", 0) if u.op != "GatherND" else 0]
              for u in graph.consumers(name) if u.op in INDEX_OPS and u.inputs[INDEX_OPS[u.op]] == name]
    return max(1, min(bounds, default=2))


def run_model(model, arch: Arch, inputs: dict[str, np.ndarray] | None = None, *, timing_only: bool = False,
              validate: bool = False, seed: int = 0, dump_after: str | None = None, fallback: bool = True,
              fuse: bool = True, buffers: int = 2, prefetch: bool | None = None, resident: bool | None = None,
              serial: bool = False, progress=None, limits: Limits | None = LIMITS,
              dims: dict[str, int] | None = None, cache: bool = True, options: OpOptions | None = None,
              batch: int | None = None, **op_options: str):
    """Compile an ONNX model (path, ModelProto or Graph) for ``arch`` and simulate it.

    ``inputs``: input name -> array of exactly the input's shape and dtype (or one array for a one-input model),
    checked before compiling; without them, seeded random ones (standard normal for floats). Returns (compiled
    model, result, outputs by ONNX name, report dict with ``layers``, ``host_ops`` and, when ``validate``,
    ``validation`` per output against onnxruntime). fallback: run the nodes the NPU cannot on the host CPU (else
    UnsupportedOpError lists them).
    fuse, buffers, prefetch, resident, options and the op options by name (``conv_transpose=``, ``msda_tables=``,
    ...): compiler options (:func:`compiler.compile.compile_model`);
    serial: simulate every instruction after the previous one retired (no overlap between units at all). ``progress``
    and ``limits`` are passed to :func:`npusim.simulate` (``progress(retired, total, cycle)``). ``dims`` fixes the
    model's symbolic input dimensions by name (``{"batch": 1}``). ``batch``: the inferences one run makes, for
    the per-inference figures (default: the batch the model declares, :func:`npusim.app.batch.model_batch`; the
    report's ``batch.source`` says where it came from). ``cache``: load the compiled model from the disk
    compile cache (:mod:`npusim.app.compile_cache`) when it holds this model, Arch and options, else compile and store
    it there (an ONNX path or ModelProto; a Graph, or ``dump_after``, always compiles; so does every run with the
    environment variable ``NPUSIM_NO_CACHE`` set). The report says ``compile_cache`` ("hit", "miss" or "off"),
    ``compile_seconds`` (import + compile, or the cache load) and ``simulate_seconds`` (wall).
    """
    t0 = time.perf_counter()
    checked_batch(batch)
    compile_options = dict(fallback=fallback, fuse=fuse, buffers=buffers, prefetch=prefetch, resident=resident,
                           options=validated_options(options, **op_options))
    cache = cache and dump_after is None and not os.environ.get("NPUSIM_NO_CACHE")
    graph, compiled, key = _cached(model, arch, dims, cache, compile_options)
    hit = "off" if key is None else "miss" if compiled is None else "hit"
    if inputs is not None:
        inputs = for_model(model_inputs(graph), inputs)
    if compiled is None:
        compiled = compile_model(graph, arch, dump_after=dump_after, **compile_options)
        if key is not None:
            from npusim.app import compile_cache

            compile_cache.store(key, graph, compiled)
    t1 = time.perf_counter()
    if inputs is None:
        inputs = random_inputs(graph, seed)
    result = simulate(compiled.program, arch, None if timing_only else compiled.dram_inputs(inputs),
                      timing_only=timing_only, host_functions=None if timing_only else host_functions(compiled),
                      serial=serial, progress=progress, limits=limits)
    outputs = {} if timing_only else compiled.read_outputs(result.outputs["ACT"])
    report = model_report(result, compiled, batch=model_batch(graph, dims, batch))
    report.update(compile_seconds=t1 - t0, simulate_seconds=time.perf_counter() - t1, compile_cache=hit)
    if validate and not timing_only:
        report["validation"] = _validation(model, graph, inputs, outputs)
    return compiled, result, outputs, report


def _cached(model, arch: Arch, dims: dict[str, int] | None, cache: bool,
            compile_options: dict) -> tuple[Graph, CompiledModel | None, str | None]:
    """``model`` imported, and compiled for ``arch`` with ``compile_options`` (:func:`compile_model`'s) when the disk
    compile cache holds it: (graph, compiled model or None, the cache key or None when ``cache`` is off or the model
    has no bytes to key)."""
    key = None
    data = _model_bytes(model) if cache else None   # (read or serialized once: the key's and the importer's)
    if data is not None:
        from npusim.app import compile_cache

        compile_cache.max_bytes()   # a bad NPUSIM_CACHE_MAX_BYTES is an error before the compile, not after it
        named = {k: v for k, v in compile_options.items() if k != "options"} | compile_options["options"].as_dict()
        key = compile_cache.cache_key(data + _external_data(model, data), arch,
                                      named | {"dims": dims})   # the op options by name, as before
        entry = compile_cache.load(key)
        if entry is not None:
            return *entry, key
    return load_model(model, compile_options["fallback"], dims, data), None, key


def _validation(model, graph: Graph, inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray]) -> dict:
    """Each output compared with onnxruntime's on the model as given (or, for an old opset onnxruntime no longer
    implements, as converted on import): :func:`_compare`'s dict by output name. A file is onnxruntime's to read (not
    parsed and serialized again here: 2.5 s against 0.6 s for 200 MB of weights)."""
    from compiler.frontend.builder import to_onnx

    given = to_onnx(graph) if isinstance(model, Graph) else model
    try:
        sess = ort_session(given, _ort_options(graph), what="onnxruntime (the reference for --validate)")
    except CompileError:   # an old opset onnxruntime no longer implements: the model as converted on import
        if isinstance(model, Graph):
            raise
        sess = ort_session(to_onnx(graph), _ort_options(graph), what="onnxruntime (the reference for --validate)")
    try:
        refs = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, dict(inputs))))
    except Exception as e:   # onnxruntime's own error types: the model is one it cannot run
        raise CompileError(f"onnxruntime (the reference for --validate) cannot run the model: "
                           f"{_first_line(e)}") from None
    quantized = any(n.op in QUANT_OPS for n in graph.nodes)
    return {name: _compare(outputs[name], refs[name], quantized) for name in outputs}


def _model_bytes(model) -> bytes | None:
    """The bytes of an ONNX path or ModelProto, what the compile cache's key hashes (None for a Graph, which has no
    bytes of its own, or a path that cannot be read: load_model then says what is wrong with it)."""
    import onnx

    if isinstance(model, onnx.ModelProto):
        return model.SerializeToString(deterministic=True)
    if isinstance(model, str | os.PathLike):
        try:
            return Path(model).read_bytes()
        except OSError:
            return None
    return None


def _external_data(model, data: bytes) -> bytes:
    """SHA-256 of each external data file (a dynamo export's ``.onnx.data`` beside it) that the ONNX file ``model``,
    of bytes ``data``, keeps its tensors in, for the compile cache's key (a model exported again with other weights
    has the same ``.onnx`` bytes and another data file); b"" when it has none (every such tensor names its file under
    the key ``location``, so a model whose bytes lack that word has none)."""
    if not isinstance(model, str | os.PathLike) or b"location" not in data:
        return b""
    import hashlib

    import onnx
    from onnx.external_data_helper import ExternalDataInfo, uses_external_data

    from compiler.frontend.onnx_import import external_tensors

    try:
        m = onnx.load_from_string(data)
    except Exception:   # (protobuf's DecodeError) the importer says what is wrong with the file
        return b""
    files = sorted({ExternalDataInfo(t).location for t in external_tensors(m) if uses_external_data(t)})
    h = hashlib.sha256()
    for name in files:
        h.update(name.encode())
        try:
            with open(Path(model).parent / name, "rb") as f:   # (streamed: a data file may be gigabytes)
                h.update(hashlib.file_digest(f, "sha256").digest())
        except OSError:   # the importer says the file is missing
            h.update(b"(missing)")
    return h.digest()


def _ort_options(graph: Graph):
    """Session options for the reference run. A quantized model runs with graph optimizations off, so onnxruntime
    executes exactly the ops in the graph: otherwise it rewrites DequantizeLinear -> Add -> QuantizeLinear into its
    contrib QLinearAdd (and similar), which rounds differently, and int8 outputs could not be compared exactly. So does
    a model with a quantized MatMul weight (a QuantMatMul here): onnxruntime would rewrite its DequantizeLinear ->
    MatMul into a MatMulNBits at accuracy level 4, which quantizes the activations to int8 (0.6% off an f32 tiny
    Llama layer's outputs), and the reference would be the less accurate side."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    if any(n.op in QUANT_OPS or n.op == WEIGHT_QUANT_OP for n in graph.nodes):
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return opts


def _compare(got: np.ndarray, want: np.ndarray, quantized: bool = False) -> dict:
    """max |err| and the relative error max|err| / max|want|; fp32 models must agree within 1e-3 relative, integer
    outputs and every output of a quantized model (int8, or float from DequantizeLinear of identical int8) exactly.
    Equal infinities and NaN against NaN agree (a masked attention score is -inf on both sides); any other
    non-finite difference is an infinite error."""
    g, w = got.astype(np.float64), want.astype(np.float64)
    same = (g == w) | (np.isnan(g) & np.isnan(w))
    with np.errstate(invalid="ignore"):   # inf - inf where the two disagree: counted as an infinite error
        err = float(np.nan_to_num(np.where(same, 0.0, np.abs(g - w)), nan=np.inf).max(initial=0))
    rel = err / max(float(np.abs(w[np.isfinite(w)]).max(initial=0)), 1e-30)
    exact = quantized or not np.issubdtype(want.dtype, np.floating)
    return {"max_abs_error": err, "max_rel_error": rel, "ok": err == 0 if exact else rel <= 1e-3,
            "rule": "exact" if exact else "max|err| / max|reference| <= 1e-3"}


def check_layers(model, arch: Arch, inputs: dict[str, np.ndarray] | None = None, *, seed: int = 0,
                 **options) -> list[dict]:
    """Run ``model`` through npusim (values) and compare every intermediate tensor the compiled program keeps in
    DRAM with onnxruntime's value of the same ONNX tensor (the model with those tensors added as graph outputs).

    Tensors the compiler fused or folded away (a Relu's input after fusion, a Conv's output before its folded
    BatchNormalization) exist only on one side and are skipped. Returns one dict per compared tensor, in graph order:
    ``tensor, node, op, shape, max_abs_error, max_rel_error`` (max |err| / max |reference|) and ``ok`` (the same rule
    as :func:`run_model`'s output validation). ``options`` go to :func:`run_model`.
    """
    from compiler.frontend.builder import to_onnx

    graph = load_model(model, options.get("fallback", True), options.get("dims"))
    compiled, result, _, _ = run_model(graph, arch, inputs, seed=seed, **options)
    produced = {t: n for n in graph.nodes for t in n.outputs if t}
    names = [t for t in produced if t in compiled.tensors]
    if inputs is None:
        inputs = random_inputs(graph, seed)   # the same draws as run_model's
    proto = to_onnx(replace(graph, outputs=tuple(dict.fromkeys(graph.outputs + tuple(names)))))
    sess = ort_session(proto, what="onnxruntime (the reference)")
    refs = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, dict(inputs))))
    got = compiled.read_tensors(result.outputs["ACT"])
    return [{"tensor": t, "node": produced[t].name, "op": produced[t].op, "shape": tuple(refs[t].shape),
             **_compare(got[t], refs[t])} for t in names]
