#include "coll/parallel/transformer.h"

#include <cmath>
#include <string>
#include <tuple>

#include "coll/parallel/error.h"
#include "parallel/ops.h"

namespace coll::parallel {
namespace {

// How a parameter is split over the tensor-parallel group.
enum Split { kWhole = 0, kRows = 1, kCols = 2 };  // whole; by output features; by input features

// The 16 parameters of a block: name, split, which of (d, ffn) its rows and columns are ('1': a
// vector), and its layer's fan-in (the initialization's scale).
struct Spec {
  const char* name;
  Split split;
  char rows, cols, fanIn;
};
constexpr Spec kBlock[16] = {{"ln1.weight", kWhole, 'd', '1', '-'},    {"ln1.bias", kWhole, 'd', '1', '-'},
                             {"q.weight", kRows, 'd', 'd', 'd'},       {"q.bias", kRows, 'd', '1', 'd'},
                             {"k.weight", kRows, 'd', 'd', 'd'},       {"k.bias", kRows, 'd', '1', 'd'},
                             {"v.weight", kRows, 'd', 'd', 'd'},       {"v.bias", kRows, 'd', '1', 'd'},
                             {"o.weight", kCols, 'd', 'd', 'd'},       {"o.bias", kWhole, 'd', '1', 'd'},
                             {"ln2.weight", kWhole, 'd', '1', '-'},    {"ln2.bias", kWhole, 'd', '1', '-'},
                             {"mlp_in.weight", kRows, 'f', 'd', 'd'},  {"mlp_in.bias", kRows, 'f', '1', 'd'},
                             {"mlp_out.weight", kCols, 'd', 'f', 'f'}, {"mlp_out.bias", kWhole, 'd', '1', 'f'}};
constexpr size_t kPerBlock = 16;
enum : size_t { kLn1W, kLn1B, kQW, kQB, kKW, kKB, kVW, kVB, kOW, kOB, kLn2W, kLn2B, kInW, kInB, kOutW, kOutB };

void callHook(const LayerHooks* hooks, std::function<void(size_t)> LayerHooks::*which, size_t u) {
  if (hooks && hooks->*which) (hooks->*which)(u);
}

void addBias(std::vector<float>* y, const std::vector<float>& b) {
  size_t n = b.size();
  for (size_t i = 0; i < y->size(); ++i) (*y)[i] += b[i % n];
}

void addColumnSums(const std::vector<float>& dy, std::vector<float>* db) {
  size_t n = db->size();
  for (size_t i = 0; i < dy.size(); ++i) (*db)[i % n] += dy[i];
}

void addInto(std::vector<float>* a, const std::vector<float>& b) {
  for (size_t i = 0; i < a->size(); ++i) (*a)[i] += b[i];
}

}  // namespace

// What a block's forward keeps for its backward (per rank: n rows outside the parallel regions,
// N inside them).
struct Transformer::Block {
  std::vector<float> x, a, mean1, rstd1, aFull, q, k, v, ctx, lse, h, c, mean2, rstd2, cFull, z1, g;
};

Transformer::Transformer(TransformerConfig config, uint64_t seed, const TensorParallel* tp, RingAttention* cp)
    : cfg_(config), tp_(tp), cp_(cp) {
  if (cfg_.dModel < 1 || cfg_.heads < 1 || cfg_.ffn < 1 || cfg_.layers < 1 || cfg_.classes < 2 || cfg_.seq < 1)
    throw Error("Transformer: every size must be positive and classes at least 2");
  if (cfg_.dModel % cfg_.heads != 0)
    throw Error("Transformer: dModel (" + std::to_string(cfg_.dModel) + ") is not a multiple of heads (" +
                std::to_string(cfg_.heads) + ")");
  if (!tp_) {
    ownTp_ = std::make_unique<TensorParallel>(nullptr);
    tp_ = ownTp_.get();
  }
  if (!cp_) {
    ownCp_ = std::make_unique<RingAttention>(nullptr);
    cp_ = ownCp_.get();
  }
  int t = tp_->size();
  TensorParallel::split(cfg_.heads, t, 0, "Transformer: the number of attention heads");
  TensorParallel::split(cfg_.ffn, t, 0, "Transformer: the MLP width (ffn)");
  int splits = cp_->size() * (tp_->sequenceParallel() ? t : 1);
  if (cfg_.seq % splits != 0)
    throw Error("Transformer: the sequence (" + std::to_string(cfg_.seq) + " tokens) does not split into " +
                std::to_string(splits) + " equal chunks (context parallel" +
                (tp_->sequenceParallel() ? " x sequence parallel" : "") + "): choose a multiple of " +
                std::to_string(splits));
  // Draw every parameter whole, each from its own stream (so the draws do not depend on the
  // split), then keep this rank's shard.
  auto draw = [&](const std::string& name, size_t rows, size_t cols, float bound, float center, uint64_t stream) {
    uint64_t s = seed ^ (stream * 0xd1b54a32d192ed03ull);
    std::vector<float> full(rows * cols);
    for (float& v : full) v = center + bound * kern::uniform(&s);
    return Param{name, std::move(full), {}};
  };
  uint64_t stream = 1;
  for (int l = 0; l < cfg_.layers; ++l)
    for (const Spec& sp : kBlock) {
      auto dim = [&](char c) { return c == 'd' ? cfg_.dModel : c == 'f' ? cfg_.ffn : 1; };
      size_t rows = dim(sp.rows), cols = dim(sp.cols);
      std::string name = "block" + std::to_string(l) + "." + sp.name;
      bool norm = sp.fanIn == '-';
      bool weight = name.find(".weight") != std::string::npos;
      // LayerNorm: weight near 1, bias near 0; linear layers: uniform in +-1/sqrt(fan_in).
      float bound = norm ? 0.1f : 1.0f / std::sqrt(static_cast<float>(dim(sp.fanIn)));
      params_.push_back(draw(name, rows, cols, bound, norm && weight ? 1.0f : 0.0f, stream++));
    }
  float hb = 1.0f / std::sqrt(static_cast<float>(cfg_.dModel));
  params_.push_back(draw("head.weight", cfg_.classes, cfg_.dModel, hb, 0.0f, stream++));
  params_.push_back(draw("head.bias", cfg_.classes, 1, hb, 0.0f, stream++));
  for (size_t i = 0; i < params_.size(); ++i) {
    params_[i].value = shardOf(i, params_[i].value);
    params_[i].zeroGrad();
  }
}

Transformer::~Transformer() = default;

std::vector<Param*> Transformer::paramPtrs() {
  std::vector<Param*> out;
  for (Param& p : params_) out.push_back(&p);
  return out;
}

std::vector<std::vector<size_t>> Transformer::units() const {
  std::vector<std::vector<size_t>> u;
  for (int l = 0; l < cfg_.layers; ++l) {
    u.emplace_back();
    for (size_t i = 0; i < kPerBlock; ++i) u.back().push_back(l * kPerBlock + i);
  }
  u.push_back({cfg_.layers * kPerBlock, cfg_.layers * kPerBlock + 1});
  return u;
}

int Transformer::splitOf(size_t i) const {
  if (i >= params_.size()) throw Error("Transformer: no parameter " + std::to_string(i));
  return i < static_cast<size_t>(cfg_.layers) * kPerBlock ? kBlock[i % kPerBlock].split : kWhole;  // the head: whole
}

bool Transformer::replicated(size_t i) const { return splitOf(i) == kWhole; }

std::vector<float> Transformer::shardOf(size_t i, const std::vector<float>& full) const {
  int t = tp_->size(), r = tp_->rank();
  int split = splitOf(i);
  if (split == kWhole || t == 1) return full;
  // A split parameter is a matrix (rows x cols) or a vector (one column) of the block's spec.
  const Spec& sp = kBlock[i % kPerBlock];
  size_t rows = sp.rows == 'd' ? cfg_.dModel : cfg_.ffn;
  size_t cols = full.size() / rows;
  if (split == kRows) {
    auto [a, b] = TensorParallel::split(static_cast<int>(rows), t, r, "Transformer: a split parameter's rows");
    return std::vector<float>(full.begin() + a * cols, full.begin() + b * cols);
  }
  auto [a, b] = TensorParallel::split(static_cast<int>(cols), t, r, "Transformer: a split parameter's columns");
  std::vector<float> out;
  for (size_t row = 0; row < rows; ++row)
    out.insert(out.end(), full.begin() + row * cols + a, full.begin() + row * cols + b);
  return out;
}

int Transformer::localTokens() const { return cfg_.seq / cp_->size() / (tp_->sequenceParallel() ? tp_->size() : 1); }

int Transformer::firstToken() const {
  int chunk = cfg_.seq / cp_->size();
  return cp_->rank() * chunk + (tp_->sequenceParallel() ? tp_->rank() * localTokens() : 0);
}

void Transformer::blockForward(size_t l, const std::vector<float>& x, int batch, Block* k, std::vector<float>* out) {
  const int d = cfg_.dModel, t = tp_->size(), dl = d / t, fl = cfg_.ffn / t, hl = cfg_.heads / t;
  const int n = static_cast<int>(x.size() / d);  // rows held outside the regions
  const int chunk = cfg_.seq / cp_->size();      // tokens inside them
  const int rows = chunk * batch;
  auto P = [&](size_t j) -> const std::vector<float>& { return params_[l * kPerBlock + j].value; };
  k->x = x;
  k->a.resize(x.size());
  k->mean1.resize(n);
  k->rstd1.resize(n);
  kern::layerNorm(x.data(), P(kLn1W).data(), P(kLn1B).data(), k->a.data(), k->mean1.data(), k->rstd1.data(), n, d);
  k->aFull = tp_->enterForward(k->a);
  for (auto [w, b, dst] : {std::tuple{kQW, kQB, &k->q}, std::tuple{kKW, kKB, &k->k}, std::tuple{kVW, kVB, &k->v}}) {
    dst->resize(static_cast<size_t>(rows) * dl);
    kern::linear(k->aFull.data(), P(w).data(), P(b).data(), dst->data(), rows, d, dl);
  }
  k->ctx.resize(static_cast<size_t>(rows) * dl);
  k->lse.resize(static_cast<size_t>(rows) * hl);
  cp_->forward(k->q.data(), k->k.data(), k->v.data(), chunk, batch, hl, d / cfg_.heads, k->ctx.data(), k->lse.data());
  std::vector<float> o(static_cast<size_t>(rows) * d);
  kern::linear(k->ctx.data(), P(kOW).data(), nullptr, o.data(), rows, dl, d);
  o = tp_->exitForward(std::move(o));
  addBias(&o, P(kOB));
  k->h = x;
  addInto(&k->h, o);
  k->c.resize(x.size());
  k->mean2.resize(n);
  k->rstd2.resize(n);
  kern::layerNorm(k->h.data(), P(kLn2W).data(), P(kLn2B).data(), k->c.data(), k->mean2.data(), k->rstd2.data(), n, d);
  k->cFull = tp_->enterForward(k->c);
  k->z1.resize(static_cast<size_t>(rows) * fl);
  kern::linear(k->cFull.data(), P(kInW).data(), P(kInB).data(), k->z1.data(), rows, d, fl);
  k->g.resize(k->z1.size());
  for (size_t i = 0; i < k->g.size(); ++i) k->g[i] = kern::gelu(k->z1[i]);
  std::vector<float> y(static_cast<size_t>(rows) * d);
  kern::linear(k->g.data(), P(kOutW).data(), nullptr, y.data(), rows, fl, d);
  y = tp_->exitForward(std::move(y));
  addBias(&y, P(kOutB));
  *out = k->h;
  addInto(out, y);
}

std::vector<float> Transformer::blockBackward(size_t l, const Block& k, std::vector<float> dOut, int batch) {
  const int d = cfg_.dModel, t = tp_->size(), dl = d / t, fl = cfg_.ffn / t, hl = cfg_.heads / t;
  const int n = static_cast<int>(k.x.size() / d);
  const int chunk = cfg_.seq / cp_->size();
  const int rows = chunk * batch;
  Param* p = &params_[l * kPerBlock];
  // The MLP: y = h + W2 gelu(W1 LN2(h) + b1) + b2.
  std::vector<float> dh = dOut;  // the residual path
  addColumnSums(dOut, &p[kOutB].grad);
  std::vector<float> dy = tp_->exitBackward(std::move(dOut));
  std::vector<float> dz(static_cast<size_t>(rows) * fl);
  kern::linearBackward(k.g.data(), p[kOutW].value.data(), dy.data(), dz.data(), p[kOutW].grad.data(), nullptr, rows, fl,
                       d);
  for (size_t i = 0; i < dz.size(); ++i) dz[i] *= kern::geluGrad(k.z1[i]);
  std::vector<float> dc(static_cast<size_t>(rows) * d);
  kern::linearBackward(k.cFull.data(), p[kInW].value.data(), dz.data(), dc.data(), p[kInW].grad.data(),
                       p[kInB].grad.data(), rows, d, fl);
  dc = tp_->enterBackward(std::move(dc));
  std::vector<float> tmp(static_cast<size_t>(n) * d);
  kern::layerNormBackward(k.h.data(), p[kLn2W].value.data(), k.mean2.data(), k.rstd2.data(), dc.data(), tmp.data(),
                          p[kLn2W].grad.data(), p[kLn2B].grad.data(), n, d);
  addInto(&dh, tmp);
  // Attention: h = x + Wo attention(...) + bo.
  addColumnSums(dh, &p[kOB].grad);
  std::vector<float> dx = dh;
  std::vector<float> dO = tp_->exitBackward(std::move(dh));
  std::vector<float> dctx(static_cast<size_t>(rows) * dl);
  kern::linearBackward(k.ctx.data(), p[kOW].value.data(), dO.data(), dctx.data(), p[kOW].grad.data(), nullptr, rows, dl,
                       d);
  std::vector<float> dq(dctx.size()), dk(dctx.size()), dv(dctx.size());
  cp_->backward(k.q.data(), k.k.data(), k.v.data(), k.ctx.data(), k.lse.data(), dctx.data(), chunk, batch, hl,
                d / cfg_.heads, dq.data(), dk.data(), dv.data());
  std::vector<float> da(static_cast<size_t>(rows) * d, 0.0f), part(da.size());
  for (auto [w, b, g] : {std::tuple{kQW, kQB, &dq}, std::tuple{kKW, kKB, &dk}, std::tuple{kVW, kVB, &dv}}) {
    kern::linearBackward(k.aFull.data(), p[w].value.data(), g->data(), part.data(), p[w].grad.data(), p[b].grad.data(),
                         rows, d, dl);
    addInto(&da, part);
  }
  da = tp_->enterBackward(std::move(da));
  kern::layerNormBackward(k.x.data(), p[kLn1W].value.data(), k.mean1.data(), k.rstd1.data(), da.data(), tmp.data(),
                          p[kLn1W].grad.data(), p[kLn1B].grad.data(), n, d);
  addInto(&dx, tmp);
  return dx;
}

void Transformer::syncReplicated(size_t first, size_t count) {
  std::vector<Param*> whole;
  for (size_t i = first; i < first + count; ++i)
    if (splitOf(i) == kWhole) whole.push_back(&params_[i]);
  tp_->sumReplicatedGrads(whole);
}

float Transformer::forwardBackward(const float* x, const int* labels, int batch, float scale,
                                   const std::function<void(size_t)>& onReady, const LayerHooks* hooks) {
  const int d = cfg_.dModel, n = localTokens() * batch;
  const size_t L = static_cast<size_t>(cfg_.layers), head = L * kPerBlock;
  std::vector<Block> keep(L);
  std::vector<float> h(x, x + static_cast<size_t>(n) * d), next;
  for (size_t l = 0; l < L; ++l) {
    callHook(hooks, &LayerHooks::beforeForward, l);
    blockForward(l, h, batch, &keep[l], &next);
    callHook(hooks, &LayerHooks::afterForward, l);
    h.swap(next);
  }
  callHook(hooks, &LayerHooks::beforeForward, L);
  std::vector<float> logits(static_cast<size_t>(n) * cfg_.classes);
  kern::linear(h.data(), params_[head].value.data(), params_[head + 1].value.data(), logits.data(), n, d, cfg_.classes);
  callHook(hooks, &LayerHooks::afterForward, L);
  // With sequence parallelism the group's mean loss is the mean of its ranks' means.
  float groupScale = tp_->sequenceParallel() ? scale / static_cast<float>(tp_->size()) : scale;
  std::vector<float> dLogits;
  float loss = crossEntropy(logits.data(), labels, n, cfg_.classes, groupScale, &dLogits);

  callHook(hooks, &LayerHooks::beforeBackward, L);
  std::vector<float> dh(static_cast<size_t>(n) * d);
  kern::linearBackward(h.data(), params_[head].value.data(), dLogits.data(), dh.data(), params_[head].grad.data(),
                       params_[head + 1].grad.data(), n, d, cfg_.classes);
  syncReplicated(head, 2);
  if (onReady) {
    onReady(head + 1);
    onReady(head);
  }
  callHook(hooks, &LayerHooks::afterBackward, L);
  for (size_t l = L; l-- > 0;) {
    callHook(hooks, &LayerHooks::beforeBackward, l);
    dh = blockBackward(l, keep[l], std::move(dh), batch);
    syncReplicated(l * kPerBlock, kPerBlock);
    if (onReady)
      for (size_t i = kPerBlock; i-- > 0;) onReady(l * kPerBlock + i);
    callHook(hooks, &LayerHooks::afterBackward, l);
  }
  return loss;
}

}  // namespace coll::parallel
