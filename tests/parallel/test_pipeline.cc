// Pipeline parallel on ranks as threads: the schedules' bubble against (p-1)/(m+p-1), training
// with 2-4 stages (GPipe and 1F1B) and with data parallel x pipeline against one process on the
// whole batch (same losses and parameters within float rounding: the micro-batches' means are
// summed in another order), and the configurations that are refused.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "coll/coll.h"
#include "coll/parallel/ddp.h"
#include "coll/parallel/error.h"
#include "coll/parallel/mesh.h"
#include "coll/parallel/model.h"
#include "coll/parallel/pipeline.h"
#include "parallel/ranks.h"

using namespace coll::parallel;
using colltest::onRanks;

namespace {

const std::vector<int> kWidths = {12, 32, 24, 16, 5};  // 4 layers
constexpr int kGlobalBatch = 24;
constexpr int kSteps = 10;
constexpr float kLr = 0.2f;
constexpr uint64_t kSeed = 5;

using Weights = std::vector<std::vector<float>>;

Weights trainAlone(std::vector<float>* losses) {
  Mlp m(kWidths, kSeed);
  std::vector<float> x;
  std::vector<int> y;
  for (int s = 0; s < kSteps; ++s) {
    syntheticBatch(kSeed, s, kGlobalBatch, kWidths.front(), kWidths.back(), &x, &y);
    losses->push_back(m.forwardBackward(x.data(), y.data(), kGlobalBatch, 1.0f));
    sgdStep(m.paramPtrs(), kLr);
  }
  Weights out;
  for (auto& p : m.params()) out.push_back(p.value);
  return out;
}

bool close(const std::vector<float>& a, const std::vector<float>& b, double rel) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::fabs(a[i] - b[i]) > rel * std::max(1e-2, std::fabs(static_cast<double>(b[i])))) return false;
  return true;
}

// dp x pp ranks (pp fastest); returns each parameter as trained by the stage that owns it, and
// the losses every rank saw.
struct PipeRun {
  Weights params;
  std::vector<std::vector<float>> losses;
};

PipeRun trainPipeline(int dp, int pp, Pipeline::Options opt) {
  int n = dp * pp;
  PipeRun run;
  run.params.resize(2 * (kWidths.size() - 1));
  run.losses.resize(n);
  std::vector<std::vector<std::pair<size_t, std::vector<float>>>> owned(n);
  auto errors = onRanks(n, [&](int r, collComm_t comm) {
    ProcessMesh mesh(comm, {{"dp", dp}, {"pp", pp}});
    Mlp m(kWidths, kSeed);
    Pipeline pipe(mesh.comm("pp"), m, opt);
    std::vector<Param*> mine;
    for (size_t k : pipe.paramIndices()) mine.push_back(&m.params()[k]);
    DataParallel::Options dopt;
    dopt.overlap = false;  // the pipeline's micro-batches accumulate; average once per step
    DataParallel ddp(mesh.comm("dp"), mine, dopt);
    int local = kGlobalBatch / dp;
    std::vector<float> x;
    std::vector<int> y;
    for (int s = 0; s < kSteps; ++s) {
      syntheticBatch(kSeed, s, kGlobalBatch, kWidths.front(), kWidths.back(), &x, &y);
      size_t row = static_cast<size_t>(mesh.coord("dp")) * local;
      ddp.beginStep(true);
      float loss = pipe.step(x.data() + row * kWidths.front(), y.data() + row, local);
      ddp.finishStep();
      // Each data-parallel rank saw its half of the batch: the global loss is their mean.
      float global = 0;
      check(collAllReduce(&loss, &global, 1, collFloat32, collAvg, mesh.comm("dp"), nullptr), mesh.comm("dp"),
            "loss average");
      run.losses[r].push_back(global);
      sgdStep(mine, kLr);
    }
    if (mesh.coord("dp") == 0)
      for (size_t k : pipe.paramIndices()) owned[r].push_back({k, m.params()[k].value});
  });
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r << ": " << errors[r]);
    REQUIRE(errors[r].empty());
  }
  for (auto& list : owned)
    for (auto& [k, v] : list) run.params[k] = v;
  return run;
}

}  // namespace

TEST_CASE("pipeline schedules: the simulated bubble is (p-1)/(m+p-1), 1F1B keeps at most p-s in flight",
          "[parallel][pipeline]") {
  for (int p = 1; p <= 5; ++p)
    for (int m = 1; m <= 9; ++m)
      for (PipeSchedule s : {PipeSchedule::kGPipe, PipeSchedule::k1F1B}) {
        if (s == PipeSchedule::k1F1B && m < p) continue;
        INFO(p << " stages, " << m << " micro-batches, " << (s == PipeSchedule::kGPipe ? "GPipe" : "1F1B"));
        CHECK(simulatedBubble(s, p, m) == Approx(static_cast<double>(p - 1) / (m + p - 1)).margin(1e-12));
        for (int st = 0; st < p; ++st) {
          int live = 0, most = 0;
          for (PipeOp op : pipeOps(s, p, st, m)) {
            live += op.kind == 'F' ? 1 : -1;
            most = std::max(most, live);
          }
          CHECK(live == 0);
          CHECK(most == (s == PipeSchedule::kGPipe ? m : std::min(m, p - st)));
        }
      }
}

TEST_CASE("pipeline parallel trains to one process's parameters: 2-4 stages, GPipe and 1F1B, with data parallel",
          "[parallel][pipeline]") {
  std::vector<float> aloneLoss;
  Weights alone = trainAlone(&aloneLoss);
  struct Shape {
    int dp, pp, micro;
  };
  for (Shape sh : {Shape{1, 2, 4}, Shape{1, 3, 4}, Shape{1, 4, 6}, Shape{1, 4, 4}, Shape{2, 2, 3}, Shape{2, 3, 4},
                   Shape{1, 2, 1}}) {
    for (PipeSchedule sched : {PipeSchedule::kGPipe, PipeSchedule::k1F1B}) {
      if (sched == PipeSchedule::k1F1B && sh.micro < sh.pp) continue;
      INFO("dp " << sh.dp << " x pp " << sh.pp << ", " << sh.micro << " micro-batches, "
                 << (sched == PipeSchedule::kGPipe ? "GPipe" : "1F1B"));
      Pipeline::Options opt;
      opt.microBatches = sh.micro;
      opt.schedule = sched;
      PipeRun run = trainPipeline(sh.dp, sh.pp, opt);
      for (size_t k = 0; k < alone.size(); ++k) {
        INFO("parameter " << k);
        CHECK(close(run.params[k], alone[k], 1e-4));
      }
      for (int s = 0; s < kSteps; ++s)
        for (const auto& l : run.losses) CHECK(l[s] == Approx(aloneLoss[s]).epsilon(1e-5));
    }
  }
}

TEST_CASE("pipeline: refused configurations name the fix, before any communication", "[parallel][pipeline]") {
  auto errors = onRanks(4, [&](int, collComm_t comm) {
    Mlp m(kWidths, kSeed);
    Pipeline::Options opt;
    opt.microBatches = 3;
    Pipeline pipe(comm, m, opt);
  });
  for (const auto& e : errors) CHECK_THAT(e, Catch::Contains("raise microBatches to 4"));
  errors = onRanks(5, [&](int, collComm_t comm) {
    Mlp m(kWidths, kSeed);
    Pipeline pipe(comm, m, Pipeline::Options());
  });
  for (const auto& e : errors) CHECK_THAT(e, Catch::Contains("5 stages for a model of 4 layers"));
}
