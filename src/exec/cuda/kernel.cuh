// The device interpreter's kernels (nvcc only): one __global__ kernel per (type, op), each with the
// whole channel (interpreter.h, kernels/cuda/move.h) inlined, so that no device function call is left. Why:
// with one kernel that dispatched to about 60 (type, op) functions, ptxas allocated registers
// across the whole call graph (minutes per architecture, over 10 GB) and spilled around the calls
// within the 128 registers 512 threads leave; a kernel per instantiation is a leaf, compiled in a
// second or two. Each kernel_<type>.cu instantiates one type, so the files compile in parallel.
#pragma once

#include <cuda_runtime.h>

#include <type_traits>

#include "coll/coll.h"
#include "exec/cuda/dispatch.h"
#include "exec/cuda/launch.h"
#include "exec/cuda/window_run.h"

namespace coll::exec::dev {

/// The body of every kernel here: CTA c runs channels[c]'s works in order with runWork(sh, g)
/// (the interpreter's channel, the window or the one-sided run), stopping at the first that fails,
/// timed around them. Inlined into each kernel, with the kernel's own shared memory.
template <typename RunWork>
__device__ __forceinline__ void runCta(ChannelShared& sh, DevChannel& c, const DevChannel* channels, RunWork runWork) {
  if (threadIdx.x == 0) c = channels[blockIdx.x];
  __syncthreads();
  CtaGroup g;
  timingBegin(sh, g);  // groupCopy's first barrier orders it before the channel's work
  // Every thread of the CTA gets the same answer from runWork (failures are agreed by syncOr).
  for (int i = 0; i < c.nworks; ++i) {
    groupCopy(&sh.work, &c.works[i], sizeof(DevWork), g);
    if (!runWork(sh, g)) return;  // a failed channel's timing is not needed
  }
  // runWork's last barrier ordered every thread's counts before this.
  if (threadIdx.x == 0) timingEnd(sh, c.nworks > 0 ? sh.work.result : nullptr);
}

/// One launch of the interpreter where every work has this (type, op): CTA c runs channels[c].
template <typename T, Op O>
__global__ void __launch_bounds__(kMaxCtaThreads) interpreterKernel(const DevChannel* channels) {
  __shared__ ChannelShared sh;
  __shared__ DevChannel c;
  runCta(sh, c, channels, [](ChannelShared& s, CtaGroup g) { return Channel<T, O, CtaGroup>(s, g).run(); });
}

/// One launch of collectives on windows (window_run.h) where every work has this (type, op): CTA
/// c runs channels[c].
template <typename T, Op O>
__global__ void __launch_bounds__(kMaxCtaThreads) windowKernel(const DevChannel* channels) {
  __shared__ ChannelShared sh;
  __shared__ DevChannel c;
  runCta(sh, c, channels, [](ChannelShared& s, CtaGroup g) { return runWindow<T, O>(s, g); });
}

/// The interpreter's kernel of (T, O), or the window kernel's.
template <typename T, Op O>
void launchOne(bool window, const DevChannel* channels, int n, int threads, cudaStream_t s) {
  if (window)
    windowKernel<T, O><<<n, threads, 0, s>>>(channels);
  else
    interpreterKernel<T, O><<<n, threads, 0, s>>>(channels);
}

/// Launches the kernel of (T, op); op is a kernel op (kernelOp).
template <typename T>
cudaError_t launchTyped(int op, bool window, const DevChannel* channels, int n, int threads, cudaStream_t s) {
  switch (static_cast<Op>(op)) {
    case Op::kSum:
      launchOne<T, Op::kSum>(window, channels, n, threads, s);
      break;
    case Op::kProd:
      launchOne<T, Op::kProd>(window, channels, n, threads, s);
      break;
    case Op::kMax:
      launchOne<T, Op::kMax>(window, channels, n, threads, s);
      break;
    case Op::kMin:
      launchOne<T, Op::kMin>(window, channels, n, threads, s);
      break;
    default:
      if constexpr (std::is_integral<T>::value) {
        if (static_cast<Op>(op) == Op::kBand) launchOne<T, Op::kBand>(window, channels, n, threads, s);
        if (static_cast<Op>(op) == Op::kBor) launchOne<T, Op::kBor>(window, channels, n, threads, s);
        if (static_cast<Op>(op) == Op::kBxor) launchOne<T, Op::kBxor>(window, channels, n, threads, s);
        if (op >= static_cast<int>(Op::kBand) && op <= static_cast<int>(Op::kBxor)) break;
      }
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

/// Lowers *least to the fewest CTAs per SM among T's kernels at `threads` threads. Asking loads each
/// kernel's module, so that none is loaded lazily at its first launch, while other ranks' kernels
/// spin (which can deadlock).
template <typename T>
cudaError_t occupancyTyped(int threads, int* least) {
  cudaError_t e = cudaSuccess;
  auto one = [&](const void* kernel) {
    int n = 0;
    if (e == cudaSuccess) e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, 0);
    if (e == cudaSuccess && n < *least) *least = n;
  };
  one(reinterpret_cast<const void*>(interpreterKernel<T, Op::kSum>));
  one(reinterpret_cast<const void*>(interpreterKernel<T, Op::kProd>));
  one(reinterpret_cast<const void*>(interpreterKernel<T, Op::kMax>));
  one(reinterpret_cast<const void*>(interpreterKernel<T, Op::kMin>));
  one(reinterpret_cast<const void*>(windowKernel<T, Op::kSum>));
  one(reinterpret_cast<const void*>(windowKernel<T, Op::kProd>));
  one(reinterpret_cast<const void*>(windowKernel<T, Op::kMax>));
  one(reinterpret_cast<const void*>(windowKernel<T, Op::kMin>));
  if constexpr (std::is_integral<T>::value) {
    one(reinterpret_cast<const void*>(interpreterKernel<T, Op::kBand>));
    one(reinterpret_cast<const void*>(interpreterKernel<T, Op::kBor>));
    one(reinterpret_cast<const void*>(interpreterKernel<T, Op::kBxor>));
    one(reinterpret_cast<const void*>(windowKernel<T, Op::kBand>));
    one(reinterpret_cast<const void*>(windowKernel<T, Op::kBor>));
    one(reinterpret_cast<const void*>(windowKernel<T, Op::kBxor>));
  }
  return e;
}

// The launchers of kernel_<type>.cu, by collDataType_t, and their kernels' occupancy.
cudaError_t launchInt8(int op, bool window, const DevChannel* channels, int n, int threads, cudaStream_t s);
cudaError_t launchUint8(int op, bool window, const DevChannel* channels, int n, int threads, cudaStream_t s);
cudaError_t launchInt32(int op, bool window, const DevChannel* channels, int n, int threads, cudaStream_t s);
cudaError_t launchUint32(int op, bool window, const DevChannel* channels, int n, int threads, cudaStream_t s);
cudaError_t launchInt64(int op, bool window, const DevChannel* channels, int n, int threads, cudaStream_t s);
cudaError_t launchUint64(int op, bool window, const DevChannel* channels, int n, int threads, cudaStream_t s);
cudaError_t launchFloat16(int op, bool window, const DevChannel* channels, int n, int threads, cudaStream_t s);
cudaError_t launchFloat32(int op, bool window, const DevChannel* channels, int n, int threads, cudaStream_t s);
cudaError_t launchFloat64(int op, bool window, const DevChannel* channels, int n, int threads, cudaStream_t s);
cudaError_t launchBfloat16(int op, bool window, const DevChannel* channels, int n, int threads, cudaStream_t s);
cudaError_t launchFloat8e4m3(int op, bool window, const DevChannel* channels, int n, int threads, cudaStream_t s);
cudaError_t launchFloat8e5m2(int op, bool window, const DevChannel* channels, int n, int threads, cudaStream_t s);
cudaError_t launchInt8Occupancy(int threads, int* least);
cudaError_t launchUint8Occupancy(int threads, int* least);
cudaError_t launchInt32Occupancy(int threads, int* least);
cudaError_t launchUint32Occupancy(int threads, int* least);
cudaError_t launchInt64Occupancy(int threads, int* least);
cudaError_t launchUint64Occupancy(int threads, int* least);
cudaError_t launchFloat16Occupancy(int threads, int* least);
cudaError_t launchFloat32Occupancy(int threads, int* least);
cudaError_t launchFloat64Occupancy(int threads, int* least);
cudaError_t launchBfloat16Occupancy(int threads, int* least);
cudaError_t launchFloat8e4m3Occupancy(int threads, int* least);
cudaError_t launchFloat8e5m2Occupancy(int threads, int* least);

}  // namespace coll::exec::dev

/// Defines the launcher NAME for type T, and NAME##Occupancy (one per kernel_<type>.cu).
#define COLL_DEFINE_LAUNCHER(T, NAME)                                                                     \
  namespace coll::exec::dev {                                                                             \
  cudaError_t NAME(int op, bool window, const DevChannel* channels, int n, int threads, cudaStream_t s) { \
    return launchTyped<T>(op, window, channels, n, threads, s);                                           \
  }                                                                                                       \
  cudaError_t NAME##Occupancy(int threads, int* least) { return occupancyTyped<T>(threads, least); }      \
  }
