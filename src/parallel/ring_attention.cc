#include "coll/parallel/ring_attention.h"

#include <cmath>
#include <utility>
#include <vector>

#include "coll/parallel/error.h"
#include "parallel/ops.h"

namespace coll::parallel {

RingAttention::RingAttention(collComm_t cp, CommLedger* ledger) : comm_(cp), ledger_(ledger) {
  if (!comm_) return;
  check(collCommCount(comm_, &size_), comm_, "RingAttention: collCommCount");
  check(collCommUserRank(comm_, &rank_), comm_, "RingAttention: collCommUserRank");
  if (size_ > 1) check(collHostStreamCreate(&stream_), comm_, "RingAttention: collHostStreamCreate");
}

RingAttention::~RingAttention() {
  if (stream_) collHostStreamDestroy(stream_);
}

void RingAttention::exchange(const float* send, float* recv, size_t count) {
  int next = (rank_ + 1) % size_, prev = (rank_ + size_ - 1) % size_;
  check(collGroupStart(), comm_, "RingAttention: collGroupStart");
  check(collSend(send, count, collFloat32, next, comm_, stream_), comm_, "RingAttention: collSend");
  check(collRecv(recv, count, collFloat32, prev, comm_, stream_), comm_, "RingAttention: collRecv");
  check(collGroupEnd(), comm_, "RingAttention: collGroupEnd");
  if (ledger_) ledger_->record(CommKind::kSendRecv, count, sizeof(float), size_);
}

void RingAttention::finish() {
  WaitTimer wait(ledger_);
  check(collStreamSynchronize(stream_), comm_, "RingAttention: the K/V exchange");
}

namespace {
// Head h of batch row b of a sequence-major activation, width floats per row.
kern::RowView view(const float* base, int b, int h, int batch, int width, int dh) {
  return {const_cast<float*>(base) + static_cast<size_t>(b) * width + static_cast<size_t>(h) * dh,
          static_cast<size_t>(batch) * width};
}
}  // namespace

void RingAttention::forward(const float* q, const float* k, const float* v, int sLocal, int batch, int heads, int dh,
                            float* out, float* lse) {
  int width = heads * dh;
  size_t block = static_cast<size_t>(sLocal) * batch * width;
  float scale = 1.0f / std::sqrt(static_cast<float>(dh));
  // The chunk in hand, K then V, and the one arriving.
  std::vector<float> cur(2 * block), next(size_ > 1 ? 2 * block : 0);
  std::copy(k, k + block, cur.begin());
  std::copy(v, v + block, cur.begin() + block);
  std::vector<kern::SoftmaxState> st(static_cast<size_t>(batch) * heads);
  for (auto& s : st) s.reset(sLocal, dh);
  for (int i = 0; i < size_; ++i) {
    int src = (rank_ - i + size_) % size_;
    if (i + 1 < size_) exchange(cur.data(), next.data(), cur.size());  // on its way while we compute
    if (src <= rank_)  // a later chunk's keys are all in the future of every query here
      for (int b = 0; b < batch; ++b)
        for (int h = 0; h < heads; ++h)
          kern::attentionBlock(view(q, b, h, batch, width, dh), sLocal, rank_ * sLocal,
                               view(cur.data(), b, h, batch, width, dh),
                               view(cur.data() + block, b, h, batch, width, dh), sLocal, src * sLocal, dh, scale,
                               &st[static_cast<size_t>(b) * heads + h]);
    if (i + 1 < size_) {
      finish();
      std::swap(cur, next);
    }
  }
  std::vector<float> rowLse(sLocal);
  for (int b = 0; b < batch; ++b)
    for (int h = 0; h < heads; ++h) {
      kern::attentionFinish(st[static_cast<size_t>(b) * heads + h], view(out, b, h, batch, width, dh), rowLse.data(),
                            sLocal, dh);
      for (int s = 0; s < sLocal; ++s) lse[(static_cast<size_t>(s) * batch + b) * heads + h] = rowLse[s];
    }
}

void RingAttention::backward(const float* q, const float* k, const float* v, const float* out, const float* lse,
                             const float* dOut, int sLocal, int batch, int heads, int dh, float* dq, float* dk,
                             float* dv) {
  int width = heads * dh;
  size_t block = static_cast<size_t>(sLocal) * batch * width;
  float scale = 1.0f / std::sqrt(static_cast<float>(dh));
  std::fill(dq, dq + block, 0.0f);
  // delta = rowsum(dOut * out) per (row, head), and lse regrouped per (batch, head) as rows.
  size_t groups = static_cast<size_t>(batch) * heads;
  std::vector<float> delta(groups * sLocal), lseRows(groups * sLocal);
  for (int s = 0; s < sLocal; ++s)
    for (int b = 0; b < batch; ++b)
      for (int h = 0; h < heads; ++h) {
        size_t at = (static_cast<size_t>(s) * batch + b) * width + static_cast<size_t>(h) * dh;
        float d = 0;
        for (int t = 0; t < dh; ++t) d += dOut[at + t] * out[at + t];
        size_t g = static_cast<size_t>(b) * heads + h;
        delta[g * sLocal + s] = d;
        lseRows[g * sLocal + s] = lse[(static_cast<size_t>(s) * batch + b) * heads + h];
      }
  // The travelling chunk: K, V, and the gradients of K and V that every rank adds to.
  std::vector<float> cur(4 * block, 0.0f), next(size_ > 1 ? 4 * block : 0);
  std::copy(k, k + block, cur.begin());
  std::copy(v, v + block, cur.begin() + block);
  for (int i = 0; i < size_; ++i) {
    int src = (rank_ - i + size_) % size_;
    // K and V go on to the next rank while this one computes with them (they are only read);
    // their gradients follow once this rank has added its part, on the same stream, after them.
    if (i + 1 < size_) exchange(cur.data(), next.data(), 2 * block);
    if (src <= rank_) {
      const float* ck = cur.data();
      const float* cv = ck + block;
      float* cdk = cur.data() + 2 * block;
      float* cdv = cdk + block;
      for (int b = 0; b < batch; ++b)
        for (int h = 0; h < heads; ++h) {
          size_t g = static_cast<size_t>(b) * heads + h;
          kern::attentionBlockBackward(view(q, b, h, batch, width, dh), view(dOut, b, h, batch, width, dh),
                                       lseRows.data() + g * sLocal, delta.data() + g * sLocal, sLocal, rank_ * sLocal,
                                       view(ck, b, h, batch, width, dh), view(cv, b, h, batch, width, dh),
                                       view(cdk, b, h, batch, width, dh), view(cdv, b, h, batch, width, dh), sLocal,
                                       src * sLocal, dh, scale, view(dq, b, h, batch, width, dh));
        }
    }
    if (size_ == 1) break;
    // The last hop takes only the gradients home.
    exchange(cur.data() + 2 * block, next.data() + 2 * block, 2 * block);
    finish();
    std::swap(cur, next);
  }
  std::copy(cur.begin() + 2 * block, cur.begin() + 3 * block, dk);
  std::copy(cur.begin() + 3 * block, cur.begin() + 4 * block, dv);
}

}  // namespace coll::parallel
