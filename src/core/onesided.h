// One-sided operations on host memory (collPutSignal, collSignal, collWaitSignal), run on the
// calling thread (a NULL stream) or on the communicator's host-queue worker (a host stream), in
// issue order either way: a rank's puts and signals to one peer land in the order it made them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "base/status.h"
#include "core/windows.h"

struct collComm;

namespace coll {

/// A put into peer's part of a window, at a byte offset (checked against its size by the caller).
struct PutArgs {
  const void* src = nullptr;
  size_t bytes = 0;
  int peer = -1;
  std::shared_ptr<const WindowPeers> window;
  size_t offset = 0;
};

/// Copies the put's bytes into the peer's window, then raises this rank's signal there, so that
/// a peer that has seen the signal sees the bytes.
Status runPutSignal(collComm* comm, const PutArgs& put);

/// Raises this rank's signal in peer's area.
Status runSignal(collComm* comm, int peer);

/// One condition of collWaitSignal: `count` more signals from `peer`.
struct SignalWait {
  int peer;
  uint64_t count;
};

/// Waits until every condition holds, then takes the signals it waited for (a later wait counts
/// from there). Ends with collRemoteError naming a peer that died or a communicator that was
/// aborted, and with collTimeout naming the peers still awaited after timeoutMs without a new
/// signal (0: no deadline).
Status runWaitSignal(collComm* comm, const std::vector<SignalWait>& waits, int64_t timeoutMs);

}  // namespace coll
