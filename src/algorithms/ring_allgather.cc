// Ring all-gather.
//
// How it works: the input is cut into slices of up to chunkElems; a round handles one slice of
// every rank's block. Rank r copies its slice into output block r and sends it to the next rank;
// for n-2 steps it receives block r-k from the previous rank, stores it and passes it on; the last
// receive brings block r+1. Bytes sent per rank: (n-1)/n x output. Latency: n-1 steps per round.
#include <algorithm>

#include "algorithms/schedule.h"

namespace coll::algorithms {

Schedule ringAllGather(int n, int r, size_t sendcount, size_t chunkElems) {
  Schedule s;
  if (sendcount == 0) return s;
  auto blk = [&](int b) { return static_cast<size_t>(((b % n) + n) % n) * sendcount; };
  if (n == 1) return {Step{Prim::kCopy, -1, -1, Buf::kInput, 0, 0, sendcount, false}};
  int next = (r + 1) % n, prev = (r + n - 1) % n;
  for (size_t off = 0; off < sendcount; off += chunkElems) {
    size_t len = std::min(chunkElems, sendcount - off);
    s.push_back(Step{Prim::kCopy, -1, -1, Buf::kInput, off, blk(r) + off, len, false});
    s.push_back(Step{Prim::kSend, next, -1, Buf::kInput, off, 0, len, false});
    for (int k = 1; k <= n - 2; ++k)
      s.push_back(Step{Prim::kRecvCopySend, next, prev, Buf::kOutput, 0, blk(r - k) + off, len, false});
    s.push_back(Step{Prim::kRecv, -1, prev, Buf::kOutput, 0, blk(r + 1) + off, len, false});
  }
  return s;
}

}  // namespace coll::algorithms
