// The interpreter kernels for float32 elements (kernel.cuh).
#include "exec/cuda/kernel.cuh"

COLL_DEFINE_LAUNCHER(float, launchFloat32)
