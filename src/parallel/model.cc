#include "coll/parallel/model.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "coll/parallel/error.h"
#include "parallel/ops.h"

namespace coll::parallel {
namespace {

using kern::gelu;
using kern::geluGrad;
using kern::linear;
using kern::splitmix;
using kern::uniform;

void callHook(const LayerHooks* hooks, std::function<void(size_t)> LayerHooks::*which, size_t l) {
  if (hooks && hooks->*which) (hooks->*which)(l);
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

std::vector<float> Mlp::forwardRange(size_t l0, size_t l1, const float* in, int batch, Activations* keep,
                                     const LayerHooks* hooks) {
  if (l0 >= l1 || l1 > layers())
    throw Error("Mlp::forwardRange: layers [" + std::to_string(l0) + ", " + std::to_string(l1) +
                ") are not a range of the model's " + std::to_string(layers()));
  keep->l0 = l0;
  keep->l1 = l1;
  keep->batch = batch;
  keep->z.assign(l1 - l0, {});
  keep->h.assign(l1 - l0, {});
  std::vector<float> cur(in, in + static_cast<size_t>(batch) * widths_[l0]);
  for (size_t l = l0; l < l1; ++l) {
    int nin = widths_[l], nout = widths_[l + 1];
    std::vector<float>& z = keep->z[l - l0];
    z.resize(static_cast<size_t>(batch) * nout);
    callHook(hooks, &LayerHooks::beforeForward, l);
    linear(cur.data(), params_[2 * l].value.data(), params_[2 * l + 1].value.data(), z.data(), batch, nin, nout);
    callHook(hooks, &LayerHooks::afterForward, l);
    keep->h[l - l0] = std::move(cur);
    cur = z;
    if (l + 1 < layers())
      for (float& v : cur) v = gelu(v);
  }
  return cur;
}

std::vector<float> Mlp::backwardRange(const Activations& keep, std::vector<float> dOut,
                                      const std::function<void(size_t)>& onReady, const LayerHooks* hooks) {
  size_t l0 = keep.l0, l1 = keep.l1;
  int batch = keep.batch;
  // dOut is the gradient of the range's output: of the logits for the last layer, else of the
  // GELU's output, which becomes the gradient of the last pre-activation here.
  std::vector<float> dz = std::move(dOut);
  if (l1 < layers())
    for (size_t k = 0; k < dz.size(); ++k) dz[k] *= geluGrad(keep.z[l1 - 1 - l0][k]);
  for (size_t l = l1; l-- > l0;) {
    int nin = widths_[l], nout = widths_[l + 1];
    Param& w = params_[2 * l];
    Param& b = params_[2 * l + 1];
    const std::vector<float>& h = keep.h[l - l0];
    callHook(hooks, &LayerHooks::beforeBackward, l);
    for (int r = 0; r < batch; ++r)
      for (int j = 0; j < nout; ++j) {
        float g = dz[static_cast<size_t>(r) * nout + j];
        b.grad[j] += g;
        float* wj = w.grad.data() + static_cast<size_t>(j) * nin;
        const float* hr = h.data() + static_cast<size_t>(r) * nin;
        for (int i = 0; i < nin; ++i) wj[i] += g * hr[i];
      }
    if (onReady) {
      onReady(2 * l + 1);
      onReady(2 * l);
    }
    if (l == 0) {
      callHook(hooks, &LayerHooks::afterBackward, l);
      return {};
    }
    std::vector<float> dh(static_cast<size_t>(batch) * nin, 0.0f);
    for (int r = 0; r < batch; ++r)
      for (int j = 0; j < nout; ++j) {
        float g = dz[static_cast<size_t>(r) * nout + j];
        const float* wj = w.value.data() + static_cast<size_t>(j) * nin;
        float* d = dh.data() + static_cast<size_t>(r) * nin;
        for (int i = 0; i < nin; ++i) d[i] += g * wj[i];
      }
    callHook(hooks, &LayerHooks::afterBackward, l);  // the layer's weights are used for the last time above
    if (l == l0) return dh;                          // the previous range applies its own GELU's gradient
    for (size_t k = 0; k < dh.size(); ++k) dh[k] *= geluGrad(keep.z[l - 1 - l0][k]);
    dz = std::move(dh);
  }
  return {};
}

float crossEntropy(const float* logits, const int* labels, int batch, int classes, float scale,
                   std::vector<float>* dLogits) {
  dLogits->assign(static_cast<size_t>(batch) * classes, 0.0f);
  double loss = 0;
  for (int r = 0; r < batch; ++r) {
    const float* row = logits + static_cast<size_t>(r) * classes;
    float mx = row[0];
    for (int c = 1; c < classes; ++c) mx = std::max(mx, row[c]);
    double sum = 0;
    for (int c = 0; c < classes; ++c) sum += std::exp(static_cast<double>(row[c] - mx));
    loss += std::log(sum) + mx - row[labels[r]];
    for (int c = 0; c < classes; ++c) {
      double p = std::exp(static_cast<double>(row[c] - mx)) / sum;
      (*dLogits)[static_cast<size_t>(r) * classes + c] =
          static_cast<float>((p - (c == labels[r] ? 1.0 : 0.0)) / batch * scale);
    }
  }
  return static_cast<float>(loss / batch);
}

float Mlp::forwardBackward(const float* x, const int* labels, int batch, float scale,
                           const std::function<void(size_t)>& onReady, const LayerHooks* hooks) {
  Activations keep;
  std::vector<float> logits = forwardRange(0, layers(), x, batch, &keep, hooks);
  std::vector<float> dLogits;
  float loss = crossEntropy(logits.data(), labels, batch, widths_.back(), scale, &dLogits);
  backwardRange(keep, std::move(dLogits), onReady, hooks);
  return loss;
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
