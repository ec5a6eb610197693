#include "backend.h"

#include <c10/core/impl/VirtualGuardImpl.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <thread>

#include "types.h"
#include "work.h"

namespace coll_torch {

namespace {

constexpr const char* kIdKey = "coll/unique_id";

int clampMs(std::chrono::milliseconds t) {
  return static_cast<int>(std::min<int64_t>(std::max<int64_t>(t.count(), 1), INT_MAX));
}

void check(bool ok, const std::string& what) {
  if (!ok) throwError("coll: " + what);
}

// A plan's call: one coll function with its arguments bound.
template <typename F>
void call(Plan& p, F f) {
  p.calls.emplace_back(std::move(f));
}

// The current CUDA device where torch has CUDA and a device exists, else -1 (host-only). Through
// c10's device-generic interface, so that the extension builds against any torch.
int currentCudaDevice() {
  if (!c10::impl::hasDeviceGuardImpl(c10::DeviceType::CUDA)) return -1;
  c10::impl::VirtualGuardImpl guard(c10::DeviceType::CUDA);
  if (guard.deviceCount() <= 0) return -1;
  return guard.getDevice().index();
}

}  // namespace

collConfig_t CollBackend::config() const {
  collConfig_t c = COLL_CONFIG_INITIALIZER;
  c.bootstrapTimeoutMs = clampMs(timeout_);
  c.timeoutMs = clampMs(timeout_);
  // CUDA tensors go through coll's device path on this device (NCCL binds its communicators to
  // the current device too); CPU tensors work either way.
  c.cudaDev = currentCudaDevice();
  c.commName = name_.c_str();
  return c;
}

CollBackend::CollBackend(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                         std::chrono::milliseconds timeout, std::string name)
    : Backend(rank, size), store_(store), timeout_(timeout), name_(std::move(name)) {
  collUniqueId id;
  if (rank == 0) {
    if (collGetUniqueId(&id) != collSuccess)
      throwError(std::string("coll: init: collGetUniqueId failed: ") + collGetLastError(nullptr));
    std::vector<uint8_t> bytes(sizeof(id));
    std::memcpy(bytes.data(), &id, sizeof(id));
    store_->set(kIdKey, bytes);
  } else {
    std::vector<uint8_t> bytes = store_->get(kIdKey);
    check(bytes.size() == sizeof(id), "init: the store holds a unique id of " + std::to_string(bytes.size()) +
                                          " bytes, not " + std::to_string(sizeof(id)) +
                                          " (another program wrote the key " + kIdKey + "?)");
    std::memcpy(&id, bytes.data(), sizeof(id));
  }
  collConfig_t cfg = config();
  if (collCommInitRankConfig(&comm_, size, id, rank, &cfg) != collSuccess)
    throwError(std::string("coll: init of rank ") + std::to_string(rank) + " of " + std::to_string(size) +
               " failed: " + collGetLastError(nullptr));
  handle_->comm = comm_;
  watcher_ = std::make_unique<Watcher>();
}

CollBackend::CollBackend(collComm_t comm, const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                         std::chrono::milliseconds timeout, std::string name)
    : Backend(rank, size),
      comm_(comm),
      store_(store),
      timeout_(timeout),
      name_(std::move(name)),
      watcher_(std::make_unique<Watcher>()) {
  handle_->comm = comm_;
}

CollBackend::~CollBackend() {
  watcher_.reset();  // completes what is queued (coll's deadlines bound it)
  release();
  if (comm_) collCommDestroy(comm_);
}

void CollBackend::release() {
  std::lock_guard<std::mutex> lk(handle_->mu);
  handle_->comm = nullptr;
}

c10::intrusive_ptr<c10d::Backend::Options> CollBackend::getBackendOptions() {
  auto o = c10::make_intrusive<Options>("coll", timeout_);
  o->group_name = name_;
  return o;
}

collComm_t CollBackend::live(const char* what) {
  if (!comm_) throwError(std::string("coll: ") + what + ": the process group was aborted or shut down");
  return comm_;
}

c10::intrusive_ptr<c10d::Work> CollBackend::submit(Plan plan, c10d::OpType type, const char* title,
                                                   const std::vector<at::Tensor>& inputs, bool async, int sourceRank) {
  std::lock_guard<std::mutex> lk(mu_);
  collComm_t comm = live(title);
  const c10::Device device = deviceOf(plan, title);
  ++seq_;
  if (coalescing_) {
    if (!batchDevice_) batchDevice_ = device;
    if (*batchDevice_ != device)
      throwError(std::string("coll: ") + title + ": coalesced operations on " + batchDevice_->str() + " and on " +
                 device.str() + " (one batch runs on one device)");
    for (auto& c : plan.calls) batch_.calls.push_back(std::move(c));
    for (auto& a : plan.after) batch_.after.push_back(std::move(a));
    for (auto& k : plan.keep) batch_.keep.push_back(std::move(k));
    for (auto& o : plan.outputs) batch_.outputs.push_back(std::move(o));
    for (auto op : plan.ops) batch_.ops.push_back(op);
    batchInputs_.insert(batchInputs_.end(), inputs.begin(), inputs.end());
    return c10::make_intrusive<CollWork>(batchLaunch_, rank_, type, title, inputs, sourceRank);
  }
  auto launch = std::make_shared<Launch>();
  if (device.is_cuda()) {
    launch->issueOnStream(handle_, std::move(plan), title, device);
  } else if (async) {
    launch->issue(comm, std::move(plan), title);
    watcher_->push(launch);
  } else {
    launch->runBlocking(comm, std::move(plan), title);
  }
  return c10::make_intrusive<CollWork>(launch, rank_, type, title, inputs, sourceRank);
}

// ---------------------------------------------------------------------------------------------
// Reductions

c10::intrusive_ptr<c10d::Work> CollBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                      const c10d::AllreduceOptions& opts) {
  const char* what = "all_reduce";
  check(!tensors.empty(), std::string(what) + ": no tensor given");
  for (auto& t : tensors) checkTensor(t, what);
  collComm_t comm = live(what);
  Plan p;
  for (auto& t : tensors) {
    at::Tensor buf = output(p, t);
    Reduction r = reduction(buf, opts.reduceOp, comm, p, what);
    call(p,
         [=](collStream_t s) { return collAllReduce(buf.data_ptr(), buf.data_ptr(), r.count, r.type, r.op, comm, s); });
  }
  p.outputs = tensors;
  return submit(std::move(p), c10d::OpType::ALLREDUCE, "coll:all_reduce", tensors, opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> CollBackend::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                const c10d::AllreduceCoalescedOptions& opts) {
  const char* what = "all_reduce_coalesced";
  for (auto& t : tensors) checkTensor(t, what);
  collComm_t comm = live(what);
  Plan p;
  for (auto& t : tensors) {
    at::Tensor buf = output(p, t);
    Reduction r = reduction(buf, opts.reduceOp, comm, p, what);
    call(p,
         [=](collStream_t s) { return collAllReduce(buf.data_ptr(), buf.data_ptr(), r.count, r.type, r.op, comm, s); });
  }
  p.outputs = tensors;
  return submit(std::move(p), c10d::OpType::ALLREDUCE_COALESCED, "coll:all_reduce_coalesced", tensors, opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> CollBackend::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  const char* what = "reduce";
  check(tensors.size() == 1, std::string(what) + ": takes one tensor per rank");
  checkTensor(tensors[0], what);
  check(opts.rootRank >= 0 && opts.rootRank < size_, std::string(what) + ": root " + std::to_string(opts.rootRank) +
                                                         " is not a rank of a group of " + std::to_string(size_));
  collComm_t comm = live(what);
  Plan p;
  at::Tensor buf = output(p, tensors[0]);
  Reduction r = reduction(buf, opts.reduceOp, comm, p, what);
  int root = static_cast<int>(opts.rootRank);
  call(p, [=](collStream_t s) {
    return collReduce(buf.data_ptr(), buf.data_ptr(), r.count, r.type, r.op, root, comm, s);
  });
  p.outputs = tensors;
  return submit(std::move(p), c10d::OpType::REDUCE, "coll:reduce", tensors, opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> CollBackend::_reduce_scatter_base(at::Tensor& output_, at::Tensor& input_,
                                                                 const c10d::ReduceScatterOptions& opts) {
  const char* what = "reduce_scatter_tensor";
  checkSameDtype({output_, input_}, what);
  check(input_.numel() == output_.numel() * size_,
        std::string(what) + ": the input has " + std::to_string(input_.numel()) + " elements, not " +
            std::to_string(size_) + " x the output's " + std::to_string(output_.numel()));
  collComm_t comm = live(what);
  Plan p;
  at::Tensor in = input(p, input_);
  at::Tensor out = output(p, output_);
  Reduction r = reduction(out, opts.reduceOp, comm, p, what);
  call(p, [=](collStream_t s) {
    return collReduceScatter(in.data_ptr(), out.data_ptr(), r.count, r.type, r.op, comm, s);
  });
  p.outputs = {output_};
  return submit(std::move(p), c10d::OpType::_REDUCE_SCATTER_BASE, "coll:reduce_scatter_tensor", {input_}, opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> CollBackend::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                            std::vector<at::Tensor>& inputs,
                                                                            const c10d::ReduceScatterOptions& opts) {
  const char* what = "reduce_scatter_tensor_coalesced";
  check(outputs.size() == inputs.size(), std::string(what) + ": as many outputs as inputs are needed");
  collComm_t comm = live(what);
  Plan p;
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkSameDtype({outputs[i], inputs[i]}, what);
    check(inputs[i].numel() == outputs[i].numel() * size_,
          std::string(what) + ": input " + std::to_string(i) + " is not group size x its output");
    at::Tensor in = input(p, inputs[i]);
    at::Tensor out = output(p, outputs[i]);
    Reduction r = reduction(out, opts.reduceOp, comm, p, what);
    call(p, [=](collStream_t s) {
      return collReduceScatter(in.data_ptr(), out.data_ptr(), r.count, r.type, r.op, comm, s);
    });
  }
  p.outputs = outputs;
  return submit(std::move(p), c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED, "coll:reduce_scatter_tensor_coalesced",
                inputs, opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> CollBackend::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                           std::vector<std::vector<at::Tensor>>& inputs,
                                                           const c10d::ReduceScatterOptions& opts) {
  const char* what = "reduce_scatter";
  check(outputs.size() == 1 && inputs.size() == 1, std::string(what) + ": takes one output and one input list");
  check(static_cast<int>(inputs[0].size()) == size_, std::string(what) + ": the input list has " +
                                                         std::to_string(inputs[0].size()) + " tensors, not " +
                                                         std::to_string(size_));
  std::vector<at::Tensor> all(inputs[0]);
  all.push_back(outputs[0]);
  checkSameDtype(all, what);
  const int64_t n = outputs[0].numel();
  for (auto& t : inputs[0]) check(t.numel() == n, std::string(what) + ": every input must have the output's size");
  collComm_t comm = live(what);
  Plan p;
  // One flat input in rank order: what collReduceScatter reads.
  at::Tensor flat = at::empty({n * size_}, outputs[0].options().memory_format(at::MemoryFormat::Contiguous));
  for (int r = 0; r < size_; ++r) flat.narrow(0, r * n, n).copy_(inputs[0][r].reshape(-1));
  p.keep.push_back(flat);
  at::Tensor out = output(p, outputs[0]);
  Reduction r = reduction(out, opts.reduceOp, comm, p, what);
  call(p, [=](collStream_t s) {
    return collReduceScatter(flat.data_ptr(), out.data_ptr(), r.count, r.type, r.op, comm, s);
  });
  p.outputs = outputs;
  return submit(std::move(p), c10d::OpType::REDUCE_SCATTER, "coll:reduce_scatter", inputs[0], opts.asyncOp);
}

// ---------------------------------------------------------------------------------------------
// Data movement: raw bytes, so every dtype works.

c10::intrusive_ptr<c10d::Work> CollBackend::broadcast(std::vector<at::Tensor>& tensors,
                                                      const c10d::BroadcastOptions& opts) {
  const char* what = "broadcast";
  check(!tensors.empty(), std::string(what) + ": no tensor given");
  check(opts.rootRank >= 0 && opts.rootRank < size_, std::string(what) + ": root " + std::to_string(opts.rootRank) +
                                                         " is not a rank of a group of " + std::to_string(size_));
  for (auto& t : tensors) checkTensor(t, what);
  collComm_t comm = live(what);
  Plan p;
  int root = static_cast<int>(opts.rootRank);
  for (auto& t : tensors) {
    at::Tensor buf = output(p, t);
    size_t bytes = bytesOf(buf);
    call(p, [=](collStream_t s) {
      return collBroadcast(buf.data_ptr(), buf.data_ptr(), bytes, collUint8, root, comm, s);
    });
  }
  p.outputs = tensors;
  return submit(std::move(p), c10d::OpType::BROADCAST, "coll:broadcast", tensors, opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> CollBackend::_allgather_base(at::Tensor& output_, at::Tensor& input_,
                                                            const c10d::AllgatherOptions& opts) {
  const char* what = "all_gather_into_tensor";
  checkSameDtype({output_, input_}, what);
  check(output_.numel() == input_.numel() * size_,
        std::string(what) + ": the output has " + std::to_string(output_.numel()) + " elements, not " +
            std::to_string(size_) + " x the input's " + std::to_string(input_.numel()));
  collComm_t comm = live(what);
  Plan p;
  at::Tensor in = input(p, input_);
  at::Tensor out = output(p, output_);
  size_t bytes = bytesOf(in);
  call(p, [=](collStream_t s) { return collAllGather(in.data_ptr(), out.data_ptr(), bytes, collUint8, comm, s); });
  p.outputs = {output_};
  return submit(std::move(p), c10d::OpType::_ALLGATHER_BASE, "coll:all_gather_into_tensor", {input_}, opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> CollBackend::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                            std::vector<at::Tensor>& inputs,
                                                                            const c10d::AllgatherOptions& opts) {
  const char* what = "all_gather_into_tensor_coalesced";
  check(outputs.size() == inputs.size(), std::string(what) + ": as many outputs as inputs are needed");
  collComm_t comm = live(what);
  Plan p;
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkSameDtype({outputs[i], inputs[i]}, what);
    check(outputs[i].numel() == inputs[i].numel() * size_,
          std::string(what) + ": output " + std::to_string(i) + " is not group size x its input");
    at::Tensor in = input(p, inputs[i]);
    at::Tensor out = output(p, outputs[i]);
    size_t bytes = bytesOf(in);
    call(p, [=](collStream_t s) { return collAllGather(in.data_ptr(), out.data_ptr(), bytes, collUint8, comm, s); });
  }
  p.outputs = outputs;
  return submit(std::move(p), c10d::OpType::ALLGATHER_INTO_TENSOR_COALESCED, "coll:all_gather_into_tensor_coalesced",
                inputs, opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> CollBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                      std::vector<at::Tensor>& inputs,
                                                      const c10d::AllgatherOptions& opts) {
  const char* what = "all_gather";
  check(outputs.size() == 1 && inputs.size() == 1, std::string(what) + ": takes one input and one output list");
  check(static_cast<int>(outputs[0].size()) == size_, std::string(what) + ": the output list has " +
                                                          std::to_string(outputs[0].size()) + " tensors, not " +
                                                          std::to_string(size_));
  std::vector<at::Tensor> all(outputs[0]);
  all.push_back(inputs[0]);
  checkSameDtype(all, what);
  const int64_t n = inputs[0].numel();
  for (auto& t : outputs[0]) check(t.numel() == n, std::string(what) + ": every output must have the input's size");
  collComm_t comm = live(what);
  Plan p;
  at::Tensor in = input(p, inputs[0]);
  at::Tensor flat = at::empty({n * size_}, inputs[0].options().memory_format(at::MemoryFormat::Contiguous));
  p.keep.push_back(flat);
  size_t bytes = bytesOf(in);
  call(p, [=](collStream_t s) { return collAllGather(in.data_ptr(), flat.data_ptr(), bytes, collUint8, comm, s); });
  std::vector<at::Tensor> outs = outputs[0];
  p.after.push_back([outs, flat, n]() mutable {
    for (size_t r = 0; r < outs.size(); ++r)
      outs[r].copy_(flat.narrow(0, static_cast<int64_t>(r) * n, n).view(outs[r].sizes()));
  });
  p.outputs = outputs[0];
  return submit(std::move(p), c10d::OpType::ALLGATHER, "coll:all_gather", inputs, opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> CollBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                   std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) {
  const char* what = "gather";
  check(inputs.size() == 1, std::string(what) + ": takes one input tensor");
  checkTensor(inputs[0], what);
  check(opts.rootRank >= 0 && opts.rootRank < size_, std::string(what) + ": root " + std::to_string(opts.rootRank) +
                                                         " is not a rank of a group of " + std::to_string(size_));
  const int root = static_cast<int>(opts.rootRank);
  collComm_t comm = live(what);
  Plan p;
  at::Tensor in = input(p, inputs[0]);
  const size_t bytes = bytesOf(in);
  if (rank_ == root) {
    check(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == size_,
          std::string(what) + ": the root needs a list of " + std::to_string(size_) + " output tensors");
    for (auto& t : outputs[0]) {
      checkSameDtype({t, inputs[0]}, what);
      check(t.numel() == in.numel(), std::string(what) + ": every output must have the input's size");
    }
    for (int r = 0; r < size_; ++r) {
      at::Tensor out = output(p, outputs[0][r]);
      if (r == rank_) {
        out.view(-1).copy_(in.view(-1));
        continue;
      }
      call(p, [=](collStream_t s) { return collRecv(out.data_ptr(), bytes, collUint8, r, comm, s); });
    }
    p.outputs = outputs[0];
  } else {
    check(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
          std::string(what) + ": only the root passes output tensors");
    call(p, [=](collStream_t s) { return collSend(in.data_ptr(), bytes, collUint8, root, comm, s); });
  }
  return submit(std::move(p), c10d::OpType::GATHER, "coll:gather", inputs, opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> CollBackend::scatter(std::vector<at::Tensor>& outputs,
                                                    std::vector<std::vector<at::Tensor>>& inputs,
                                                    const c10d::ScatterOptions& opts) {
  const char* what = "scatter";
  check(outputs.size() == 1, std::string(what) + ": takes one output tensor");
  checkTensor(outputs[0], what);
  check(opts.rootRank >= 0 && opts.rootRank < size_, std::string(what) + ": root " + std::to_string(opts.rootRank) +
                                                         " is not a rank of a group of " + std::to_string(size_));
  const int root = static_cast<int>(opts.rootRank);
  collComm_t comm = live(what);
  Plan p;
  at::Tensor out = output(p, outputs[0]);
  const size_t bytes = bytesOf(out);
  std::vector<at::Tensor> ins;
  if (rank_ == root) {
    check(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == size_,
          std::string(what) + ": the root needs a list of " + std::to_string(size_) + " input tensors");
    for (auto& t : inputs[0]) {
      checkSameDtype({t, outputs[0]}, what);
      check(t.numel() == out.numel(), std::string(what) + ": every input must have the output's size");
    }
    ins = inputs[0];
    for (int r = 0; r < size_; ++r) {
      at::Tensor in = input(p, inputs[0][r]);
      if (r == rank_) {
        out.view(-1).copy_(in.view(-1));
        continue;
      }
      call(p, [=](collStream_t s) { return collSend(in.data_ptr(), bytes, collUint8, r, comm, s); });
    }
  } else {
    check(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
          std::string(what) + ": only the root passes input tensors");
    call(p, [=](collStream_t s) { return collRecv(out.data_ptr(), bytes, collUint8, root, comm, s); });
  }
  p.outputs = outputs;
  return submit(std::move(p), c10d::OpType::SCATTER, "coll:scatter", ins, opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> CollBackend::alltoall_base(at::Tensor& output_, at::Tensor& input_,
                                                          std::vector<int64_t>& outputSplits,
                                                          std::vector<int64_t>& inputSplits,
                                                          const c10d::AllToAllOptions& opts) {
  const char* what = "all_to_all_single";
  checkSameDtype({output_, input_}, what);
  collComm_t comm = live(what);
  Plan p;
  at::Tensor in = input(p, input_);
  at::Tensor out = output(p, output_);
  if (outputSplits.empty() && inputSplits.empty()) {
    check(in.numel() % size_ == 0 && out.numel() == in.numel(),
          std::string(what) + ": without split sizes, input and output must have the same size, divisible by " +
              std::to_string(size_));
    size_t bytes = bytesOf(in) / size_;
    call(p, [=](collStream_t s) { return collAllToAll(in.data_ptr(), out.data_ptr(), bytes, collUint8, comm, s); });
  } else {
    // Uneven: one send and one receive per peer, in one group; dim-0 rows of either tensor.
    auto rows = [&](const at::Tensor& t, std::vector<int64_t>& splits, const char* side) {
      const int64_t dim0 = t.dim() ? t.size(0) : 1;
      if (splits.empty()) {
        check(dim0 % size_ == 0, std::string(what) + ": the " + side + " has " + std::to_string(dim0) +
                                     " rows, not divisible by " + std::to_string(size_));
        splits.assign(size_, dim0 / size_);
      }
      check(static_cast<int>(splits.size()) == size_, std::string(what) + ": " + std::to_string(splits.size()) + " " +
                                                          side + " split sizes for " + std::to_string(size_) +
                                                          " ranks");
      int64_t sum = 0;
      for (int64_t s : splits) {
        check(s >= 0, std::string(what) + ": a negative split size");
        sum += s;
      }
      check(sum == dim0, std::string(what) + ": the " + side + " split sizes add up to " + std::to_string(sum) +
                             ", not its " + std::to_string(dim0) + " rows");
      return dim0 ? static_cast<size_t>(t.numel() / dim0) * t.element_size() : size_t(0);
    };
    std::vector<int64_t> ins = inputSplits, outs = outputSplits;
    const size_t inRow = rows(in, ins, "input"), outRow = rows(out, outs, "output");
    auto* src = static_cast<char*>(in.data_ptr());
    auto* dst = static_cast<char*>(out.data_ptr());
    at::Tensor inBytes = in.reshape(-1).view(at::kByte), outBytes = out.reshape(-1).view(at::kByte);
    size_t inOff = 0, outOff = 0;
    for (int r = 0; r < size_; ++r) {
      const size_t sb = ins[r] * inRow, rb = outs[r] * outRow;
      if (r == rank_) {
        check(sb == rb, std::string(what) + ": this rank sends itself " + std::to_string(sb) + " bytes but expects " +
                            std::to_string(rb));
        // As tensors, so that it runs where they are (a copy on the CUDA stream, or memcpy).
        if (sb)
          outBytes.narrow(0, static_cast<int64_t>(outOff), static_cast<int64_t>(sb))
              .copy_(inBytes.narrow(0, static_cast<int64_t>(inOff), static_cast<int64_t>(sb)));
      } else {
        char* sp = src + inOff;
        char* rp = dst + outOff;
        if (sb) call(p, [=](collStream_t s) { return collSend(sp, sb, collUint8, r, comm, s); });
        if (rb) call(p, [=](collStream_t s) { return collRecv(rp, rb, collUint8, r, comm, s); });
      }
      inOff += sb;
      outOff += rb;
    }
  }
  p.outputs = {output_};
  return submit(std::move(p), c10d::OpType::ALLTOALL_BASE, "coll:all_to_all_single", {input_}, opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> CollBackend::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                                     const c10d::AllToAllOptions& opts) {
  const char* what = "all_to_all";
  check(static_cast<int>(outputs.size()) == size_ && static_cast<int>(inputs.size()) == size_,
        std::string(what) + ": needs " + std::to_string(size_) + " input and output tensors");
  std::vector<at::Tensor> all(inputs);
  all.insert(all.end(), outputs.begin(), outputs.end());
  checkSameDtype(all, what);
  collComm_t comm = live(what);
  Plan p;
  for (int r = 0; r < size_; ++r) {
    at::Tensor in = input(p, inputs[r]);
    at::Tensor out = output(p, outputs[r]);
    if (r == rank_) {
      check(in.numel() == out.numel(), std::string(what) + ": this rank's own input and output differ in size");
      out.view(-1).copy_(in.view(-1));
      continue;
    }
    size_t sb = bytesOf(in), rb = bytesOf(out);
    if (sb) call(p, [=](collStream_t s) { return collSend(in.data_ptr(), sb, collUint8, r, comm, s); });
    if (rb) call(p, [=](collStream_t s) { return collRecv(out.data_ptr(), rb, collUint8, r, comm, s); });
  }
  p.outputs = outputs;
  return submit(std::move(p), c10d::OpType::ALLTOALL, "coll:all_to_all", inputs, opts.asyncOp);
}

// ---------------------------------------------------------------------------------------------
// Point to point, barriers

c10::intrusive_ptr<c10d::Work> CollBackend::send(std::vector<at::Tensor>& tensors, int dst, int /*tag*/) {
  const char* what = "send";
  check(tensors.size() == 1, std::string(what) + ": takes one tensor");
  checkTensor(tensors[0], what);
  check(dst >= 0 && dst < size_ && dst != rank_, std::string(what) + ": peer " + std::to_string(dst) +
                                                     " is not another rank of a group of " + std::to_string(size_));
  collComm_t comm = live(what);
  Plan p;
  at::Tensor in = input(p, tensors[0]);
  size_t bytes = bytesOf(in);
  call(p, [=](collStream_t s) { return collSend(in.data_ptr(), bytes, collUint8, dst, comm, s); });
  return submit(std::move(p), c10d::OpType::SEND, "coll:send", tensors, true);
}

c10::intrusive_ptr<c10d::Work> CollBackend::recv(std::vector<at::Tensor>& tensors, int src, int /*tag*/) {
  const char* what = "recv";
  check(tensors.size() == 1, std::string(what) + ": takes one tensor");
  checkTensor(tensors[0], what);
  check(src >= 0 && src < size_ && src != rank_, std::string(what) + ": peer " + std::to_string(src) +
                                                     " is not another rank of a group of " + std::to_string(size_));
  collComm_t comm = live(what);
  Plan p;
  at::Tensor out = output(p, tensors[0]);
  size_t bytes = bytesOf(out);
  call(p, [=](collStream_t s) { return collRecv(out.data_ptr(), bytes, collUint8, src, comm, s); });
  p.outputs = tensors;
  return submit(std::move(p), c10d::OpType::RECV, "coll:recv", tensors, true, src);
}

c10::intrusive_ptr<c10d::Work> CollBackend::barrier(const c10d::BarrierOptions& opts) {
  collComm_t comm = live("barrier");
  Plan p;
  at::Tensor flag = at::zeros({1}, at::kByte);
  p.keep.push_back(flag);
  call(p,
       [=](collStream_t s) { return collAllReduce(flag.data_ptr(), flag.data_ptr(), 1, collUint8, collSum, comm, s); });
  return submit(std::move(p), c10d::OpType::BARRIER, "coll:barrier", {}, opts.asyncOp);
}

void CollBackend::monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) {
  live("monitored_barrier");
  const auto timeout = opts.timeout == c10d::kUnsetTimeout ? timeout_ : opts.timeout;
  const std::string prefix = "coll/monitored_barrier/" + std::to_string(++monitoredSeq_) + "/";
  if (rank_ != 0) {
    store_->set(prefix + std::to_string(rank_), std::vector<uint8_t>{1});
    try {
      store_->wait({prefix + "done"}, timeout);
    } catch (const std::exception& e) {
      throwError("coll: rank " + std::to_string(rank_) + ": rank 0 did not release the monitored barrier within " +
                 std::to_string(timeout.count()) + " ms");
    }
    return;
  }
  std::vector<int> missing;
  for (int r = 1; r < size_; ++r) missing.push_back(r);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!missing.empty()) {
    std::vector<int> still;
    for (int r : missing)
      if (!store_->check({prefix + std::to_string(r)})) still.push_back(r);
    missing.swap(still);
    if (missing.empty() || std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (!missing.empty()) {
    std::string who;
    const size_t shown = waitAllRanks ? missing.size() : 1;
    for (size_t i = 0; i < shown; ++i) who += (i ? ", " : "") + std::to_string(missing[i]);
    throwError("coll: rank 0: " + std::string(shown > 1 ? "ranks " : "rank ") + who +
               " failed to pass the monitored barrier in " + std::to_string(timeout.count()) + " ms");
  }
  store_->set(prefix + "done", std::vector<uint8_t>{1});
}

// ---------------------------------------------------------------------------------------------
// Coalescing, groups, lifetime

void CollBackend::startCoalescing() {
  std::lock_guard<std::mutex> lk(mu_);
  live("start_coalescing");
  if (coalescing_) throwError("coll: start_coalescing: already coalescing (nested coalescing is not supported)");
  coalescing_ = true;
  batch_ = Plan();
  batchDevice_.reset();
  batchInputs_.clear();
  batchLaunch_ = std::make_shared<Launch>();
}

c10::intrusive_ptr<c10d::Work> CollBackend::endCoalescing() {
  std::lock_guard<std::mutex> lk(mu_);
  if (!coalescing_) throwError("coll: end_coalescing without start_coalescing");
  coalescing_ = false;
  auto launch = std::move(batchLaunch_);
  auto inputs = std::move(batchInputs_);
  batchLaunch_.reset();
  batchInputs_.clear();
  collComm_t comm = live("end_coalescing");
  if (batchDevice_ && batchDevice_->is_cuda()) {
    launch->issueOnStream(handle_, std::move(batch_), "coalesced operations", *batchDevice_);
  } else {
    launch->issue(comm, std::move(batch_), "coalesced operations");
    watcher_->push(launch);
  }
  batch_ = Plan();
  batchDevice_.reset();
  return c10::make_intrusive<CollWork>(launch, rank_, c10d::OpType::COALESCED, "coll:coalesced", inputs);
}

c10::intrusive_ptr<c10d::Backend> CollBackend::split(const c10::intrusive_ptr<c10d::Store>& store,
                                                     const std::vector<int>& ranks,
                                                     const c10::intrusive_ptr<Options>& opts) {
  collComm_t comm = live("split");
  watcher_->drain();  // the split uses the bootstrap, which queued work may be using to connect
  auto it = std::find(ranks.begin(), ranks.end(), rank_);
  const int key = it == ranks.end() ? rank_ : static_cast<int>(it - ranks.begin());
  const int color = it == ranks.end() ? COLL_SPLIT_NOCOLOR : *std::min_element(ranks.begin(), ranks.end());
  const auto timeout = opts ? opts->timeout : timeout_;
  const std::string name = opts && !opts->group_name.empty() ? opts->group_name : name_ + ":split";
  collConfig_t cfg = config();
  cfg.bootstrapTimeoutMs = cfg.timeoutMs = clampMs(timeout);
  cfg.commName = name.c_str();
  collComm_t nc = nullptr;
  if (collCommSplit(comm, color, key, &nc, &cfg) != collSuccess)
    throwError(std::string("coll: split: ") + collGetLastError(comm));
  if (!nc) return {};
  return c10::make_intrusive<CollBackend>(nc, store, key, static_cast<int>(ranks.size()), timeout, name);
}

void CollBackend::performNocolorSplit() {
  collComm_t comm = live("split");
  watcher_->drain();
  collComm_t nc = nullptr;
  collConfig_t cfg = config();
  if (collCommSplit(comm, COLL_SPLIT_NOCOLOR, rank_, &nc, &cfg) != collSuccess)
    throwError(std::string("coll: split: ") + collGetLastError(comm));
}

void CollBackend::waitForPendingWorks() { watcher_->drain(); }

void CollBackend::abort() {
  std::lock_guard<std::mutex> lk(mu_);
  if (!comm_) return;
  release();
  collCommAbort(comm_);  // queued work is cancelled, running work ends; the watcher sees the errors
  comm_ = nullptr;
}

void CollBackend::shutdown() {
  watcher_->drain();
  std::lock_guard<std::mutex> lk(mu_);
  if (!comm_) return;
  release();
  collCommFinalize(comm_);
  collCommDestroy(comm_);
  comm_ = nullptr;
}

}  // namespace coll_torch
