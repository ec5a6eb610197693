// Folding a rank count that is not a power of two into one that is (as MPICH does).
//
// With p = the largest power of two <= n and rem = n - p, ranks 0 .. 2 rem - 1 pair up: each even
// rank hands its data to the odd rank after it and sits out, so p ranks remain. They are renumbered
// 0 .. p-1 ("new ranks"): the pair (2i, 2i+1) is new rank i for i < rem, and old rank i + rem is
// new rank i for i >= rem. A range of new ranks [a, b) covers old ranks [oldLo(a), oldLo(b)),
// a contiguous range: that is what lets the algorithms keep blocks of data contiguous too.
#pragma once

namespace coll::algorithms {

struct Fold {
  int n = 1, p = 1, rem = 0;
  explicit Fold(int nranks) : n(nranks) {
    while (p * 2 <= n) p *= 2;
    rem = n - p;
  }
  /// True for the even ranks of the first 2 rem, which hand over their data and sit out.
  bool sitsOut(int r) const { return r < 2 * rem && r % 2 == 0; }
  /// True for the odd ranks of the first 2 rem, which act for their even neighbour as well.
  bool actsForTwo(int r) const { return r < 2 * rem && r % 2 == 1; }
  /// The new rank of an old rank that takes part.
  int newRank(int r) const { return r < 2 * rem ? r / 2 : r - rem; }
  /// The old rank acting as new rank v.
  int oldRank(int v) const { return v < rem ? 2 * v + 1 : v + rem; }
  /// The first old rank covered by new rank v (v == p gives n).
  int oldLo(int v) const { return v < rem ? 2 * v : v + rem; }
};

}  // namespace coll::algorithms
