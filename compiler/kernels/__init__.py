"""Program generators: each emits the ISA program of one operation (GEMM, convolutions, vector ops, sampling, ...)."""
