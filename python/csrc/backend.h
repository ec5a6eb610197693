// coll as a torch.distributed backend: a c10d::Backend over one coll communicator.
//
// Every operation turns its tensors into a Plan of coll calls (types.h says how tensors map).
// CPU tensors: it either runs in the calling thread (asyncOp=false: dist.all_reduce(t) without
// async_op, no thread hop at all) or is queued on a host stream, returning a CollWork at once
// (asyncOp=true: DDP's buckets, FSDP's prefetches, isend/irecv); the backend's Watcher completes
// the works and their futures in issue order. CUDA tensors: it is enqueued on the current stream
// of their device, as NCCL's backend does (launch.h), whatever asyncOp says; the communicator is
// made for the current CUDA device at init (torch.cuda.set_device first, as with NCCL), and
// tensors on another device are refused. Operations between startCoalescing and endCoalescing
// (torch's batch_isend_irecv and coalescing manager) are issued as one coll group.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "coll/coll.h"
#include "launch.h"

namespace coll_torch {

class CollBackend : public c10d::Backend {
 public:
  /// Rendezvous through store (group rank 0 puts a coll unique id, the others get it), then
  /// collCommInitRankConfig with timeout as both the bootstrap and the data-transfer deadline.
  CollBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::chrono::milliseconds timeout,
              std::string name);
  /// Wraps a communicator made by collCommSplit.
  CollBackend(collComm_t comm, const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
              std::chrono::milliseconds timeout, std::string name);
  /// Waits for queued work (bounded by the communicator's deadlines), then destroys the communicator.
  ~CollBackend() override;

  const std::string getBackendName() const override { return "coll"; }
  c10::intrusive_ptr<Options> getBackendOptions() override;
  bool supportsSplitting() const override { return true; }
  bool supportsCoalescing() const override { return true; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits, std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts = {}) override;
  /// Tags are accepted and not matched: messages between two ranks are received in the order they
  /// were sent, whatever their tags (NCCL's behaviour; Gloo matches tags).
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts = {}) override;
  /// Gloo's monitored barrier, through the store: rank 0 waits for every other rank until the
  /// timeout and names each one that did not arrive (all of them with waitAllRanks, else the first).
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks = false) override;

  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  /// collCommSplit over this group: ranks (this group's ranks) form the new group, in that order;
  /// a rank not in ranks takes part with no color and gets a null backend.
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<Options>& opts) override;
  /// The no-color side of a split this rank is not part of (torch's new_group on non-members).
  void performNocolorSplit();

  /// Used by monitoredBarrier and later splits; the communicator keeps the deadline it was made with.
  void setTimeout(std::chrono::milliseconds timeout) override { timeout_ = timeout; }
  uint64_t getSequenceNumberForGroup() override { return seq_; }
  /// Waits for every queued operation.
  void waitForPendingWorks() override;
  /// collCommAbort: queued and running operations end with an error; the group is unusable after.
  void abort() override;
  /// Waits for queued operations, then finalizes and destroys the communicator.
  void shutdown() override;

 private:
  c10::intrusive_ptr<c10d::Work> submit(Plan plan, c10d::OpType type, const char* title,
                                        const std::vector<at::Tensor>& inputs, bool async, int sourceRank = -1);
  collComm_t live(const char* what);  // the communicator, or a clear error once aborted/shut down
  collConfig_t config() const;
  void release();  // mu_ held: comm_ is about to be destroyed (launches must not reach it)

  collComm_t comm_ = nullptr;
  std::shared_ptr<CommHandle> handle_ = std::make_shared<CommHandle>();  // comm_ for device launches
  c10::intrusive_ptr<c10d::Store> store_;
  std::chrono::milliseconds timeout_;
  std::string name_;
  std::unique_ptr<Watcher> watcher_;
  std::mutex mu_;  // issue order when several threads use one group
  uint64_t seq_ = 0;
  uint64_t monitoredSeq_ = 0;
  bool coalescing_ = false;
  Plan batch_;
  std::optional<c10::Device> batchDevice_;  // the device of the batch's first operation
  std::shared_ptr<Launch> batchLaunch_;
  std::vector<at::Tensor> batchInputs_;
};

}  // namespace coll_torch
