// Pipelined chain broadcast.
//
// How it works: ranks form a chain root, root+1, ..., root-1. The root sends its data to the next
// rank; every middle rank stores what it receives and forwards it at once, piece by piece, so all
// links of the chain carry data at the same time. The chain has no cycle, so no chunking is
// needed. Bytes sent per rank: size (the last rank sends nothing). Latency: n-1 hops, once.
#include "algorithms/schedule.h"

namespace coll::algorithms {

Schedule chainBroadcast(int n, int r, int root, size_t count) {
  if (count == 0) return {};
  int pos = (r - root + n) % n;
  int next = (r + 1) % n, prev = (r + n - 1) % n;
  if (n == 1) return {Step{Prim::kCopy, -1, -1, Buf::kInput, 0, 0, count, false}};
  if (pos == 0)
    return {Step{Prim::kCopy, -1, -1, Buf::kInput, 0, 0, count, false},
            Step{Prim::kSend, next, -1, Buf::kInput, 0, 0, count, false}};
  if (pos == n - 1) return {Step{Prim::kRecv, -1, prev, Buf::kOutput, 0, 0, count, false}};
  return {Step{Prim::kRecvCopySend, next, prev, Buf::kOutput, 0, 0, count, false}};
}

}  // namespace coll::algorithms
