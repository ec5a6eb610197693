// The client layer (include/coll/parallel) on ranks as threads of this process: the process mesh
// (coordinates, one communicator per dimension, refused shapes), and data parallel against one
// process training on the whole batch: the same parameters after 12 steps (float tolerance: the
// ranks' partial sums are averaged in another order than one rank's sum), with one bucket and
// with many, overlapped or not, and with gradient accumulation; the ledger against the seeds'
// 2 Psi (N-1)/N elements per step.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "coll/coll.h"
#include "coll/parallel/ddp.h"
#include "coll/parallel/error.h"
#include "coll/parallel/mesh.h"
#include "coll/parallel/model.h"
#include "parallel/ranks.h"

using namespace coll::parallel;
using colltest::onRanks;

namespace {

const std::vector<int> kWidths = {12, 32, 24, 5};
constexpr int kGlobalBatch = 24;  // divisible by 1, 2, 3, 4, 6, 8
constexpr int kSteps = 12;
constexpr float kLr = 0.2f;
constexpr uint64_t kSeed = 7;

// One process on the whole batch: the reference. accumulate > 1 splits each batch in as many
// micro-batches, as the data-parallel run with accumulation does.
std::vector<std::vector<float>> trainAlone(std::vector<float>* losses) {
  Mlp m(kWidths, kSeed);
  std::vector<float> x;
  std::vector<int> y;
  for (int s = 0; s < kSteps; ++s) {
    syntheticBatch(kSeed, s, kGlobalBatch, kWidths.front(), kWidths.back(), &x, &y);
    losses->push_back(m.forwardBackward(x.data(), y.data(), kGlobalBatch, 1.0f));
    sgdStep(m.paramPtrs(), kLr);
  }
  std::vector<std::vector<float>> out;
  for (auto& p : m.params()) out.push_back(p.value);
  return out;
}

double maxRelDiff(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  double worst = 0;
  for (size_t k = 0; k < a.size(); ++k)
    for (size_t i = 0; i < a[k].size(); ++i)
      worst = std::max(worst, std::fabs(a[k][i] - b[k][i]) / std::max(1e-3, std::fabs(static_cast<double>(b[k][i]))));
  return worst;
}

struct DdpRun {
  std::vector<std::vector<std::vector<float>>> params;  // by rank
  std::vector<std::vector<float>> losses;               // by rank: the rank's local loss per step
  std::vector<CommLedger> ledgers;
  std::vector<size_t> nbuckets;
};

// n ranks, each on its slice of every global batch; `accum` micro-batches per step (the first
// accum-1 without communication).
DdpRun trainDdp(int n, DataParallel::Options opt, int accum = 1) {
  DdpRun run;
  run.params.resize(n);
  run.losses.resize(n);
  run.ledgers.resize(n);
  run.nbuckets.resize(n);
  auto errors = onRanks(n, [&](int r, collComm_t comm) {
    // Different seeds on purpose: broadcastParameters must make them rank 0's.
    Mlp m(kWidths, r == 0 ? kSeed : kSeed + 100 + r);
    DataParallel ddp(comm, m.paramPtrs(), opt, &run.ledgers[r]);
    ddp.broadcastParameters();
    run.ledgers[r].reset();
    run.nbuckets[r] = ddp.buckets().size();
    int local = kGlobalBatch / n, micro = local / accum;
    std::vector<float> x;
    std::vector<int> y;
    for (int s = 0; s < kSteps; ++s) {
      syntheticBatch(kSeed, s, kGlobalBatch, kWidths.front(), kWidths.back(), &x, &y);
      float loss = 0;
      for (int a = 0; a < accum; ++a) {
        ddp.beginStep(a == accum - 1);
        size_t row = static_cast<size_t>(r) * local + static_cast<size_t>(a) * micro;
        loss += m.forwardBackward(x.data() + row * kWidths.front(), y.data() + row, micro, 1.0f / accum,
                                  [&](size_t i) { ddp.gradReady(i); });
        ddp.finishStep();
      }
      run.losses[r].push_back(loss / accum);
      sgdStep(m.paramPtrs(), kLr);
    }
    for (auto& p : m.params()) run.params[r].push_back(p.value);
  });
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r << ": " << errors[r]);
    REQUIRE(errors[r].empty());
  }
  return run;
}

size_t paramCount() {
  Mlp m(kWidths, 1);
  size_t n = 0;
  for (auto& p : m.params()) n += p.size();
  return n;
}

}  // namespace

TEST_CASE("process mesh: coordinates, one communicator per dimension", "[parallel][mesh]") {
  // 2 x 3 x 2 = 12 ranks: pp x dp x tp, tp fastest.
  std::vector<std::array<int, 6>> seen(12);  // coords and comm sizes/ranks per rank
  auto errors = onRanks(12, [&](int r, collComm_t comm) {
    ProcessMesh mesh(comm, {{"pp", 2}, {"dp", 3}, {"tp", 2}});
    int tpRank = -1, dpCount = -1;
    collCommUserRank(mesh.comm("tp"), &tpRank);
    collCommCount(mesh.comm("dp"), &dpCount);
    // A sum along dp: the ranks that share pp and tp coordinates.
    int v = r, sum = 0;
    coll::parallel::check(collAllReduce(&v, &sum, 1, collInt32, collSum, mesh.comm("dp"), nullptr), mesh.comm("dp"),
                          "all-reduce along dp");
    seen[r] = {mesh.coord("pp"), mesh.coord("dp"), mesh.coord("tp"), tpRank, dpCount, sum};
  });
  for (int r = 0; r < 12; ++r) {
    INFO("rank " << r << ": " << errors[r]);
    REQUIRE(errors[r].empty());
    int pp = r / 6, dp = (r / 2) % 3, tp = r % 2;
    CHECK(seen[r][0] == pp);
    CHECK(seen[r][1] == dp);
    CHECK(seen[r][2] == tp);
    CHECK(seen[r][3] == tp);  // the coordinate is the rank in the dimension's communicator
    CHECK(seen[r][4] == 3);
    CHECK(seen[r][5] == (pp * 6 + tp) * 3 + 2 * (0 + 1 + 2));  // ranks pp*6 + 2d + tp, d = 0..2
  }
}

TEST_CASE("process mesh: shapes that do not fit are refused before any communication", "[parallel][mesh]") {
  auto errors = onRanks(4, [&](int, collComm_t comm) { ProcessMesh mesh(comm, {{"dp", 3}, {"tp", 2}}); });
  for (const auto& e : errors) CHECK_THAT(e, Catch::Contains("has 6 ranks but the communicator has 4"));
  errors = onRanks(2, [&](int, collComm_t comm) { ProcessMesh mesh(comm, {{"dp", 2}, {"dp", 1}}); });
  for (const auto& e : errors) CHECK_THAT(e, Catch::Contains("'dp' is used twice"));
  errors = onRanks(2, [&](int, collComm_t comm) { ProcessMesh mesh(comm, {{"dp", 0}}); });
  for (const auto& e : errors) CHECK_THAT(e, Catch::Contains("sizes are at least 1"));
}

TEST_CASE("data parallel trains to one process's parameters, 1-8 ranks, one bucket or many", "[parallel][ddp]") {
  std::vector<float> aloneLoss;
  auto alone = trainAlone(&aloneLoss);
  for (int n : {1, 2, 3, 4, 8}) {
    for (size_t bucketBytes : {size_t(25) << 20, size_t(1000)}) {
      for (bool overlap : {true, false}) {
        INFO(n << " ranks, buckets of " << bucketBytes << " bytes, overlap " << overlap);
        DataParallel::Options opt;
        opt.bucketBytes = bucketBytes;
        opt.overlap = overlap;
        DdpRun run = trainDdp(n, opt);
        if (bucketBytes == 1000) CHECK(run.nbuckets[0] > 3);
        for (int r = 0; r < n; ++r) {
          // Every rank the same parameters, bit for bit (the average is one all-reduce result).
          CHECK(run.params[r] == run.params[0]);
          CHECK(run.ledgers[r].calls[static_cast<int>(CommKind::kAllReduce)] ==
                static_cast<long>(kSteps * run.nbuckets[r]));
        }
        // Against one process: the order of the sums differs, so floats differ in the last bits.
        CHECK(maxRelDiff(run.params[0], alone) < 1e-4);
        // The seeds' ledger: 2 Psi (N-1)/N elements per rank and step.
        double psi = static_cast<double>(paramCount());
        CHECK(run.ledgers[0].elements[static_cast<int>(CommKind::kAllReduce)] ==
              Approx(kSteps * 2 * psi * (n - 1) / n).margin(1e-9));
        CHECK(run.ledgers[0].totalElements() == run.ledgers[0].elements[static_cast<int>(CommKind::kAllReduce)]);
      }
    }
  }
}

TEST_CASE("data parallel: gradient accumulation communicates once per step and trains the same", "[parallel][ddp]") {
  std::vector<float> aloneLoss;
  auto alone = trainAlone(&aloneLoss);
  DataParallel::Options opt;
  DdpRun run = trainDdp(2, opt, 3);  // 12 rows per rank, 3 micro-batches of 4
  CHECK(maxRelDiff(run.params[0], alone) < 1e-4);
  CHECK(run.ledgers[0].calls[static_cast<int>(CommKind::kAllReduce)] == kSteps * static_cast<long>(run.nbuckets[0]));
  // The loss falls: the model learns.
  CHECK(aloneLoss.back() < aloneLoss.front());
}

TEST_CASE("data parallel: a gradient never reported is an error, not a hang", "[parallel][ddp]") {
  // Rank 0 waits in the all-reduce of the bucket rank 1 never starts: a short deadline ends it.
  setenv("COLL_TIMEOUT_MS", "3000", 1);
  auto errors = onRanks(2, [&](int r, collComm_t comm) {
    Mlp m(kWidths, kSeed);
    DataParallel::Options opt;
    opt.bucketBytes = 1000;
    DataParallel ddp(comm, m.paramPtrs(), opt);
    std::vector<float> x;
    std::vector<int> y;
    syntheticBatch(kSeed, 0, 4, kWidths.front(), kWidths.back(), &x, &y);
    m.forwardBackward(x.data(), y.data(), 4, 1.0f, [&](size_t i) {
      if (!(r == 1 && i == 0)) ddp.gradReady(i);  // rank 1 forgets layer0.weight
    });
    ddp.finishStep();
  });
  unsetenv("COLL_TIMEOUT_MS");
  CHECK_THAT(errors[1], Catch::Contains("'layer0.weight' was never reported ready"));
  CHECK_THAT(errors[0], Catch::Contains("collTimeout") || Catch::Contains("rank 1"));
}
