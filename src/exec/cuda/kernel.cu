// The device interpreter's kernel: interpreter.h compiled by nvcc, one CTA per channel.
#include <cuda_runtime.h>

#include "exec/cuda/dispatch.h"
#include "exec/cuda/launch.h"

namespace coll::exec::dev {
namespace {

__global__ void __launch_bounds__(kCtaThreads) interpreterKernel(const DevWork* works) {
  runChannel(works[blockIdx.x], CtaGroup{});
}

}  // namespace

std::string launchInterpreter(const DevWork* works, int nchannels, void* stream) {
  if (nchannels <= 0) return "";
  interpreterKernel<<<nchannels, kCtaThreads, 0, static_cast<cudaStream_t>(stream)>>>(works);
  cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? "" : cudaGetErrorString(e);
}

}  // namespace coll::exec::dev
