"""Weight-only quantized MatMuls: ``MatMul(A, DequantizeLinear(W_q, scale[, zp]))`` with a constant int4, uint4,
int8, uint8 or FLOAT8E4M3FN ``W_q`` becomes one ``QuantMatMul`` node (:mod:`compiler.ops.weight_quant`) that keeps
``W_q`` quantized in DRAM and applies it on chip.

Taken (ONNX DequantizeLinear, opset 21: ``y = (x - x_zero_point) * x_scale``, the zero point 0 when absent):

- int4 / uint4 / int8 / uint8 ``W_q [K, N]`` with ``axis=0`` and ``block_size`` (scales ``[ceil(K/block), N]``), or
  per column (``axis=1``, scales ``[N]``) or per tensor; constant zero points of the same shape (or none). 8-bit codes
  whose differences from their zero points all fit int8 (symmetric int8, uint8 with zero point 128, ...) are stored
  as those differences, int8 with no zero point (exact; the matrix unit then takes them as they are);
- FLOAT8E4M3FN ``W_q`` per tensor or per column, no zero point (the ONNX reference rejects a nonzero one) and no NaN
  code.

Not taken: a MatMul whose A is itself dequantized (``DequantizeLinear`` of an activation: a QDQ model with quantized
activations keeps its QLinear path as it is).

Runs before constant folding, which never folds a DequantizeLinear (:data:`compiler.passes.fold_constants.KEEP`):
folding a quantized weight into a float constant would store it at four bytes per element. Anything else is left as
it is (an int4/fp8 tensor left in the graph is then refused by the importer's dtype check, naming it).

onnxruntime's ``com.microsoft.MatMulNBits`` becomes the same ``QuantMatMul`` here
(:mod:`compiler.passes.matmul_nbits`)."""

from __future__ import annotations

from dataclasses import replace

import ml_dtypes
import numpy as np

from compiler.ir import Graph, Node, Tensor
from compiler.ops.weight_quant import quant_matmul
from compiler.passes.fold_constants import remove_dead
from compiler.passes.matmul_nbits import is_matmul_nbits, nbits_as_quant_matmul

INT4, UINT4, FP8 = np.dtype(ml_dtypes.int4), np.dtype(ml_dtypes.uint4), np.dtype(ml_dtypes.float8_e4m3fn)
KINDS = {INT4: "int4", UINT4: "uint4", np.dtype(np.int8): "int8", np.dtype(np.uint8): "uint8", FP8: "fp8"}


def _const(graph: Graph, node: Node, i: int) -> np.ndarray | None:
    name = node.inputs[i] if i < len(node.inputs) else ""
    return np.asarray(graph.tensor(name).data) if name and graph.is_const(name) else None


def _blocks(dq: Node, w: np.ndarray, scale: np.ndarray) -> int | None:
    """The block size along K of ``dq``'s scales (0: one per column; None: a form not taken)."""
    K, N = w.shape
    axis, bs = int(dq.attrs.get("axis", 1)) % 2, int(dq.attrs.get("block_size", 0) or 0)
    if scale.size == 1:
        return 0
    if bs == 0:
        return 0 if axis == 1 and scale.shape == (N,) else None
    return bs if axis == 0 and scale.shape == (-(-K // bs), N) else None


def _as_rows(a: np.ndarray, N: int) -> np.ndarray:
    """Per-tensor / per-column / per-block values as f32 rows ``[blocks, N]``."""
    a = np.asarray(a, np.float32)
    return np.ascontiguousarray(np.broadcast_to(a.reshape(-1, N) if a.size > 1 else a.reshape(1, 1),
                                                (a.size // N if a.size > 1 else 1, N)))


def _fused(graph: Graph, mm: Node, dq: Node) -> tuple[Node, dict[str, Tensor]] | None:
    w, scale = _const(graph, dq, 0), _const(graph, dq, 1)
    if w is None or scale is None or w.dtype not in KINDS or w.ndim != 2:
        return None
    kind, zp = KINDS[w.dtype], _const(graph, dq, 2)
    if len(dq.inputs) > 2 and dq.inputs[2] and zp is None:
        return None
    block = _blocks(dq, w, scale)
    if block is None or block and block % 2 and kind != "fp8":
        return None
    N = w.shape[1]
    if kind == "fp8":
        raw = w.view(np.uint8)
        if (zp is not None and np.any(zp.astype(np.float32) != 0)) or np.any((raw & 0x7F) == 0x7F):
            return None
        codes, zp_rows = raw, None
    else:
        codes = w.astype(np.int8 if kind in ("int4", "int8") else np.uint8)
        zp_rows = None if zp is None else _as_rows(zp.astype(np.float32), N)
        if kind in ("int8", "uint8") and zp_rows is not None:
            kind, codes, zp_rows = _signed_bytes(kind, codes, zp_rows, block)
    return quant_matmul(mm.name, mm.inputs[0], mm.outputs, kind, block, codes, _as_rows(scale, N), zp_rows)


def _signed_bytes(kind: str, codes: np.ndarray, zp_rows: np.ndarray, block: int) -> tuple:
    """8-bit codes less their zero points as int8 with no zero point, when every difference fits int8 (exact);
    else (``kind``, ``codes``, ``zp_rows``) as they are."""
    K = codes.shape[0]
    diff = codes.astype(np.int64) - np.repeat(zp_rows, block or K, axis=0)[:K].astype(np.int64)
    if diff.min() < -128 or diff.max() > 127:
        return kind, codes, zp_rows
    return "int8", diff.astype(np.int8), None


def fuse_weight_quant(graph: Graph) -> Graph:
    """``graph`` with every MatMul by a dequantized constant int4/uint4/int8/uint8/fp8 weight (of an A that is not
    dequantized itself), and every com.microsoft MatMulNBits it can take (:mod:`compiler.passes.matmul_nbits`), as a
    ``QuantMatMul``; a MatMulNBits it cannot take is marked ``unsupported`` with the reason."""
    nodes, tensors, changed = [], dict(graph.tensors), False
    for n in graph.nodes:
        if is_matmul_nbits(n):
            got = nbits_as_quant_matmul(graph, n)
            if isinstance(got, str):
                nodes.append(replace(n, unsupported=got))
            else:
                nodes.extend(got[0])
                tensors.update(got[1])
            changed = True
            continue
        dq = graph.producer(n.inputs[1]) if n.op == "MatMul" and len(n.inputs) == 2 else None
        a = graph.producer(n.inputs[0]) if dq is not None else None
        qdq = a is not None and a.op == "DequantizeLinear"   # (quantized activations: the QLinear path)
        got = _fused(graph, n, dq) if dq is not None and dq.op == "DequantizeLinear" and not qdq else None
        if got is None:
            nodes.append(n)
            continue
        nodes.append(got[0])
        tensors.update(got[1])
        changed = True
    if not changed:
        return graph
    return remove_dead(replace(graph, nodes=tuple(nodes), tensors=tensors))
