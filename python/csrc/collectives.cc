// The operations of CollBackend: each checks its tensors, turns them into a Plan of coll calls
// (with the staging copies and copies back it needs) and submits it (backend.cc).
#include <c10/core/impl/VirtualGuardImpl.h>

#include <algorithm>
#include <climits>
#include <thread>

#include "backend.h"
#include "types.h"
#include "work.h"

namespace coll_torch {

namespace {

void check(bool ok, const std::string& what) {
  if (!ok) throwError("coll: " + what);
}

// A plan's call: one coll function with its arguments bound.
template <typename F>
void call(Plan& p, F f) {
  p.calls.emplace_back(std::move(f));
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Reductions

c10::intrusive_ptr<c10d::Work> CollBackend::allreduce(std::vector<at::Tensor>& tensors,
                                                      const c10d::AllreduceOptions& opts) {
  const char* what = "all_reduce";
  check(!tensors.empty(), std::string(what) + ": no tensor given");
  if (tensors.size() == 1 && tensors[0].defined() && tensors[0].layout() == at::kSparse)
    return allreduce_sparse(tensors, opts);
  for (auto& t : tensors) checkTensor(t, what);
  std::lock_guard<std::mutex> lk(mu_);
  collComm_t comm = commFor(tensors, what);
  Plan p;
  ownDeadline(p, opts.timeout);
  for (auto& t : tensors) {
    at::Tensor buf = reducibleOutput(p, t);
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
  std::lock_guard<std::mutex> lk(mu_);
  collComm_t comm = commFor(tensors, what);
  Plan p;
  ownDeadline(p, opts.timeout);
  for (auto& t : tensors) {
    at::Tensor buf = reducibleOutput(p, t);
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
  std::lock_guard<std::mutex> lk(mu_);
  collComm_t comm = commFor(tensors, what);
  Plan p;
  ownDeadline(p, opts.timeout);
  at::Tensor buf = reducibleOutput(p, tensors[0]);
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
  std::lock_guard<std::mutex> lk(mu_);
  collComm_t comm = commFor({input_}, what);
  Plan p;
  ownDeadline(p, opts.timeout);
  at::Tensor in = reducibleInput(p, input_);
  at::Tensor out = reducibleOutput(p, output_);
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
  std::lock_guard<std::mutex> lk(mu_);
  collComm_t comm = commFor(inputs, what);
  Plan p;
  ownDeadline(p, opts.timeout);
  for (size_t i = 0; i < inputs.size(); ++i) {
    checkSameDtype({outputs[i], inputs[i]}, what);
    check(inputs[i].numel() == outputs[i].numel() * size_,
          std::string(what) + ": input " + std::to_string(i) + " is not group size x its output");
    at::Tensor in = reducibleInput(p, inputs[i]);
    at::Tensor out = reducibleOutput(p, outputs[i]);
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
  std::lock_guard<std::mutex> lk(mu_);
  collComm_t comm = commFor(outputs, what);
  Plan p;
  ownDeadline(p, opts.timeout);
  // One flat input in rank order: what collReduceScatter reads.
  at::Tensor flat = at::empty(
      {n * size_},
      outputs[0].options().dtype(reducibleType(outputs[0].scalar_type())).memory_format(at::MemoryFormat::Contiguous));
  std::vector<at::Tensor> ins = inputs[0];
  p.before.push_back([flat, ins, n]() mutable {
    for (size_t r = 0; r < ins.size(); ++r) flat.narrow(0, static_cast<int64_t>(r) * n, n).copy_(ins[r].reshape(-1));
  });
  p.keep.push_back(flat);
  for (auto& t : ins) p.keep.push_back(t);
  at::Tensor out = reducibleOutput(p, outputs[0]);
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
  std::lock_guard<std::mutex> lk(mu_);
  collComm_t comm = commFor(tensors, what);
  Plan p;
  ownDeadline(p, opts.timeout);
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
  std::lock_guard<std::mutex> lk(mu_);
  collComm_t comm = commFor({input_}, what);
  Plan p;
  ownDeadline(p, opts.timeout);
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
  std::lock_guard<std::mutex> lk(mu_);
  collComm_t comm = commFor(inputs, what);
  Plan p;
  ownDeadline(p, opts.timeout);
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
  std::lock_guard<std::mutex> lk(mu_);
  collComm_t comm = commFor(inputs, what);
  Plan p;
  ownDeadline(p, opts.timeout);
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

// torch's layout (as ProcessGroupGloo checks it): outputs[r][i] receives rank r's inputs[i], so
// outputs holds one list per rank, each with one tensor per input.
c10::intrusive_ptr<c10d::Work> CollBackend::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                                std::vector<at::Tensor>& inputs,
                                                                const c10d::AllgatherOptions& opts) {
  const char* what = "all_gather_coalesced";
  check(static_cast<int>(outputs.size()) == size_, std::string(what) + ": " + std::to_string(outputs.size()) +
                                                       " output lists, not one per rank (" + std::to_string(size_) +
                                                       "): output_tensor_lists[rank][i] receives that rank's input i");
  for (size_t r = 0; r < outputs.size(); ++r)
    check(outputs[r].size() == inputs.size(), std::string(what) + ": output list " + std::to_string(r) + " has " +
                                                  std::to_string(outputs[r].size()) + " tensors, not one per input (" +
                                                  std::to_string(inputs.size()) + ")");
  std::lock_guard<std::mutex> lk(mu_);
  collComm_t comm = commFor(inputs, what);
  Plan p;
  ownDeadline(p, opts.timeout);
  std::vector<at::Tensor> all;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<at::Tensor> outs;  // rank r's copy of input i
    for (auto& list : outputs) outs.push_back(list[i]);
    std::vector<at::Tensor> same(outs);
    same.push_back(inputs[i]);
    checkSameDtype(same, what);
    const int64_t n = inputs[i].numel();
    for (auto& t : outs)
      check(t.numel() == n, std::string(what) + ": every output for input " + std::to_string(i) +
                                " must have its size (" + std::to_string(n) + " elements)");
    at::Tensor in = input(p, inputs[i]);
    at::Tensor flat = at::empty({n * size_}, inputs[i].options().memory_format(at::MemoryFormat::Contiguous));
    p.keep.push_back(flat);
    const size_t bytes = bytesOf(in);
    call(p, [=](collStream_t s) { return collAllGather(in.data_ptr(), flat.data_ptr(), bytes, collUint8, comm, s); });
    p.after.push_back([outs, flat, n]() mutable {
      for (size_t r = 0; r < outs.size(); ++r)
        outs[r].copy_(flat.narrow(0, static_cast<int64_t>(r) * n, n).view(outs[r].sizes()));
    });
  }
  for (auto& list : outputs) all.insert(all.end(), list.begin(), list.end());
  p.outputs = all;
  return submit(std::move(p), c10d::OpType::ALLGATHER_COALESCED, "coll:all_gather_coalesced", inputs, opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> CollBackend::gather_single(at::Tensor& output_, at::Tensor& input_,
                                                          const c10d::GatherOptions& opts) {
  const char* what = "gather_into_tensor";
  checkTensor(input_, what);
  check(opts.rootRank >= 0 && opts.rootRank < size_, std::string(what) + ": root " + std::to_string(opts.rootRank) +
                                                         " is not a rank of a group of " + std::to_string(size_));
  const int root = static_cast<int>(opts.rootRank);
  std::lock_guard<std::mutex> lk(mu_);
  collComm_t comm = commFor({input_}, what);
  Plan p;
  ownDeadline(p, opts.timeout);
  at::Tensor in = input(p, input_);
  const size_t bytes = bytesOf(in);
  if (rank_ == root) {
    checkSameDtype({output_, input_}, what);
    check(output_.numel() == input_.numel() * size_,
          std::string(what) + ": the root's output has " + std::to_string(output_.numel()) + " elements, not " +
              std::to_string(size_) + " x the input's " + std::to_string(input_.numel()));
    at::Tensor out = output(p, output_);
    at::Tensor outBytes = out.reshape(-1).view(at::kByte);
    at::Tensor inBytes = in.reshape(-1).view(at::kByte);
    for (int r = 0; r < size_; ++r) {
      at::Tensor block = outBytes.narrow(0, static_cast<int64_t>(r * bytes), static_cast<int64_t>(bytes));
      if (r == rank_) {
        p.before.push_back([block, inBytes]() mutable { block.copy_(inBytes); });
        continue;
      }
      void* dst = block.data_ptr();
      if (bytes) call(p, [=](collStream_t s) { return collRecv(dst, bytes, collUint8, r, comm, s); });
    }
    p.outputs = {output_};
  } else if (bytes) {
    call(p, [=](collStream_t s) { return collSend(in.data_ptr(), bytes, collUint8, root, comm, s); });
  }
  return submit(std::move(p), c10d::OpType::GATHER, "coll:gather_into_tensor", {input_}, opts.asyncOp);
}

c10::intrusive_ptr<c10d::Work> CollBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                   std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) {
  const char* what = "gather";
  check(inputs.size() == 1, std::string(what) + ": takes one input tensor");
  checkTensor(inputs[0], what);
  check(opts.rootRank >= 0 && opts.rootRank < size_, std::string(what) + ": root " + std::to_string(opts.rootRank) +
                                                         " is not a rank of a group of " + std::to_string(size_));
  const int root = static_cast<int>(opts.rootRank);
  std::lock_guard<std::mutex> lk(mu_);
  collComm_t comm = commFor(inputs, what);
  Plan p;
  ownDeadline(p, opts.timeout);
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
        // In queue order, as the calls: earlier operations may still write either tensor.
        p.before.push_back([out, in]() mutable { out.view(-1).copy_(in.view(-1)); });
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
  std::lock_guard<std::mutex> lk(mu_);
  collComm_t comm = commFor(outputs, what);
  Plan p;
  ownDeadline(p, opts.timeout);
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
        // In queue order, as the calls: earlier operations may still write either tensor.
        p.before.push_back([out, in]() mutable { out.view(-1).copy_(in.view(-1)); });
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
  std::lock_guard<std::mutex> lk(mu_);
  collComm_t comm = commFor({input_}, what);
  Plan p;
  ownDeadline(p, opts.timeout);
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
        // In queue order, as the calls: earlier operations may still write either tensor.
        if (sb) {
          at::Tensor to = outBytes.narrow(0, static_cast<int64_t>(outOff), static_cast<int64_t>(sb));
          at::Tensor from = inBytes.narrow(0, static_cast<int64_t>(inOff), static_cast<int64_t>(sb));
          p.before.push_back([to, from]() mutable { to.copy_(from); });
        }
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
  std::lock_guard<std::mutex> lk(mu_);
  collComm_t comm = commFor(inputs, what);
  Plan p;
  ownDeadline(p, opts.timeout);
  for (int r = 0; r < size_; ++r) {
    at::Tensor in = input(p, inputs[r]);
    at::Tensor out = output(p, outputs[r]);
    if (r == rank_) {
      check(in.numel() == out.numel(), std::string(what) + ": this rank's own input and output differ in size");
      p.before.push_back([out, in]() mutable { out.view(-1).copy_(in.view(-1)); });
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

c10::intrusive_ptr<c10d::Work> CollBackend::send(std::vector<at::Tensor>& tensors, int dst, int tag) {
  const char* what = "send";
  check(tensors.size() == 1, std::string(what) + ": takes one tensor");
  checkTensor(tensors[0], what);
  check(dst >= 0 && dst < size_ && dst != rank_, std::string(what) + ": peer " + std::to_string(dst) +
                                                     " is not another rank of a group of " + std::to_string(size_));
  if (tensors[0].device().is_cpu()) return tagged(true, tensors[0].contiguous(), dst, tag, tensors);
  std::lock_guard<std::mutex> lk(mu_);
  collComm_t comm = commFor(tensors, what, false);
  Plan p;
  at::Tensor in = input(p, tensors[0]);
  size_t bytes = bytesOf(in);
  call(p, [=](collStream_t s) { return collSend(in.data_ptr(), bytes, collUint8, dst, comm, s); });
  return submit(std::move(p), c10d::OpType::SEND, "coll:send", tensors, true);
}

c10::intrusive_ptr<c10d::Work> CollBackend::recv(std::vector<at::Tensor>& tensors, int src, int tag) {
  const char* what = "recv";
  check(tensors.size() == 1, std::string(what) + ": takes one tensor");
  checkTensor(tensors[0], what);
  check(src >= 0 && src < size_ && src != rank_, std::string(what) + ": peer " + std::to_string(src) +
                                                     " is not another rank of a group of " + std::to_string(size_));
  if (tensors[0].device().is_cpu()) {
    check(tensors[0].is_contiguous(), std::string(what) + ": the tensor must be contiguous");
    return tagged(false, tensors[0], src, tag, tensors);
  }
  std::lock_guard<std::mutex> lk(mu_);
  collComm_t comm = commFor(tensors, what, false);
  Plan p;
  at::Tensor out = output(p, tensors[0]);
  size_t bytes = bytesOf(out);
  call(p, [=](collStream_t s) { return collRecv(out.data_ptr(), bytes, collUint8, src, comm, s); });
  p.outputs = tensors;
  return submit(std::move(p), c10d::OpType::RECV, "coll:recv", tensors, true, src);
}

c10::intrusive_ptr<c10d::Work> CollBackend::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  const char* what = "recv from any source";
  check(tensors.size() == 1, std::string(what) + ": takes one tensor");
  checkTensor(tensors[0], what);
  check(tensors[0].device().is_cpu(), std::string(what) + ": CUDA tensors are received from a named source only");
  check(tensors[0].is_contiguous(), std::string(what) + ": the tensor must be contiguous");
  return tagged(false, tensors[0], COLL_ANY_SOURCE, tag, tensors);
}

c10::intrusive_ptr<c10d::Work> CollBackend::tagged(bool isSend, at::Tensor t, int peer, int tag,
                                                   std::vector<at::Tensor>& tensors) {
  const char* title = isSend ? "coll:send" : peer == COLL_ANY_SOURCE ? "coll:recv_anysource" : "coll:recv";
  check(tag >= 0, std::string(title + 5) + ": tag " + std::to_string(tag) + " is negative");
  collComm_t comm = comm_.load();
  if (!comm) throwError(std::string("coll: ") + (title + 5) + ": the process group was aborted or shut down");
  collRequest_t request = nullptr;
  const size_t bytes = bytesOf(t);
  collResult_t rc = isSend ? collIsend(t.data_ptr(), bytes, collUint8, peer, tag, comm, &request)
                           : collIrecv(t.data_ptr(), bytes, collUint8, peer, tag, comm, &request);
  if (rc != collSuccess) throwError(std::string("coll: ") + (title + 5) + ": " + collGetLastError(comm));
  auto r = std::make_shared<TaggedRequest>(request, comm, t);
  {
    std::lock_guard<std::mutex> co(coMu_);
    if (coalescing_ && std::this_thread::get_id() == batchThread_) {
      batchTagged_.push_back(r);
      batchInputs_.push_back(tensors[0]);
    }
  }
  return c10::make_intrusive<TaggedWork>(std::vector<std::shared_ptr<TaggedRequest>>{r}, rank_,
                                         isSend ? c10d::OpType::SEND : c10d::OpType::RECV, title, tensors);
}

c10::intrusive_ptr<c10d::Work> CollBackend::barrier(const c10d::BarrierOptions& opts) {
  std::lock_guard<std::mutex> lk(mu_);
  collComm_t comm = commFor(c10::Device(c10::kCPU), "barrier", true);
  // As NCCL's barrier: it returns after the GPU collectives this rank issued on the group so far,
  // on the current stream and on the internal one of async operations.
  if (device_ >= 0 && devComm_.load()) {
    c10::impl::VirtualGuardImpl guard(c10::DeviceType::CUDA);
    const c10::Device device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device_));
    guard.synchronizeStream(guard.getStream(device));
    if (internalStream_) guard.synchronizeStream(*internalStream_);
  }
  Plan p;
  ownDeadline(p, opts.timeout);
  at::Tensor flag = at::zeros({1}, at::kByte);
  p.keep.push_back(flag);
  call(p,
       [=](collStream_t s) { return collAllReduce(flag.data_ptr(), flag.data_ptr(), 1, collUint8, collSum, comm, s); });
  return submit(std::move(p), c10d::OpType::BARRIER, "coll:barrier", {}, opts.asyncOp);
}

void CollBackend::monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) {
  if (!comm_.load()) throwError("coll: monitored_barrier: the process group was aborted or shut down");
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

}  // namespace coll_torch
