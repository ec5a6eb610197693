// The pace of every host-side wait for a peer (the CPU executor's FIFO waits, the arrivals of
// collectives on windows, one-sided signal waits): one policy, so that COLL_SPIN_US and its
// siblings mean the same everywhere.
//
// A wait pauses (x86 PAUSE) for the first spinsBeforeYield spins, then yields; once it has lasted
// napAfterUs without ending (or at once, with napWhenBusy, while this process's computation waits
// for a core), it naps, 5 us doubling to 50, with the thread's timer slack tightened so that a nap
// of 5 us does not last 50. The clock is read every 64th spin and after every nap, never on the
// others: most waits of a small operation end within their first spins, and a clock read costs a
// tenth of an 8-byte all-reduce. The wait's start is thus late by at most 64 pauses (about 1 us),
// nothing against a deadline.
#pragma once

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>

#include "base/cpu_load.h"
#include "base/process.h"
#include "exec/executor.h"

namespace coll::exec {

class Backoff {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Backoff(const Links& links) : links_(links) {}
  Backoff(const Backoff&) = delete;
  Backoff& operator=(const Backoff&) = delete;

  /// One spin of a wait that is not over: pauses, yields or naps. true when the caller should run
  /// its checks (abort, deadline, and liveness when livenessDue()); now() is then fresh.
  bool step() {
    ++spin_;
    if (spin_ % 64 != 0) {
      if (spin_ < links_.spinsBeforeYield)
        cpuRelax();
      else if (napUs_ == 0)
        sched_yield();  // let the peer (more ranks than cores) or the computation this rank overlaps run
      return false;
    }
    now_ = Clock::now();
    if (!started_) {
      start_ = lastCheck_ = now_;
      started_ = true;
    }
    if (napUs_ > 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(napUs_));
      napUs_ = std::min<int64_t>(napUs_ * 2, kMaxNapUs);
      spin_ += 63;  // every nap is followed by the checks
    } else if (links_.napAfterUs >= 0 && (now_ - start_ > std::chrono::microseconds(links_.napAfterUs) ||
                                          (links_.napWhenBusy && computationWaits(now_)))) {
      // While every core is taken and this process has computation of its own to run (the
      // backward pass a DDP rank overlaps), every spin is a slice taken from it: nap at once. A
      // process that only communicates keeps spinning first, its fastest way through.
      napUs_ = kFirstNapUs;
      slack_.tighten();
    }
    return true;
  }

  /// The clock as of the last step() that returned true, and when the wait started.
  Clock::time_point now() const { return now_; }
  Clock::time_point start() const { return start_; }
  /// Milliseconds since the wait started, as of now().
  int64_t waitedMs() const { return std::chrono::duration_cast<std::chrono::milliseconds>(now_ - start_).count(); }
  /// True at most once every 100 ms of the wait (after a step() that returned true): the time for
  /// the checks that cost a system call (a peer's pid, its notices, the wait state).
  bool livenessDue() {
    if (now_ - lastCheck_ <= std::chrono::milliseconds(100)) return false;
    lastCheck_ = now_;
    return true;
  }

 private:
  static constexpr int64_t kFirstNapUs = 5;
  static constexpr int64_t kMaxNapUs = 50;
  const Links& links_;
  uint64_t spin_ = 0;
  int64_t napUs_ = 0;  // > 0 once the wait naps between polls
  bool started_ = false;
  Clock::time_point start_, lastCheck_, now_;
  TimerSlack slack_;
};

}  // namespace coll::exec
