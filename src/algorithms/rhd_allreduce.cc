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
  if (f.sitsOut(r)) {
    s.push_back(Step{Prim::kSend, r + 1, -1, Buf::kInput, 0, 0, count});
    s.push_back(Step{Prim::kRecv, -1, r + 1, Buf::kOutput, 0, 0, count});
    return s;
  }
  if (f.actsForTwo(r))
    s.push_back(Step{Prim::kRecvReduceCopy, -1, r - 1, Buf::kInput, 0, 0, count});
  else
    s.push_back(Step{Prim::kCopy, -1, -1, Buf::kInput, 0, 0, count});
  Blocks blocks{count, static_cast<size_t>(f.p)};
  auto span = [&](int lo, int hi) { return Span{blocks.offset(lo), blocks.offset(hi) - blocks.offset(lo)}; };
  int v = f.newRank(r), lo = 0, hi = f.p;
  for (int mask = f.p / 2; mask >= 1; mask /= 2) {
    int peer = f.oldRank(v ^ mask), mid = lo + (hi - lo) / 2;
    bool upper = (v & mask) != 0;
    Span keep = upper ? span(mid, hi) : span(lo, mid), give = upper ? span(lo, mid) : span(mid, hi);
    Step st{Prim::kSendRecvReduce, peer, peer, Buf::kOutput, give.offset, keep.offset, give.count, mask == 1};
    st.recvCount = keep.count;
    s.push_back(st);
    (upper ? lo : hi) = mid;
  }
  for (int mask = 1; mask < f.p; mask *= 2) {
    int peer = f.oldRank(v ^ mask);
    int mine = v & ~(mask - 1), theirs = mine ^ mask;
    Span a = span(mine, mine + mask), b = span(theirs, theirs + mask);
    Step st{Prim::kSendRecv, peer, peer, Buf::kOutput, a.offset, b.offset, a.count};
    st.recvCount = b.count;
    s.push_back(st);
  }
  if (f.actsForTwo(r)) s.push_back(Step{Prim::kSend, r - 1, -1, Buf::kOutput, 0, 0, count});
  return s;
}

}  // namespace coll::algorithms
