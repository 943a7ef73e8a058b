"""The parts of the dequantizing GEMM (:mod:`compiler.kernels.dequant_gemm`): formats and schemes, plan, DRAM
images, loads, the vector unit's work on weight tiles, and the program of each scheme."""
