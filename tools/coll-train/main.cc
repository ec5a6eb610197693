// coll-train: trains a small model with the client layer's parallel strategies, one rank per
// process under coll-run (or any launcher collCommInitFromEnv knows; alone: one rank), and reports what each step
// cost. It uses only the public headers (coll/coll.h and coll/parallel/*), as a trainer would.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "coll/coll.h"
#include "coll/parallel/ddp.h"
#include "coll/parallel/error.h"
#include "coll/parallel/mesh.h"
#include "coll/parallel/pipeline.h"
#include "coll/parallel/transformer.h"
#include "coll/parallel/zero.h"
#include "options.h"

using namespace coll::parallel;
using colltrain::Options;

namespace {

constexpr uint64_t kSeed = 1234;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// What one step cost this rank.
struct StepFigures {
  float loss = 0;  // the whole batch's mean loss
  double seconds = 0, waitSeconds = 0;
  double bytes[kCommKinds] = {};
};

class Report {
 public:
  Report(collComm_t world, int rank) : world_(world), rank_(rank) {}
  void header(const std::string& what) {
    if (rank_ != 0) return;
    std::printf("# coll-train: %s\n", what.c_str());
    std::printf("# per rank 0: bytes it sent by kind, peak bytes it held (params = working copy)\n");
    std::printf("%4s %10s %9s %9s", "step", "loss", "step_ms", "wait_ms");
    for (int k = 0; k < kCommKinds; ++k) std::printf(" %14s", commKindName(static_cast<CommKind>(k)));
    std::printf(" %11s %11s %11s\n", "params_B", "grads_B", "optim_B");
  }
  // Collective over world (loss mean, slowest rank's time), outside the ledgers.
  void step(int s, StepFigures f, const MemoryLedger& mem) {
    float sums[2] = {f.loss, 0};
    int n = 1;
    collCommCount(world_, &n);
    sums[0] /= static_cast<float>(n);
    check(collAllReduce(sums, sums, 1, collFloat32, collSum, world_, nullptr), world_, "coll-train: loss");
    double slow[2] = {f.seconds, f.waitSeconds};
    check(collAllReduce(slow, slow, 2, collFloat64, collMax, world_, nullptr), world_, "coll-train: step time");
    steps_.push_back(slow[0]);
    waits_.push_back(f.waitSeconds / std::max(f.seconds, 1e-9));
    bytes_ = 0;
    for (double b : f.bytes) bytes_ += b;
    mem_ = mem;
    if (rank_ != 0) return;
    std::printf("%4d %10.6f %9.2f %9.2f", s, sums[0], slow[0] * 1e3, f.waitSeconds * 1e3);
    for (double b : f.bytes) std::printf(" %14.0f", b);
    std::printf(" %11zu %11zu %11zu\n", mem.peak[MemoryLedger::kParams], mem.peak[MemoryLedger::kGrads],
                mem.peak[MemoryLedger::kOptimizer]);
    std::fflush(stdout);
  }
  // Medians over the steps after the first (which connects and warms up).
  void summary(const std::string& strategy, size_t params) {
    if (rank_ != 0) return;
    auto median = [](std::vector<double> v) {
      if (v.size() > 1) v.erase(v.begin());
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    std::printf(
        "summary: strategy=%s params_per_rank=%zu median_step_ms=%.2f median_wait_share=%.3f bytes_per_step=%.0f "
        "peak_params_B=%zu peak_grads_B=%zu peak_optim_B=%zu peak_total_B=%zu\n",
        strategy.c_str(), params, median(steps_) * 1e3, median(waits_), bytes_, mem_.peak[MemoryLedger::kParams],
        mem_.peak[MemoryLedger::kGrads], mem_.peak[MemoryLedger::kOptimizer], mem_.peakTotal);
  }

 private:
  collComm_t world_;
  int rank_;
  std::vector<double> steps_, waits_;
  double bytes_ = 0;
  MemoryLedger mem_;
};

StepFigures figures(const CommLedger& l, double seconds, float loss) {
  StepFigures f;
  f.loss = loss;
  f.seconds = seconds;
  f.waitSeconds = l.waitSeconds;
  for (int k = 0; k < kCommKinds; ++k) f.bytes[k] = l.bytes[k];
  return f;
}

size_t countParams(const std::vector<Param*>& ps) {
  size_t n = 0;
  for (const Param* p : ps) n += p->size();
  return n;
}

std::string strategyName(const Options& o, int dp) {
  std::string s = "dp" + std::to_string(dp);
  if (o.zero >= 0) s += "-zero" + std::to_string(o.zero);
  if (o.tp > 1) s += "-tp" + std::to_string(o.tp) + (o.sp ? "sp" : "");
  if (o.cp > 1) s += "-cp" + std::to_string(o.cp);
  if (o.pipeline) s += "-pp" + std::to_string(o.pp) + o.schedule + "m" + std::to_string(o.micro);
  if (o.zero < 0 && !o.overlap) s += "-nooverlap";
  return s;
}

// The transformer under dp (or ZeRO) x cp x tp.
void trainTransformer(collComm_t world, const Options& o, int dp, int rank) {
  ProcessMesh mesh(world, {{"dp", dp}, {"cp", o.cp}, {"tp", o.tp}}, {{"dp", "cp"}});
  CommLedger ledger;
  MemoryLedger mem;
  TensorParallel tp(mesh.comm("tp"), o.sp, &ledger);
  RingAttention ring(mesh.comm("cp"), &ledger);
  TransformerConfig cfg;
  cfg.dModel = o.dModel;
  cfg.heads = o.heads;
  cfg.ffn = o.ffn;
  cfg.layers = o.layers;
  cfg.classes = o.classes;
  cfg.seq = o.seq;
  if (o.batch % dp != 0)
    throw Error("--batch " + std::to_string(o.batch) + " does not split over " + std::to_string(dp) +
                " data-parallel ranks: choose a multiple of " + std::to_string(dp));
  Transformer m(cfg, kSeed, &tp, &ring);
  std::vector<Param*> ps = m.paramPtrs();
  size_t psi = countParams(ps);
  std::unique_ptr<Zero> zero;
  std::unique_ptr<DataParallel> ddp;
  if (o.zero >= 0) {
    Zero::Options zo;
    zo.stage = o.zero;
    zo.adam.lr = o.lr / 10;
    zero = std::make_unique<Zero>(mesh.comm("dp+cp"), ps, m.units(), zo, &ledger, &mem);
  } else {
    DataParallel::Options dopt;
    dopt.bucketBytes = static_cast<size_t>(o.bucketMb * (1 << 20));
    dopt.overlap = o.overlap;
    ddp = std::make_unique<DataParallel>(mesh.comm("dp+cp"), ps, dopt, &ledger);
    mem.add(MemoryLedger::kParams, psi * sizeof(float));
    mem.add(MemoryLedger::kGrads, psi * sizeof(float));  // fp32 gradients; SGD keeps no state
  }
  Report report(world, rank);
  report.header(strategyName(o, dp) + ": transformer, " + std::to_string(o.layers) + " blocks, d " +
                std::to_string(o.dModel) + ", " + std::to_string(o.heads) + " heads, ffn " + std::to_string(o.ffn) +
                ", seq " + std::to_string(o.seq) + ", batch " + std::to_string(o.batch) + "; " + std::to_string(psi) +
                " parameters on this rank; " + (o.zero >= 0 ? "Adam, bf16 working copy, fp32 master" : "SGD, fp32"));
  int nb = o.batch / dp, b0 = mesh.coord("dp") * nb;
  std::vector<float> x, xs;
  std::vector<int> y, ys;
  for (int s = 0; s < o.steps; ++s) {
    syntheticBatch(kSeed, s, o.seq * o.batch, o.dModel, o.classes, &x, &y);
    xs.clear();
    ys.clear();
    for (int t = m.firstToken(); t < m.firstToken() + m.localTokens(); ++t)
      for (int b = b0; b < b0 + nb; ++b) {
        size_t row = static_cast<size_t>(t) * o.batch + b;
        xs.insert(xs.end(), x.begin() + row * o.dModel, x.begin() + (row + 1) * o.dModel);
        ys.push_back(y[row]);
      }
    ledger.reset();
    double t0 = now();
    float loss = 0;
    if (zero) {
      loss = m.forwardBackward(xs.data(), ys.data(), nb, 1.0f, nullptr, &zero->hooks());
      zero->step();
    } else {
      ddp->beginStep();
      loss = m.forwardBackward(xs.data(), ys.data(), nb, 1.0f, [&](size_t i) { ddp->gradReady(i); });
      ddp->finishStep();
      sgdStep(ps, o.lr);
    }
    report.step(s, figures(ledger, now() - t0, loss), mem);
  }
  report.summary(strategyName(o, dp), psi);
}

// The MLP in pipeline stages x data parallel.
void trainPipeline(collComm_t world, const Options& o, int dp, int rank) {
  ProcessMesh mesh(world, {{"dp", dp}, {"pp", o.pp}});
  CommLedger ledger;
  MemoryLedger mem;
  std::vector<int> widths = {o.dModel};
  for (int l = 0; l + 1 < o.layers; ++l) widths.push_back(o.ffn);
  widths.push_back(o.classes);
  Mlp m(widths, kSeed);
  Pipeline::Options po;
  po.microBatches = o.micro;
  po.schedule = o.schedule == "gpipe" ? PipeSchedule::kGPipe : PipeSchedule::k1F1B;
  Pipeline pipe(mesh.comm("pp"), m, po, &ledger);
  if (o.batch % (dp * o.micro) != 0)
    throw Error("--batch " + std::to_string(o.batch) + " does not split into " + std::to_string(dp) +
                " data-parallel ranks x " + std::to_string(o.micro) + " micro-batches: choose a multiple of " +
                std::to_string(dp * o.micro));
  std::vector<Param*> mine;
  for (size_t k : pipe.paramIndices()) mine.push_back(&m.params()[k]);
  DataParallel::Options dopt;
  dopt.overlap = false;  // the micro-batches accumulate; one average per step
  DataParallel ddp(mesh.comm("dp"), mine, dopt, &ledger);
  size_t psi = countParams(mine);
  mem.add(MemoryLedger::kParams, psi * sizeof(float));
  mem.add(MemoryLedger::kGrads, psi * sizeof(float));
  Report report(world, rank);
  report.header(strategyName(o, dp) + ": MLP of " + std::to_string(o.layers) + " layers (width " +
                std::to_string(o.ffn) + "), stage " + std::to_string(pipe.stage()) + " holds layers [" +
                std::to_string(pipe.firstLayer()) + ", " + std::to_string(pipe.endLayer()) + "); bubble " +
                std::to_string(pipe.bubbleFraction()) + " of the schedule; SGD, fp32");
  int local = o.batch / dp;
  std::vector<float> x;
  std::vector<int> y;
  for (int s = 0; s < o.steps; ++s) {
    syntheticBatch(kSeed, s, o.batch, o.dModel, o.classes, &x, &y);
    size_t row = static_cast<size_t>(mesh.coord("dp")) * local;
    ledger.reset();
    double t0 = now();
    ddp.beginStep(true);
    float loss = pipe.step(x.data() + row * o.dModel, y.data() + row, local);
    ddp.finishStep();
    sgdStep(mine, o.lr);
    report.step(s, figures(ledger, now() - t0, loss), mem);
  }
  report.summary(strategyName(o, dp), psi);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::string err = colltrain::parse(argc, argv, &o);
  if (o.help) {
    std::fputs(colltrain::usage(), stdout);
    return 0;
  }
  if (!err.empty()) {
    std::fprintf(stderr, "coll-train: %s\n\n%s", err.c_str(), colltrain::usage());
    return 2;
  }
  collComm_t world = nullptr;
  bool launched = false;
  for (const char* v : {"COLL_RANK", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"})
    launched |= std::getenv(v) != nullptr;
  // Alone, one rank (the reference runs); under a launcher, the job's ranks.
  collResult_t init = launched ? collCommInitFromEnv(&world) : collCommInitAll(&world, 1, nullptr);
  if (init != collSuccess) {
    std::fprintf(stderr, "coll-train: %s\n", collGetLastError(nullptr));
    return 1;
  }
  int n = 1, rank = 0;
  collCommCount(world, &n);
  collCommUserRank(world, &rank);
  int rest = o.tp * o.cp * o.pp;
  int dp = o.dp > 0 ? o.dp : (n % rest == 0 ? n / rest : 0);
  int rc = 0;
  try {
    if (dp == 0)
      throw Error("--tp x --cp x --pp = " + std::to_string(rest) + " does not divide the " + std::to_string(n) +
                  " ranks: choose sizes whose product divides it");
    if (o.pipeline)
      trainPipeline(world, o, dp, rank);
    else
      trainTransformer(world, o, dp, rank);
  } catch (const Error& e) {
    // Refusals come before any training and on every rank alike; each rank says it, since the
    // launcher may stop the others as soon as the first one exits.
    std::fprintf(stderr, "coll-train (rank %d): %s\n", rank, e.what());
    rc = 2;
  }
  collCommDestroy(world);
  return rc;
}
