// Launching the device interpreter: picks the kernel of the launch's (type, op) (kernel.cuh).
#include <cuda_runtime.h>

#include "exec/cuda/kernel.cuh"

namespace coll::exec::dev {

/// One launch of one-sided operations (window_run.h: runOneSided): CTA c runs channels[c].
__global__ void __launch_bounds__(kMaxCtaThreads) oneSidedKernel(const DevChannel* channels) {
  __shared__ ChannelShared sh;
  __shared__ DevChannel c;
  runCta(sh, c, channels, [](ChannelShared& s, CtaGroup g) { return runOneSided(s, g); });
}

std::string launchInterpreter(const DevChannel* channels, int nchannels, int threads, int type, int op, int kind,
                              void* stream) {
  if (nchannels <= 0) return "";
  if (threads < 32 || threads > kMaxCtaThreads || threads % 32 != 0) return "threads per CTA out of range";
  if (kind == kOneSidedKernel) {
    oneSidedKernel<<<nchannels, threads, 0, static_cast<cudaStream_t>(stream)>>>(channels);
    cudaError_t e = cudaGetLastError();
    return e == cudaSuccess ? "" : cudaGetErrorString(e);
  }
  const bool window = kind == kWindowKernel;
  // By collDataType_t (coll.h's values, 0..11).
  using Launcher = cudaError_t (*)(int, bool, const DevChannel*, int, int, cudaStream_t);
  static const Launcher kByType[] = {launchInt8,    launchUint8,    launchInt32,      launchUint32,
                                     launchInt64,   launchUint64,   launchFloat16,    launchFloat32,
                                     launchFloat64, launchBfloat16, launchFloat8e4m3, launchFloat8e5m2};
  static_assert(collInt8 == 0 && collFloat8e5m2 == 11 && collNumTypes == 12, "kByType follows collDataType_t");
  if (type < 0 || type >= static_cast<int>(sizeof(kByType) / sizeof(kByType[0]))) return "no kernel for this type";
  cudaError_t e = kByType[type](op, window, channels, nchannels, threads, static_cast<cudaStream_t>(stream));
  return e == cudaSuccess ? "" : cudaGetErrorString(e);
}

std::string interpreterCtasPerSm(int threads, int* out) {
  if (threads < 32 || threads > kMaxCtaThreads || threads % 32 != 0) return "threads per CTA out of range";
  using Query = cudaError_t (*)(int, int*);
  static const Query kByType[] = {launchInt8Occupancy,     launchUint8Occupancy,      launchInt32Occupancy,
                                  launchUint32Occupancy,   launchInt64Occupancy,      launchUint64Occupancy,
                                  launchFloat16Occupancy,  launchFloat32Occupancy,    launchFloat64Occupancy,
                                  launchBfloat16Occupancy, launchFloat8e4m3Occupancy, launchFloat8e5m2Occupancy};
  cudaError_t e = cudaSuccess;
  int least = 1 << 30;
  for (Query q : kByType)
    if (e == cudaSuccess) e = q(threads, &least);
  int oneSided = 0;  // loaded with the others, though a launch of it holds one CTA
  if (e == cudaSuccess)
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&oneSided, reinterpret_cast<const void*>(oneSidedKernel), threads,
                                                      0);
  if (e != cudaSuccess) return cudaGetErrorString(e);
  *out = least;
  return "";
}

}  // namespace coll::exec::dev
