// The host build of the device executor's interpreter: the same code the CUDA kernel runs
// (interpreter.h), compiled as plain C++, one CPU thread per channel (the CTA of the GPU build).
// CI runs every collective through it, so the device protocol logic is checked on machines
// without a GPU; on the GPU the kernel takes the same DevWork.
#pragma once

#include <string>
#include <vector>

#include "algorithms/schedule.h"
#include "base/status.h"
#include "exec/cuda/dev_work.h"

namespace coll::exec::dev {

/// A schedule's steps as the interpreter reads them (recvCount resolved).
std::vector<DevStep> toDevSteps(const algorithms::Schedule& schedule);

/// Runs one channel of w on the calling thread; false with *w.result set when it failed.
bool runChannelOnHost(const DevWork& w);

/// Runs one CTA's works in order on the calling thread; false at the first that failed.
bool runWorksOnHost(const DevChannel& c);

/// The status a failed channel ends its operation with: collTimeout, collInvalidUsage (sizes
/// differ), collRemoteError (aborted) or collInternalError, with describe()'s sentence.
Status failureStatus(const DevResult& r, const char* opName, const std::string& peerWhere);

/// A sentence for a failed channel: what happened, at which step, with which peer; peerWhere
/// follows the peer's name (" on host h").
std::string describe(const DevResult& r, const char* opName, const std::string& peerWhere = "");

}  // namespace coll::exec::dev
