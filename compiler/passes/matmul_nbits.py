"""onnxruntime's ``com.microsoft.MatMulNBits`` (the int4 weight format of LLM exports) as a ``QuantMatMul``
(:mod:`compiler.ops.weight_quant`), so that its weight stays packed in DRAM and is dequantized on chip.

The op (onnxruntime docs/ContribOperators.md, and its CPU kernel ``matmul_nbits.cc``): ``Y = A @ W^T (+ bias)`` with
``W[n, k] = (q[n, k] - zp[n, k // block_size]) * scales[n, k // block_size]``. ``B`` is uint8
``[N, ceil(K / block_size), block_size * bits / 8]``: each row is one output column's codes along K, two 4-bit codes
a byte, the earlier k in the low nibble; the last block is padded when ``block_size`` does not divide K. ``scales``
is ``[N, k_blocks]`` (older exports: flat). ``zero_points`` is uint8 packed the same way, ``[N, ceil(k_blocks / 2)]``,
or of A's float type ``[N, k_blocks]``; absent, it is ``2^(bits - 1)``, 8 for 4 bits.

Taken: ``bits`` 4, ``accuracy_level`` 0 or 1 (f32 arithmetic; 4 lets onnxruntime quantize A to int8, 2 and 3 compute
in f16/bf16), ``weight_prepacked`` 0, no ``g_idx``, f32 ``A``, constant ``B``, scales, zero points and bias. The
codes become uint4 ``[K, N]`` with their zero point (one value, or a per-block image), the bias an ``Add`` after it.
Anything else keeps the node, marked for the host CPU with the reason (:func:`nbits_as_quant_matmul`)."""

from __future__ import annotations

import numpy as np

from compiler.ir import Graph, Node, Tensor
from compiler.ops.weight_quant import quant_matmul

OP, DOMAIN = "MatMulNBits", "com.microsoft"
A, B, SCALES, ZERO_POINTS, G_IDX, BIAS = range(6)
INPUT_NAMES = ("A", "B", "scales", "zero_points", "g_idx", "bias")


def is_matmul_nbits(n: Node) -> bool:
    """Whether ``n`` is a ``com.microsoft.MatMulNBits`` node."""
    return n.op == OP and n.domain == DOMAIN


def _input(n: Node, i: int) -> str:
    return n.inputs[i] if i < len(n.inputs) else ""


def _refusal(graph: Graph, n: Node) -> str | None:
    """Why ``n`` cannot become a QuantMatMul (one line), or None."""
    bits, level = int(n.attrs.get("bits", 4)), int(n.attrs.get("accuracy_level", 0))
    if bits != 4:
        return f"bits={bits}: only 4-bit MatMulNBits weights run on the NPU"
    if level not in (0, 1):
        return (f"accuracy_level={level} computes in a lower precision (4: A quantized to int8); only 0 or 1 (f32) "
                f"runs on the NPU")
    if int(n.attrs.get("weight_prepacked", 0)):
        return "weight_prepacked: a GPU-specific layout of B is not supported"
    if _input(n, G_IDX):
        return "g_idx (a K permutation, deprecated in onnxruntime) is not supported"
    if np.dtype(graph.tensor(n.inputs[A]).dtype) != np.float32:
        return f"A is {graph.tensor(n.inputs[A]).dtype}: only float32 activations run on the NPU"
    for i in (B, SCALES, ZERO_POINTS, BIAS):
        name = _input(n, i)
        if name and not graph.is_const(name):
            return (f"input {INPUT_NAMES[i]} ({name!r}) is computed at run time; the NPU keeps only a constant "
                    f"quantized weight in DRAM")
    return None


def _codes(b: np.ndarray, K: int, N: int, block: int) -> np.ndarray | None:
    """The uint4 codes ``[K, N]`` of packed ``B`` ``[N, k_blocks, block / 2]`` (None: another shape)."""
    kb = -(-K // block)
    if b.dtype != np.uint8 or b.size != N * kb * block // 2:
        return None
    b = b.reshape(N, kb * block // 2)
    q = np.empty((N, kb * block), np.uint8)
    q[:, 0::2], q[:, 1::2] = b & 0x0F, b >> 4
    return np.ascontiguousarray(q[:, :K].T)


def _zero_points(z: np.ndarray | None, N: int, kb: int) -> np.ndarray | None:
    """Zero points as f32 rows ``[k_blocks, N]``: 8 when absent, unpacked from uint8 (two a byte, low nibble first)
    or as given in float (None: another shape)."""
    if z is None:
        return np.full((kb, N), 8.0, np.float32)
    if z.dtype == np.uint8:
        per = -(-kb // 2)
        if z.size != N * per:
            return None
        z = z.reshape(N, per)
        out = np.empty((N, 2 * per), np.float32)
        out[:, 0::2], out[:, 1::2] = z & 0x0F, z >> 4
        return np.ascontiguousarray(out[:, :kb].T)
    return np.ascontiguousarray(z.astype(np.float32).reshape(N, kb).T) if z.size == N * kb else None


def _const(graph: Graph, name: str) -> np.ndarray | None:
    return np.asarray(graph.tensor(name).data) if name else None


def nbits_as_quant_matmul(graph: Graph, n: Node) -> tuple[list[Node], dict[str, Tensor]] | str:
    """The QuantMatMul (and bias Add) that compute MatMulNBits node ``n`` with the new constant tensors, or the
    reason it runs on the host (a node with attributes or operands of another shape than the op defines is refused
    as such, naming the operand)."""
    reason = _refusal(graph, n)
    if reason:
        return reason
    K, N, block = int(n.attrs["K"]), int(n.attrs["N"]), int(n.attrs["block_size"])
    if block < 16 or block & (block - 1):
        return f"block_size={block} is not a power of 2 of at least 16, as MatMulNBits requires"
    kb = -(-K // block)
    codes = _codes(_const(graph, n.inputs[B]), K, N, block)
    scales = _const(graph, n.inputs[SCALES])
    zps = _zero_points(_const(graph, _input(n, ZERO_POINTS)), N, kb)
    for what, bad in (("B", codes is None), ("scales", scales.size != N * kb), ("zero_points", zps is None)):
        if bad:
            return f"input {what} does not have the shape MatMulNBits defines for K={K}, N={N}, block_size={block}"
    out, bias = n.outputs[0], _input(n, BIAS)
    mm_out = f"{out}.matmul" if bias else out
    node, tensors = quant_matmul(n.name, n.inputs[A], (mm_out,), "uint4", block, codes,
                                 np.ascontiguousarray(scales.astype(np.float32).reshape(N, kb).T), zps)
    if not bias:
        return [node], tensors
    y = graph.tensor(out)
    tensors[mm_out] = Tensor(mm_out, y.shape, y.dtype)
    return [node, Node(f"{n.name}.bias", "Add", (mm_out, bias), (out,))], tensors
