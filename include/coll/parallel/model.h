// A small model for the client layer's trainer and tests: a multi-layer perceptron classifier
// (linear layers with GELU between them, softmax cross-entropy), float32 on the CPU, with its
// backward pass reporting each parameter's gradient as soon as it is final, in the reverse order
// of the layers, as autograd does (what data parallel's buckets overlap with).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "coll/parallel/tensor.h"

namespace coll::parallel {

/// Calls around each layer's use of its parameters, for layers that shard them (ZeRO-3, FSDP):
/// the parameters must be in place after before*(layer) and may be released after after*(layer).
/// afterBackward(layer) comes once the layer's gradients are complete.
struct LayerHooks {
  std::function<void(size_t)> beforeForward, afterForward, beforeBackward, afterBackward;
};

/// What a forward pass over layers [l0, l1) keeps for its backward pass.
struct Activations {
  size_t l0 = 0, l1 = 0;
  int batch = 0;
  std::vector<std::vector<float>> h;  // each layer's input
  std::vector<std::vector<float>> z;  // each layer's pre-activation
};

class Mlp {
 public:
  /// widths: input features, hidden widths..., classes (at least 2 entries). Weights are drawn
  /// from a generator seeded with `seed`: equal seeds give equal models on every rank.
  Mlp(std::vector<int> widths, uint64_t seed);

  /// Parameters in forward order: weight (out x in) then bias of each layer (layer l: 2l, 2l + 1).
  std::vector<Param>& params() { return params_; }
  /// Number of linear layers.
  size_t layers() const { return widths_.size() - 1; }
  /// Parameter indices of each layer, in order (the units of ZeRO-3/FSDP).
  std::vector<std::vector<size_t>> layerUnits() const;
  std::vector<Param*> paramPtrs();

  /// Forward and backward over `batch` rows of x (batch x widths[0]) with class labels. Returns
  /// the mean cross-entropy over the rows; adds scale x d(mean loss)/d(param) into each grad and
  /// calls onReady(i) (an index into params()) once parameter i's gradient is complete.
  float forwardBackward(const float* x, const int* labels, int batch, float scale,
                        const std::function<void(size_t)>& onReady = nullptr, const LayerHooks* hooks = nullptr);

  /// Forward through layers [l0, l1) (a pipeline stage): in is batch x widths[l0]; returns the
  /// output, after the GELU (the next layer's input), or the logits when l1 is the last layer.
  std::vector<float> forwardRange(size_t l0, size_t l1, const float* in, int batch, Activations* keep,
                                  const LayerHooks* hooks = nullptr);
  /// Backward through keep's layers from dOut, the gradient of their output: adds the parameter
  /// gradients, calls onReady; returns the gradient of their input (empty when l0 is 0).
  std::vector<float> backwardRange(const Activations& keep, std::vector<float> dOut,
                                   const std::function<void(size_t)>& onReady = nullptr,
                                   const LayerHooks* hooks = nullptr);
  /// Input width of layer l (widths[l]); width(layers()) is the number of classes.
  int width(size_t l) const { return widths_[l]; }

  /// Mean cross-entropy of a batch, without gradients.
  float loss(const float* x, const int* labels, int batch);

 private:
  std::vector<int> widths_;
  std::vector<Param> params_;
};

/// Mean softmax cross-entropy of batch rows of logits; *dLogits = scale x its gradient.
float crossEntropy(const float* logits, const int* labels, int batch, int classes, float scale,
                   std::vector<float>* dLogits);

/// Plain SGD: value -= lr x grad, then zeroes the gradients.
void sgdStep(const std::vector<Param*>& params, float lr);

/// Deterministic synthetic data: `rows` rows of `features` features and labels in [0, classes),
/// row r the same on every rank for the same seed (so a rank takes its slice of a global batch).
void syntheticBatch(uint64_t seed, int step, int rows, int features, int classes, std::vector<float>* x,
                    std::vector<int>* labels);

}  // namespace coll::parallel
