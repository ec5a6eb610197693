// The c10d::Work a coll operation returns: a view of its Launch (several works share one launch
// when torch coalesces operations).
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <memory>

#include "launch.h"

namespace coll_torch {

class CollWork : public c10d::Work {
 public:
  CollWork(std::shared_ptr<Launch> launch, int rank, c10d::OpType type, const char* title,
           std::vector<at::Tensor> inputs, int sourceRank = -1);

  /// Non-blocking; true once the operation and its copies back are done (or it failed).
  bool isCompleted() override;
  /// True when it completed without failure (false while running).
  bool isSuccess() const override;
  /// The failure (a DistBackendError carrying coll's sentence), or null.
  std::exception_ptr exception() const override;
  /// The peer a recv received from.
  int sourceRank() const override;
  /// The output tensors (valid once complete).
  std::vector<at::Tensor> result() override;
  /// Host tensors: blocks until complete, then rethrows a failure. With a timeout, raises when it
  /// is not done by then (the operation itself keeps running until coll's own deadline ends it).
  /// An operation of a coalesced batch not ended yet: raises at once and drops the batch.
  /// CUDA tensors (NCCL's semantics): makes the current stream wait for the operation, without
  /// blocking the CPU, and rethrows a failure the communicator has reported so far.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  /// CUDA tensors: the current stream waits for the operation. Host tensors: nothing (the results
  /// are in place when wait() returns).
  void synchronize() override;
  /// A future completed with the outputs (or the failure); its callbacks run on the backend's
  /// completer threads (watcher.h), or inline when it is already complete.
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  std::shared_ptr<Launch> launch_;
  int sourceRank_;
};

}  // namespace coll_torch
