// Recursive doubling all-reduce (small messages).
//
// How it works: in round k (k = 0 .. log2 p - 1) each rank exchanges its whole running result with
// the rank whose number differs in bit k and reduces what it receives into it; after log2 p rounds
// every rank holds the full reduction. Partners compute a (op) b and b (op) a, which are the same
// bits for every commutative operation, so all ranks agree. A rank count that is not a power of two
// is folded first (fold.h): each sitting-out rank sends its input to its odd neighbour and gets
// the result back at the end.
// Bytes sent per rank: size x log2 p (+ size for a folded pair). Latency: log2 p steps (+ 2).
#include "algorithms/rhd_blocks.h"

namespace coll::algorithms {

Schedule rdAllReduce(int n, int r, size_t count) {
  if (count == 0) return {};
  if (n == 1) return {Step{Prim::kCopy, -1, -1, Buf::kInput, 0, 0, count, true}};
  Fold f(n);
  Schedule s;
  if (foldAllReduceIn(s, f, r, count)) return s;
  int v = f.newRank(r);
  for (int mask = 1; mask < f.p; mask <<= 1) {
    int peer = f.oldRank(v ^ mask);
    s.push_back(Step{Prim::kSendRecvReduce, peer, peer, Buf::kOutput, 0, 0, count, mask * 2 == f.p});
  }
  foldOut(s, f, r, count);
  return s;
}

}  // namespace coll::algorithms
