// The transformer of the client layer and its tensor, sequence and context parallelism, on ranks
// as threads of this process: its gradients against finite differences; then every split
// (tp, tp with sequence parallelism, cp, tp x cp, dp x tp, zero-3 x tp) trained for 10 steps
// against one rank training the whole model on the whole batch: the same parameters (float
// tolerance: the split sums add in another order), the same losses, and the collectives counted
// against Megatron's (2 all-reduces per block forward, 2 backward) and the ring's volumes.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "coll/coll.h"
#include "coll/parallel/ddp.h"
#include "coll/parallel/error.h"
#include "coll/parallel/mesh.h"
#include "coll/parallel/transformer.h"
#include "coll/parallel/zero.h"
#include "parallel/ranks.h"

using namespace coll::parallel;
using colltest::onRanks;

namespace {

TransformerConfig config() {
  TransformerConfig c;
  c.dModel = 16;
  c.heads = 4;
  c.ffn = 32;
  c.layers = 2;
  c.classes = 5;
  c.seq = 12;  // splits in 1, 2, 3, 4, 6 chunks
  return c;
}
constexpr int kBatch = 4;  // whole sequences per step, over every data-parallel rank
constexpr int kSteps = 10;
constexpr float kLr = 0.1f;
constexpr uint64_t kSeed = 11;

// The global batch of a step: seq x kBatch rows (sequence-major) and a label per row.
void globalBatch(int step, std::vector<float>* x, std::vector<int>* y) {
  TransformerConfig c = config();
  syntheticBatch(kSeed, step, c.seq * kBatch, c.dModel, c.classes, x, y);
}

// The rows of tokens [t0, t0 + nt) of sequences [b0, b0 + nb) of the global batch.
void slice(const std::vector<float>& x, const std::vector<int>& y, int t0, int nt, int b0, int nb,
           std::vector<float>* xs, std::vector<int>* ys) {
  int d = config().dModel;
  xs->clear();
  ys->clear();
  for (int t = t0; t < t0 + nt; ++t)
    for (int b = b0; b < b0 + nb; ++b) {
      size_t row = static_cast<size_t>(t) * kBatch + b;
      xs->insert(xs->end(), x.begin() + row * d, x.begin() + (row + 1) * d);
      ys->push_back(y[row]);
    }
}

struct Reference {
  std::vector<std::vector<float>> params;
  std::vector<float> losses;
};

// One rank, the whole model and batch, plain SGD.
const Reference& reference() {
  static Reference ref = [] {
    Reference r;
    Transformer m(config(), kSeed);
    std::vector<float> x;
    std::vector<int> y;
    for (int s = 0; s < kSteps; ++s) {
      globalBatch(s, &x, &y);
      r.losses.push_back(m.forwardBackward(x.data(), y.data(), kBatch, 1.0f));
      sgdStep(m.paramPtrs(), kLr);
    }
    for (auto& p : m.params()) r.params.push_back(p.value);
    return r;
  }();
  return ref;
}

double relDiff(float a, float b) { return std::fabs(a - b) / std::max(1e-2, std::fabs(static_cast<double>(b))); }

struct Split {
  int dp = 1, cp = 1, tp = 1;
  bool sp = false;
};

struct RankResult {
  double worstParam = 0;      // largest relative difference from the reference's shard
  std::vector<float> losses;  // this rank's tensor-parallel group's mean loss per step
  CommLedger tp, cp, dp;
};

// Trains the split with SGD; gradients averaged over dp x cp with DataParallel.
std::vector<RankResult> trainSplit(const Split& s) {
  int n = s.dp * s.cp * s.tp;
  std::vector<RankResult> results(n);
  auto errors = onRanks(n, [&](int rank, collComm_t world) {
    ProcessMesh mesh(world, {{"dp", s.dp}, {"cp", s.cp}, {"tp", s.tp}}, {{"dp", "cp"}});
    RankResult& res = results[rank];
    TensorParallel tp(mesh.comm("tp"), s.sp, &res.tp);
    RingAttention ring(mesh.comm("cp"), &res.cp);
    Transformer m(config(), kSeed, &tp, &ring);
    DataParallel ddp(mesh.comm("dp+cp"), m.paramPtrs(), DataParallel::Options(), &res.dp);
    int nb = kBatch / s.dp, b0 = mesh.coord("dp") * nb;
    std::vector<float> x, xs;
    std::vector<int> y, ys;
    for (int step = 0; step < kSteps; ++step) {
      globalBatch(step, &x, &y);
      slice(x, y, m.firstToken(), m.localTokens(), b0, nb, &xs, &ys);
      ddp.beginStep();
      float loss = m.forwardBackward(xs.data(), ys.data(), nb, 1.0f, [&](size_t i) { ddp.gradReady(i); });
      ddp.finishStep();
      sgdStep(m.paramPtrs(), kLr);
      // The whole batch's mean loss, for the side-by-side curve (not in the ledgers).
      float all = loss / static_cast<float>(n);
      check(collAllReduce(&all, &all, 1, collFloat32, collSum, world, nullptr), world, "loss all-reduce");
      res.losses.push_back(all);
    }
    const Reference& ref = reference();
    for (size_t i = 0; i < m.params().size(); ++i) {
      std::vector<float> want = m.shardOf(i, ref.params[i]);
      // Catch's assertions are not thread-safe: a rank thread throws, and the test checks errors.
      if (want.size() != m.params()[i].value.size()) throw Error("shard size differs for " + m.params()[i].name);
      for (size_t k = 0; k < want.size(); ++k)
        res.worstParam = std::max(res.worstParam, relDiff(m.params()[i].value[k], want[k]));
    }
  });
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r);
    CHECK(errors[r] == "");
  }
  return results;
}

void printCurves(const char* what, const std::vector<float>& split) {
  std::printf("loss per step, one rank | %s\n", what);
  for (int s = 0; s < kSteps; ++s) std::printf("  %2d  %.6f | %.6f\n", s, reference().losses[s], split[s]);
}

void expectSameTraining(const std::vector<RankResult>& results, const char* what) {
  for (size_t r = 0; r < results.size(); ++r) {
    INFO(what << ", rank " << r);
    CHECK(results[r].worstParam < 2e-4);
    for (int s = 0; s < kSteps; ++s) CHECK(relDiff(results[r].losses[s], reference().losses[s]) < 1e-4);
  }
  printCurves(what, results[0].losses);
}

// Rows inside the parallel regions of a rank (a context-parallel chunk of every local sequence).
double regionRows(const Split& s) { return static_cast<double>(config().seq / s.cp) * (kBatch / s.dp); }

}  // namespace

TEST_CASE("transformer: gradients match finite differences", "[parallel][transformer]") {
  Transformer m(config(), kSeed);
  std::vector<float> x;
  std::vector<int> y;
  globalBatch(0, &x, &y);
  m.forwardBackward(x.data(), y.data(), kBatch, 1.0f);
  // Central differences in double-checked float: a few elements of every parameter.
  int checked = 0;
  for (size_t i = 0; i < m.params().size(); ++i) {
    Param& p = m.params()[i];
    std::vector<float> grad = p.grad;
    for (size_t k : {size_t(0), p.size() / 2, p.size() - 1}) {
      float keepValue = p.value[k], eps = 1e-2f;
      auto lossAt = [&](float v) {
        p.value[k] = v;
        for (auto& q : m.params()) q.zeroGrad();
        return static_cast<double>(m.forwardBackward(x.data(), y.data(), kBatch, 1.0f));
      };
      double numeric = (lossAt(keepValue + eps) - lossAt(keepValue - eps)) / (2 * eps);
      p.value[k] = keepValue;
      INFO(p.name << "[" << k << "]: analytic " << grad[k] << ", numeric " << numeric);
      CHECK(std::fabs(numeric - grad[k]) <= 2e-3 + 2e-2 * std::fabs(grad[k]));
      ++checked;
    }
  }
  CHECK(checked == 3 * (16 * config().layers + 2));
}

TEST_CASE("transformer: tensor parallel trains as one rank, 2 all-reduces per block each way",
          "[parallel][transformer]") {
  const int L = config().layers, d = config().dModel;
  for (int t : {2, 4}) {
    DYNAMIC_SECTION("tp " << t) {
      Split s;
      s.tp = t;
      auto results = trainSplit(s);
      expectSameTraining(results, ("tp " + std::to_string(t)).c_str());
      double rows = regionRows(s);
      for (const RankResult& r : results) {
        int ar = static_cast<int>(CommKind::kAllReduce);
        CHECK(r.tp.calls[ar] == 4L * L * kSteps);
        CHECK(r.tp.elements[ar] == Approx(4.0 * L * kSteps * 2 * rows * d * (t - 1) / t));
        CHECK(r.tp.totalElements() == Approx(r.tp.elements[ar]));
      }
    }
  }
}

TEST_CASE("transformer: sequence parallel trains as one rank, reduce-scatter + all-gather for each all-reduce",
          "[parallel][transformer]") {
  const int L = config().layers, d = config().dModel;
  for (int t : {2, 4}) {
    DYNAMIC_SECTION("tp " << t << " + sp") {
      TransformerConfig c = config();
      Split s;
      s.tp = t;
      s.sp = true;
      auto results = trainSplit(s);
      expectSameTraining(results, ("tp " + std::to_string(t) + " + sp").c_str());
      double rows = regionRows(s);
      int ag = static_cast<int>(CommKind::kAllGather), rs = static_cast<int>(CommKind::kReduceScatter),
          ar = static_cast<int>(CommKind::kAllReduce);
      // The replicated parameters' gradients: one all-reduce per block and one for the head.
      double replicated = L * (6.0 * d) + (c.classes * d + c.classes);
      for (const RankResult& r : results) {
        CHECK(r.tp.calls[ag] == 4L * L * kSteps);
        CHECK(r.tp.calls[rs] == 4L * L * kSteps);
        CHECK(r.tp.elements[ag] == Approx(4.0 * L * kSteps * rows * d * (t - 1) / t));
        CHECK(r.tp.elements[rs] == Approx(r.tp.elements[ag]));
        CHECK(r.tp.calls[ar] == (L + 1L) * kSteps);
        CHECK(r.tp.elements[ar] == Approx(kSteps * 2 * replicated * (t - 1) / t));
      }
    }
  }
}

TEST_CASE("transformer: ring attention (context parallel) trains as one rank", "[parallel][transformer]") {
  const int L = config().layers, d = config().dModel;
  for (int c : {2, 3, 4}) {
    DYNAMIC_SECTION("cp " << c) {
      Split s;
      s.cp = c;
      auto results = trainSplit(s);
      expectSameTraining(results, ("cp " + std::to_string(c)).c_str());
      double block = regionRows(s) * d;
      int sr = static_cast<int>(CommKind::kSendRecv);
      for (const RankResult& r : results) {
        // Per block: forward c - 1 hops of K and V; backward c - 1 hops of K and V, and c of
        // their gradients (the last one home).
        CHECK(r.cp.elements[sr] == Approx(kSteps * L * ((c - 1) * 2 * block + (c - 1) * 2 * block + c * 2 * block)));
        CHECK(r.cp.calls[sr] == kSteps * L * (3L * c - 2));
      }
    }
  }
}

TEST_CASE("transformer: combinations train as one rank (dp x tp, tp+sp x cp, dp x cp)", "[parallel][transformer]") {
  SECTION("dp 2 x tp 2") {
    Split s;
    s.dp = 2;
    s.tp = 2;
    expectSameTraining(trainSplit(s), "dp 2 x tp 2");
  }
  SECTION("cp 2 x tp 2 + sp") {
    Split s;
    s.cp = 2;
    s.tp = 2;
    s.sp = true;
    expectSameTraining(trainSplit(s), "cp 2 x tp 2 + sp");
  }
  SECTION("dp 2 x cp 2") {
    Split s;
    s.dp = 2;
    s.cp = 2;
    expectSameTraining(trainSplit(s), "dp 2 x cp 2");
  }
}

TEST_CASE("transformer: zero-3 x tp trains as zero-3 on one rank", "[parallel][transformer][zero]") {
  Zero::Options opt;
  opt.stage = 3;
  opt.gradType = collFloat32;
  opt.adam.lr = 1e-2f;
  // The reference: the same ZeRO-3 over a one-rank group, whole model and batch.
  std::vector<std::vector<float>> want;
  std::vector<float> wantLoss;
  onRanks(1, [&](int, collComm_t comm) {
    Transformer m(config(), kSeed);
    Zero z(comm, m.paramPtrs(), m.units(), opt);
    std::vector<float> x;
    std::vector<int> y;
    for (int s = 0; s < kSteps; ++s) {
      globalBatch(s, &x, &y);
      wantLoss.push_back(m.forwardBackward(x.data(), y.data(), kBatch, 1.0f, nullptr, &z.hooks()));
      z.step();
    }
    z.gatherAll();
    for (auto& p : m.params()) want.push_back(p.value);
  });
  REQUIRE(want.size() == static_cast<size_t>(16 * config().layers + 2));
  std::vector<double> worst(4, 0), meanAbs(4, 0);
  std::vector<std::string> worstName(4);
  std::vector<double> keyBiasWorst(4, 0);
  std::vector<std::vector<float>> losses(4);
  auto errors = onRanks(4, [&](int rank, collComm_t world) {
    ProcessMesh mesh(world, {{"dp", 2}, {"tp", 2}});
    TensorParallel tp(mesh.comm("tp"));
    Transformer m(config(), kSeed, &tp);
    Zero z(mesh.comm("dp"), m.paramPtrs(), m.units(), opt);
    int nb = kBatch / 2, b0 = mesh.coord("dp") * nb;
    std::vector<float> x, xs;
    std::vector<int> y, ys;
    for (int s = 0; s < kSteps; ++s) {
      globalBatch(s, &x, &y);
      slice(x, y, 0, config().seq, b0, nb, &xs, &ys);
      float loss = m.forwardBackward(xs.data(), ys.data(), nb, 1.0f, nullptr, &z.hooks()) / 4;
      z.step();
      check(collAllReduce(&loss, &loss, 1, collFloat32, collSum, world, nullptr), world, "loss");
      losses[rank].push_back(loss);  // the two tensor-parallel ranks of a half count it twice: the mean
    }
    z.gatherAll();
    size_t count = 0;
    for (size_t i = 0; i < m.params().size(); ++i) {
      std::vector<float> w = m.shardOf(i, want[i]);
      // The key bias's true gradient is exactly zero (a query adds the same q.bias to every
      // key's score, and softmax ignores a shift), so what reaches it is rounding noise, which
      // Adam normalizes into steps of up to lr each: bounded by that, not comparable elementwise.
      bool keyBias = m.params()[i].name.find(".k.bias") != std::string::npos;
      for (size_t k = 0; k < w.size(); ++k) {
        double diff = std::fabs(m.params()[i].value[k] - w[k]);
        if (keyBias) {
          keyBiasWorst[rank] = std::max(keyBiasWorst[rank], diff);
          continue;
        }
        // bfloat16 working copies: a split sum may round to the neighbouring bfloat16.
        double rel = diff / std::max(1e-3, std::fabs(static_cast<double>(w[k])));
        if (rel > worst[rank]) worstName[rank] = m.params()[i].name;
        worst[rank] = std::max(worst[rank], rel);
        meanAbs[rank] += diff;
        ++count;
      }
    }
    meanAbs[rank] /= static_cast<double>(count);
  });
  for (int r = 0; r < 4; ++r) {
    INFO("rank " << r << ": " << errors[r] << "; worst parameter " << worstName[r]);
    CHECK(errors[r] == "");
    CHECK(worst[r] <= 2.0 / 128);  // two bfloat16 ulps
    CHECK(keyBiasWorst[r] <= 2.0 * opt.adam.lr * kSteps);
    CHECK(meanAbs[r] < 2e-4);
    for (int s = 0; s < kSteps; ++s) CHECK(relDiff(losses[r][s], wantLoss[s]) < 1e-2);
  }
  std::printf("loss per step, zero-3 on one rank | zero-3 (dp 2) x tp 2\n");
  for (int s = 0; s < kSteps; ++s) std::printf("  %2d  %.6f | %.6f\n", s, wantLoss[s], losses[0][s]);
}

TEST_CASE("transformer: splits that do not divide are refused before any communication", "[parallel][transformer]") {
  auto errors = onRanks(3, [&](int, collComm_t comm) {
    TensorParallel tp(comm);
    Transformer m(config(), kSeed, &tp);  // 4 heads over 3 ranks
  });
  for (const std::string& e : errors) {
    CHECK_THAT(e, Catch::Contains("attention heads (4) is not divisible by the tensor-parallel size (3)"));
    CHECK_THAT(e, Catch::Contains("choose a size that divides it"));
  }
  errors = onRanks(2, [&](int, collComm_t comm) {
    TransformerConfig c = config();
    c.seq = 5;
    RingAttention ring(comm);
    Transformer m(c, kSeed, nullptr, &ring);
  });
  for (const std::string& e : errors) CHECK_THAT(e, Catch::Contains("choose a multiple of 2"));
  errors = onRanks(2, [&](int, collComm_t comm) {
    TransformerConfig c = config();
    c.ffn = 33;
    c.heads = 2;
    TensorParallel tp(comm);
    Transformer m(c, kSeed, &tp);
  });
  for (const std::string& e : errors) CHECK_THAT(e, Catch::Contains("MLP width (ffn) (33)"));
}
