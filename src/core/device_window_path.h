// Collectives on symmetric windows over device memory: the device twin of core/window_path.h. A
// call whose buffers the peers reach lie in COLL_WIN_COLL_SYMMETRIC windows of device memory that
// every rank maps (threads of one process: their pointers; processes of one host: each other's
// allocations, mapped at registration) runs as one launch of the interpreter whose channels read
// and write the peers' buffers directly (exec/cuda/dev_work.h: DevWindow), between two arrivals in
// device memory. No FIFO, no proxy, no connection.
//
// What every rank must do alike, as NCCL's symmetric windows require: put its buffers at the same
// offsets of the same windows (registered in the same order), which the arrival checks with the
// call's fingerprint (a mismatch fails every rank with collInvalidUsage naming the peer).
// Broadcast decides from every rank's output alone (an out-of-place root copies its input into
// its output first, on its stream). Not taken: reduce (the other ranks cannot know where the
// root's output is), PreMulSum, an in-place all-to-all, other overlaps, one rank, more than
// kWindowMaxRanks ranks, ranks on several hosts, and COLL_ALGO without "window".
// There are no fitted constants for GPUs yet: where the buffers allow and COLL_ALGO permits, the
// path is taken at every size.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "algorithms/catalog.h"
#include "base/status.h"
#include "core/enqueue.h"
#include "core/windows.h"
#include "exec/cuda/dev_work.h"
#include "exec/executor.h"

struct collComm;

namespace coll {

/// Every rank's arrival area in device memory, mapped by every rank of the host: made with the
/// communicator's first window over device memory (collective, as registration is). Rank q's area
/// holds one DevArrival per (channel, rank) that rank writes, and the call counter of each of
/// q's channels.
class DeviceWindowArrivals {
 public:
  static Result<std::unique_ptr<DeviceWindowArrivals>> create(collComm* comm);
  ~DeviceWindowArrivals();
  DeviceWindowArrivals(const DeviceWindowArrivals&) = delete;
  DeviceWindowArrivals& operator=(const DeviceWindowArrivals&) = delete;

  /// Every rank maps every rank's area (agreed): else no call takes the path.
  bool usable() const { return areas_ && areas_->allPointers && areas_->device; }
  /// This rank's word in rank peer's area, for channel.
  exec::dev::DevArrival* at(int peer, int channel) const;
  /// This rank's area for channel, by writing rank.
  const exec::dev::DevArrival* own(int channel) const;
  /// This rank's call counter of channel (the kernels advance it).
  uint64_t* epoch(int channel) const;

  /// Calls that took the path (collStatWindowCollectives adds them).
  std::atomic<uint64_t> calls{0};

 private:
  DeviceWindowArrivals() = default;
  int nranks_ = 0;
  int rank_ = 0;
  void* own_ = nullptr;  // device memory of this rank
  std::shared_ptr<WindowPeers> areas_;
};

/// Adds collective call a (validated, device memory) to *works as a launch on windows when its
/// buffers take the path (see above), one work per channel, and sets *taken; the channels'
/// DevWindow live in *windows until the launch is built. Leaves *taken false otherwise.
Status deviceWindowWork(collComm* comm, const OpArgs& a, algorithms::Collective c,
                        std::vector<std::unique_ptr<exec::dev::DevWindow>>* windows, std::vector<exec::Work>* works,
                        bool* taken);

}  // namespace coll
