// Pairwise all-to-all.
//
// How it works: rank r copies its own block, then in step s = 1..n-1 sends block r+s to rank r+s
// while receiving block r-s from rank r-s, the two interleaved piece by piece. Each step is a
// permutation of the ranks, so every rank sends to one peer and receives from one.
// Bytes sent per rank: (n-1)/n x input. Latency: n-1 steps.
#include "algorithms/schedule.h"

namespace coll::algorithms {

Schedule pairwiseAllToAll(int n, int r, size_t count) {
  Schedule s;
  if (count == 0) return s;
  auto blk = [&](int b) { return static_cast<size_t>(((b % n) + n) % n) * count; };
  s.push_back(Step{Prim::kCopy, -1, -1, Buf::kInput, blk(r), blk(r), count, false});
  for (int k = 1; k < n; ++k) {
    int to = (r + k) % n, from = (r - k + n) % n;
    s.push_back(Step{Prim::kSendRecv, to, from, Buf::kInput, blk(to), blk(from), count, false});
  }
  return s;
}

}  // namespace coll::algorithms
