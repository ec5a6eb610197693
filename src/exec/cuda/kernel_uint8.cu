// The interpreter kernels for uint8 elements (kernel.cuh).
#include "exec/cuda/kernel.cuh"

COLL_DEFINE_LAUNCHER(uint8_t, launchUint8)
