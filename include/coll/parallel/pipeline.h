// Pipeline parallel: the model's layers split into consecutive stages, one per rank of a
// pipeline group; a batch split into micro-batches that flow forward through the stages and whose
// gradients flow back, with send/recv between neighbours. Two schedules:
//   GPipe: every micro-batch forward, then every one backward;
//   1F1B:  p - s - 1 forwards to fill the pipe (stage s of p), then one forward and one backward
//          in turn, then the remaining backwards: at most p - s micro-batches' activations kept.
// Both leave the stages idle for a bubble of (p-1)/(m+p-1) of the step (m micro-batches, forward
// and backward of equal cost). Where a stage sends one way and then receives from the same
// neighbour, the two are one group, so neither waits for the other to finish first.
#pragma once

#include <string>
#include <vector>

#include "coll/coll.h"
#include "coll/parallel/ledger.h"
#include "coll/parallel/model.h"

namespace coll::parallel {

enum class PipeSchedule { kGPipe, k1F1B };

/// One stage's operations in order: 'F' or 'B' and the micro-batch.
struct PipeOp {
  char kind;
  int micro;
};

/// The operations of stage `stage` of `stages` over `micro` micro-batches.
std::vector<PipeOp> pipeOps(PipeSchedule schedule, int stages, int stage, int micro);

/// The idle share of a step, simulated over the schedule's operations with forward and backward
/// each taking `forward` and `backward` time units and sends taking none. For equal costs this is
/// (p-1)/(m+p-1).
double simulatedBubble(PipeSchedule schedule, int stages, int micro, double forward = 1, double backward = 1);

class Pipeline {
 public:
  struct Options {
    int microBatches = 4;
    PipeSchedule schedule = PipeSchedule::k1F1B;
  };

  /// This rank runs stage (its rank in comm) of the model: layers split as evenly as possible,
  /// earlier stages taking the extra ones. Throws Error, before any communication, when there are
  /// more stages than layers, or fewer micro-batches than stages under 1F1B.
  Pipeline(collComm_t comm, Mlp& model, Options options, CommLedger* ledger = nullptr);

  /// One step's forward and backward over a batch of `batch` rows (divisible by the number of
  /// micro-batches): x is read by the first stage, labels by the last. Gradients of this stage's
  /// parameters are added (the micro-batches' mean); returns the batch's mean loss on every stage.
  float step(const float* x, const int* labels, int batch);

  int stage() const { return stage_; }
  int stages() const { return stages_; }
  size_t firstLayer() const { return l0_; }
  size_t endLayer() const { return l1_; }
  /// This stage's parameter indices in the model (for data parallel or an optimizer).
  std::vector<size_t> paramIndices() const;
  /// (p-1)/(m+p-1).
  double bubbleFraction() const;

 private:
  collComm_t comm_;
  Mlp& model_;
  Options opt_;
  CommLedger* ledger_;
  int stage_ = 0, stages_ = 1;
  size_t l0_ = 0, l1_ = 0;
};

}  // namespace coll::parallel
