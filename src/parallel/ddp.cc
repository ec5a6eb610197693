#include "coll/parallel/ddp.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "coll/parallel/error.h"

namespace coll::parallel {

DataParallel::DataParallel(collComm_t comm, std::vector<Param*> params, Options options, CommLedger* ledger)
    : comm_(comm), params_(std::move(params)), options_(options), ledger_(ledger) {
  check(collCommCount(comm_, &nranks_), comm_, "DataParallel: collCommCount");
  if (options_.bucketBytes == 0) throw Error("DataParallel: bucketBytes is 0; use at least one parameter's bytes");
  // Buckets in reverse parameter order, the order backward makes gradients ready; a parameter
  // larger than a bucket gets one of its own.
  bucketOf_.assign(params_.size(), 0);
  size_t bytes = 0;
  for (size_t k = params_.size(); k-- > 0;) {
    size_t b = params_[k]->size() * sizeof(float);
    if (buckets_.empty() || (bytes > 0 && bytes + b > options_.bucketBytes)) {
      buckets_.emplace_back();
      bytes = 0;
    }
    buckets_.back().push_back(k);
    bucketOf_[k] = buckets_.size() - 1;
    bytes += b;
  }
  flat_.resize(buckets_.size());
  for (size_t b = 0; b < buckets_.size(); ++b) {
    size_t n = 0;
    for (size_t k : buckets_[b]) n += params_[k]->size();
    flat_[b].resize(n);
  }
  for (Param* p : params_)
    if (p->grad.size() != p->value.size()) p->zeroGrad();
  check(collHostStreamCreate(&stream_), comm_, "DataParallel: collHostStreamCreate");
  beginStep(true);
}

DataParallel::~DataParallel() {
  if (stream_) collHostStreamDestroy(stream_);
}

void DataParallel::broadcastParameters() {
  for (Param* p : params_) {
    check(collBroadcast(p->value.data(), p->value.data(), p->size(), collFloat32, 0, comm_, nullptr), comm_,
          "DataParallel: collBroadcast of the parameters");
    if (ledger_) ledger_->record(CommKind::kBroadcast, p->size(), sizeof(float), nranks_);
  }
}

void DataParallel::beginStep(bool sync) {
  sync_ = sync;
  pending_.assign(buckets_.size(), 0);
  for (size_t b = 0; b < buckets_.size(); ++b) pending_[b] = buckets_[b].size();
  launched_.assign(buckets_.size(), 0);
  ready_.assign(params_.size(), 0);
}

void DataParallel::gradReady(size_t i) {
  if (i >= params_.size()) throw Error("DataParallel::gradReady: parameter " + std::to_string(i) + " does not exist");
  if (ready_[i]) return;  // reported twice in one pass (a shared parameter): counted once
  ready_[i] = 1;
  size_t b = bucketOf_[i];
  if (--pending_[b] == 0 && sync_ && options_.overlap) launch(b);
}

// Copies the bucket's gradients into its flat buffer and queues the all-reduce (average) on the
// host stream: the call returns at once and the communicator's thread runs it meanwhile.
void DataParallel::launch(size_t b) {
  float* flat = flat_[b].data();
  for (size_t k : buckets_[b]) {
    std::memcpy(flat, params_[k]->grad.data(), params_[k]->size() * sizeof(float));
    flat += params_[k]->size();
  }
  check(collAllReduce(flat_[b].data(), flat_[b].data(), flat_[b].size(), collFloat32, collAvg, comm_, stream_), comm_,
        "DataParallel: collAllReduce of a gradient bucket");
  if (ledger_) ledger_->record(CommKind::kAllReduce, flat_[b].size(), sizeof(float), nranks_);
  launched_[b] = 1;
}

void DataParallel::finishStep() {
  if (!sync_) return;  // accumulation: the gradients stay local
  for (size_t b = 0; b < buckets_.size(); ++b) {
    if (launched_[b]) continue;
    if (options_.overlap && pending_[b] != 0) {
      size_t missing = 0;
      for (size_t k : buckets_[b])
        if (!ready_[k]) missing = k;
      // Other ranks may be waiting in this bucket's all-reduce: better a clear error than a hang.
      collStreamSynchronize(stream_);
      throw Error("DataParallel::finishStep: the gradient of parameter '" + params_[missing]->name +
                  "' was never reported ready (gradReady); every parameter must be, on every rank");
    }
    launch(b);
  }
  {
    WaitTimer wait(ledger_);
    check(collStreamSynchronize(stream_), nullptr, "DataParallel: the gradient all-reduces");
  }
  for (size_t b = 0; b < buckets_.size(); ++b) {
    const float* flat = flat_[b].data();
    for (size_t k : buckets_[b]) {
      std::memcpy(params_[k]->grad.data(), flat, params_[k]->size() * sizeof(float));
      flat += params_[k]->size();
    }
  }
  beginStep(true);
}

}  // namespace coll::parallel
