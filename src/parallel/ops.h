// The client layer's float32 CPU kernels (inside src/parallel, not public): what its small models
// compute with. Row-major matrices; weights are (out x in) as in PyTorch's nn.Linear. The
// attention kernels work on one (sequence, head) at a time through strided row views, block by
// block with an online softmax, so that a whole sequence (one block) and ring attention (a block
// per context-parallel rank) run the same code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace coll::parallel::kern {

/// splitmix64: the layer's deterministic generator (equal seeds give equal draws on every rank).
uint64_t splitmix(uint64_t* s);
/// Uniform in [-1, 1).
float uniform(uint64_t* s);

float gelu(float z);
/// d gelu(z) / dz.
float geluGrad(float z);

/// y (rows x n) = x (rows x k) W^T + b, W n x k; b may be null.
void linear(const float* x, const float* w, const float* b, float* y, int rows, int k, int n);
/// The backward of linear: dx = dy W (overwritten; skipped when dx is null), dw += dy^T x,
/// db += the column sums of dy (skipped when db is null).
void linearBackward(const float* x, const float* w, const float* dy, float* dx, float* dw, float* db, int rows, int k,
                    int n);

/// LayerNorm over the d features of each row (eps 1e-5): y = (x - mean) rstd gamma + beta;
/// mean and rstd (rows each) are kept for the backward.
void layerNorm(const float* x, const float* gamma, const float* beta, float* y, float* mean, float* rstd, int rows,
               int d);
/// dx = d/dx (overwritten), dgamma and dbeta added.
void layerNormBackward(const float* x, const float* gamma, const float* mean, const float* rstd, const float* dy,
                       float* dx, float* dgamma, float* dbeta, int rows, int d);

/// Rows of one head of one sequence inside a larger activation: row i at base + i * stride, dh
/// floats each.
struct RowView {
  float* base;
  size_t stride;
  float* row(int i) const { return base + static_cast<size_t>(i) * stride; }
};

/// Causal attention's running state for nq query rows (FlashAttention's online softmax): the
/// largest score so far, the sum of exp(score - max), and the unnormalized output.
struct SoftmaxState {
  std::vector<float> max, sum, acc;  // nq, nq, nq x dh
  void reset(int nq, int dh);
};

/// Adds the keys/values block (nk rows at global positions kPos0..) to the state of the query
/// rows (nq at qPos0..): query p sees key p' when p' <= p. Scores are q.k x scale.
void attentionBlock(RowView q, int nq, int qPos0, RowView k, RowView v, int nk, int kPos0, int dh, float scale,
                    SoftmaxState* st);
/// out = acc / sum; lse (nq) = max + log(sum), what the backward needs.
void attentionFinish(const SoftmaxState& st, RowView out, float* lse, int nq, int dh);
/// The backward of one block given the finished forward's lse and delta = rowsum(dOut * out):
/// adds into dq, dk and dv.
void attentionBlockBackward(RowView q, RowView dOut, const float* lse, const float* delta, int nq, int qPos0, RowView k,
                            RowView v, RowView dk, RowView dv, int nk, int kPos0, int dh, float scale, RowView dq);

}  // namespace coll::parallel::kern
