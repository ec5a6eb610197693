// The interpreter kernels for int8 elements (kernel.cuh).
#include "exec/cuda/kernel.cuh"

COLL_DEFINE_LAUNCHER(int8_t, launchInt8)
