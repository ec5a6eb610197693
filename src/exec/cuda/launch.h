// Launching the device interpreter on a GPU: one CTA per channel, each reading its DevWork.
// No CUDA header here (the core includes it in every build); builds without CUDA report that no
// device is usable.
#pragma once

#include <string>

#include "exec/cuda/dev_work.h"

namespace coll::exec::dev {

/// Threads per CTA of the interpreter kernel.
constexpr int kCtaThreads = 256;

/// Enqueues the interpreter on `stream` (a cudaStream_t): CTA c runs channels[c], which must be in
/// memory the device reads (device, managed or mapped pinned memory), as must everything it
/// points to. Returns "" or CUDA's error string.
std::string launchInterpreter(const DevChannel* channels, int nchannels, void* stream);

}  // namespace coll::exec::dev
