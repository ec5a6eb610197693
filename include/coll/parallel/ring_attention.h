// Context parallelism: ring attention. The sequence is split into equal consecutive chunks, one
// per rank of the context-parallel group (rank r holds positions [r s, (r+1) s) for chunk length
// s). Causal attention needs every earlier key and value, so the K/V chunks travel around the
// ring with send/recv: at step i a rank attends its queries to the chunk of rank r - i while that
// chunk is already on its way to the next rank (the exchange overlaps the block's computation),
// and the partial results merge through the online softmax (running max and sum), so no rank ever
// holds more than two chunks. The backward pass sends each K/V chunk around again (again while
// it is used), followed by the gradient of its keys and values, which every rank adds to before
// passing it on, and a last hop brings that gradient home. Per block of s b h d elements: c - 1
// exchanges of K and V forward; backward c - 1 of K and V and c of their gradients.
#pragma once

#include "coll/coll.h"
#include "coll/parallel/ledger.h"

namespace coll::parallel {

class RingAttention {
 public:
  /// cp: the context-parallel group (nullptr: this rank holds the whole sequence and nothing is
  /// exchanged). The object has a host stream of its own for the exchanges. ledger, when given,
  /// records them.
  explicit RingAttention(collComm_t cp, CommLedger* ledger = nullptr);
  ~RingAttention();
  RingAttention(const RingAttention&) = delete;
  RingAttention& operator=(const RingAttention&) = delete;

  int size() const { return size_; }
  int rank() const { return rank_; }

  /// Causal multi-head attention of this rank's chunk. q, k, v and out: sLocal x batch rows
  /// (sequence-major: row s batch + b) of heads x dh values (head h at columns [h dh, (h+1) dh));
  /// scores scaled by 1/sqrt(dh). lse (sLocal x batch x heads) receives each row's log-sum-exp,
  /// which the backward needs. Every rank of the group calls this together.
  void forward(const float* q, const float* k, const float* v, int sLocal, int batch, int heads, int dh, float* out,
               float* lse);
  /// The gradients of q, k and v (overwritten) from dOut, given the forward's inputs, out and lse.
  void backward(const float* q, const float* k, const float* v, const float* out, const float* lse, const float* dOut,
                int sLocal, int batch, int heads, int dh, float* dq, float* dk, float* dv);

 private:
  /// Starts sending `count` floats of `send` to the next rank and receiving as many from the
  /// previous one into `recv`, on the stream; finish() waits.
  void exchange(const float* send, float* recv, size_t count);
  void finish();
  collComm_t comm_;
  CommLedger* ledger_;
  collStream_t stream_ = nullptr;
  int size_ = 1, rank_ = 0;
};

}  // namespace coll::parallel
