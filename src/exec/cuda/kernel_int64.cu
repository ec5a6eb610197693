// The interpreter kernels for int64 elements (kernel.cuh).
#include "exec/cuda/kernel.cuh"

COLL_DEFINE_LAUNCHER(int64_t, launchInt64)
