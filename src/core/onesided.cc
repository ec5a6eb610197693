#include "core/onesided.h"

#include <chrono>
#include <string>

#include "core/comm.h"
#include "core/connections.h"
#include "core/signals.h"
#include "exec/backoff.h"

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
  // The pace of every host wait (exec/backoff.h): a signal a microsecond late costs a few pauses,
  // a long wait naps and leaves the core to the rank that computes what it will put.
  exec::Backoff pace(comm->conns->links());
  exec::Backoff::Clock::time_point lastMove;  // when a signal last came from an awaited peer
  bool looked = false;
  uint64_t seen = 0;  // the signals arrived from the awaited peers at the last look: a change is progress
  while (!allArrived(s, waits)) {
    if (!pace.step()) continue;
    uint64_t total = 0;
    for (const SignalWait& w : waits) total += s.arrived(w.peer);
    if (!looked || total != seen) {
      looked = true;
      seen = total;
      lastMove = pace.now();
    }
    if (comm->abortFlag.load(std::memory_order_relaxed))
      return Status(collRemoteError, "the communicator was aborted while waiting for signals");
    if (pace.livenessDue()) {
      for (const SignalWait& w : waits)
        if (comm->bootstrap->peerProcessGone(w.peer))
          return COLL_ERROR(collRemoteError,
                            FMT_STRING("rank {} (pid {}) died before raising the signals awaited from it"), w.peer,
                            comm->bootstrap->peers()[w.peer].pid);
      std::string notice = comm->bootstrap->peerFailure(0);
      if (!notice.empty()) return Status(collRemoteError, notice);
    }
    auto quiet = std::chrono::duration_cast<std::chrono::milliseconds>(pace.now() - lastMove).count();
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
