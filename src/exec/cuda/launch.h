// Launching the device interpreter on a GPU: one CTA per channel, each reading its DevWork.
// No CUDA header here (the core includes it in every build); builds without CUDA report that no
// device is usable.
#pragma once

#include <string>

#include "exec/cuda/dev_work.h"

namespace coll::exec::dev {

/// The most threads per CTA the interpreter kernel is compiled for (its __launch_bounds__: with
/// 512, ptxas keeps each thread within 128 registers). COLL_DEVICE_THREADS picks 64..512.
constexpr int kMaxCtaThreads = 512;

/// Enqueues the interpreter on `stream` (a cudaStream_t) with `threads` threads per CTA: CTA c
/// runs channels[c], which must be in memory the device reads (device, managed or mapped pinned
/// memory), as must everything it points to. Every work of the launch has element type `type`
/// (collDataType_t) and kernel op `op` (kernelOp): there is one kernel per pair. kind: which
/// kernel (KernelKind): the interpreter's, the window kernel of the pair (every work a collective
/// on windows, DevWork::window), or the one-sided kernel (every work a one-sided operation; type
/// and op unused). Returns "" or CUDA's error string.
enum KernelKind : int { kInterpreterKernel = 0, kWindowKernel = 1, kOneSidedKernel = 2 };
std::string launchInterpreter(const DevChannel* channels, int nchannels, int threads, int type, int op, int kind,
                              void* stream);

/// Writes to *out the fewest CTAs per SM of the current device among the interpreter's kernels at
/// `threads` threads (cudaOccupancyMaxActiveBlocksPerMultiprocessor). Asking loads every kernel,
/// which init does so that no module is loaded at a first launch. Returns "" or CUDA's error.
std::string interpreterCtasPerSm(int threads, int* out);

}  // namespace coll::exec::dev
