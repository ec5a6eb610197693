// The signals of one-sided operations (collPutSignal, collSignal, collWaitSignal). Every rank
// owns one counter per peer, each on its own cache line, in memory from memAlloc that the other
// ranks of its host map (core/windows.h): rank p's signals to rank q raise counter p of q's area.
// Each counter has one writing rank, which raises it with a release add (its host calls and its
// device kernels may both raise it, in stream order each); the owner reads it with acquire, which
// makes the puts before the signal visible first.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"
#include "core/windows.h"

struct collComm;

namespace coll {

namespace device {
class Runtime;
}  // namespace device

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
  /// This rank's counter in peer's area (where raise adds), and peer's counter in this rank's.
  uint64_t* slot(int peer) const;
  const uint64_t* own(int peer) const;
  /// Whether every area this rank reaches is addressable by the device (registered at create when
  /// the communicator has a device): the device one-sided path's kernels add and wait there.
  bool deviceReady() const { return deviceReady_; }

  /// The signals from peer that collWaitSignal calls have taken so far (the caller's thread only:
  /// one-sided calls of a communicator run in issue order on one thread at a time).
  uint64_t& consumed(int peer) { return consumed_[static_cast<size_t>(peer)]; }

  static constexpr size_t kStride = 64;  // bytes per counter: one cache line each

 private:
  Signals() = default;
  int rank_ = -1;
  void* own_ = nullptr;  // this rank's area (memAlloc)
  std::shared_ptr<WindowPeers> areas_;
  std::vector<uint64_t> consumed_;  // by peer
  bool deviceReady_ = false;
  device::Runtime* registeredWith_ = nullptr;
  std::vector<void*> registered_;  // areas registered with the device runtime
};

}  // namespace coll
