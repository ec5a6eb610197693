// The device interpreter's kernel: interpreter.h compiled by nvcc, one CTA per channel.
#include <cuda_runtime.h>

#include "exec/cuda/dispatch.h"
#include "exec/cuda/launch.h"

namespace coll::exec::dev {
namespace {

__global__ void __launch_bounds__(kCtaThreads) interpreterKernel(const DevChannel* channels) {
  const DevChannel& c = channels[blockIdx.x];
  // Every thread of the CTA gets the same answer from runChannel (failures are agreed by syncOr).
  for (int i = 0; i < c.nworks; ++i)
    if (!runChannel(c.works[i], CtaGroup{})) return;
}

}  // namespace

std::string launchInterpreter(const DevChannel* channels, int nchannels, void* stream) {
  if (nchannels <= 0) return "";
  interpreterKernel<<<nchannels, kCtaThreads, 0, static_cast<cudaStream_t>(stream)>>>(channels);
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : cudaGetErrorString(e);
}

}  // namespace coll::exec::dev
