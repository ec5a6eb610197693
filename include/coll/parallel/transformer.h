// A small causal transformer for the client layer's trainer and tests, float32 on the CPU, whose
// blocks run tensor parallel (attention split by heads, the MLP column- then row-parallel), with
// sequence parallelism, and context parallel (ring attention), in any combination.
//
// The input is a batch of sequences of dModel-wide feature vectors (no embedding table: the
// trainer's data are synthetic), the target a class per token. Each block is pre-LayerNorm:
//   h = x + Wo attention(LN1(x) Wq, LN1(x) Wk, LN1(x) Wv) + bo
//   y = h + W2 gelu(W1 LN2(h) + b1) + b2
// followed by a linear head and the mean softmax cross-entropy over the tokens.
//
// Activations are sequence-major: row s batch + b is token s of sequence b. A rank holds the
// tokens of its context-parallel chunk of the sequence (seq / cp of them) and, with sequence
// parallelism, its tensor-parallel share of that chunk outside the parallel regions
// (seq / (cp tp)); localTokens() and firstToken() say which.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "coll/parallel/model.h"
#include "coll/parallel/ring_attention.h"
#include "coll/parallel/tensor.h"
#include "coll/parallel/tensor_parallel.h"

namespace coll::parallel {

struct TransformerConfig {
  int dModel = 32;
  int heads = 4;
  int ffn = 128;  // the MLP's hidden width
  int layers = 2;
  int classes = 8;
  int seq = 16;  // tokens per sequence (the whole sequence, before any splitting)
};

class Transformer {
 public:
  /// Builds the model from `seed` (equal on every rank: the whole model is drawn, then each rank
  /// keeps its shard, so any split holds the same numbers as one rank). tp: the tensor-parallel
  /// group (nullptr: none); cp: the context-parallel ring (nullptr: none). Both objects must
  /// outlive the model. Throws Error, before any communication, when tp's size does not divide
  /// the heads or the MLP width, or the sequence does not split over cp (x tp with sequence
  /// parallelism), naming what to change.
  Transformer(TransformerConfig config, uint64_t seed, const TensorParallel* tp = nullptr, RingAttention* cp = nullptr);
  ~Transformer();

  /// This rank's parameters, in forward order: 16 per block (ln1 weight/bias, q/k/v weight and
  /// bias, o weight/bias, ln2 weight/bias, MLP in weight/bias, MLP out weight/bias), then the
  /// head's weight and bias. Split ones hold this rank's shard.
  std::vector<Param>& params() { return params_; }
  std::vector<Param*> paramPtrs();
  /// Parameter indices per block and one unit for the head, in forward order (ZeRO-3/FSDP units).
  std::vector<std::vector<size_t>> units() const;
  /// Whether parameter i is whole on every tensor-parallel rank (LayerNorm, the row-parallel
  /// layers' biases, the head) rather than split.
  bool replicated(size_t i) const;
  /// This rank's part of parameter i's whole value `full` (as one rank would hold it): to load a
  /// checkpoint, or to compare with a one-rank model.
  std::vector<float> shardOf(size_t i, const std::vector<float>& full) const;

  /// Tokens of each sequence this rank's input holds, and the position of the first.
  int localTokens() const;
  int firstToken() const;
  const TransformerConfig& config() const { return cfg_; }

  /// Forward and backward over this rank's rows of a batch: x is localTokens() x batch rows of
  /// dModel (sequence-major), labels one class per row. Returns the mean cross-entropy over those
  /// rows. Gradients: scale x the gradient of the mean loss over the tokens this rank's
  /// tensor-parallel group holds (the group's rows with sequence parallelism, else this rank's),
  /// added into the grads; with context parallelism, average the gradients over the cp group
  /// afterwards (DataParallel over it does). onReady(i) comes when parameter i's gradient is final
  /// on this rank (a block at a time, last block first); hooks are called per unit (units()).
  float forwardBackward(const float* x, const int* labels, int batch, float scale,
                        const std::function<void(size_t)>& onReady = nullptr, const LayerHooks* hooks = nullptr);

 private:
  struct Block;
  void blockForward(size_t l, const std::vector<float>& x, int batch, Block* keep, std::vector<float>* out);
  std::vector<float> blockBackward(size_t l, const Block& keep, std::vector<float> dOut, int batch);
  void syncReplicated(size_t first, size_t count);
  int splitOf(size_t i) const;  // how parameter i is split (transformer.cc's Split)
  TransformerConfig cfg_;
  const TensorParallel* tp_;
  RingAttention* cp_;
  std::unique_ptr<RingAttention> ownCp_;  // a one-rank ring when none is given
  std::unique_ptr<TensorParallel> ownTp_;
  std::vector<Param> params_;
};

}  // namespace coll::parallel
