// Double binary tree all-reduce (NCCL's construction).
//
// How it works: tree 0 is a binary tree in which rank r with lowest set bit b has parent
// (r ^ b) | 2b (or r ^ b when that is out of range) and children r - b/2 and r + b'/2, b' the
// largest power of two <= b with r + b'/2 < n; rank 0 is the root, with the single child
// 2^floor(log2(n-1)). Tree 1 is tree 0 mirrored (rank n-1-r) when n is even, shifted by one rank
// when n is odd, so that a rank that is a leaf in one tree is an inner node in the other. Each
// tree carries half of the data, in chunks: up the tree, a node adds its children's partial sums
// to its input (lower child first, so each reduction joins adjacent rank ranges) and passes the
// result to its parent; the root finishes the chunk, and it comes back down to everybody. The
// root computes every final value, so all ranks get the same bits.
// Bytes sent per rank: about size (inner nodes 1.5 x size). Latency: 2 log2 n steps, then one
// step per chunk: each rank runs its part of the two trees' ways up and down in rounds offset from
// its neighbours' (below), so that nobody waits for a round trip.
#include <algorithm>

#include "algorithms/schedule.h"

namespace coll::algorithms {
namespace {

struct Node {
  int parent = -1, child0 = -1, child1 = -1;
};

Node btree(int n, int r) {
  Node t;
  int bit = 1;
  while (bit < n && !(bit & r)) bit <<= 1;
  if (r == 0) {
    if (n > 1) t.child1 = bit >> 1;
    return t;
  }
  t.parent = (r ^ bit) | (bit << 1);
  if (t.parent >= n) t.parent = r ^ bit;
  for (int low = bit >> 1; low > 0; low >>= 1) {
    if (t.child0 < 0) t.child0 = r - low;
    if (r + low < n) {
      t.child1 = r + low;
      break;
    }
  }
  return t;
}

Node tree(int n, int r, int which) {
  if (which == 0) return btree(n, r);
  auto map = [&](int x) { return x < 0 ? -1 : (n % 2 ? (x + 1) % n : n - 1 - x); };
  int me = n % 2 ? (r - 1 + n) % n : n - 1 - r;
  Node t = btree(n, me);
  Node m{map(t.parent), map(t.child0), map(t.child1)};
  // Keep the lower-ranked child first: reductions then join adjacent ranges in rank order.
  if (m.child0 >= 0 && m.child1 >= 0 && m.child0 > m.child1 && n % 2 == 0) std::swap(m.child0, m.child1);
  return m;
}

// Hops from r to the root of tree `which`.
size_t depth(int n, int r, int which) {
  size_t d = 0;
  for (int p = tree(n, r, which).parent; p >= 0; p = tree(n, p, which).parent) ++d;
  return d;
}

void up(Schedule& s, const Node& t, size_t off, size_t len) {
  int kids[2] = {t.child0, t.child1};
  bool haveAcc = false;
  int left = (kids[0] >= 0) + (kids[1] >= 0);
  for (int k : kids) {
    if (k < 0) continue;
    bool last = --left == 0;
    Buf src = haveAcc ? Buf::kOutput : Buf::kInput;
    if (last && t.parent >= 0)
      s.push_back(Step{Prim::kRecvReduceSend, t.parent, k, src, off, off, len});
    else
      s.push_back(Step{Prim::kRecvReduceCopy, -1, k, src, off, off, len, last});
    haveAcc = true;
  }
  if (!haveAcc && t.parent >= 0) s.push_back(Step{Prim::kSend, t.parent, -1, Buf::kInput, off, off, len});
  if (!haveAcc && t.parent < 0) s.push_back(Step{Prim::kCopy, -1, -1, Buf::kInput, off, off, len, true});
}

void down(Schedule& s, const Node& t, size_t off, size_t len) {
  int kids[2] = {t.child0, t.child1};
  bool first = true;
  for (int k : kids) {
    if (k < 0) continue;
    if (first && t.parent >= 0)
      s.push_back(Step{Prim::kRecvCopySend, k, t.parent, Buf::kOutput, off, off, len});
    else
      s.push_back(Step{Prim::kSend, k, -1, Buf::kOutput, off, off, len});
    first = false;
  }
  if (first && t.parent >= 0) s.push_back(Step{Prim::kRecv, -1, t.parent, Buf::kOutput, off, off, len});
}

}  // namespace

TreeNode doubleBinaryTree(int n, int r, int which) {
  Node t = tree(n, r, which);
  return TreeNode{t.parent, t.child0, t.child1};
}

Schedule treeAllReduce(int n, int r, size_t count, size_t chunkElems) {
  if (count == 0) return {};
  if (n == 1) return {Step{Prim::kCopy, -1, -1, Buf::kInput, 0, 0, count, true}};
  Node trees[2] = {tree(n, r, 0), tree(n, r, 1)};
  size_t half[2] = {count - count / 2, count / 2};
  size_t base[2] = {0, count - count / 2};
  size_t chunk = std::max<size_t>(1, chunkElems / 2);
  // Rounds: in round k a rank takes chunk k - up[t] up tree t and chunk k - down[t] down it,
  // with offsets that grow by kSlack rounds per hop along the way data flows (from the leaves up,
  // then from the root down). Every chunk a rank waits for was then sent a round earlier by its
  // sender, so a rank never waits for a neighbour's round trip, nor for a chain of waits that runs
  // through the other tree (ranks that took both trees' chunks in the same round did: 5x slower in
  // coll-sim on an 8-GPU node). The slack is bounded by the FIFO: a connection can carry a chunk
  // of each tree per round, and senders run up to kSlack rounds ahead. coll-sim finds deadlocks
  // with a slack of 2 on FIFOs of 2 slots, and of 3 on the default 8; 1 finishes on any
  // (tests/unit/test_sim.cc).
  constexpr size_t kSlack = 1;
  size_t height = 1;  // bounds every rank's depth: each hop up at least doubles r's lowest set bit
  for (int m = 1; m < n; m <<= 1) ++height;
  size_t upOff[2], downOff[2];
  for (int t = 0; t < 2; ++t) {
    size_t d = depth(n, r, t);
    upOff[t] = kSlack * (height - d);
    downOff[t] = kSlack * (height + d);
  }
  size_t chunks = (half[0] + chunk - 1) / chunk;
  auto lenOf = [&](int t, size_t k, size_t off) {
    if (k < off || k - off >= chunks) return size_t(0);
    size_t at = (k - off) * chunk;
    return at < half[t] ? std::min(chunk, half[t] - at) : 0;
  };
  Schedule s;
  for (size_t k = 0; k < chunks + 2 * kSlack * height; ++k) {
    for (int t = 0; t < 2; ++t)
      if (size_t len = lenOf(t, k, upOff[t])) up(s, trees[t], base[t] + (k - upOff[t]) * chunk, len);
    for (int t = 0; t < 2; ++t)
      if (size_t len = lenOf(t, k, downOff[t])) down(s, trees[t], base[t] + (k - downOff[t]) * chunk, len);
  }
  return s;
}

}  // namespace coll::algorithms
