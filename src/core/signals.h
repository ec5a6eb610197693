// The signals of one-sided operations (collPutSignal, collSignal, collWaitSignal). Every rank
// owns one counter per peer, each on its own cache line, in memory from memAlloc that the other
// ranks of its host map (core/windows.h): rank p's signals to rank q raise counter p of q's area.
// Each counter has one writer, so raising it is a load of the writer's own count and a release
// store, with no read-modify-write across processes; the owner reads it with acquire, which makes
// the puts before the signal visible first.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"
#include "core/windows.h"

struct collComm;

namespace coll {

class Signals {
 public:
  /// Collective over comm's bootstrap: allocates this rank's area and reaches the others'.
  static Result<std::unique_ptr<Signals>> create(collComm* comm);
  ~Signals();
  Signals(const Signals&) = delete;
  Signals& operator=(const Signals&) = delete;

  /// collInvalidUsage naming peer when its area cannot be reached (by pointer), else ok.
  Status check(int peer) const;
  /// Raises this rank's counter in peer's area by one. check(peer) must have passed: the calls
  /// check it when made, before anything is queued.
  void raise(int peer);
  /// The signals peer has raised in this rank's area so far.
  uint64_t arrived(int peer) const;
  /// The signals from peer that collWaitSignal calls have taken so far (the caller's thread only:
  /// one-sided calls of a communicator run in issue order on one thread at a time).
  uint64_t& consumed(int peer) { return consumed_[static_cast<size_t>(peer)]; }

  static constexpr size_t kStride = 64;  // bytes per counter: one cache line each

 private:
  Signals() = default;
  int rank_ = -1;
  void* own_ = nullptr;  // this rank's area (memAlloc)
  std::shared_ptr<WindowPeers> areas_;
  std::vector<uint64_t> raised_;    // by peer: signals this rank has raised in peer's area
  std::vector<uint64_t> consumed_;  // by peer
};

}  // namespace coll
