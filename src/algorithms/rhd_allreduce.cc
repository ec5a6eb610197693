// Rabenseifner all-reduce: recursive-halving reduce-scatter, then recursive-doubling all-gather.
//
// How it works: the p (power of two) taking part cut the vector into p blocks. In halving round
// k (mask = p/2, p/4, ..., 1) each rank exchanges half of the blocks it still holds with the rank
// differing in that bit: it sends the half its partner keeps and reduces the half it keeps. After
// log2 p rounds, rank v holds block v fully reduced. The doubling rounds (mask = 1, 2, ..., p/2)
// swap the finished blocks until every rank has all of them. A rank count that is not a power of
// two is folded first (fold.h). Every block is finished on one rank only, so all ranks get the
// same bits.
// Bytes sent per rank: 2 (p-1)/p x size (+ size twice for a folded pair). Latency: 2 log2 p steps.
#include "algorithms/rhd_blocks.h"
#include "algorithms/schedule.h"

namespace coll::algorithms {

Schedule rhdAllReduce(int n, int r, size_t count) {
  if (count == 0) return {};
  if (n == 1) return {Step{Prim::kCopy, -1, -1, Buf::kInput, 0, 0, count, true}};
  Fold f(n);
  Schedule s;
  if (foldAllReduceIn(s, f, r, count)) return s;
  Blocks blocks{count, static_cast<size_t>(f.p)};
  auto span = [&](int lo, int hi) { return Span{blocks.offset(lo), blocks.offset(hi) - blocks.offset(lo)}; };
  appendHalving(s, f, f.newRank(r), Buf::kOutput, span);
  appendDoubling(s, f, f.newRank(r), span);
  foldOut(s, f, r, count);
  return s;
}

}  // namespace coll::algorithms
