// Pipelined chain reduce.
//
// How it works: ranks form a chain root+1, root+2, ..., root-1, root. The first sends its input;
// each middle rank adds its own input to what it receives and forwards the partial sum piece by
// piece; the root adds its input last and writes the result. Bytes sent per rank: size (the root
// sends nothing). Latency: n-1 hops, once.
#include "algorithms/schedule.h"

namespace coll::algorithms {

Schedule chainReduce(int n, int r, int root, size_t count) {
  if (count == 0) return {};
  if (n == 1) return {Step{Prim::kCopy, -1, -1, Buf::kInput, 0, 0, count, true}};
  int pos = (r - root - 1 + n) % n;  // root is last, at n-1
  int next = (r + 1) % n, prev = (r + n - 1) % n;
  if (pos == 0) return {Step{Prim::kSend, next, -1, Buf::kInput, 0, 0, count, false}};
  if (pos == n - 1) return {Step{Prim::kRecvReduceCopy, -1, prev, Buf::kInput, 0, 0, count, true}};
  return {Step{Prim::kRecvReduceSend, next, prev, Buf::kInput, 0, 0, count, false}};
}

}  // namespace coll::algorithms
