#include "coll/parallel/model.h"

#include <algorithm>
#include <cmath>

#include "coll/parallel/error.h"

namespace coll::parallel {
namespace {

uint64_t splitmix(uint64_t* s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
// Uniform in [-1, 1).
float uniform(uint64_t* s) { return static_cast<float>(splitmix(s) >> 40) / static_cast<float>(1 << 23) - 1.0f; }

float gelu(float z) { return 0.5f * z * (1.0f + std::erf(z * 0.70710678f)); }
float geluGrad(float z) {
  float cdf = 0.5f * (1.0f + std::erf(z * 0.70710678f));
  float pdf = 0.39894228f * std::exp(-0.5f * z * z);
  return cdf + z * pdf;
}

// out (rows x n) = in (rows x k) W^T (W: n x k) + b.
void linear(const float* in, const float* w, const float* b, float* out, int rows, int k, int n) {
  for (int r = 0; r < rows; ++r)
    for (int j = 0; j < n; ++j) {
      float acc = b[j];
      const float* x = in + static_cast<size_t>(r) * k;
      const float* wj = w + static_cast<size_t>(j) * k;
      for (int i = 0; i < k; ++i) acc += x[i] * wj[i];
      out[static_cast<size_t>(r) * n + j] = acc;
    }
}

}  // namespace

Mlp::Mlp(std::vector<int> widths, uint64_t seed) : widths_(std::move(widths)) {
  if (widths_.size() < 2) throw Error("Mlp: give at least the input width and the number of classes");
  uint64_t s = seed;
  for (size_t l = 0; l + 1 < widths_.size(); ++l) {
    int in = widths_[l], out = widths_[l + 1];
    float bound = 1.0f / std::sqrt(static_cast<float>(in));
    Param w{"layer" + std::to_string(l) + ".weight", std::vector<float>(static_cast<size_t>(in) * out), {}};
    Param b{"layer" + std::to_string(l) + ".bias", std::vector<float>(out), {}};
    for (float& v : w.value) v = bound * uniform(&s);
    for (float& v : b.value) v = bound * uniform(&s);
    w.zeroGrad();
    b.zeroGrad();
    params_.push_back(std::move(w));
    params_.push_back(std::move(b));
  }
}

std::vector<Param*> Mlp::paramPtrs() {
  std::vector<Param*> out;
  for (Param& p : params_) out.push_back(&p);
  return out;
}

std::vector<std::vector<size_t>> Mlp::layerUnits() const {
  std::vector<std::vector<size_t>> units;
  for (size_t l = 0; l < layers(); ++l) units.push_back({2 * l, 2 * l + 1});
  return units;
}

float Mlp::forwardBackward(const float* x, const int* labels, int batch, float scale,
                           const std::function<void(size_t)>& onReady, const LayerHooks* hooks) {
  auto call = [&](const std::function<void(size_t)> LayerHooks::*which, size_t l) {
    if (hooks && hooks->*which) (hooks->*which)(l);
  };
  size_t layers = widths_.size() - 1;
  // z[l]: pre-activations of layer l; h[l]: its input (h[0] = x).
  std::vector<std::vector<float>> z(layers), h(layers + 1);
  h[0].assign(x, x + static_cast<size_t>(batch) * widths_[0]);
  for (size_t l = 0; l < layers; ++l) {
    int in = widths_[l], out = widths_[l + 1];
    z[l].resize(static_cast<size_t>(batch) * out);
    call(&LayerHooks::beforeForward, l);
    linear(h[l].data(), params_[2 * l].value.data(), params_[2 * l + 1].value.data(), z[l].data(), batch, in, out);
    call(&LayerHooks::afterForward, l);
    h[l + 1] = z[l];
    if (l + 1 < layers)
      for (float& v : h[l + 1]) v = gelu(v);
  }
  // Softmax cross-entropy, mean over rows; dz = (softmax - onehot) / batch x scale.
  int classes = widths_.back();
  std::vector<float> dz(static_cast<size_t>(batch) * classes);
  double loss = 0;
  for (int r = 0; r < batch; ++r) {
    const float* logits = z[layers - 1].data() + static_cast<size_t>(r) * classes;
    float mx = logits[0];
    for (int c = 1; c < classes; ++c) mx = std::max(mx, logits[c]);
    double sum = 0;
    for (int c = 0; c < classes; ++c) sum += std::exp(static_cast<double>(logits[c] - mx));
    loss += std::log(sum) + mx - logits[labels[r]];
    for (int c = 0; c < classes; ++c) {
      double p = std::exp(static_cast<double>(logits[c] - mx)) / sum;
      dz[static_cast<size_t>(r) * classes + c] = static_cast<float>((p - (c == labels[r] ? 1.0 : 0.0)) / batch * scale);
    }
  }
  for (size_t l = layers; l-- > 0;) {
    int in = widths_[l], out = widths_[l + 1];
    Param& w = params_[2 * l];
    Param& b = params_[2 * l + 1];
    call(&LayerHooks::beforeBackward, l);
    for (int r = 0; r < batch; ++r)
      for (int j = 0; j < out; ++j) {
        float g = dz[static_cast<size_t>(r) * out + j];
        b.grad[j] += g;
        float* wj = w.grad.data() + static_cast<size_t>(j) * in;
        const float* hr = h[l].data() + static_cast<size_t>(r) * in;
        for (int i = 0; i < in; ++i) wj[i] += g * hr[i];
      }
    if (onReady) {
      onReady(2 * l + 1);
      onReady(2 * l);
    }
    if (l == 0) {
      call(&LayerHooks::afterBackward, l);
      break;
    }
    std::vector<float> dh(static_cast<size_t>(batch) * in, 0.0f);
    for (int r = 0; r < batch; ++r)
      for (int j = 0; j < out; ++j) {
        float g = dz[static_cast<size_t>(r) * out + j];
        const float* wj = w.value.data() + static_cast<size_t>(j) * in;
        float* d = dh.data() + static_cast<size_t>(r) * in;
        for (int i = 0; i < in; ++i) d[i] += g * wj[i];
      }
    call(&LayerHooks::afterBackward, l);  // the layer's weights are used for the last time above
    for (size_t k = 0; k < dh.size(); ++k) dh[k] *= geluGrad(z[l - 1][k]);
    dz = std::move(dh);
  }
  return static_cast<float>(loss / batch);
}

float Mlp::loss(const float* x, const int* labels, int batch) {
  size_t layers = widths_.size() - 1;
  std::vector<float> h(x, x + static_cast<size_t>(batch) * widths_[0]), z;
  for (size_t l = 0; l < layers; ++l) {
    z.resize(static_cast<size_t>(batch) * widths_[l + 1]);
    linear(h.data(), params_[2 * l].value.data(), params_[2 * l + 1].value.data(), z.data(), batch, widths_[l],
           widths_[l + 1]);
    h = z;
    if (l + 1 < layers)
      for (float& v : h) v = gelu(v);
  }
  int classes = widths_.back();
  double loss = 0;
  for (int r = 0; r < batch; ++r) {
    const float* logits = h.data() + static_cast<size_t>(r) * classes;
    float mx = logits[0];
    for (int c = 1; c < classes; ++c) mx = std::max(mx, logits[c]);
    double sum = 0;
    for (int c = 0; c < classes; ++c) sum += std::exp(static_cast<double>(logits[c] - mx));
    loss += std::log(sum) + mx - logits[labels[r]];
  }
  return static_cast<float>(loss / batch);
}

void sgdStep(const std::vector<Param*>& params, float lr) {
  for (Param* p : params) {
    for (size_t i = 0; i < p->size(); ++i) p->value[i] -= lr * p->grad[i];
    p->zeroGrad();
  }
}

void syntheticBatch(uint64_t seed, int step, int rows, int features, int classes, std::vector<float>* x,
                    std::vector<int>* labels) {
  x->resize(static_cast<size_t>(rows) * features);
  labels->resize(rows);
  for (int r = 0; r < rows; ++r) {
    uint64_t s = seed ^ (static_cast<uint64_t>(step) << 32) ^ static_cast<uint64_t>(r) * 0x9e3779b97f4a7c15ull;
    for (int f = 0; f < features; ++f) (*x)[static_cast<size_t>(r) * features + f] = uniform(&s);
    (*labels)[r] = static_cast<int>(splitmix(&s) % static_cast<uint64_t>(classes));
  }
}

}  // namespace coll::parallel
