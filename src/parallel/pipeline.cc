#include "coll/parallel/pipeline.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "coll/parallel/error.h"

namespace coll::parallel {

std::vector<PipeOp> pipeOps(PipeSchedule schedule, int stages, int stage, int micro) {
  std::vector<PipeOp> ops;
  if (schedule == PipeSchedule::kGPipe) {
    for (int j = 0; j < micro; ++j) ops.push_back({'F', j});
    for (int j = 0; j < micro; ++j) ops.push_back({'B', j});
    return ops;
  }
  int warm = std::min(stages - stage - 1, micro);
  for (int j = 0; j < warm; ++j) ops.push_back({'F', j});
  for (int i = 0; i < micro - warm; ++i) {
    ops.push_back({'F', warm + i});
    ops.push_back({'B', i});
  }
  for (int j = micro - warm; j < micro; ++j) ops.push_back({'B', j});
  return ops;
}

double simulatedBubble(PipeSchedule schedule, int stages, int micro, double forward, double backward) {
  // Finish times of F and B of each (stage, micro-batch); -1 until known.
  std::vector<std::vector<double>> fEnd(stages, std::vector<double>(micro, -1)), bEnd = fEnd;
  std::vector<std::vector<PipeOp>> ops(stages);
  std::vector<size_t> next(stages, 0);
  std::vector<double> free(stages, 0);
  for (int s = 0; s < stages; ++s) ops[s] = pipeOps(schedule, stages, s, micro);
  for (bool moved = true; moved;) {
    moved = false;
    for (int s = 0; s < stages; ++s) {
      while (next[s] < ops[s].size()) {
        PipeOp op = ops[s][next[s]];
        double dep = 0;
        if (op.kind == 'F' && s > 0) dep = fEnd[s - 1][op.micro];
        if (op.kind == 'B') dep = s + 1 < stages ? bEnd[s + 1][op.micro] : fEnd[s][op.micro];
        if (dep < 0) break;  // waits for a neighbour's operation not simulated yet
        double end = std::max(free[s], dep) + (op.kind == 'F' ? forward : backward);
        (op.kind == 'F' ? fEnd : bEnd)[s][op.micro] = end;
        free[s] = end;
        ++next[s];
        moved = true;
      }
    }
  }
  for (int s = 0; s < stages; ++s)
    if (next[s] != ops[s].size()) throw Error("simulatedBubble: the schedule deadlocks");
  double span = *std::max_element(free.begin(), free.end());
  return 1.0 - micro * (forward + backward) / span;
}

Pipeline::Pipeline(collComm_t comm, Mlp& model, Options options, CommLedger* ledger)
    : comm_(comm), model_(model), opt_(options), ledger_(ledger) {
  collResult_t rc = collCommCount(comm_, &stages_);
  if (rc == collSuccess) rc = collCommUserRank(comm_, &stage_);
  check(rc, comm_, "Pipeline: collCommCount/collCommUserRank");
  size_t layers = model_.layers();
  if (static_cast<size_t>(stages_) > layers)
    throw Error("Pipeline: " + std::to_string(stages_) + " stages for a model of " + std::to_string(layers) +
                " layers; use at most " + std::to_string(layers) + " pipeline ranks");
  if (opt_.microBatches < 1) throw Error("Pipeline: microBatches must be at least 1");
  if (opt_.schedule == PipeSchedule::k1F1B && opt_.microBatches < stages_)
    throw Error("Pipeline: 1F1B needs at least as many micro-batches as stages (" + std::to_string(opt_.microBatches) +
                " < " + std::to_string(stages_) + "); raise microBatches to " + std::to_string(stages_) +
                " or more, or use GPipe");
  size_t base = layers / stages_, extra = layers % stages_, s = static_cast<size_t>(stage_);
  l0_ = s * base + std::min(s, extra);
  l1_ = l0_ + base + (s < extra ? 1 : 0);
  // coll connects a pair of ranks on their first send or receive, and both must then ask for the
  // same directions: a stage whose first call is a grouped send+receive would wait for a
  // neighbour whose first call is a lone receive. One exchange with each neighbour, both ways,
  // makes every connection the schedule will use now.
  float mine = 0, theirs[2] = {0, 0};
  check(collGroupStart(), comm_, "Pipeline: collGroupStart");
  for (int peer : {stage_ - 1, stage_ + 1}) {
    if (peer < 0 || peer >= stages_) continue;
    check(collSend(&mine, 1, collFloat32, peer, comm_, nullptr), comm_, "Pipeline: collSend (connect)");
    check(collRecv(&theirs[peer > stage_], 1, collFloat32, peer, comm_, nullptr), comm_,
          "Pipeline: collRecv (connect)");
  }
  check(collGroupEnd(), comm_, "Pipeline: collGroupEnd (connect)");
}

std::vector<size_t> Pipeline::paramIndices() const {
  std::vector<size_t> out;
  for (size_t l = l0_; l < l1_; ++l) {
    out.push_back(2 * l);
    out.push_back(2 * l + 1);
  }
  return out;
}

double Pipeline::bubbleFraction() const { return static_cast<double>(stages_ - 1) / (opt_.microBatches + stages_ - 1); }

float Pipeline::step(const float* x, const int* labels, int batch) {
  int m = opt_.microBatches;
  if (batch % m != 0)
    throw Error("Pipeline::step: a batch of " + std::to_string(batch) + " rows does not split into " +
                std::to_string(m) + " micro-batches");
  int rows = batch / m;
  bool first = stage_ == 0, last = stage_ == stages_ - 1;
  size_t inElems = static_cast<size_t>(rows) * model_.width(l0_);
  size_t outElems = static_cast<size_t>(rows) * model_.width(l1_);
  std::map<int, std::vector<float>> input, gradOut, dLogits;  // by micro-batch
  std::map<int, Activations> keep;
  std::vector<PipeOp> ops = pipeOps(opt_.schedule, stages_, stage_, m);
  double loss = 0;

  auto send = [&](const std::vector<float>& v, int peer) {
    WaitTimer wait(ledger_);
    check(collSend(v.data(), v.size(), collFloat32, peer, comm_, nullptr), comm_, "Pipeline: collSend");
    if (ledger_) ledger_->record(CommKind::kSendRecv, v.size(), sizeof(float), 2);
  };
  auto recv = [&](std::vector<float>* v, size_t n, int peer) {
    v->resize(n);
    WaitTimer wait(ledger_);
    check(collRecv(v->data(), n, collFloat32, peer, comm_, nullptr), comm_, "Pipeline: collRecv");
  };
  // Sends v to peer; if this stage's next operation first receives from the same peer, the
  // receive joins the send in one group (a neighbour doing the mirror image then cannot wait on
  // this stage's send while this stage waits on its).
  auto sendThenMaybeRecv = [&](const std::vector<float>& v, int peer, size_t i) {
    bool pair = false;
    std::vector<float>* into = nullptr;
    size_t n = 0;
    if (i + 1 < ops.size()) {
      PipeOp nx = ops[i + 1];
      if (peer == stage_ + 1 && nx.kind == 'B' && !last) {
        into = &gradOut[nx.micro];
        n = outElems;
        pair = true;
      } else if (peer == stage_ - 1 && nx.kind == 'F' && !first) {
        into = &input[nx.micro];
        n = inElems;
        pair = true;
      }
    }
    if (!pair) return send(v, peer);
    check(collGroupStart(), comm_, "Pipeline: collGroupStart");
    send(v, peer);
    recv(into, n, peer);
    WaitTimer wait(ledger_);  // a group runs at its end
    check(collGroupEnd(), comm_, "Pipeline: collGroupEnd");
  };

  for (size_t i = 0; i < ops.size(); ++i) {
    PipeOp op = ops[i];
    int j = op.micro;
    if (op.kind == 'F') {
      const float* in = nullptr;
      if (first) {
        in = x + static_cast<size_t>(j) * inElems;
      } else {
        if (!input.count(j)) recv(&input[j], inElems, stage_ - 1);
        in = input[j].data();
      }
      std::vector<float> out = model_.forwardRange(l0_, l1_, in, rows, &keep[j]);
      input.erase(j);
      if (last) {
        loss += crossEntropy(out.data(), labels + static_cast<size_t>(j) * rows, rows, model_.width(l1_), 1.0f / m,
                             &dLogits[j]) /
                m;
      } else {
        sendThenMaybeRecv(out, stage_ + 1, i);
      }
    } else {
      std::vector<float> dOut;
      if (last) {
        dOut = std::move(dLogits[j]);
        dLogits.erase(j);
      } else {
        if (!gradOut.count(j)) recv(&gradOut[j], outElems, stage_ + 1);
        dOut = std::move(gradOut[j]);
        gradOut.erase(j);
      }
      std::vector<float> dIn = model_.backwardRange(keep[j], std::move(dOut));
      keep.erase(j);
      if (!first) sendThenMaybeRecv(dIn, stage_ - 1, i);
    }
  }
  // Every stage reports the loss, which only the last one computed.
  float result = static_cast<float>(loss);
  WaitTimer wait(ledger_);
  check(collBroadcast(&result, &result, 1, collFloat32, stages_ - 1, comm_, nullptr), comm_,
        "Pipeline: collBroadcast of the loss");
  if (ledger_) ledger_->record(CommKind::kBroadcast, 1, sizeof(float), stages_);
  return result;
}

}  // namespace coll::parallel
