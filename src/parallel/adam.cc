#include "coll/parallel/adam.h"

#include <cmath>

namespace coll::parallel {

void adamUpdate(float* master, float* m, float* v, const float* grad, size_t n, int step, const AdamOptions& o) {
  float c1 = 1.0f - std::pow(o.beta1, static_cast<float>(step));
  float c2 = 1.0f - std::pow(o.beta2, static_cast<float>(step));
  for (size_t i = 0; i < n; ++i) {
    float g = grad[i];
    m[i] = o.beta1 * m[i] + (1.0f - o.beta1) * g;
    v[i] = o.beta2 * v[i] + (1.0f - o.beta2) * g * g;
    float update = (m[i] / c1) / (std::sqrt(v[i] / c2) + o.eps);
    master[i] -= o.lr * (update + o.weightDecay * master[i]);
  }
}

}  // namespace coll::parallel
