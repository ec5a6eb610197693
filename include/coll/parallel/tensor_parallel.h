// Tensor parallelism (Megatron-LM): a linear layer's weight split across the ranks of a group, by
// output features (column parallel: each rank computes a slice of the outputs) or by input
// features (row parallel: each rank computes a partial sum of every output). A column-parallel
// layer followed by a row-parallel one needs no communication between them; around the pair sit
// two conjugate operators:
//   entering (f): forward identity,   backward all-reduce of the input's gradient;
//   leaving  (g): forward all-reduce, backward identity,
// so a transformer block (attention split by heads, then the MLP) does 2 all-reduces forward and 2
// backward. Sequence parallelism splits the rows (tokens) of the regions between them (LayerNorm,
// residual, dropout) across the same ranks and replaces each all-reduce by a reduce-scatter plus
// an all-gather: f becomes all-gather forward / reduce-scatter backward, g reduce-scatter forward
// / all-gather backward, the same bytes, and activations there take 1/t of the memory.
// Activations are row-major (rows x width), rows sequence-major, so a rank's share of the
// sequence is a contiguous block of rows.
#pragma once

#include <utility>
#include <vector>

#include "coll/coll.h"
#include "coll/parallel/ledger.h"
#include "coll/parallel/tensor.h"

namespace coll::parallel {

class TensorParallel {
 public:
  /// comm: the tensor-parallel group (nullptr: one rank, every operator is the identity).
  /// sequenceParallel: split the rows outside the parallel regions (see above). ledger, when
  /// given, records each call. The calls are blocking.
  explicit TensorParallel(collComm_t comm, bool sequenceParallel = false, CommLedger* ledger = nullptr);

  int size() const { return size_; }
  int rank() const { return rank_; }
  bool sequenceParallel() const { return sp_; }
  collComm_t comm() const { return comm_; }

  /// f forward: x (the rows this rank holds) as the parallel region needs them
  /// (sequence parallel: all-gathered to every rank's rows, in rank order).
  std::vector<float> enterForward(std::vector<float> x) const;
  /// f backward: the region's input gradient summed over the group (sequence parallel:
  /// reduce-scattered back to this rank's rows).
  std::vector<float> enterBackward(std::vector<float> dx) const;
  /// g forward: a row-parallel layer's partial outputs summed over the group (sequence parallel:
  /// reduce-scattered to this rank's rows).
  std::vector<float> exitForward(std::vector<float> partial) const;
  /// g backward: the output gradient as the region needs it (sequence parallel: all-gathered).
  std::vector<float> exitBackward(std::vector<float> dy) const;
  /// Sequence parallel: the parameters outside the regions (LayerNorm, the row-parallel layers'
  /// biases, ...) saw only this rank's rows, so their gradients are summed over the group (one
  /// all-reduce of them all). Without sequence parallelism every rank computed the same gradient
  /// and this does nothing.
  void sumReplicatedGrads(const std::vector<Param*>& params) const;

  /// The [begin, end) of part `index` when n is split in `parts` equal parts (Error when parts
  /// does not divide n: name the sizes to change).
  static std::pair<int, int> split(int n, int parts, int index, const char* what);

 private:
  void allReduce(std::vector<float>* v) const;
  collComm_t comm_;
  bool sp_;
  CommLedger* ledger_;
  int size_ = 1, rank_ = 0;
};

}  // namespace coll::parallel
