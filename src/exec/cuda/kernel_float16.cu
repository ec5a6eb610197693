// The interpreter kernels for float16 elements (kernel.cuh).
#include "exec/cuda/kernel.cuh"

COLL_DEFINE_LAUNCHER(coll::exec::dev::Half, launchFloat16)
