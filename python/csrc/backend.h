// coll as a torch.distributed backend: a c10d::Backend over coll communicators.
//
// Every operation turns its tensors into a Plan of coll calls (types.h says how tensors map).
// CPU tensors: it either runs in the calling thread (asyncOp=false: dist.all_reduce(t) without
// async_op, no thread hop at all) or is queued on a host stream, returning a CollWork at once
// (asyncOp=true: DDP's buckets, FSDP's prefetches, isend/irecv); the backend's Watcher completes
// the works in issue order and their futures' callbacks run on threads of their own (watcher.h).
// CUDA tensors: enqueued on a CUDA stream of their device, as NCCL's backend does (launch.h):
// the current stream without async_op, else an internal stream that first waits for the current
// one. The group's communicator is bound to a CUDA device at init when init_process_group gets a
// device_id; otherwise it is host-only and a device communicator is split off it at the first
// CUDA collective, on the device of its tensors (torch.cuda.set_device may come after init).
// Operations between startCoalescing and endCoalescing (torch's coalescing manager) are issued
// as one coll group.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "coll/coll.h"
#include "launch.h"
#include "tagged.h"
#include "watcher.h"

namespace coll_torch {

class CollBackend : public c10d::Backend {
 public:
  /// Rendezvous through store (group rank 0 puts a coll unique id, the others get it), then
  /// collCommInitRankConfig with timeout as both the bootstrap and the data-transfer deadline.
  /// device: the CUDA device the group is bound to (init_process_group's device_id), or -1.
  CollBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::chrono::milliseconds timeout,
              std::string name, int device = -1);
  /// Wraps a communicator made by collCommSplit (bound to device, or host-only with -1).
  CollBackend(collComm_t comm, const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
              std::chrono::milliseconds timeout, std::string name, int device);
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
  /// Sparse COO tensors (DDP's sparse gradients): Gloo's method, every rank's indices and values
  /// gathered, then summed; runs in the calling thread after the group's queued work.
  c10::intrusive_ptr<c10d::Work> allreduce_sparse(std::vector<at::Tensor>& tensors,
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
  /// Deprecated in torch, still called: outputs[i] gets every rank's inputs[i].
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts = {}) override;
  /// The root's output holds every rank's input in rank order (torch's gather_into_tensor
  /// forwards here).
  c10::intrusive_ptr<c10d::Work> gather_single(at::Tensor& output, at::Tensor& input,
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
  /// CPU tensors: coll's tagged messages, matched by source and tag as Gloo does, beside the
  /// group's collectives (tagged.h). CUDA tensors: coll's collSend/collRecv on the device path,
  /// tags accepted and not matched (NCCL's behaviour: in the order sent).
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;
  /// recv(src=None): from whichever rank sends first with this tag; the work's source rank says who.
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
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

  /// The group's timeout from now on: the data-path deadline of the operations issued after it
  /// (collCommSetTimeout on its communicators), monitoredBarrier, coalescing deadlines and later
  /// splits.
  void setTimeout(std::chrono::milliseconds timeout) override;
  /// init_process_group(device_id=cuda:N) on a group made without it: binds the device now.
  void eagerConnectSingleDevice(at::Device device) override;
  uint64_t getSequenceNumberForGroup() override { return seq_; }
  /// Waits for every queued operation.
  void waitForPendingWorks() override;
  /// collCommAbort, from any thread, also while another thread is blocked in an operation of the
  /// group: queued and running operations end with an error; the group is unusable after.
  void abort() override;
  /// Waits for queued operations (coll's deadlines bound them), then finalizes the communicators
  /// with every peer for at most COLL_TORCH_SHUTDOWN_TIMEOUT_MS (default 10000, at most the
  /// group's timeout); a peer that has not arrived by then, or has gone, is logged and the
  /// communicators are aborted instead.
  void shutdown() override;

 private:
  c10::intrusive_ptr<c10d::Work> submit(Plan plan, c10d::OpType type, const char* title,
                                        const std::vector<at::Tensor>& inputs, bool async, int sourceRank = -1);
  /// Issues a host plan (mu_ held): at once, blocking, or deferred to keep every copy in order.
  void submitHost(const std::shared_ptr<Launch>& launch, Plan plan, bool async);
  /// Issues a CUDA plan (mu_ held) on the current stream, or with async on the internal one.
  void submitDevice(const std::shared_ptr<Launch>& launch, Plan plan, c10::Device device, bool async);
  /// The communicator for tensors on device (mu_ held): the group's own for CPU tensors; for CUDA
  /// tensors the one bound to their device, split off the group's at the first CUDA collective
  /// (collective false: a send or recv, which cannot make it). Throws a sentence otherwise.
  collComm_t commFor(const c10::Device& device, const char* what, bool collective);
  /// commFor the device of tensors (mu_ held).
  collComm_t commFor(at::TensorList tensors, const char* what, bool collective = true);
  /// The open batch's bookkeeping when its coalescing must end (coMu_ held).
  void dropBatch();
  /// Fails an unusable coalescing state with a sentence (coMu_ held): another thread's batch, or
  /// one whose end_coalescing never came.
  void checkCoalescing(const char* what);
  /// Takes comm as the group's communicator (construction), and as its CUDA one when device >= 0.
  void adopt(collComm_t comm, int device);
  collConfig_t config() const;
  /// A send (peer: the destination) or receive (peer: the source, or COLL_ANY_SOURCE) of a CPU
  /// tensor through coll's tagged messages; joins the batch while coalescing.
  c10::intrusive_ptr<c10d::Work> tagged(bool isSend, at::Tensor t, int peer, int tag, std::vector<at::Tensor>& tensors);
  /// An operation's own timeout (its options' timeout, when set) for the calls of plan.
  void ownDeadline(Plan& plan, std::chrono::milliseconds timeout) const;
  /// Takes the communicators out of the launches' reach; returns them (main, device-only).
  std::pair<collComm_t, collComm_t> release();

  std::atomic<collComm_t> comm_{nullptr};
  std::shared_ptr<CommHandle> handle_ = std::make_shared<CommHandle>();  // comm_ for launches
  // CUDA tensors' communicator: comm_ when the group is bound to a device, else split off it.
  int device_ = -1;                                                         // its device, -1 none yet
  std::atomic<collComm_t> devComm_{nullptr};                                // owned when != comm_
  std::shared_ptr<CommHandle> devHandle_ = std::make_shared<CommHandle>();  // devComm_ for launches
  std::optional<c10::Stream> internalStream_;                               // async_op CUDA launches
  c10::intrusive_ptr<c10d::Store> store_;
  std::chrono::milliseconds timeout_;
  std::string name_;
  std::unique_ptr<Watcher> watcher_;
  std::mutex mu_;  // issue order when several threads use one group; not taken by abort()
  uint64_t seq_ = 0;
  uint64_t monitoredSeq_ = 0;
  // Coalescing, under coMu_ (taken after mu_ where both are): the batch's plan, its launch (made
  // by its first operation) and the thread that started it.
  std::mutex coMu_;
  bool coalescing_ = false;
  std::string batchDropped_;  // why the last batch was dropped, told to the next call
  Plan batch_;
  std::optional<c10::Device> batchDevice_;
  std::shared_ptr<Launch> batchLaunch_;
  std::vector<at::Tensor> batchInputs_;
  std::vector<std::shared_ptr<TaggedRequest>> batchTagged_;  // sends and receives of CPU tensors
  std::thread::id batchThread_;
};

}  // namespace coll_torch
