#include "coll/parallel/zero.h"

#include <algorithm>
#include <string>

#include "coll/parallel/error.h"
#include "coll/parallel/precision.h"

namespace coll::parallel {

Zero::Zero(collComm_t comm, std::vector<Param*> params, std::vector<std::vector<size_t>> units, Options options,
           CommLedger* commLedger, MemoryLedger* memory)
    : comm_(comm),
      params_(std::move(params)),
      opt_(options),
      ledger_(commLedger),
      memory_(memory ? memory : &ownMemory_) {
  if (opt_.stage < 0 || opt_.stage > 3)
    throw Error("Zero: stage " + std::to_string(opt_.stage) + " does not exist; use 0, 1, 2 or 3");
  if (opt_.gradType != collBfloat16 && opt_.gradType != collFloat32)
    throw Error("Zero: gradients are kept in collBfloat16 or collFloat32");
  std::vector<int> covered(params_.size(), 0);
  for (const auto& u : units)
    for (size_t k : u) {
      if (k >= params_.size())
        throw Error("Zero: a unit names parameter " + std::to_string(k) + ", which does not exist");
      ++covered[k];
    }
  for (size_t k = 0; k < params_.size(); ++k)
    if (covered[k] != 1)
      throw Error("Zero: parameter '" + params_[k]->name + "' is in " + std::to_string(covered[k]) +
                  " units; each must be in exactly one");
  for (Param* p : params_) sizes_.push_back(p->size());
  check(collCommCount(comm_, &nranks_), comm_, "Zero: collCommCount");
  if (opt_.replicate) {
    if (opt_.stage == 0)
      throw Error("Zero: replicate (HSDP) needs a sharding stage (1, 2 or 3); stage 0 replicates already");
    check(collCommCount(opt_.replicate, &replicas_), opt_.replicate, "Zero: collCommCount of the replicate group");
  }
  check(collCommUserRank(comm_, &rank_), comm_, "Zero: collCommUserRank");

  size_t n = static_cast<size_t>(nranks_);
  for (auto& indices : units) {
    Unit u;
    u.params = std::move(indices);
    for (size_t k : u.params) u.elems += params_[k]->size();
    u.padded = (u.elems + n - 1) / n * n;
    std::vector<float> flat(u.padded, 0.0f);
    size_t off = 0;
    for (size_t k : u.params) {
      std::copy(params_[k]->value.begin(), params_[k]->value.end(), flat.begin() + static_cast<long>(off));
      off += params_[k]->size();
    }
    size_t shard = u.padded / n;
    if (opt_.stage == 0)
      u.master.assign(flat.begin(), flat.begin() + static_cast<long>(u.elems));
    else
      u.master.assign(flat.begin() + static_cast<long>(shard * rank_),
                      flat.begin() + static_cast<long>(shard * (rank_ + 1)));
    u.m.assign(u.master.size(), 0.0f);
    u.v.assign(u.master.size(), 0.0f);
    memory_->add(MemoryLedger::kOptimizer, kAdamStateBytes * u.master.size());
    if (opt_.stage >= 1) {
      u.gradShard.assign(shard, 0.0f);
      if (opt_.stage >= 2) memory_->add(MemoryLedger::kGrads, gradBytes() * shard);
    }
    units_.push_back(std::move(u));
  }
  for (size_t ui = 0; ui < units_.size(); ++ui) {
    Unit& u = units_[ui];
    if (opt_.stage == 3) {
      u.workShard.resize(u.master.size());
      for (size_t i = 0; i < u.master.size(); ++i) u.workShard[i] = toBf16(u.master[i]);
      memory_->add(MemoryLedger::kParams, 2 * u.workShard.size());
      for (size_t k : u.params) {
        params_[k]->value.clear();
        params_[k]->value.shrink_to_fit();
      }
    } else {
      for (size_t k : u.params)
        for (float& x : params_[k]->value) x = roundBf16(x);
      memory_->add(MemoryLedger::kParams, 2 * u.elems);
    }
    if (opt_.stage <= 1) {
      for (size_t k : u.params) params_[k]->zeroGrad();
      memory_->add(MemoryLedger::kGrads, gradBytes() * u.elems);
    } else {
      for (size_t k : u.params) {
        params_[k]->grad.clear();
        params_[k]->grad.shrink_to_fit();
      }
    }
  }
  if (opt_.stage == 3) {
    check(collHostStreamCreate(&streams_[0]), comm_, "Zero: collHostStreamCreate");
    check(collHostStreamCreate(&streams_[1]), comm_, "Zero: collHostStreamCreate");
    hooks_.beforeForward = [this](size_t u) {
      gatherFinish(u);
      if (opt_.prefetch && u + 1 < units_.size()) gatherStart(u + 1);
    };
    hooks_.afterForward = [this](size_t u) { release(u); };
    hooks_.beforeBackward = [this](size_t u) {
      gatherFinish(u);
      if (opt_.prefetch && u > 0) gatherStart(u - 1);
      allocGrads(u);
    };
    hooks_.afterBackward = [this](size_t u) {
      reduceGrads(u, true);
      freeGrads(u);
      release(u);
    };
  } else if (opt_.stage == 2) {
    hooks_.beforeBackward = [this](size_t u) { allocGrads(u); };
    hooks_.afterBackward = [this](size_t u) {
      reduceGrads(u, true);
      freeGrads(u);
    };
  }
}

Zero::~Zero() {
  for (collStream_t s : streams_)
    if (s) collHostStreamDestroy(s);
}

// Queues the all-gather of unit u's working shards into its gather buffer.
void Zero::gatherStart(size_t ui) {
  Unit& u = units_.at(ui);
  if (u.inFlight || u.present) return;
  u.gathered.resize(u.padded);
  memory_->add(MemoryLedger::kParams, 2 * u.padded);
  check(collAllGather(u.workShard.data(), u.gathered.data(), u.workShard.size(), collBfloat16, comm_, streamOf(ui)),
        comm_, "Zero: collAllGather of a unit's parameters");
  if (ledger_) ledger_->record(CommKind::kAllGather, u.padded, 2, nranks_);
  u.inFlight = true;
}

// Waits for unit u's gather (starting it if nobody did) and puts the values in its parameters.
void Zero::gatherFinish(size_t ui) {
  Unit& u = units_.at(ui);
  if (u.present) return;
  gatherStart(ui);
  {
    WaitTimer wait(ledger_);
    check(collStreamSynchronize(streamOf(ui)), nullptr, "Zero: the all-gather of a unit's parameters");
  }
  size_t off = 0;
  for (size_t k : u.params) {
    Param& p = *params_[k];
    p.value.resize(sizes_[k]);
    for (size_t i = 0; i < sizes_[k]; ++i) p.value[i] = fromBf16(u.gathered[off + i]);
    off += sizes_[k];
  }
  // The float copy above is what the CPU kernels compute with; the ledger keeps charging the
  // bfloat16 unit until release().
  u.gathered.clear();
  u.gathered.shrink_to_fit();
  u.inFlight = false;
  u.present = true;
}

void Zero::release(size_t ui) {
  Unit& u = units_.at(ui);
  if (!u.present) return;
  for (size_t k : u.params) {
    params_[k]->value.clear();
    params_[k]->value.shrink_to_fit();
  }
  memory_->sub(MemoryLedger::kParams, 2 * u.padded);
  u.present = false;
}

void Zero::allocGrads(size_t ui) {
  Unit& u = units_.at(ui);
  if (u.gradsLive) return;
  for (size_t k : u.params) params_[k]->grad.assign(sizes_[k], 0.0f);
  memory_->add(MemoryLedger::kGrads, gradBytes() * u.elems);
  u.gradsLive = true;
}

void Zero::freeGrads(size_t ui) {
  Unit& u = units_.at(ui);
  if (!u.gradsLive) return;
  for (size_t k : u.params) {
    params_[k]->grad.clear();
    params_[k]->grad.shrink_to_fit();
  }
  memory_->sub(MemoryLedger::kGrads, gradBytes() * u.elems);
  u.gradsLive = false;
}

// Averages unit u's gradients over the group in gradType: all of them (stage 0, written back to
// the Params) or, scatter, this rank's shard, added to gradShard (so micro-batches accumulate).
void Zero::reduceGrads(size_t ui, bool scatter) {
  Unit& u = units_.at(ui);
  size_t count = scatter ? u.padded : u.elems;
  std::vector<float> flat(count, 0.0f);
  size_t off = 0;
  for (size_t k : u.params) {
    std::copy(params_[k]->grad.begin(), params_[k]->grad.end(), flat.begin() + static_cast<long>(off));
    off += sizes_[k];
  }
  size_t shard = u.padded / static_cast<size_t>(nranks_);
  std::vector<float> out(scatter ? shard : count);
  if (opt_.gradType == collBfloat16) {
    std::vector<uint16_t> in(count), res(out.size());
    for (size_t i = 0; i < count; ++i) in[i] = toBf16(flat[i]);
    WaitTimer wait(ledger_);
    if (scatter)
      check(collReduceScatter(in.data(), res.data(), shard, collBfloat16, collAvg, comm_, nullptr), comm_,
            "Zero: collReduceScatter of a unit's gradients");
    else
      check(collAllReduce(in.data(), res.data(), count, collBfloat16, collAvg, comm_, nullptr), comm_,
            "Zero: collAllReduce of the gradients");
    for (size_t i = 0; i < out.size(); ++i) out[i] = fromBf16(res[i]);
  } else if (scatter) {
    WaitTimer wait(ledger_);
    check(collReduceScatter(flat.data(), out.data(), shard, collFloat32, collAvg, comm_, nullptr), comm_,
          "Zero: collReduceScatter of a unit's gradients");
  } else {
    WaitTimer wait(ledger_);
    check(collAllReduce(flat.data(), out.data(), count, collFloat32, collAvg, comm_, nullptr), comm_,
          "Zero: collAllReduce of the gradients");
  }
  if (ledger_) ledger_->record(scatter ? CommKind::kReduceScatter : CommKind::kAllReduce, count, gradBytes(), nranks_);
  if (scatter) {
    if (opt_.replicate && replicas_ > 1) replicateShard(&out);
    for (size_t i = 0; i < shard; ++i) u.gradShard[i] += out[i];
    return;
  }
  off = 0;
  for (size_t k : u.params) {
    std::copy(out.begin() + static_cast<long>(off), out.begin() + static_cast<long>(off + sizes_[k]),
              params_[k]->grad.begin());
    off += sizes_[k];
  }
}

// HSDP: the reduced shard averaged over the replicas (in gradType, as the reduce-scatter).
void Zero::replicateShard(std::vector<float>* shard) {
  size_t n = shard->size();
  collComm_t rc = opt_.replicate;
  WaitTimer wait(ledger_);
  if (opt_.gradType == collBfloat16) {
    std::vector<uint16_t> h(n);
    for (size_t i = 0; i < n; ++i) h[i] = toBf16((*shard)[i]);
    check(collAllReduce(h.data(), h.data(), n, collBfloat16, collAvg, rc, nullptr), rc,
          "Zero: collAllReduce of a gradient shard across replicas");
    for (size_t i = 0; i < n; ++i) (*shard)[i] = fromBf16(h[i]);
  } else {
    check(collAllReduce(shard->data(), shard->data(), n, collFloat32, collAvg, rc, nullptr), rc,
          "Zero: collAllReduce of a gradient shard across replicas");
  }
  if (ledger_) ledger_->record(CommKind::kAllReduce, n, gradBytes(), replicas_);
}

void Zero::step() {
  ++steps_;
  for (size_t ui = 0; ui < units_.size(); ++ui) {
    Unit& u = units_[ui];
    if (opt_.stage == 0) {
      reduceGrads(ui, false);
      std::vector<float> g(u.elems);
      size_t off = 0;
      for (size_t k : u.params) {
        std::copy(params_[k]->grad.begin(), params_[k]->grad.end(), g.begin() + static_cast<long>(off));
        off += sizes_[k];
      }
      adamUpdate(u.master.data(), u.m.data(), u.v.data(), g.data(), u.elems, steps_, opt_.adam);
      off = 0;
      for (size_t k : u.params) {
        for (size_t i = 0; i < sizes_[k]; ++i) params_[k]->value[i] = roundBf16(u.master[off + i]);
        params_[k]->zeroGrad();
        off += sizes_[k];
      }
      continue;
    }
    if (opt_.stage == 1) {
      reduceGrads(ui, true);
      for (size_t k : u.params) params_[k]->zeroGrad();
    }
    adamUpdate(u.master.data(), u.m.data(), u.v.data(), u.gradShard.data(), u.master.size(), steps_, opt_.adam);
    std::fill(u.gradShard.begin(), u.gradShard.end(), 0.0f);
    std::vector<uint16_t> work(u.master.size());
    for (size_t i = 0; i < work.size(); ++i) work[i] = toBf16(u.master[i]);
    if (opt_.stage == 3) {
      u.workShard = std::move(work);
      continue;
    }
    // Stages 1 and 2: every rank needs every updated parameter for the next forward.
    std::vector<uint16_t> full(u.padded);
    WaitTimer wait(ledger_);
    check(collAllGather(work.data(), full.data(), work.size(), collBfloat16, comm_, nullptr), comm_,
          "Zero: collAllGather of the updated parameters");
    if (ledger_) ledger_->record(CommKind::kAllGather, u.padded, 2, nranks_);
    size_t off = 0;
    for (size_t k : u.params) {
      for (size_t i = 0; i < sizes_[k]; ++i) params_[k]->value[i] = fromBf16(full[off + i]);
      off += sizes_[k];
    }
  }
}

void Zero::gatherAll() {
  if (opt_.stage != 3) return;
  for (size_t u = 0; u < units_.size(); ++u) gatherFinish(u);
}

}  // namespace coll::parallel
