// Recursive-halving reduce-scatter.
//
// How it works: the input holds one block per rank. A working copy of it lives in scratch. In
// round k (mask = p/2, ..., 1) each of the p taking part sends its partner the half of its current
// range of blocks that the partner keeps, and reduces the half it keeps; ranges are contiguous
// runs of blocks, so each exchange is one message. A rank count that is not a power of two is
// folded (fold.h): a sitting-out rank sends its whole input to its odd neighbour, which reduces
// for both and at the end sends back the sitting-out rank's block.
// Bytes sent per rank: (p-1)/p x input (+ input and a block for a folded pair). Latency: log2 p.
#include "algorithms/rhd_blocks.h"
#include "algorithms/schedule.h"

namespace coll::algorithms {

Schedule rhdReduceScatter(int n, int r, size_t rc) {
  if (rc == 0) return {};
  size_t total = rc * static_cast<size_t>(n);
  if (n == 1) return {Step{Prim::kCopy, -1, -1, Buf::kInput, 0, 0, rc, true}};
  Fold f(n);
  Schedule s;
  if (f.sitsOut(r)) {
    s.push_back(Step{Prim::kSend, r + 1, -1, Buf::kInput, 0, 0, total});
    s.push_back(Step{Prim::kRecv, -1, r + 1, Buf::kOutput, 0, 0, rc});
    return s;
  }
  Step first{f.actsForTwo(r) ? Prim::kRecvReduceCopy : Prim::kCopy,
             -1,
             f.actsForTwo(r) ? r - 1 : -1,
             Buf::kInput,
             0,
             0,
             total};
  first.dst = Buf::kScratch;
  s.push_back(first);
  appendHalving(s, f, f.newRank(r), Buf::kScratch, [&](int a, int b) { return spanOf(f, a, b, rc); });
  // Scratch now holds the finished blocks of the old ranks this rank stands for.
  if (f.actsForTwo(r)) s.push_back(Step{Prim::kSend, r - 1, -1, Buf::kScratch, (r - 1) * rc, 0, rc});
  Step out{Prim::kCopy, -1, -1, Buf::kScratch, r * rc, 0, rc};
  s.push_back(out);
  return s;
}

}  // namespace coll::algorithms
