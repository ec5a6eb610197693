// Launching the device interpreter: picks the kernel of the launch's (type, op) (kernel.cuh).
#include <cuda_runtime.h>

#include "exec/cuda/kernel.cuh"

namespace coll::exec::dev {

std::string launchInterpreter(const DevChannel* channels, int nchannels, int threads, int type, int op, void* stream) {
  if (nchannels <= 0) return "";
  if (threads < 32 || threads > kMaxCtaThreads || threads % 32 != 0) return "threads per CTA out of range";
  auto s = static_cast<cudaStream_t>(stream);
  cudaError_t e = cudaErrorInvalidValue;
  switch (type) {
    case collInt8:
      e = launchInt8(op, channels, nchannels, threads, s);
      break;
    case collUint8:
      e = launchUint8(op, channels, nchannels, threads, s);
      break;
    case collInt32:
      e = launchInt32(op, channels, nchannels, threads, s);
      break;
    case collUint32:
      e = launchUint32(op, channels, nchannels, threads, s);
      break;
    case collInt64:
      e = launchInt64(op, channels, nchannels, threads, s);
      break;
    case collUint64:
      e = launchUint64(op, channels, nchannels, threads, s);
      break;
    case collFloat16:
      e = launchFloat16(op, channels, nchannels, threads, s);
      break;
    case collFloat32:
      e = launchFloat32(op, channels, nchannels, threads, s);
      break;
    case collFloat64:
      e = launchFloat64(op, channels, nchannels, threads, s);
      break;
    case collBfloat16:
      e = launchBfloat16(op, channels, nchannels, threads, s);
      break;
    default:
      break;
  }
  return e == cudaSuccess ? "" : cudaGetErrorString(e);
}

}  // namespace coll::exec::dev
