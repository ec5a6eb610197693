// The interpreter kernels for uint32 elements (kernel.cuh).
#include "exec/cuda/kernel.cuh"

COLL_DEFINE_LAUNCHER(uint32_t, launchUint32)
