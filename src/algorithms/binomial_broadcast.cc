// Binomial-tree broadcast (small messages).
//
// How it works: ranks are numbered relative to the root (v = r - root mod n). Rank v > 0 receives
// from v minus its lowest set bit, then sends to v + 2^j for every 2^j below that bit (largest
// first, so the biggest subtrees start earliest). The root sends to 1, 2, 4, ... Each rank
// forwards after it has the whole message (store and forward), which suits small sizes; large
// broadcasts take the pipelined chain.
// Bytes sent per rank: up to log2 n x size (the root). Latency: ceil(log2 n) steps.
#include "algorithms/schedule.h"

namespace coll::algorithms {

Schedule binomialBroadcast(int n, int r, int root, size_t count) {
  if (count == 0) return {};
  int v = (r - root + n) % n;
  auto rank = [&](int rel) { return (rel + root) % n; };
  Schedule s;
  int mask = 1;
  if (v == 0) {
    while (mask < n) mask <<= 1;
    s.push_back(Step{Prim::kCopy, -1, -1, Buf::kInput, 0, 0, count});
  } else {
    while (!(v & mask)) mask <<= 1;
    s.push_back(Step{Prim::kRecv, -1, rank(v - mask), Buf::kOutput, 0, 0, count});
  }
  for (mask >>= 1; mask >= 1; mask >>= 1)
    if (v + mask < n) s.push_back(Step{Prim::kSend, rank(v + mask), -1, Buf::kOutput, 0, 0, count});
  return s;
}

}  // namespace coll::algorithms
