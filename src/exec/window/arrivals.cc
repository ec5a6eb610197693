// The waits of the collectives on windows: every rank's arrival word, under the same policy as
// the CPU executor's waits on FIFOs (exec/cpu): pauses, then yields, then naps, with the abort,
// dead local peers, the wait state for coll-top and whom-do-you-wait-for, and the deadline.
#include "base/process.h"
#include "exec/backoff.h"
#include "exec/window/window.h"

namespace coll::exec::window {
namespace {

uint64_t epochOf(const Arrival* a) { return __atomic_load_n(&a->epoch, __ATOMIC_ACQUIRE); }

// Whether rank p is waited for and below target (null entries: ranks of other hosts).
bool isLate(const std::vector<const Arrival*>& arrivals, int p, uint64_t target) {
  const Arrival* a = arrivals[static_cast<size_t>(p)];
  return a && epochOf(a) < target;
}

// The first rank (from `from`) whose epoch is below target, or -1 when all have reached it.
int firstLate(const std::vector<const Arrival*>& arrivals, int from, uint64_t target) {
  int n = static_cast<int>(arrivals.size());
  for (int p = from; p < n; ++p)
    if (isLate(arrivals, p, target)) return p;
  return -1;
}

}  // namespace

Status waitArrivals(const std::vector<const Arrival*>& arrivals, int rank, uint64_t target, uint64_t print,
                    std::string (*describe)(uint64_t), const Links& links, const char* opName, int64_t timeoutMs) {
  // Ranks that have arrived stay arrived: the scan goes on from the first late one.
  int late = firstLate(arrivals, 0, target);
  if (late >= 0) {
    Backoff pace(links);  // exec/backoff.h: the CPU executor's pace
    bool told = false;
    while ((late = firstLate(arrivals, late, target)) >= 0) {
      if (!pace.step()) continue;
      if (links.abort && links.abort->load(std::memory_order_relaxed))
        return COLL_ERROR(collRemoteError, FMT_STRING("{} was aborted"), opName);
      if (pace.livenessDue()) {
        if (links.wait && !told) {
          links.wait->waitsFor(late, WaitState::toMs(pace.start()));
          told = true;
        }
        for (int p = late; p < static_cast<int>(arrivals.size()); ++p) {
          int pid = static_cast<size_t>(p) < links.localPids.size() ? links.localPids[static_cast<size_t>(p)] : 0;
          if (pid > 0 && isLate(arrivals, p, target) && processGone(pid))
            return COLL_ERROR(collRemoteError, FMT_STRING("{}: rank {} (pid {}) died"), opName, p, pid);
        }
        // A rank that failed this call (and told the others) will not arrive.
        if (links.peerNotice) {
          std::string notice = links.peerNotice();
          if (!notice.empty()) return Status(collRemoteError, notice);
        }
      }
      int64_t waited = pace.waitedMs();
      if (timeoutMs > 0 && waited >= timeoutMs)
        return COLL_ERROR(collTimeout,
                          FMT_STRING("{} on windows: rank {}{} did not arrive for {} ms (COLL_TIMEOUT_MS, "
                                     "config.timeoutMs or collCommSetTimeout): it stalled, died, or did not take "
                                     "the windows path (every rank's buffers must lie in windows registered "
                                     "with COLL_WIN_COLL_SYMMETRIC)"),
                          opName, late, onHost(links, late), waited);
    }
    if (told) links.wait->progressed();
  }
  if (print == 0) return Status::ok();
  // A rank at exactly the target published this call's print; one past it has compared its print
  // with this rank's already (and would have stopped there on a difference).
  for (size_t p = 0; p < arrivals.size(); ++p) {
    const Arrival* a = arrivals[p];
    if (!a) continue;
    uint64_t theirs = __atomic_load_n(&a->print, __ATOMIC_RELAXED);
    if (epochOf(a) != target || theirs == print) continue;
    return COLL_ERROR(collInvalidUsage, FMT_STRING("{} on windows: rank {} called {} while rank {} called {}"), opName,
                      p, describe(theirs), rank, describe(print));
  }
  return Status::ok();
}

}  // namespace coll::exec::window
