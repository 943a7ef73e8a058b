"""What instructions compute: device memory, the numba value kernels and their numpy references."""
