// Data parallel (DDP): every rank holds the whole model and a slice of each batch; gradients are
// averaged over the data-parallel group in buckets, each bucket's all-reduce started as soon as
// its last gradient is ready, so communication overlaps the rest of the backward pass.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "coll/coll.h"
#include "coll/parallel/ledger.h"
#include "coll/parallel/tensor.h"

namespace coll::parallel {

class DataParallel {
 public:
  struct Options {
    size_t bucketBytes = size_t(25) << 20;  // PyTorch DDP's default bucket_cap_mb
    /// true: a bucket's all-reduce is queued when its last gradient is ready (during backward);
    /// false: every bucket is all-reduced in finishStep, after backward (for comparison).
    bool overlap = true;
  };

  /// params: the model's parameters in forward order (the backward pass makes them ready in
  /// reverse, so buckets are filled from the last one). comm: the data-parallel group; the
  /// object uses a host stream of its own (collHostStreamCreate) for the non-blocking
  /// all-reduces. ledger, when given, records every call.
  DataParallel(collComm_t comm, std::vector<Param*> params, Options options, CommLedger* ledger = nullptr);
  DataParallel(collComm_t comm, std::vector<Param*> params) : DataParallel(comm, std::move(params), Options()) {}
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  /// Makes every rank's parameters rank 0's (what DDP does at construction). Blocking.
  void broadcastParameters();
  /// Starts a backward pass. sync=false: gradient accumulation, no communication on this step;
  /// the gradients add up locally until a step with sync=true averages their sum.
  void beginStep(bool sync = true);
  /// The backward hook: parameter i's gradient is final for this pass.
  void gradReady(size_t i);
  /// Waits for every bucket's all-reduce; each gradient then holds the average over the group.
  /// Throws Error when a parameter was never reported ready on a sync step.
  void finishStep();

  /// The buckets, as parameter indices (for tests and logs).
  const std::vector<std::vector<size_t>>& buckets() const { return buckets_; }

 private:
  void launch(size_t bucket);
  collComm_t comm_;
  std::vector<Param*> params_;
  Options options_;
  CommLedger* ledger_;
  int nranks_ = 1;
  collStream_t stream_ = nullptr;
  std::vector<std::vector<size_t>> buckets_;
  std::vector<size_t> bucketOf_;
  std::vector<std::vector<float>> flat_;
  std::vector<size_t> pending_;  // gradients not yet ready, per bucket
  std::vector<char> launched_;   // per bucket
  std::vector<char> ready_;      // per parameter, this pass
  bool sync_ = true;
};

}  // namespace coll::parallel
