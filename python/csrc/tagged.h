// torch's send, recv and recv from any source on CPU tensors: coll's tagged messages (collIsend
// and collIrecv on the group's mailbox, coll.h), which match by source and tag as torch defines
// them (Gloo's semantics) and run beside the group's collectives instead of in their queue. Their
// works are completed by waiting on coll's request, not by the watcher's issue order, so that a
// receive posted long before its message holds nothing up.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <memory>
#include <mutex>
#include <vector>

#include "coll/coll.h"

namespace coll_torch {

/// One coll request and the tensor it reads or writes, waited on once.
class TaggedRequest {
 public:
  TaggedRequest(collRequest_t request, collComm_t comm, at::Tensor tensor);
  /// A request still pending is freed (coll then keeps a send's bytes itself and drops the rest of
  /// a receive), so that the tensor may go.
  ~TaggedRequest();
  /// Waits until done, or at most timeout when it is not kNoTimeout; whether it is done.
  bool wait(std::chrono::milliseconds timeout);
  /// Non-blocking: whether it is done.
  bool poll();
  /// Once done: the failure (a DistBackendError with coll's sentence), or null.
  std::exception_ptr error();
  /// Once done: the sender of a received message.
  int source();

 private:
  void end(collResult_t rc);  // mu_ held

  std::mutex mu_;
  collRequest_t request_;
  collComm_t comm_;
  at::Tensor tensor_;
  bool done_ = false;
  std::exception_ptr error_;
  collMsgStatus_t status_{};
};

/// The work of tagged requests: one (send, recv) or several (a coalesced batch of them, plus the
/// batch's other operations when it had any).
class TaggedWork : public c10d::Work {
 public:
  TaggedWork(std::vector<std::shared_ptr<TaggedRequest>> requests, int rank, c10d::OpType type, const char* title,
             std::vector<at::Tensor> tensors, c10::intrusive_ptr<c10d::Work> also = {});
  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  /// The sender (a receive; from any source: known once complete).
  int sourceRank() const override;
  std::vector<at::Tensor> result() override { return tensors_; }
  /// Blocks until every request is done (at most timeout), then rethrows the first failure.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void synchronize() override {}
  /// Completed with the tensors (or the failure) by a thread of its own that waits for them.
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  std::vector<std::shared_ptr<TaggedRequest>> requests_;
  std::vector<at::Tensor> tensors_;
  c10::intrusive_ptr<c10d::Work> also_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::mutex futureMu_;
};

}  // namespace coll_torch
