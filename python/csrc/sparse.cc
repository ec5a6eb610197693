// All-reduce of sparse COO tensors, as Gloo does it: every rank's coalesced indices and values are
// gathered (padded to the largest count of non-zeros), concatenated in rank order and summed by
// coalescing, so that every rank computes the same tensor in the same order.
#include <algorithm>

#include "backend.h"
#include "types.h"
#include "work.h"

namespace coll_torch {

namespace {

// The shape header every rank gathers: non-zeros, dimensions, sparse dimensions, then the sizes.
constexpr int kMaxDims = 61;
constexpr int kHeader = 3 + kMaxDims;

void gatherBytes(collComm_t comm, const void* send, void* recv, size_t bytes, const std::string& what) {
  if (collAllGather(send, recv, bytes, collUint8, comm, nullptr) != collSuccess)
    throwError("coll: " + what + " failed: " + collGetLastError(comm));
}

}  // namespace

c10::intrusive_ptr<c10d::Work> CollBackend::allreduce_sparse(std::vector<at::Tensor>& tensors,
                                                             const c10d::AllreduceOptions& opts) {
  const std::string what = "all_reduce of a sparse tensor";
  if (tensors.size() != 1) throwError("coll: " + what + ": takes one tensor");
  at::Tensor& t = tensors[0];
  if (!t.defined() || t.layout() != at::kSparse)
    throwError("coll: " + what + ": the tensor is not a sparse COO tensor");
  if (!t.device().is_cpu())
    throwError("coll: " + what + ": sparse tensors on " + t.device().str() + " are not supported (CPU only, as Gloo)");
  if (opts.reduceOp.op_ != c10d::ReduceOp::SUM)
    throwError("coll: " + what + ": only ReduceOp.SUM is defined for sparse tensors (as with Gloo)");
  if (t.dim() > kMaxDims) throwError("coll: " + what + ": more than " + std::to_string(kMaxDims) + " dimensions");
  std::lock_guard<std::mutex> lk(mu_);
  collComm_t comm = commFor(c10::Device(c10::kCPU), what.c_str(), true);
  {
    std::lock_guard<std::mutex> co(coMu_);
    if (coalescing_) throwError("coll: " + what + ": sparse tensors cannot join a coalesced batch");
  }
  // Runs here, blocking: after every launch queued before it, deferred ones included.
  watcher_->drain();
  ++seq_;

  at::Tensor in = t.coalesce();
  const int64_t nnz = in._nnz();
  std::vector<int64_t> header(kHeader, 0), headers(static_cast<size_t>(kHeader) * size_);
  header[0] = nnz;
  header[1] = in.dim();
  header[2] = in.sparse_dim();
  for (int64_t d = 0; d < in.dim(); ++d) header[3 + d] = in.size(d);
  gatherBytes(comm, header.data(), headers.data(), sizeof(int64_t) * kHeader, what);
  int64_t maxNnz = 0;
  for (int r = 0; r < size_; ++r) {
    const int64_t* h = &headers[static_cast<size_t>(r) * kHeader];
    if (!std::equal(h + 1, h + kHeader, header.begin() + 1))
      throwError("coll: " + what + ": rank " + std::to_string(r) +
                 "'s tensor has another shape or sparse layout "
                 "than this rank's");
    maxNnz = std::max(maxNnz, h[0]);
  }

  const int64_t sparseDim = in.sparse_dim();
  at::Tensor indices = at::zeros({sparseDim, maxNnz}, in._indices().options());
  indices.narrow(1, 0, nnz).copy_(in._indices());
  std::vector<int64_t> valueShape = in._values().sizes().vec();
  valueShape[0] = maxNnz;
  at::Tensor values = at::zeros(valueShape, in._values().options());
  values.narrow(0, 0, nnz).copy_(in._values());

  std::vector<int64_t> allIdxShape{size_, sparseDim, maxNnz};
  at::Tensor allIndices = at::empty(allIdxShape, indices.options());
  std::vector<int64_t> allValShape = valueShape;
  allValShape.insert(allValShape.begin(), size_);
  at::Tensor allValues = at::empty(allValShape, values.options());
  if (maxNnz > 0) {
    gatherBytes(comm, indices.data_ptr(), allIndices.data_ptr(), bytesOf(indices), what);
    gatherBytes(comm, values.data_ptr(), allValues.data_ptr(), bytesOf(values), what);
  }

  std::vector<at::Tensor> idx, val;
  for (int r = 0; r < size_; ++r) {
    const int64_t n = headers[static_cast<size_t>(r) * kHeader];
    idx.push_back(allIndices[r].narrow(1, 0, n));
    val.push_back(allValues[r].narrow(0, 0, n));
  }
  at::Tensor sum = at::sparse_coo_tensor(at::cat(idx, 1), at::cat(val, 0), in.sizes()).coalesce();
  t.copy_(sum);  // in place, as every all-reduce (DDP reads the future's value instead)

  Plan done;
  done.outputs = {sum};
  auto launch = std::make_shared<Launch>("coll:" + what, handle_, watcher_->completer());
  launch->runBlocking(std::move(done));
  return c10::make_intrusive<CollWork>(launch, rank_, c10d::OpType::ALLREDUCE, "coll:all_reduce", tensors);
}

}  // namespace coll_torch
