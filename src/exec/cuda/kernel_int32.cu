// The interpreter kernels for int32 elements (kernel.cuh).
#include "exec/cuda/kernel.cuh"

COLL_DEFINE_LAUNCHER(int32_t, launchInt32)
