// The interpreter kernels for float8 e5m2 elements (kernel.cuh).
#include "exec/cuda/kernel.cuh"

COLL_DEFINE_LAUNCHER(coll::exec::dev::Fp8E5m2, launchFloat8e5m2)
