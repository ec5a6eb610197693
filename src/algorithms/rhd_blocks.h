// Pieces shared by the recursive halving and doubling algorithms: block arithmetic, the folding
// of a rank count that is not a power of two (fold.h) for all-reduces, and the halving and
// doubling rounds themselves.
#pragma once

#include <cstddef>

#include "algorithms/fold.h"
#include "algorithms/schedule.h"

namespace coll::algorithms {

/// count elements cut into nblocks nearly equal blocks (the first count % nblocks get one more).
struct Blocks {
  size_t count, nblocks;
  size_t offset(size_t b) const {
    size_t q = count / nblocks, rem = count % nblocks;
    return q * b + (b < rem ? b : rem);
  }
};

/// Elements [offset, offset + count) of a buffer.
struct Span {
  size_t offset, count;
};

/// The elements of the blocks of the old ranks covered by new ranks [a, b).
inline Span spanOf(const Fold& f, int a, int b, size_t blockElems) {
  size_t lo = static_cast<size_t>(f.oldLo(a)) * blockElems, hi = static_cast<size_t>(f.oldLo(b)) * blockElems;
  return Span{lo, hi - lo};
}

/// Folding in, for an all-reduce of count elements: a sitting-out rank sends its input to its odd
/// neighbour and receives the result (its schedule is then complete: returns true); the others
/// start from output = input, reduced with the neighbour's input on the odd rank of a pair.
inline bool foldAllReduceIn(Schedule& s, const Fold& f, int r, size_t count) {
  if (f.sitsOut(r)) {
    s.push_back(Step{Prim::kSend, r + 1, -1, Buf::kInput, 0, 0, count});
    s.push_back(Step{Prim::kRecv, -1, r + 1, Buf::kOutput, 0, 0, count});
    return true;
  }
  if (f.actsForTwo(r))
    s.push_back(Step{Prim::kRecvReduceCopy, -1, r - 1, Buf::kInput, 0, 0, count});
  else
    s.push_back(Step{Prim::kCopy, -1, -1, Buf::kInput, 0, 0, count});
  return false;
}

/// Folding out: the odd rank of a pair sends the whole output (total elements) to its neighbour.
inline void foldOut(Schedule& s, const Fold& f, int r, size_t total) {
  if (f.actsForTwo(r)) s.push_back(Step{Prim::kSend, r - 1, -1, Buf::kOutput, 0, 0, total});
}

/// The halving rounds of new rank v (mask = p/2, ..., 1) over buf: each round sends the partner
/// the half of the current range it keeps and reduces the half this rank keeps; span(a, b) gives
/// the elements of new ranks [a, b). The last round writes final values.
template <typename SpanOf>
void appendHalving(Schedule& s, const Fold& f, int v, Buf buf, SpanOf span) {
  int lo = 0, hi = f.p;
  for (int mask = f.p / 2; mask >= 1; mask /= 2) {
    int peer = f.oldRank(v ^ mask), mid = lo + (hi - lo) / 2;
    bool upper = (v & mask) != 0;
    Span keep = upper ? span(mid, hi) : span(lo, mid), give = upper ? span(lo, mid) : span(mid, hi);
    Step st{Prim::kSendRecvReduce, peer, peer, buf, give.offset, keep.offset, give.count, mask == 1};
    st.dst = buf;
    st.recvCount = keep.count;
    s.push_back(st);
    (upper ? lo : hi) = mid;
  }
}

/// The doubling rounds of new rank v (mask = 1, 2, ..., p/2) in the output: each round swaps
/// everything gathered so far (an aligned run of new ranks) with the partner.
template <typename SpanOf>
void appendDoubling(Schedule& s, const Fold& f, int v, SpanOf span) {
  for (int mask = 1; mask < f.p; mask *= 2) {
    int peer = f.oldRank(v ^ mask);
    int mine = v & ~(mask - 1), theirs = mine ^ mask;
    Span a = span(mine, mine + mask), b = span(theirs, theirs + mask);
    Step st{Prim::kSendRecv, peer, peer, Buf::kOutput, a.offset, b.offset, a.count};
    st.recvCount = b.count;
    s.push_back(st);
  }
}

}  // namespace coll::algorithms
