// The interpreter kernels for float8 e4m3 elements (kernel.cuh).
#include "exec/cuda/kernel.cuh"

COLL_DEFINE_LAUNCHER(coll::exec::dev::Fp8E4m3, launchFloat8e4m3)
