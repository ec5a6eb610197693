// The device.h functions in a build without CUDA (COLL_ENABLE_CUDA=OFF, or no nvcc): no buffer is
// device memory, and the kernels report that they were not built.
#include "kernels/cuda/device.h"

namespace coll::kernels::cuda {

bool built() { return false; }

bool isDeviceMemory(const void*, int*) { return false; }

std::string reduce(void*, const void*, const void*, size_t, collDataType_t, collRedOp_t, void*) {
  return "coll was built without CUDA";
}

std::string scale(void*, const void*, size_t, collDataType_t, const void*, void*) {
  return "coll was built without CUDA";
}

std::string copyToHost(void*, const void*, size_t) { return "coll was built without CUDA"; }

std::string finishAverage(void*, size_t, collDataType_t, int, void*) { return "coll was built without CUDA"; }

std::string copy(void*, const void*, size_t, void*) { return "coll was built without CUDA"; }

}  // namespace coll::kernels::cuda
