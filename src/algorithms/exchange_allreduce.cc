// Exchange all-reduce (small messages).
//
// How it works: rank r puts its input into scratch block r, then in step s = 1..n-1 sends its input
// to rank r+s while receiving rank r-s's input into scratch block r-s (each step is a permutation,
// as in all-to-all). Finally it reduces the n blocks in rank order 0, 1, ..., n-1, so every rank
// computes the same operations in the same order and gets the same bits, whatever the type.
// Bytes sent per rank: (n-1) x size, so it only pays for small sizes. Latency: n-1 steps, each one
// hop, against 2(n-1) hops for the ring.
#include "algorithms/schedule.h"

namespace coll::algorithms {

Schedule exchangeAllReduce(int n, int r, size_t count) {
  if (count == 0) return {};
  auto blk = [&](int b) { return static_cast<size_t>(((b % n) + n) % n) * count; };
  Schedule s;
  Step own{Prim::kCopy, -1, -1, Buf::kInput, 0, blk(r), count, false};
  own.dst = Buf::kScratch;
  s.push_back(own);
  for (int k = 1; k < n; ++k) {
    Step x{Prim::kSendRecv, (r + k) % n, (r - k + n) % n, Buf::kInput, 0, blk(r - k), count, false};
    x.dst = Buf::kScratch;
    s.push_back(x);
  }
  s.push_back(Step{Prim::kReduceBlocks, -1, -1, Buf::kScratch, 0, 0, count, true});
  return s;
}

}  // namespace coll::algorithms
