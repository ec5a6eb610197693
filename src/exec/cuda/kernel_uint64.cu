// The interpreter kernels for uint64 elements (kernel.cuh).
#include "exec/cuda/kernel.cuh"

COLL_DEFINE_LAUNCHER(uint64_t, launchUint64)
