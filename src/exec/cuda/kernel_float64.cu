// The interpreter kernels for float64 elements (kernel.cuh).
#include "exec/cuda/kernel.cuh"

COLL_DEFINE_LAUNCHER(double, launchFloat64)
