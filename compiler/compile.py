"""Whole-model compilation: graph passes, one lowering per node (:mod:`compiler.ops`), linked into one ISA
program (:func:`compiler.link.linker.link`); nodes the NPU cannot run become host calls (:mod:`compiler.ops.host`).

The memory plan (regions ``W`` and ``ACT``, layouts) is :class:`compiler.ops.LoweringContext`'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from compiler.errors import (
    FALLBACK_HINT,
    CompileError,
    TilingError,
    UnsupportedDTypeError,
    UnsupportedOpError,
    no_tiling,
)
from compiler.frontend.dtypes import from_storage, is_narrowed, to_storage
from compiler.ir import Graph, Node
from compiler.kernels.common.target import Target
from compiler.link.linker import LayerRange, Segment, leading_constants, link
from compiler.link.residency import place_in_spm
from compiler.ops import ALIGN, REGISTRY, Binding, LoweringContext, OpOptions, unsupported_nodes, validated_options
from compiler.ops.host import HostOp, HostTensor, host_fn_name, host_ops, host_program, storage_dtype
from compiler.ops.kv_cache import appended_by, bind_past
from compiler.ops.layout import lower_constant_output
from compiler.passes import FUSION_PASSES, run_passes
from isa import Program
from isa.arch import Arch
from isa.cost import program_estimate

CONV_OPS = {"Conv", "QLinearConv"}   # re-lowered for half the SPM under prefetch
RESIDENT_MIN_SPM = 1 << 23           # bytes: activations are kept in SPM by default from this SPM size (dc128)
ARENA_FRACTION = 3 / 8               # of the SPM, for activations kept on chip (measured: see docs/compiler.md)
PREFETCH_MIN_SPM = 1 << 20           # bytes: prefetch is on by default from this SPM size (mid32, dc128)


@dataclass(frozen=True)
class CompiledModel:
    """A linked program with its memory plan: weights image, activation arena size, input/output bindings."""

    program: Program
    layers: tuple[LayerRange, ...]
    weights: np.ndarray
    act_bytes: int
    inputs: dict[str, Binding]
    outputs: dict[str, Binding]
    graph: Graph
    host_ops: tuple[HostOp, ...] = ()
    tensors: dict[str, Binding] = field(default_factory=dict)
    """Every activation the program keeps in region ACT (inputs, intermediates, outputs) by ONNX name, in its
    final layout; fused or folded tensors (a Relu's input after fusion, BN outputs) and those kept in the SPM
    (``compile_model(resident=...)``) are absent."""

    def dram_inputs(self, values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The DRAM regions' initial contents for graph inputs ``values`` (by ONNX input name, each in its graph
        type), each stored as the NPU holds its type (:mod:`compiler.frontend.dtypes`); ValueRangeError naming the
        input and the value for an int64 the NPU's int32 cannot hold."""
        act = np.zeros(self.act_bytes, np.uint8)
        for name, b in self.inputs.items():
            value = to_storage(values[name], self.graph.tensor(name).dtype, f"input {name!r}")
            data = b.to_memory(value).view(np.uint8).ravel()
            act[b.offset: b.offset + data.size] = data
        return {"W": self.weights, "ACT": act}

    def read_outputs(self, act: np.ndarray) -> dict[str, np.ndarray]:
        """The graph outputs from the final ACT region, each in its ONNX type (widened from its NPU storage: a bool
        output is stored as u8, an int64 one as i32)."""
        return {name: from_storage(b.from_memory(act), self.graph.tensor(name).dtype)
                for name, b in self.outputs.items()}

    @property
    def narrowed(self) -> tuple[str, ...]:
        """The run-time tensors held in a narrower type than the model's (float64 computed in float32, int64 held
        as int32), in graph order; a run's report names the float ones."""
        return tuple(n for n, t in self.graph.tensors.items() if not t.is_const and is_narrowed(t.dtype))

    def read_tensors(self, act: np.ndarray) -> dict[str, np.ndarray]:
        """Every tensor of :attr:`tensors` from the final ACT region (each has its own offset, none is reused)."""
        return {name: b.from_memory(act) for name, b in self.tensors.items()}


def compile_model(graph: Graph, arch: Arch, dump_after: str | None = None, fallback: bool = True, *,
                  fuse: bool = True, buffers: int = 2, prefetch: bool | None = None,
                  resident: bool | None = None, options: OpOptions | None = None,
                  **op_options: str) -> CompiledModel:
    """Compile ``graph`` for ``arch``.

    fallback: nodes the NPU cannot run (unknown ops, unsupported attributes or dtypes) run on the host CPU as
    ``host.call`` segments (listed in ``CompiledModel.host_ops``). Without it, UnsupportedOpError lists them.
    fuse: run the fusion passes (off: every exporter pattern stays as its nodes and every Relu/Clip, bias Add and
    residual Add is its own vector-unit layer).
    buffers: ring depth of every layer's load -> compute -> store pipeline (2: double buffering; 1: a step's loads
    wait until the previous step's compute freed its buffer, so loads, compute and stores of a layer do not
    overlap; tiles are unchanged, so this isolates what the overlap saves).
    prefetch: a layer may be compiled for half the SPM (when it fits and the compiler's estimate, counting its leading
    constant loads as hidden, is no worse); consecutive such layers alternate between the halves and load their
    leading constants (weights, biases) before waiting for the previous layer (:func:`compiler.link.linker.link`), so
    those loads overlap that layer's tail. None: on for SPMs of at least ``PREFETCH_MIN_SPM`` bytes whose half is a
    whole
    number of bank rows (below, half an SPM rarely holds a layer, and pricing each conv twice costs compile time:
    edge16's ResNet-50 compiled in 34 s instead of 15.5 s for 0.1% fewer cycles).
    resident: keep activations on chip (:mod:`compiler.link.residency`): the top ``ARENA_FRACTION`` of the SPM holds the
    activation tensors that fit there (by live range), so layers pass them through SRAM instead of DRAM; the layers
    are compiled for the rest of the SPM. Graph inputs, outputs and what host calls touch stay in DRAM, and tensors
    kept on chip are absent from ``CompiledModel.tensors``. None: on for SPMs of at least ``RESIDENT_MIN_SPM`` bytes
    (on mid32's 1 MiB it costs BERT and ViT 5-6% for 1.2-7.4% on the CNNs, see docs/compiler.md).
    options, op_options: the op options (:mod:`compiler.ops.options`): an :class:`~compiler.ops.OpOptions`, and/or
    each by name as a keyword over it, e.g. ``conv_transpose="swell_spm"`` (how ConvTranspose is lowered) or
    ``msda_tables="dram"`` (where a deformable attention keeps its level tables); the rest at their defaults.
    :data:`compiler.ops.OPTIONS` (and docs/ops.md) lists them with their values. An unknown name is a TypeError, a
    value the option does not take a CompileError naming the values it takes.
    """
    if buffers not in (1, 2):
        raise CompileError(f"buffers must be 1 (single) or 2 (double buffering), not {buffers}")
    graph = run_passes(graph, dump_after, skip=() if fuse else FUSION_PASSES)
    host = _host_nodes(graph, arch, fallback)
    plan = SpmPlan.of(arch, prefetch, resident)
    low = LoweringContext(graph, plan.target, validated_options(options, **op_options))
    inputs = _bind_inputs(low)
    _lower_nodes(low, host, plan.half, fallback)
    return _link_model(low, plan, inputs, buffers)


def _host_nodes(graph: Graph, arch: Arch, fallback: bool) -> dict[Node, str]:
    """The nodes of ``graph`` the NPU cannot run, with why (they run on the host); without ``fallback``, refuse the
    first of them with UnsupportedOpError. Refuses a float model on an Arch whose matrix unit has no f32."""
    host = dict(unsupported_nodes(graph))
    if host and not fallback:
        (n, why), rest = next(iter(host.items())), list(host)[1:]
        more = f" (and {len(rest)} more: {', '.join(sorted({b.op for b in rest}))})" if rest else ""
        raise UnsupportedOpError(n.name, n.op, why + more + FALLBACK_HINT)
    if "f32" not in arch.matrix.dtypes and any(n.op in ("Conv", "Gemm", "MatMul") for n in graph.nodes):
        raise UnsupportedDTypeError(graph.inputs[0], "float32", arch.matrix.dtypes)
    return host


@dataclass(frozen=True)
class SpmPlan:
    """How one compile divides the SPM: the top ``arena`` bytes of the Arch's (``whole``) hold activations
    (:mod:`compiler.link.residency`), the lowerings get ``target`` (the rest), and under prefetch a layer may be
    compiled for ``half`` of that (None: prefetch off)."""

    whole: Target
    target: Target
    half: Target | None
    arena: int

    @classmethod
    def of(cls, arch: Arch, prefetch: bool | None, resident: bool | None) -> SpmPlan:
        """The plan for ``arch`` under :func:`compile_model`'s ``prefetch`` and ``resident`` (None: by SPM size)."""
        whole = Target.of(arch)
        half = None if prefetch is False or (prefetch is None and arch.spm.size < PREFETCH_MIN_SPM) else _half(whole)
        if prefetch and half is None:
            raise CompileError(f"prefetch needs an SPM of an even number of bank rows ({arch.spm.banks} banks x "
                               f"{arch.spm.bank_width} B), not {arch.spm.size} B; compile with prefetch=False")
        arena = _arena_bytes(whole) if resident or (resident is None and arch.spm.size >= RESIDENT_MIN_SPM) else 0
        target = whole.with_spm(whole.spm - arena) if arena else whole   # the lowerings get the SPM below the arena
        half = half and _half(target) if arena else half                 # and prefetch splits that
        return cls(whole, target, half, arena)


def _bind_inputs(low: LoweringContext) -> dict[str, Binding]:
    """Place the graph inputs in region ACT (NHWC when a consumer lowers NHWC): where the caller writes them."""
    graph = low.graph
    for name in graph.inputs:
        t = graph.tensor(name)
        if appended_by(graph, name):   # a past KV input, held in its present output's buffer
            low.bind[name] = bind_past(low, name)
            continue
        nhwc = t.rank in (3, 4) and any(getattr(REGISTRY.get(u.op), "nhwc", False) and u.inputs[0] == name
                                        for u in graph.consumers(name))
        low.bind[name] = low.alloc(t.shape, "nhwc" if nhwc else "rm", storage_dtype(t))
    return {n: low.bind[n] for n in graph.inputs}   # before any layout change


def _lower_nodes(low: LoweringContext, host: dict[Node, str], half: Target | None, fallback: bool) -> None:
    """Lower every node in graph order: those in ``host`` on the host, the rest on the NPU, or (with ``fallback``)
    on the host when their lowering refuses them or no tiling fits."""
    for node in low.graph.nodes:
        if node in host:
            _host(low, node, host[node])
            continue
        saved = low.snapshot()
        try:
            _lower(low, node, half)
        except (UnsupportedOpError, TilingError) as e:   # a case its lowering does not handle, or no tiling fits
            why = e.reason if isinstance(e, UnsupportedOpError) else no_tiling(e)
            if not fallback:
                raise UnsupportedOpError(node.name, node.op, why + FALLBACK_HINT) from None
            low.restore(saved)
            _host(low, node, why)


def _link_model(low: LoweringContext, plan: SpmPlan, inputs: dict[str, Binding], buffers: int) -> CompiledModel:
    """Bind the graph outputs, keep what fits of the activations in the SPM arena and link the segments."""
    graph = low.graph
    for name in graph.outputs:
        if name not in low.bind and graph.is_const(name):   # the model's result folded to a constant
            lower_constant_output(low, name)
    outputs = {name: low.want(name, "nhwc" if low.bind[name].layout == "nhwc" else "rm") for name in graph.outputs}
    weights = np.concatenate(low.weights) if low.weights else np.zeros(ALIGN, np.uint8)
    segments = low.segments if buffers == 2 else [_ring_depth(s, buffers) for s in low.segments]
    placed = []
    if plan.arena:
        pinned = {b.offset for b in (*inputs.values(), *outputs.values())}
        pinned |= {t.offset for h in low.host for t in (*h.inputs, *h.outputs) if t.region == "ACT"}
        segments, placed = place_in_spm(segments, low.allocs, pinned, plan.target.spm, plan.arena,
                                        plan.whole.bank_row)
    program, layers = link(segments, plan.whole.config, {"W": weights.size, "ACT": max(low.act, ALIGN)},
                           plan.half.spm if plan.half else 0)
    on_chip = {p.offset for p in placed}
    return CompiledModel(program, tuple(layers), weights, max(low.act, ALIGN),
                         inputs, outputs, graph, tuple(low.host),
                         {n: b for n, b in {**low.bind, **outputs}.items() if b.offset not in on_chip})


def _lower(low: LoweringContext, node: Node, half: Target | None) -> None:
    """Lower ``node`` for the context's target or, when ``half`` is given and its estimate is no worse once the
    leading constant loads are hidden behind the previous layer, for half of its SPM."""
    lower, target = REGISTRY[node.op].lower, low.target
    if half is None:
        return lower(low, node)
    before = low.snapshot()
    first = len(low.segments)   # this node's segments are low.segments[first:]
    lower(low, node)
    if all(s.program.spm_top() <= half.spm for s in low.segments[first:]):   # it fits half as it is
        low.segments[first:] = [replace(s, program=replace(s.program, config=replace(
            s.program.config, spm=half.spm))) for s in low.segments[first:]]
        return
    if node.op not in CONV_OPS:   # GEMMs, vector streams: the estimate favours smaller tiles more than the simulator
        return
    full = low.snapshot()
    full_cycles = sum(program_estimate(s.program, target.arch) for s in low.segments[first:])
    low.restore(before)
    low.target, low.prefetched = half, True
    try:
        lower(low, node)
    except CompileError:   # it does not fit half the SPM
        low.restore(full)
        return
    finally:
        low.target, low.prefetched = target, False
    new = low.segments[first:]
    half_cycles = sum(program_estimate(s.program, half.arch) for s in new)
    half_cycles -= leading_constants(new[0].program, half.arch, new[0].bind)
    if half_cycles > full_cycles:
        low.restore(full)


def _half(target: Target) -> Target | None:
    """``target`` with half its SPM (what a layer gets under prefetch), or None when that is not whole bank rows."""
    size = target.spm // 2
    return None if size % target.bank_row else target.with_spm(size)


def _arena_bytes(target: Target) -> int:
    """SPM bytes kept for activations (:mod:`compiler.link.residency`): ``ARENA_FRACTION`` of the SPM, in whole pairs of
    bank rows (so the rest still splits into two halves for prefetch)."""
    row2 = 2 * target.bank_row
    return int(target.spm * ARENA_FRACTION) // row2 * row2


def _ring_depth(seg: Segment, depth: int) -> Segment:
    """``seg`` with its ring semaphores (``*_empty``, initially the number of free buffers) starting at ``depth``."""
    sems = tuple(replace(s, init=min(s.init, depth)) if s.name.endswith("_empty") else s for s in seg.program.sems)
    return replace(seg, program=replace(seg.program, sems=sems))


def _host(low: LoweringContext, n: Node, reason: str) -> None:
    """Run ``n`` on the host CPU (see :mod:`compiler.ops.host`): activations read in their layout, constants from W."""
    g, ins, outs = low.graph, [], []
    for t in dict.fromkeys(n.present_inputs):
        if g.is_const(t):
            data = np.asarray(low.data(t))
            ins.append(HostTensor(t, "W", low.const(data), data.shape, data.dtype))
        else:
            b = low.bind[t]   # read in its NPU storage, given to the host in the graph's type
            ins.append(HostTensor(t, "ACT", b.offset, b.shape, g.tensor(t).dtype, b.layout, b.dtype.storage))
    nhwc = any(t.layout == "nhwc" and len(t.shape) == 4 for t in ins)
    for t in (o for o in n.outputs if o):
        tensor = g.tensor(t)
        dtype = storage_dtype(tensor, n)
        layout = "nhwc" if nhwc and len(tensor.shape) == 4 else "rm"
        b = low.bind[t] = low.alloc(tensor.shape, layout, dtype)
        outs.append(HostTensor(t, "ACT", b.offset, b.shape, tensor.dtype, layout, dtype.storage))
    fn = host_fn_name(len(low.host), n)
    prog = host_program(fn, sum(t.nbytes for t in ins), sum(t.nbytes for t in outs), host_ops(n, g),
                        low.target.config)
    low.segments.append(Segment(n.name, n.op, prog))
    low.host.append(HostOp(fn, n, tuple(ins), tuple(outs), reason))
