// Builds without CUDA: there is no CUDA runtime, only the emulation (runtime.h).
#include "device/runtime.h"

namespace coll::device {

Runtime* cudaRuntime(std::string* why) {
  if (why) *why = "this build of coll has no CUDA support";
  return nullptr;
}

}  // namespace coll::device
