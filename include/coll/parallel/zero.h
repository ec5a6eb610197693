// ZeRO (stages 0-3) and FSDP with a mixed-precision Adam: bfloat16 working parameters, gradients
// in bfloat16 (or float32), float32 master weights and moments (K = 12 bytes per parameter).
//
// The model's parameters are grouped in units (FSDP's units; a layer each, say). Each unit is
// flattened (its parameters in order) and padded to a multiple of the group size N; rank r owns
// shard r of every unit. What each stage keeps and moves, per rank, with Psi parameters:
//   stage 0 (DDP):   all-reduce of the gradients; Adam on everything;
//                    memory 2 Psi + 2 Psi + K Psi
//   stage 1:         reduce-scatter of the gradients after backward, Adam on the own shard,
//                    all-gather of the updated parameters; memory 2 Psi + 2 Psi + K Psi / N
//   stage 2:         as 1, but each unit's gradients are reduce-scattered as soon as backward has
//                    made them and only the shard is kept; memory 2 Psi + (2 + K) Psi / N
//   stage 3 (FSDP):  as 2, and the parameters are sharded too: a unit is all-gathered before its
//                    forward and again before its backward, and released after each; the next
//                    unit's gather runs while the current one computes (prefetch);
//                    memory (2 + 2 + K) Psi / N, plus the units gathered at the moment
// Stages 0-2 move 2 Psi (N-1)/N elements per step, stage 3 3 Psi (N-1)/N (1.5x). HSDP
// (Options::replicate, R replicas of an N-way sharding) adds an all-reduce of the gradient shard
// across the replicas: 2 (Psi/N) (R-1)/R more.
// The memory ledger counts the working parameters at 2 bytes each wherever they are
// materialized; the CPU model then computes in float32 from those bfloat16 values (its kernels
// are float32), a copy that a GPU's bfloat16 kernels would not need and that is not counted.
#pragma once

#include <cstdint>
#include <vector>

#include "coll/coll.h"
#include "coll/parallel/adam.h"
#include "coll/parallel/ledger.h"
#include "coll/parallel/model.h"
#include "coll/parallel/tensor.h"

namespace coll::parallel {

class Zero {
 public:
  struct Options {
    int stage = 1;                           // 0, 1, 2 or 3
    AdamOptions adam;                        //
    collDataType_t gradType = collBfloat16;  // gradients kept and reduced in this type (or collFloat32)
    bool prefetch = true;                    // stage 3: gather the next unit during the current one
    /// HSDP: the shards live in comm (the shard group, say the ranks of a host) and are
    /// replicated across this communicator (one rank of each shard group with the same shard
    /// coordinate): after the reduce-scatter in comm, each shard's gradients are all-reduced
    /// (averaged) here. nullptr: no replication. Stages 1-3.
    collComm_t replicate = nullptr;
  };

  /// params: every parameter, equal on every rank of comm at the start (same seed, or broadcast
  /// first); units: parameter indices in the order the forward pass uses them, each parameter in
  /// exactly one. Rounds the parameters to bfloat16 (the working copy); stage 3 then keeps only
  /// this rank's shard. Throws Error for a bad stage or units that do not cover the parameters.
  Zero(collComm_t comm, std::vector<Param*> params, std::vector<std::vector<size_t>> units, Options options,
       CommLedger* comm_ledger = nullptr, MemoryLedger* memory = nullptr);
  ~Zero();
  Zero(const Zero&) = delete;
  Zero& operator=(const Zero&) = delete;

  /// The calls to give the model's forward/backward (stages 2 and 3 act in them; 0 and 1 do not).
  const LayerHooks& hooks() const { return hooks_; }
  /// After backward: reduces the gradients (stages 0, 1), updates the master weights this rank
  /// owns (all of them at stage 0) with Adam, and makes the new working parameters (stages 0-2:
  /// all of them, all-gathered for 1-2; stage 3: this rank's shard). Zeroes the gradients.
  void step();
  /// Stage 3: gathers every unit's parameters into the Params (to read or save the model); they
  /// stay until the next forward releases them. Other stages: nothing to do.
  void gatherAll();

  /// Elements of unit u after padding, and of this rank's shard of it.
  size_t paddedSize(size_t u) const { return units_[u].padded; }
  size_t shardSize(size_t u) const { return units_[u].padded / static_cast<size_t>(nranks_); }

 private:
  struct Unit {
    std::vector<size_t> params;
    size_t elems = 0, padded = 0;
    std::vector<float> master, m, v;  // this rank's shard (stage 0: the whole unit)
    std::vector<float> gradShard;     // stages 1-3: the reduced gradients of the shard
    std::vector<uint16_t> workShard;  // stage 3: the bfloat16 working shard
    std::vector<uint16_t> gathered;   // stage 3: the unit's gather buffer while it is in use
    bool inFlight = false, present = false, gradsLive = false;
  };
  size_t gradBytes() const { return opt_.gradType == collFloat32 ? 4 : 2; }
  void gatherStart(size_t u);
  void gatherFinish(size_t u);
  void release(size_t u);
  void reduceGrads(size_t u, bool scatter);
  void allocGrads(size_t u);
  void replicateShard(std::vector<float>* shard);
  void freeGrads(size_t u);
  collStream_t streamOf(size_t u) const { return streams_[u % 2]; }

  collComm_t comm_;
  std::vector<Param*> params_;
  std::vector<size_t> sizes_;  // each parameter's element count (stage 3 releases the values)
  std::vector<Unit> units_;
  Options opt_;
  CommLedger* ledger_;
  MemoryLedger* memory_;
  MemoryLedger ownMemory_;
  int nranks_ = 1, rank_ = 0, steps_ = 0, replicas_ = 1;
  collStream_t streams_[2] = {nullptr, nullptr};
  LayerHooks hooks_;
};

}  // namespace coll::parallel
