// Builds without CUDA: the interpreter exists only in its host build (host_threads.h).
#include "exec/cuda/launch.h"

namespace coll::exec::dev {

std::string launchInterpreter(const DevChannel*, int nchannels, int, int, int, int, void*) {
  return nchannels <= 0 ? "" : "this build of coll has no CUDA support";
}

std::string interpreterCtasPerSm(int, int*) { return "this build of coll has no CUDA support"; }

}  // namespace coll::exec::dev
