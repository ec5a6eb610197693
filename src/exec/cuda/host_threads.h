// The host build of the device executor's interpreter: the same code the CUDA kernel runs
// (interpreter.h), compiled as plain C++, a team of COLL_DEVICE_EMULATION_THREADS CPU threads per
// channel with real barriers (the CTA of the GPU build; host_team.h).
// CI runs every collective through it, so the device protocol logic is checked on machines
// without a GPU; on the GPU the kernel takes the same DevWork.
#pragma once

#include <string>
#include <vector>

#include "algorithms/schedule.h"
#include "base/status.h"
#include "exec/cuda/dev_work.h"
#include "exec/executor.h"
#include "transport/transport.h"

namespace coll::exec::dev {

/// A schedule's steps as the interpreter reads them (recvCount resolved).
std::vector<DevStep> toDevSteps(const algorithms::Schedule& schedule);

/// An untagged connection's FIFO as the interpreter reads it, cursor 0 (both device executors).
DevPort portOf(const transport::ConnInfo& info);

/// One channel (a CTA) as the host builds it: works run in order, each with its steps.
struct ChannelWorks {
  std::vector<std::vector<DevStep>> steps;  // by work
  std::vector<DevWork> works;
  std::vector<DevWindow> windows;  // by work: its moves when it is on windows (DevWork::window set)
  int channel = 0;                 // whose connections (ports) the works use
};

/// A group's sends and receives as CTAs, one per (peer, direction, channel) in order of first
/// use, each holding those operations in posting order, every one a one-step work (bytes as int8)
/// made from `base` (whose ports the caller replaces by the channel's). Operations that move no
/// bytes are left out.
std::vector<ChannelWorks> p2pChannels(const std::vector<P2POp>& ops, const DevWork& base);

/// Whether the channel that writes r waits for `peer` now (DevResult::recvWait, sendWait: read
/// while the channel runs, by the proxy that decides whether a dead peer ends the launch).
inline bool waitsFor(const DevResult& r, int peer) {
  uint32_t want = static_cast<uint32_t>(peer) + 1;
  return __atomic_load_n(&r.recvWait, __ATOMIC_RELAXED) == want ||
         __atomic_load_n(&r.sendWait, __ATOMIC_RELAXED) == want;
}

/// The peer the channel that writes r waits for now (its receive side first) and the schedule's
/// step that wait is in (-1: not known); false when it waits for nobody. For live views.
inline bool waitingOn(const DevResult& r, int* peer, int* step) {
  uint32_t w = __atomic_load_n(&r.recvWait, __ATOMIC_RELAXED);
  if (w == 0) w = __atomic_load_n(&r.sendWait, __ATOMIC_RELAXED);
  if (w == 0) return false;
  *peer = static_cast<int>(w) - 1;
  *step = static_cast<int>(__atomic_load_n(&r.atStep, __ATOMIC_RELAXED)) - 1;
  return true;
}

/// Threads that play one CTA in the host build (COLL_DEVICE_EMULATION_THREADS).
int hostCtaThreads();

/// Runs one channel of w on the calling thread and hostCtaThreads() - 1 helpers; false with
/// *w.result set when it failed.
bool runChannelOnHost(const DevWork& w);

/// Runs one CTA's works in order on a team as runChannelOnHost does; false at the first that failed.
bool runWorksOnHost(const DevChannel& c);

/// The status a failed channel ends its operation with: collTimeout, collInvalidUsage (sizes
/// differ), collRemoteError (aborted) or collInternalError, with describe()'s sentence.
/// describe and rank: an in-band call mismatch (kCallMismatch with the peer's print) is put in
/// CallCheck::describe's words when given.
Status failureStatus(const DevResult& r, const char* opName, const std::string& peerWhere,
                     decltype(CallCheck::describe) describe = nullptr, int rank = -1);

/// A sentence for a failed channel: what happened, at which step, with which peer; peerWhere
/// follows the peer's name (" on host h").
std::string describe(const DevResult& r, const char* opName, const std::string& peerWhere = "");

}  // namespace coll::exec::dev
