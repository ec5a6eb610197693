// What a rank is waiting for right now, for a peer that asks (the blame chain, core/blame.cc).
//
// The executor writes whom it waits for once a wait has lasted long enough to be worth telling
// (its liveness check, every 100 ms) and at a timeout; the bootstrap's inbox thread reads it to
// answer a peer's question. Plain atomics: written by the thread running the operation, read by
// the inbox thread, no lock.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace coll {

struct WaitState {
  std::atomic<uint64_t> opSeq{0};       // operations started on the communicator (1 = the first)
  std::atomic<bool> inOp{false};        // an operation is running, or failed and was not followed by another
  std::atomic<int> waitingFor{-1};      // the peer the operation waits for; -1: none known
  std::atomic<int> waitStep{-1};        // the schedule's step that wait is in; -1: not known
  std::atomic<int64_t> sinceMs{0};      // steady-clock ms when that wait began
  std::atomic<const char*> opName{""};  // a string literal naming the operation ("collAllReduce")
  // Bytes of the operations finished (for a live view, coll-top): the host path's (one writer,
  // the calling thread: no read-modify-write on every call) and the device path's (written by
  // whichever thread reaps a launch, under the executor's lock). totalBytes() adds them.
  std::atomic<uint64_t> bytes{0};
  std::atomic<uint64_t> deviceBytes{0};
  uint64_t totalBytes() const {
    return bytes.load(std::memory_order_relaxed) + deviceBytes.load(std::memory_order_relaxed);
  }

  /// A line about the communicator for a live view (its transports), set once it is known.
  void setDetail(std::string text) {
    std::lock_guard<std::mutex> lock(detailMu_);
    detail_ = std::move(text);
  }
  std::string detail() const {
    std::lock_guard<std::mutex> lock(detailMu_);
    return detail_;
  }

  /// A steady-clock time in the unit of sinceMs.
  static int64_t toMs(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  }

  /// The executor: a wait on peer, in step (-1: not known), has lasted a while (or timed out).
  void waitsFor(int peer, int64_t nowMs, int step = -1) {
    if (waitingFor.load(std::memory_order_relaxed) == peer && waitStep.load(std::memory_order_relaxed) == step) return;
    waitStep.store(step, std::memory_order_relaxed);
    sinceMs.store(nowMs, std::memory_order_relaxed);
    waitingFor.store(peer, std::memory_order_release);
  }
  /// The executor: the wait that waitsFor announced ended with progress.
  void progressed() {
    if (waitingFor.load(std::memory_order_relaxed) != -1) waitingFor.store(-1, std::memory_order_release);
  }

 private:
  mutable std::mutex detailMu_;
  std::string detail_;
};

/// Communicators alive in this process (counted by the communicator's init and destroy).
inline std::atomic<int>& liveCommunicators() {
  static std::atomic<int> n{0};
  return n;
}

}  // namespace coll
