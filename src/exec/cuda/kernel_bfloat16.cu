// The interpreter kernels for bfloat16 elements (kernel.cuh).
#include "exec/cuda/kernel.cuh"

COLL_DEFINE_LAUNCHER(coll::exec::dev::Bf16, launchBfloat16)
