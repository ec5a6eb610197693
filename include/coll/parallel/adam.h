// Adam (with decoupled weight decay, AdamW) on float32 master weights: the optimizer of the
// mixed-precision layers, K = 12 bytes of state per parameter (master 4, first moment 4, second 4).
#pragma once

#include <cstddef>

namespace coll::parallel {

struct AdamOptions {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weightDecay = 0.0f;
};

/// Bytes of optimizer state per parameter: master weight, m and v in float32.
constexpr size_t kAdamStateBytes = 12;

/// One Adam step (step counts from 1) over n elements: m, v and master updated in place from grad.
void adamUpdate(float* master, float* m, float* v, const float* grad, size_t n, int step, const AdamOptions& o);

}  // namespace coll::parallel
