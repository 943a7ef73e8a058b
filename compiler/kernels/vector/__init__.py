"""The vector unit's program generators, one module per kind of op.

- :mod:`~compiler.kernels.vector.strides`: element strides of row-major tensors (dense, broadcast, merged).
- :mod:`~compiler.kernels.vector.streams`: the element-wise stream (load a tile of each input, compute, store;
  double-buffered) and the ops that are one stream: binary with broadcasting, select, unary, activation, pointwise.
- :mod:`~compiler.kernels.vector.recipes`: the instructions per tile of element-wise ops that are no one instruction.
- :mod:`~compiler.kernels.vector.rowwise`: softmax, layer normalisation and last-axis reductions, in whole rows.
- :mod:`~compiler.kernels.vector.pooling`: max and average pooling on NHWC, and the average's counts.
- :mod:`~compiler.kernels.vector.quantization`: quantize, dequantize, requantize.
- :mod:`~compiler.kernels.vector.logic`: comparisons into bools, And/Or/Xor/Not, IsNaN, Where with a run-time
  condition (bit for bit).
- :mod:`~compiler.kernels.vector.scan`: cumulative sums (CumSum) in onnxruntime's order.
- :mod:`~compiler.kernels.vector.ranking`: ArgMax, ArgMin and TopK (indices as i32), NaN as onnxruntime orders it.
- :mod:`~compiler.kernels.vector.cast`: Cast to floats, to bools, and between integers with wrap-around.
"""
