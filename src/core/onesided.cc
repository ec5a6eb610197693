#include "core/onesided.h"

#include <sched.h>

#include <chrono>
#include <string>
#include <thread>

#include "base/process.h"
#include "core/comm.h"
#include "core/signals.h"

namespace coll {

Status runPutSignal(collComm* comm, const PutArgs& put) {
  COLL_TRY(writeRange(put.window->ranks[static_cast<size_t>(put.peer)], put.peer, put.offset, put.src, put.bytes));
  comm->signals->raise(put.peer);
  return Status::ok();
}

Status runSignal(collComm* comm, int peer) {
  comm->signals->raise(peer);
  return Status::ok();
}

namespace {

// Whether every condition holds (collWaitSignal has folded the conditions on one peer into one).
bool allArrived(Signals& s, const std::vector<SignalWait>& waits) {
  for (const SignalWait& w : waits)
    if (s.arrived(w.peer) - s.consumed(w.peer) < w.count) return false;
  return true;
}

}  // namespace

Status runWaitSignal(collComm* comm, const std::vector<SignalWait>& waits, int64_t timeoutMs) {
  Signals& s = *comm->signals;
  using Clock = std::chrono::steady_clock;
  auto start = Clock::now(), lastMove = start, lastCheck = start;
  uint64_t seen = 0;  // the signals arrived from the awaited peers at the last look: a change is progress
  int64_t napUs = 0;
  for (uint64_t spin = 0; !allArrived(s, waits); ++spin) {
    // A signal a microsecond late is worth a few pauses, not a system call; then yields (the
    // signalling rank may need this core), then naps.
    if (spin < 2048) {
      cpuRelax();
      continue;
    }
    if (spin < 2048 + 256) {
      sched_yield();
      continue;
    }
    // Past the first yields, nap (as the executor's waits do once the peer is late): a rank that
    // waits for a signal leaves the core to the rank that computes what it will put.
    napUs = napUs == 0 ? 5 : std::min<int64_t>(napUs * 2, 200);
    std::this_thread::sleep_for(std::chrono::microseconds(napUs));
    auto now = Clock::now();
    uint64_t total = 0;
    for (const SignalWait& w : waits) total += s.arrived(w.peer);
    if (total != seen) {
      seen = total;
      lastMove = now;
      napUs = 0;
    }
    if (comm->abortFlag.load(std::memory_order_relaxed))
      return Status(collRemoteError, "the communicator was aborted while waiting for signals");
    if (now - lastCheck > std::chrono::milliseconds(100)) {
      lastCheck = now;
      for (const SignalWait& w : waits)
        if (comm->bootstrap->peerProcessGone(w.peer))
          return COLL_ERROR(collRemoteError,
                            FMT_STRING("rank {} (pid {}) died before raising the signals awaited from it"), w.peer,
                            comm->bootstrap->peers()[w.peer].pid);
      std::string notice = comm->bootstrap->peerFailure(0);
      if (!notice.empty()) return Status(collRemoteError, notice);
    }
    auto quiet = std::chrono::duration_cast<std::chrono::milliseconds>(now - lastMove).count();
    if (timeoutMs > 0 && quiet >= timeoutMs) {
      std::string missing;
      for (const SignalWait& w : waits) {
        uint64_t have = s.arrived(w.peer) - s.consumed(w.peer);
        if (have < w.count)
          missing += fmt::format("{}rank {} ({} of {})", missing.empty() ? "" : ", ", w.peer, have, w.count);
      }
      return COLL_ERROR(collTimeout,
                        FMT_STRING("no signal came for {} ms (COLL_TIMEOUT_MS, config.timeoutMs or "
                                   "collCommSetTimeout) while waiting for signals from {}"),
                        quiet, missing);
    }
  }
  for (const SignalWait& w : waits) s.consumed(w.peer) += w.count;
  return Status::ok();
}

}  // namespace coll
