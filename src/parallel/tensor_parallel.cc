#include "coll/parallel/tensor_parallel.h"

#include <string>

#include "coll/parallel/error.h"

namespace coll::parallel {

TensorParallel::TensorParallel(collComm_t comm, bool sequenceParallel, CommLedger* ledger)
    : comm_(comm), sp_(sequenceParallel), ledger_(ledger) {
  if (comm_) {
    check(collCommCount(comm_, &size_), comm_, "TensorParallel: collCommCount");
    check(collCommUserRank(comm_, &rank_), comm_, "TensorParallel: collCommUserRank");
  }
}

std::pair<int, int> TensorParallel::split(int n, int parts, int index, const char* what) {
  if (parts < 1 || n % parts != 0)
    throw Error(std::string(what) + " (" + std::to_string(n) + ") is not divisible by the tensor-parallel size (" +
                std::to_string(parts) + "): choose a size that divides it");
  int each = n / parts;
  return {index * each, (index + 1) * each};
}

void TensorParallel::allReduce(std::vector<float>* v) const {
  if (size_ == 1) return;
  WaitTimer wait(ledger_);
  check(collAllReduce(v->data(), v->data(), v->size(), collFloat32, collSum, comm_, nullptr), comm_,
        "TensorParallel: collAllReduce");
  if (ledger_) ledger_->record(CommKind::kAllReduce, v->size(), sizeof(float), size_);
}

namespace {
std::vector<float> gatherRows(std::vector<float> x, collComm_t comm, int n, CommLedger* ledger) {
  std::vector<float> all(x.size() * n);
  WaitTimer wait(ledger);
  check(collAllGather(x.data(), all.data(), x.size(), collFloat32, comm, nullptr), comm,
        "TensorParallel: collAllGather");
  if (ledger) ledger->record(CommKind::kAllGather, all.size(), sizeof(float), n);
  return all;
}

std::vector<float> scatterRows(std::vector<float> x, collComm_t comm, int n, CommLedger* ledger) {
  if (x.size() % n != 0) throw Error("TensorParallel: the rows do not split evenly over the group");
  std::vector<float> mine(x.size() / n);
  WaitTimer wait(ledger);
  check(collReduceScatter(x.data(), mine.data(), mine.size(), collFloat32, collSum, comm, nullptr), comm,
        "TensorParallel: collReduceScatter");
  if (ledger) ledger->record(CommKind::kReduceScatter, x.size(), sizeof(float), n);
  return mine;
}
}  // namespace

std::vector<float> TensorParallel::enterForward(std::vector<float> x) const {
  if (size_ == 1 || !sp_) return x;
  return gatherRows(std::move(x), comm_, size_, ledger_);
}

std::vector<float> TensorParallel::enterBackward(std::vector<float> dx) const {
  if (size_ == 1) return dx;
  if (sp_) return scatterRows(std::move(dx), comm_, size_, ledger_);
  allReduce(&dx);
  return dx;
}

std::vector<float> TensorParallel::exitForward(std::vector<float> partial) const {
  if (size_ == 1) return partial;
  if (sp_) return scatterRows(std::move(partial), comm_, size_, ledger_);
  allReduce(&partial);
  return partial;
}

std::vector<float> TensorParallel::exitBackward(std::vector<float> dy) const {
  if (size_ == 1 || !sp_) return dy;
  return gatherRows(std::move(dy), comm_, size_, ledger_);
}

void TensorParallel::sumReplicatedGrads(const std::vector<Param*>& params) const {
  if (size_ == 1 || !sp_ || params.empty()) return;
  std::vector<float> flat;
  for (const Param* p : params) flat.insert(flat.end(), p->grad.begin(), p->grad.end());
  allReduce(&flat);
  size_t at = 0;
  for (Param* p : params) {
    std::copy(flat.begin() + at, flat.begin() + at + p->grad.size(), p->grad.begin());
    at += p->grad.size();
  }
}

}  // namespace coll::parallel
