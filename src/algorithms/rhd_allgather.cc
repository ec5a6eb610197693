// Recursive-doubling all-gather.
//
// How it works: rank r puts its input into output block r. In round k (mask = 1, 2, ..., p/2) each
// of the p taking part swaps everything it has gathered with the rank differing in bit k; what
// each holds is a contiguous run of blocks, so each swap is one message each way. A rank count
// that is not a power of two is folded (fold.h): a sitting-out rank sends its input to its odd
// neighbour, which gathers for both and at the end sends it the whole output.
// Bytes sent per rank: (p-1)/p x output (+ output for a folded pair). Latency: log2 p steps (+ 2).
#include "algorithms/rhd_blocks.h"
#include "algorithms/schedule.h"

namespace coll::algorithms {

Schedule rhdAllGather(int n, int r, size_t sc) {
  if (sc == 0) return {};
  size_t total = sc * static_cast<size_t>(n);
  Schedule s;
  if (n == 1) return {Step{Prim::kCopy, -1, -1, Buf::kInput, 0, 0, sc}};
  Fold f(n);
  if (f.sitsOut(r)) {
    s.push_back(Step{Prim::kSend, r + 1, -1, Buf::kInput, 0, 0, sc});
    s.push_back(Step{Prim::kRecv, -1, r + 1, Buf::kOutput, 0, 0, total});
    return s;
  }
  s.push_back(Step{Prim::kCopy, -1, -1, Buf::kInput, 0, r * sc, sc});
  if (f.actsForTwo(r)) s.push_back(Step{Prim::kRecv, -1, r - 1, Buf::kOutput, 0, (r - 1) * sc, sc});
  appendDoubling(s, f, f.newRank(r), [&](int a, int b) { return spanOf(f, a, b, sc); });
  foldOut(s, f, r, total);
  return s;
}

}  // namespace coll::algorithms
