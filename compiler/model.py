"""Whole-model compilation: graph passes, one lowering per node, linked into one ISA program.

Memory plan: constants (packed weights, biases, maps) in DRAM region ``W``; every activation in region ``ACT`` at
its own offset. A 4-D activation is kept channels-last (``nhwc``) when convolutions or pooling touch it, otherwise
row-major in its logical shape (``rm``); lowerings ask for the layout they need and a transpose is inserted when a
tensor is in the other one. Reshape-like ops are free aliases of row-major tensors.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from isa import Act, BinOp, DmaCopy, DType, Program, ProgramConfig, Reduce, Space
from isa.arch import Arch
from isa.cost import program_estimate

from . import quant, vector
from .conv import Epilogue, conv2d, conv_shape, pack_weights, search_conv_tiling
from .depthwise import depthwise2d, pack_depthwise
from .errors import FALLBACK_HINT, CompileError, UnsupportedDTypeError, UnsupportedOpError
from .gemm import pack_b, search_tiling, tiled_gemm
from .host import HostOp, HostTensor, host_fn_name, host_ops, host_program
from .ir import Graph, Node
from .layout_ops import lower_concat, lower_pad, lower_slice
from .link import LayerRange, Segment, leading_constants, link
from .passes.fold_batchnorm import fold_batchnorm
from .passes.fold_constants import fold_constants
from .passes.fuse import fuse_activation, fuse_residual
from .patchify import is_patchify, lower_patchify
from .residency import place_in_spm
from .steps import activation_step, bias_step

F32 = DType.F32
ALIGN = 64
INT8 = (np.dtype(np.int8), np.dtype(np.uint8))
UNARY = {"Relu": Act.RELU, "Sigmoid": Act.SIGMOID, "Tanh": Act.TANH, "Erf": Act.ERF, "Gelu": Act.GELU,
         "Identity": Act.MOV}
BINARY = {"Add": BinOp.ADD, "Sub": BinOp.SUB, "Mul": BinOp.MUL, "Div": BinOp.DIV}
CONV_OPS = {"Conv", "QLinearConv"}   # re-lowered for half the SPM under prefetch
RESIDENT_MIN_SPM = 1 << 23           # bytes: activations are kept in SPM by default from this SPM size (dc128)
ARENA_FRACTION = 3 / 8               # of the SPM, for activations kept on chip (measured: see docs/compiler.md)
PREFETCH_MIN_SPM = 1 << 20           # bytes: prefetch is on by default from this SPM size (mid32, dc128)
NHWC_OPS = {"Conv", "QLinearConv", "MaxPool", "AveragePool", "GlobalAveragePool"}
ALIASES = {"Reshape", "Flatten", "Squeeze", "Unsqueeze"}
CONST_OPERANDS = ALIASES | {"Slice", "Pad"}  # ops whose int64 constant operands (shapes, starts, pads) are fine
INT8_OK = ALIASES | {"MaxPool"}  # ops that also move int8/uint8 tensors (the quant ops check their own types)
PASSES: dict[str, Callable[[Graph], Graph]] = {"fold_constants": fold_constants, "fold_batchnorm": fold_batchnorm,
                                                "fuse_activation": fuse_activation, "fuse_residual": fuse_residual}


@dataclass(frozen=True)
class Binding:
    """Where a tensor lives: byte ``offset`` in region ACT, logical ``shape``, ``layout`` nhwc or rm."""

    offset: int
    shape: tuple[int, ...]
    dtype: DType
    layout: str

    @property
    def phys(self) -> tuple[int, ...]:
        """The shape in memory order."""
        n, c, h, w = self.shape if self.layout == "nhwc" else (0, 0, 0, 0)
        return (n, h, w, c) if self.layout == "nhwc" else self.shape

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.size

    def to_memory(self, x: np.ndarray) -> np.ndarray:
        """A logical array in this binding's memory order."""
        return np.ascontiguousarray(x.transpose(0, 2, 3, 1) if self.layout == "nhwc" else x)

    def from_memory(self, raw: np.ndarray) -> np.ndarray:
        """This tensor's logical value from the ACT region's bytes."""
        arr = raw[self.offset: self.offset + self.nbytes].view(self.dtype.storage).reshape(self.phys)
        return arr.transpose(0, 3, 1, 2) if self.layout == "nhwc" else arr


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
        """The DRAM regions' initial contents for graph inputs ``values`` (by ONNX input name)."""
        act = np.zeros(self.act_bytes, np.uint8)
        for name, b in self.inputs.items():
            data = b.to_memory(np.asarray(values[name], dtype=b.dtype.storage)).view(np.uint8).ravel()
            act[b.offset: b.offset + data.size] = data
        return {"W": self.weights, "ACT": act}

    def read_outputs(self, act: np.ndarray) -> dict[str, np.ndarray]:
        return {name: b.from_memory(act) for name, b in self.outputs.items()}

    def read_tensors(self, act: np.ndarray) -> dict[str, np.ndarray]:
        """Every tensor of :attr:`tensors` from the final ACT region (each has its own offset, none is reused)."""
        return {name: b.from_memory(act) for name, b in self.tensors.items()}


def run_passes(graph: Graph, dump_after: str | None = None, dump: Callable[[str], None] = print,
               skip: tuple[str, ...] = ()) -> Graph:
    """Apply the graph passes in order, but those named in ``skip``; print the IR after ``dump_after`` (a pass
    name)."""
    if dump_after is not None and dump_after not in PASSES:
        raise CompileError(f"--dump-after must be one of {', '.join(PASSES)}, not {dump_after!r}")
    unknown = [s for s in skip if s not in PASSES]
    if unknown:
        raise CompileError(f"cannot skip unknown pass(es) {', '.join(unknown)}; passes: {', '.join(PASSES)}")
    for name, fn in PASSES.items():
        if name in skip:
            continue
        graph = fn(graph)
        if name == dump_after:
            dump(graph.dump())
    return graph


def unsupported_nodes(graph: Graph) -> list[tuple[Node, str]]:
    """(node, reason) for every node this compiler cannot lower."""
    out = []
    for n in graph.nodes:
        if n.unsupported:
            out.append((n, n.unsupported))
        elif n.op not in LOWER:
            out.append((n, "not lowered to the NPU yet"))
        elif n.op not in quant.QUANT_OPS and any(
                graph.tensor(t).dtype != np.float32 and not (n.op in INT8_OK and graph.tensor(t).dtype in INT8)
                for t in n.present_inputs + n.outputs if not graph.is_const(t) or n.op not in CONST_OPERANDS):
            out.append((n, "only float32 tensors (and int8 through the quantized ops) are lowered"))
    return out


def compile_model(graph: Graph, arch: Arch, dump_after: str | None = None, fallback: bool = True, *,
                  fuse: bool = True, buffers: int = 2, prefetch: bool | None = None,
                  resident: bool | None = None) -> CompiledModel:
    """Compile ``graph`` for ``arch``.

    fallback: nodes the NPU cannot run (unknown ops, unsupported attributes or dtypes) run on the host CPU as
    ``host.call`` segments (listed in ``CompiledModel.host_ops``). Without it, UnsupportedOpError lists them.
    fuse: run the fusion passes (off: every Relu/Clip and every residual Add is its own vector-unit layer).
    buffers: ring depth of every layer's load -> compute -> store pipeline (2: double buffering; 1: a step's loads
    wait until the previous step's compute freed its buffer, so loads, compute and stores of a layer do not
    overlap; tiles are unchanged, so this isolates what the overlap saves).
    prefetch: a layer may be compiled for half the SPM (when it fits and the compiler's estimate, counting its leading
    constant loads as hidden, is no worse); consecutive such layers alternate between the halves and load their
    leading constants (weights, biases) before waiting for the previous layer (:func:`compiler.link.link`), so those
    loads overlap that layer's tail. None: on for SPMs of at least ``PREFETCH_MIN_SPM`` bytes whose half is a whole
    number of bank rows (below, half an SPM rarely holds a layer, and pricing each conv twice costs compile time:
    edge16's ResNet-50 compiled in 34 s instead of 15.5 s for 0.1% fewer cycles).
    resident: keep activations on chip (:mod:`compiler.residency`): the top ``ARENA_FRACTION`` of the SPM holds the
    activation tensors that fit there (by live range), so layers pass them through SRAM instead of DRAM; the layers
    are compiled for the rest of the SPM. Graph inputs, outputs and what host calls touch stay in DRAM, and tensors
    kept on chip are absent from ``CompiledModel.tensors``. None: on for SPMs of at least ``RESIDENT_MIN_SPM`` bytes
    (on mid32's 1 MiB it costs BERT and ViT 5-6% for 1.2-7.4% on the CNNs, see docs/compiler.md).
    """
    if buffers not in (1, 2):
        raise CompileError(f"buffers must be 1 (single) or 2 (double buffering), not {buffers}")
    graph = run_passes(graph, dump_after, skip=() if fuse else ("fuse_activation", "fuse_residual"))
    bad = dict(unsupported_nodes(graph))
    if bad and not fallback:
        (n, why), rest = next(iter(bad.items())), list(bad)[1:]
        more = f" (and {len(rest)} more: {', '.join(sorted({b.op for b in rest}))})" if rest else ""
        raise UnsupportedOpError(n.name, n.op, why + more + FALLBACK_HINT)
    if "f32" not in arch.matrix.dtypes and any(n.op in ("Conv", "Gemm", "MatMul") for n in graph.nodes):
        raise UnsupportedDTypeError(graph.inputs[0], "float32", arch.matrix.dtypes)
    half = None if prefetch is False or (prefetch is None and arch.spm.size < PREFETCH_MIN_SPM) else _half_spm(arch)
    if prefetch and half is None:
        raise CompileError(f"prefetch needs an SPM of an even number of bank rows ({arch.spm.banks} banks x "
                           f"{arch.spm.bank_width} B), not {arch.spm.size} B; compile with prefetch=False")
    arena = _arena_bytes(arch) if resident or (resident is None and arch.spm.size >= RESIDENT_MIN_SPM) else 0
    if arena:   # the lowerings get the SPM below the arena; prefetch splits that
        lower_arch = _with_spm(arch, arch.spm.size - arena)
        half = half and _half_spm(lower_arch)
    else:
        lower_arch = arch
    low = _Lowering(graph, lower_arch)
    for name in graph.inputs:
        users = graph.consumers(name)
        t = graph.tensor(name)
        layout = "nhwc" if t.rank == 4 and any(u.op in NHWC_OPS for u in users) else "rm"
        low.bind[name] = low.alloc(t.shape, layout, quant.dtype_of(t.dtype))
    inputs = {n: low.bind[n] for n in graph.inputs}   # where the caller writes them (before any layout change)
    for node in graph.nodes:
        if node in bad:
            _host(low, node, bad[node])
            continue
        saved = low.snapshot()
        try:
            _lower(low, node, lower_arch, half)
        except UnsupportedOpError as e:   # an attribute or shape this lowering does not handle
            if not fallback:
                raise UnsupportedOpError(e.node, e.op, e.reason + FALLBACK_HINT) from None
            low.restore(saved)
            _host(low, node, e.reason)
    outputs = {name: low.want(name, "nhwc" if low.bind[name].layout == "nhwc" else "rm") for name in graph.outputs}
    weights = np.concatenate(low.weights) if low.weights else np.zeros(ALIGN, np.uint8)
    segments = low.segments if buffers == 2 else [_ring_depth(s, buffers) for s in low.segments]
    placed = []
    if arena:
        pinned = {b.offset for b in (*inputs.values(), *outputs.values())}
        pinned |= {t.offset for h in low.host for t in (*h.inputs, *h.outputs) if t.region == "ACT"}
        segments, placed = place_in_spm(segments, low.allocs, pinned, lower_arch.spm.size, arena,
                                        arch.spm.banks * arch.spm.bank_width)
    program, layers = link(segments, ProgramConfig(arch.matrix.rows, arch.matrix.cols, arch.spm.size,
                                                       arch.acc.size), {"W": weights.size, "ACT": max(low.act, ALIGN)},
                           half.spm.size if half else 0)
    on_chip = {p.offset for p in placed}
    return CompiledModel(program, tuple(layers), weights, max(low.act, ALIGN),
                         inputs, outputs, graph, tuple(low.host),
                         {n: b for n, b in {**low.bind, **outputs}.items() if b.offset not in on_chip})


def _lower(low: _Lowering, node: Node, arch: Arch, half: Arch | None) -> None:
    """Lower ``node`` for the whole SPM of ``arch`` or, when ``half`` is given and its estimate is no worse once the
    leading constant loads are hidden behind the previous layer, for half of it."""
    if half is None:
        return LOWER[node.op](low, node)
    before = low.snapshot()
    first = len(low.segments)   # this node's segments are low.segments[first:]
    LOWER[node.op](low, node)
    if all(_spm_top(s.program) <= half.spm.size for s in low.segments[first:]):   # it fits half as it is
        low.segments[first:] = [replace(s, program=replace(s.program, config=replace(
            s.program.config, spm=half.spm.size))) for s in low.segments[first:]]
        return
    if node.op not in CONV_OPS:   # GEMMs, vector streams: the estimate favours smaller tiles more than the simulator
        return
    full = low.snapshot()
    full_cycles = sum(program_estimate(s.program, arch) for s in low.segments[first:])
    low.restore(before)
    low.arch, low.prefetched = half, True
    try:
        LOWER[node.op](low, node)
    except CompileError:   # it does not fit half the SPM
        low.restore(full)
        return
    finally:
        low.arch, low.prefetched = arch, False
    new = low.segments[first:]
    half_cycles = sum(program_estimate(s.program, half) for s in new)
    half_cycles -= leading_constants(new[0].program, half, new[0].bind)
    if half_cycles > full_cycles:
        low.restore(full)


def _spm_top(program: Program) -> int:
    """One past the highest SPM byte ``program`` touches."""
    return max((view.span(i.src_shape if role == "src" and type(i) is DmaCopy else i.shape, extra)[1]
                for i in program.instrs for role, view, extra in i.views() if view.space is Space.SPM), default=0)


def _half_spm(arch: Arch) -> Arch | None:
    """``arch`` with half its SPM (what a layer gets under prefetch), or None when that is not whole bank rows."""
    size = arch.spm.size // 2
    return None if size % (arch.spm.banks * arch.spm.bank_width) else _with_spm(arch, size)


def _with_spm(arch: Arch, size: int) -> Arch:
    """``arch`` with an SPM of ``size`` bytes (what the lowerings may use)."""
    return replace(arch, spm=replace(arch.spm, size=size))


def _arena_bytes(arch: Arch) -> int:
    """SPM bytes kept for activations (:mod:`compiler.residency`): ``ARENA_FRACTION`` of the SPM, in whole pairs of
    bank rows (so the rest still splits into two halves for prefetch)."""
    row2 = 2 * arch.spm.banks * arch.spm.bank_width
    return int(arch.spm.size * ARENA_FRACTION) // row2 * row2


def _ring_depth(seg: Segment, depth: int) -> Segment:
    """``seg`` with its ring semaphores (``*_empty``, initially the number of free buffers) starting at ``depth``."""
    sems = tuple(replace(s, init=min(s.init, depth)) if s.name.endswith("_empty") else s for s in seg.program.sems)
    return replace(seg, program=replace(seg.program, sems=sems))


def _up(x: int) -> int:
    return -(-x // ALIGN) * ALIGN


class _Lowering:
    """The memory plan and the segments produced so far."""

    def __init__(self, graph: Graph, arch: Arch):
        self.graph, self.arch = graph, arch
        self.prefetched = False   # lowering for half the SPM: leading constant loads overlap the previous layer
        self.segments: list[Segment] = []
        self.weights: list[np.ndarray] = []
        self.wbytes = 0
        self.act = 0
        self.allocs: list[tuple[int, int]] = []   # (ACT offset, bytes) of every activation allocated
        self.bind: dict[str, Binding] = {}
        self.host: list[HostOp] = []

    def alloc(self, shape: tuple[int, ...], layout: str, dtype: DType = F32) -> Binding:
        b = Binding(self.act, tuple(shape), dtype, layout)
        self.allocs.append((b.offset, b.nbytes))
        self.act += _up(b.nbytes)
        return b

    @property
    def spm(self) -> int:
        """SPM bytes a lowering may use (bytes)."""
        return self.arch.spm.size

    def snapshot(self) -> tuple:
        """The lowering state (segments, layouts, memory plan), to go back to after a failed or discarded try."""
        return list(self.segments), dict(self.bind), self.act, self.wbytes, list(self.weights), list(self.allocs)

    def restore(self, saved: tuple) -> None:
        self.segments = list(saved[0])
        self.bind, self.act, self.wbytes = dict(saved[1]), saved[2], saved[3]
        self.weights, self.allocs = list(saved[4]), list(saved[5])

    def const(self, data: np.ndarray) -> int:
        raw = np.ascontiguousarray(data).view(np.uint8).ravel()
        off = self.wbytes
        self.weights.append(np.pad(raw, (0, _up(raw.size) - raw.size)))
        self.wbytes += _up(raw.size)
        return off

    def emit(self, node: Node, program: Program, bind: dict[str, tuple[str, int]], macs: int = 0, suffix=""):
        self.segments.append(Segment(node.name + suffix, node.op, program, bind, macs))

    def want(self, name: str, layout: str) -> Binding:
        """``name`` in ``layout``, inserting a transpose segment if it is in the other one."""
        b = self.bind[name]
        if b.layout == layout or len(b.shape) != 4:
            return b if b.layout == layout else self._convert(name, b, "rm")
        return self._convert(name, b, layout)

    def _convert(self, name: str, b: Binding, layout: str) -> Binding:
        out = self.alloc(b.shape, layout, b.dtype)
        perm = (0, 2, 3, 1) if layout == "nhwc" else (0, 3, 1, 2)
        prog = vector.permute(b.phys, perm, b.dtype, self.spm)
        self.segments.append(Segment(f"{name}.to_{layout}", "Transpose", prog,
                                     {"X": ("ACT", b.offset), "Y": ("ACT", out.offset)}))
        self.bind[name] = out
        return out

    def data(self, name: str) -> np.ndarray:
        return self.graph.tensor(name).data


def _host(low: _Lowering, n: Node, reason: str) -> None:
    """Run ``n`` on the host CPU (see :mod:`compiler.host`): activations read in their layout, constants from W."""
    g, ins, outs = low.graph, [], []
    for t in dict.fromkeys(n.present_inputs):
        if g.is_const(t):
            data = np.asarray(low.data(t))
            ins.append(HostTensor(t, "W", low.const(data), data.shape, data.dtype))
        else:
            b = low.bind[t]
            ins.append(HostTensor(t, "ACT", b.offset, b.shape, b.dtype.storage, b.layout))
    nhwc = any(t.layout == "nhwc" and len(t.shape) == 4 for t in ins)
    for t in (o for o in n.outputs if o):
        tensor = g.tensor(t)
        dtype = HOST_DTYPES.get(np.dtype(tensor.dtype))
        if dtype is None:
            raise UnsupportedDTypeError(t, str(np.dtype(tensor.dtype)), tuple(d.text for d in HOST_DTYPES.values()),
                                        n.name, n.op)
        layout = "nhwc" if nhwc and len(tensor.shape) == 4 else "rm"
        b = low.bind[t] = low.alloc(tensor.shape, layout, dtype)
        outs.append(HostTensor(t, "ACT", b.offset, b.shape, dtype.storage, layout))
    fn = host_fn_name(len(low.host), n)
    cfg = ProgramConfig(low.arch.matrix.rows, low.arch.matrix.cols, low.arch.spm.size, low.arch.acc.size)
    prog = host_program(fn, sum(t.nbytes for t in ins), sum(t.nbytes for t in outs), host_ops(n, g), cfg)
    low.segments.append(Segment(n.name, n.op, prog))
    low.host.append(HostOp(fn, n, tuple(ins), tuple(outs), reason))


HOST_DTYPES = {d.storage: d for d in (DType.F32, DType.F16, DType.I8, DType.U8, DType.I16, DType.I32)}


def _conv(low: _Lowering, n: Node) -> None:
    if is_patchify(n, low.graph):   # stride == kernel: the DMA gathers patches, the GEMM does the rest
        return lower_patchify(low, n)
    a = n.attrs
    x = low.want(n.inputs[0], "nhwc")
    w = low.data(n.inputs[1]).astype(np.float32)
    cs = conv_shape(n, x.shape, w.shape)
    N = cs.N
    arch, r, c = low.arch, low.arch.matrix.rows, low.arch.matrix.cols
    y = low.alloc((N, cs.K, cs.OH, cs.OW), "nhwc")
    act = a.get("activation")
    has_bias = len(n.inputs) > 2 and bool(n.inputs[2])
    if cs.groups == cs.C and cs.K % cs.C == 0:   # depthwise: the vector unit, not 1/rows of the array per group
        prog = depthwise2d(cs, F32, arch.spm.size, arch.vector.lanes)
        bind = {"X": ("ACT", x.offset), "Wd": ("W", low.const(pack_depthwise(w, cs))), "Y": ("ACT", y.offset)}
        low.emit(n, prog, bind, cs.macs)
        if has_bias:
            y = bias_step(low, n, y, low.data(n.inputs[2]))
        if act:
            y = activation_step(low, n, y, act)
    else:   # bias and activation fused: applied to each accumulator tile before the store
        residual = bool(a.get("residual"))   # fuse_residual: the Add's other operand starts the accumulators
        ep = Epilogue(bias=has_bias, act=act[0] if act else None, lo=act[1] if act and len(act) > 1 else 0.0,
                      hi=act[2] if act and len(act) > 1 else 0.0, residual=residual)
        tiling = search_conv_tiling(cs, F32, arch, ep, hidden_constants=low.prefetched)
        prog = conv2d(cs, F32, r, c, arch.spm.size, arch.acc.size, tiling, arch.matrix.max_rows, ep)
        bind = {"X": ("ACT", x.offset), "Wt": ("W", low.const(pack_weights(w, cs, r, c, tiling.im2col, tiling.pack))),
                "Y": ("ACT", y.offset)}
        if residual:
            bind["R"] = ("ACT", low.want(n.inputs[3], "nhwc").offset)
        if has_bias:
            bind["Bias"] = ("W", low.const(low.data(n.inputs[2]).astype(np.float32)))
        low.emit(n, prog, bind, cs.macs)
    low.bind[n.outputs[0]] = y


def _gemm_into(low: _Lowering, n: Node, a_off: int, b: np.ndarray | tuple[str, int], M: int, N: int, K: int,
               out_off: int, suffix: str = "") -> None:
    """One GEMM segment; ``b`` is a constant ``K x N`` array (stored pre-blocked, :func:`pack_b`) or where B lives."""
    arch = low.arch
    r, c, df, bw = arch.matrix.rows, arch.matrix.cols, arch.matrix.dataflow, arch.spm.bank_width
    packed = isinstance(b, np.ndarray)
    tiling = search_tiling(M, N, K, F32, arch, packed)
    prog = tiled_gemm(M, N, K, F32, r, c, arch.spm.size, arch.acc.size, tiling, arch.matrix.max_rows, df, bw,
                      b_packed=packed)
    b_loc = ("W", low.const(pack_b(b, K, N, F32, r, c, tiling, df, bw))) if packed else b
    low.emit(n, prog, {"A": ("ACT", a_off), "B": b_loc, "C": ("ACT", out_off)}, M * N * K, suffix)


def _gemm(low: _Lowering, n: Node) -> None:
    a = n.attrs
    if a.get("transA", 0):
        raise UnsupportedOpError(n.name, n.op, "transA=1 is not supported")
    x = low.want(n.inputs[0], "rm")
    w = low.data(n.inputs[1]).astype(np.float32)
    w = (w.T if a.get("transB", 0) else w) * np.float32(a.get("alpha", 1.0))
    M, K = x.shape
    y = low.alloc((M, w.shape[1]), "rm")
    _gemm_into(low, n, x.offset, np.ascontiguousarray(w), M, w.shape[1], K, y.offset)
    if len(n.present_inputs) > 2:
        y = bias_step(low, n, y, low.data(n.inputs[2]).astype(np.float32) * np.float32(a.get("beta", 1.0)))
    low.bind[n.outputs[0]] = y


def _matmul(low: _Lowering, n: Node) -> None:
    x = low.want(n.inputs[0], "rm")
    out_shape = low.graph.tensor(n.outputs[0]).shape
    y = low.alloc(out_shape, "rm")
    K, N = x.shape[-1], out_shape[-1]
    if low.graph.is_const(n.inputs[1]) and low.data(n.inputs[1]).ndim == 2:
        M = math.prod(x.shape[:-1])
        _gemm_into(low, n, x.offset, low.data(n.inputs[1]).astype(np.float32), M, N, K, y.offset)
    else:
        b = low.want(n.inputs[1], "rm") if not low.graph.is_const(n.inputs[1]) else None
        if b is None or x.shape[:-2] != b.shape[:-2]:
            raise UnsupportedOpError(n.name, n.op, "only A @ constant-2-D B or equal batch dims are supported")
        M = x.shape[-2]
        for i in range(math.prod(x.shape[:-2])):
            _gemm_into(low, n, x.offset + i * M * K * 4, ("ACT", b.offset + i * K * N * 4), M, N, K,
                       y.offset + i * M * N * 4, suffix=f".{i}")
    low.bind[n.outputs[0]] = y


def _elementwise(low: _Lowering, n: Node) -> None:
    g = low.graph
    acts = [t for t in n.inputs[:2] if not g.is_const(t)]
    layout = "nhwc" if any(low.bind[t].layout == "nhwc" and len(low.bind[t].shape) == 4 for t in acts) else "rm"
    out_shape = g.tensor(n.outputs[0]).shape
    locs, shapes = [], []
    for t in n.inputs[:2]:
        if g.is_const(t):
            data = low.data(t).astype(np.float32)
            if layout == "nhwc":
                data = data.reshape((1,) * (4 - data.ndim) + data.shape).transpose(0, 2, 3, 1)
            locs.append(("W", low.const(np.ascontiguousarray(data))))
            shapes.append(data.shape)
        else:
            b = low.want(t, layout)
            locs.append(("ACT", b.offset))
            shapes.append(b.phys if layout == "nhwc" else b.shape)
    y = low.alloc(out_shape, layout if len(out_shape) == 4 else "rm")
    act = n.attrs.get("activation")
    fused = None if act is None else (Act.RELU, 0.0, 0.0) if act[0] == "relu" else (Act.CLAMP, act[1], act[2])
    prog = vector.binary(BINARY[n.op], shapes[0], shapes[1], F32, low.spm, fused)
    low.emit(n, prog, {"A": locs[0], "B": locs[1], "Y": ("ACT", y.offset)})
    low.bind[n.outputs[0]] = y


def _unary(low: _Lowering, n: Node) -> None:
    x = low.bind[n.inputs[0]]
    lo = hi = 0.0
    fn = UNARY.get(n.op, Act.CLAMP)
    if n.op == "Clip":
        ins = n.inputs + ("", "")
        lo = float(low.data(ins[1])) if ins[1] else float(n.attrs.get("min", -3.4e38))
        hi = float(low.data(ins[2])) if ins[2] else float(n.attrs.get("max", 3.4e38))
    if n.op == "Gelu" and n.attrs.get("approximate", "none") != "none":
        raise UnsupportedOpError(n.name, n.op, "only approximate='none' (the erf form) is supported")
    y = low.alloc(x.shape, x.layout)
    low.emit(n, vector.unary(fn, x.phys, F32, low.spm, lo, hi), {"X": ("ACT", x.offset), "Y": ("ACT", y.offset)})
    low.bind[n.outputs[0]] = y


def _pool(low: _Lowering, n: Node) -> None:
    x = low.want(n.inputs[0], "nhwc")
    N, C, H, W = x.shape
    if n.op == "GlobalAveragePool":
        if H != W:
            raise UnsupportedOpError(n.name, n.op, f"only square inputs, not {H}x{W}")
        k, s, p, include = H, 1, 0, True
    else:
        a = n.attrs
        ks, ss, ps = a["kernel_shape"], a["strides"], a["pads"]
        if len(set(ks)) != 1 or len(set(ss)) != 1 or len(set(ps)) != 1 or a.get("ceil_mode", 0) \
                or any(d != 1 for d in a.get("dilations", (1, 1))):
            raise UnsupportedOpError(n.name, n.op, "only square windows, equal strides, symmetric pads, "
                                     "ceil_mode=0 and no dilation")
        k, s, p, include = ks[0], ss[0], ps[0], bool(a.get("count_include_pad", 0))
    kind = "max" if n.op == "MaxPool" else "avg"
    OH, OW = (H + 2 * p - k) // s + 1, (W + 2 * p - k) // s + 1
    y = low.alloc((N, C, OH, OW), "nhwc", x.dtype)
    bind = {"X": ("ACT", x.offset), "Y": ("ACT", y.offset)}
    if kind == "avg" and not include:
        bind["RC"] = ("W", low.const(vector.avgpool_reciprocals(H, W, k, s, p)))
    # a pool of dequantized int8 divides by the count as onnxruntime does, so the requantized result is exact
    dq = getattr(low.graph.producer(n.inputs[0]), "op", None) == "DequantizeLinear"
    low.emit(n, vector.pool2d(kind, N, H, W, C, k, s, p, x.dtype, low.spm, include, divide=dq), bind)
    low.bind[n.outputs[0]] = y


def _alias(low: _Lowering, n: Node) -> None:
    x = low.bind[n.inputs[0]]
    if x.layout == "nhwc" and math.prod(x.shape[2:]) != 1:
        x = low.want(n.inputs[0], "rm")
    low.bind[n.outputs[0]] = Binding(x.offset, low.graph.tensor(n.outputs[0]).shape, x.dtype, "rm")


def _rows(low: _Lowering, n: Node) -> None:
    x = low.want(n.inputs[0], "rm")
    rank = len(x.shape)
    axes = n.attrs.get("axes", (n.attrs.get("axis", -1),))
    if tuple(a % rank for a in axes) != (rank - 1,):
        raise UnsupportedOpError(n.name, n.op, f"only the last axis, not {axes}")
    rows, length = math.prod(x.shape[:-1]), x.shape[-1]
    out_shape = low.graph.tensor(n.outputs[0]).shape
    y = low.alloc(out_shape, "rm")
    bind = {"X": ("ACT", x.offset), "Y": ("ACT", y.offset)}
    if n.op == "Softmax":
        prog = vector.softmax(rows, length, F32, low.spm)
    elif n.op == "LayerNormalization":
        gamma = low.data(n.inputs[1]).astype(np.float32)
        beta = low.data(n.inputs[2]).astype(np.float32) if len(n.present_inputs) > 2 else np.zeros_like(gamma)
        bind["GB"] = ("W", low.const(np.concatenate([gamma.ravel(), beta.ravel()])))
        prog = vector.layernorm(rows, length, F32, low.spm, n.attrs.get("epsilon", 1e-5))
    else:
        prog = vector.reduce_rows(Reduce.SUM, rows, length, F32, low.spm, mean=n.op == "ReduceMean")
    low.emit(n, prog, bind)
    low.bind[n.outputs[0]] = y


def _transpose(low: _Lowering, n: Node) -> None:
    x = low.want(n.inputs[0], "rm")
    perm = tuple(n.attrs.get("perm", tuple(reversed(range(len(x.shape))))))
    y = low.alloc(tuple(x.shape[p] for p in perm), "rm")
    low.emit(n, vector.permute(x.shape, perm, F32, low.spm), {"X": ("ACT", x.offset), "Y": ("ACT", y.offset)})
    low.bind[n.outputs[0]] = y


LOWER: dict[str, Callable[[_Lowering, Node], None]] = {
    "Conv": _conv, "Gemm": _gemm, "MatMul": _matmul, "MaxPool": _pool, "AveragePool": _pool,
    "GlobalAveragePool": _pool, "Softmax": _rows, "LayerNormalization": _rows, "ReduceMean": _rows,
    "ReduceSum": _rows, "Transpose": _transpose, "Clip": _unary, "Concat": lower_concat, "Slice": lower_slice,
    "Pad": lower_pad,
    **dict.fromkeys(BINARY, _elementwise), **dict.fromkeys(UNARY, _unary), **dict.fromkeys(ALIASES, _alias),
    **quant.LOWER}
