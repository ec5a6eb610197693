// The host build's CTA: a team of CPU threads that run one channel together, with a real barrier,
// so that the interpreter's thread-strided loops, its barriers and its votes (syncOr) run on the
// host with as many threads as COLL_DEVICE_EMULATION_THREADS says, as they do on the GPU with a
// CTA's. Host build only (never compiled by nvcc for the device).
#pragma once

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdint>
#include <functional>

#include "exec/cuda/dev_work.h"
#include "exec/cuda/portable.h"

namespace coll::exec::dev {

/// Futex helpers for the team's words (std::atomic<uint32_t> is the plain word).
inline void futexWait(std::atomic<uint32_t>* word, uint32_t seen) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, seen, nullptr, nullptr, 0);
}
inline void futexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

/// A barrier for `n` threads that also ORs a flag across them (__syncthreads_or). Waiters spin
/// briefly, then sleep on a futex: the emulated CTAs of several ranks share a few cores.
class HostBarrier {
 public:
  explicit HostBarrier(int n) : n_(static_cast<uint32_t>(n)) {}

  /// Waits until all n threads have arrived; true when any of them passed true.
  bool arrive(bool v) {
    uint32_t phase = phase_.load(std::memory_order_acquire);
    if (v) any_[phase & 1].store(1, std::memory_order_relaxed);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == n_) {
      // The last one in resets for the next round; the other slot of any_ was read by everyone in
      // the round before this one, which they all finished before arriving here.
      arrived_.store(0, std::memory_order_relaxed);
      any_[(phase + 1) & 1].store(0, std::memory_order_relaxed);
      phase_.store(phase + 1, std::memory_order_release);
      futexWakeAll(&phase_);
    } else {
      // Spin a little, yield once or twice (the last thread may be one yield away; beside a busy
      // process each yield costs its time slice: portable.h), then sleep.
      for (int spin = 0; phase_.load(std::memory_order_acquire) == phase; ++spin) {
        if (spin < 32) continue;
        if (spin < 34 && cheapYield()) continue;
        futexWait(&phase_, phase);
      }
    }
    return any_[phase & 1].load(std::memory_order_relaxed) != 0;
  }

 private:
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "a futex word");
  const uint32_t n_;
  std::atomic<uint32_t> arrived_{0};
  std::atomic<uint32_t> phase_{0};
  std::atomic<uint32_t> any_[2] = {};
};

/// What one emulated CTA's threads share: the barrier and the channel's shared state.
struct HostTeam {
  explicit HostTeam(int n) : size(n), barrier(n) {}
  const int size;
  HostBarrier barrier;
  ChannelShared shared;
};

/// One thread of a team: the interface of CtaGroup (portable.h).
struct HostGroup {
  HostTeam* team;
  int id;
  int tid() const { return id; }
  int size() const { return team->size; }
  bool leader() const { return id == 0; }
  void sync() const { team->barrier.arrive(false); }
  bool syncOr(bool v) const { return team->barrier.arrive(v); }
};

/// Runs body(team, id) on n threads, the caller as id 0 and n - 1 helpers taken from a pool that
/// lives for the process (a launch on the emulated device would otherwise start and join a
/// thread per CTA thread, thousands of times in a test); returns what id 0's body returned.
/// Every id's body must make the same sequence of barrier calls.
bool runOnTeam(int n, const std::function<bool(HostTeam&, int)>& body);

}  // namespace coll::exec::dev
