// Ring reduce-scatter.
//
// How it works: each of the nranks input blocks is cut into slices of up to chunkElems; a round
// handles one slice of every block. Rank r sends its slice of block r-1 to the next rank; for
// n-2 steps it receives the running sum of block r-1-k, adds its own and passes it on; the last
// receive brings the sum of block r, completed with its own contribution into the output.
// Bytes sent per rank: (n-1)/n x total input. Latency: n-1 steps per round.
#include <algorithm>

#include "algorithms/schedule.h"

namespace coll::algorithms {

Schedule ringReduceScatter(int n, int r, size_t recvcount, size_t chunkElems) {
  Schedule s;
  if (recvcount == 0) return s;
  if (n == 1) return {Step{Prim::kCopy, -1, -1, Buf::kInput, 0, 0, recvcount, true}};
  int next = (r + 1) % n, prev = (r + n - 1) % n;
  auto blk = [&](int b) { return static_cast<size_t>(((b % n) + n) % n) * recvcount; };
  for (size_t off = 0; off < recvcount; off += chunkElems) {
    size_t len = std::min(chunkElems, recvcount - off);
    s.push_back(Step{Prim::kSend, next, -1, Buf::kInput, blk(r - 1) + off, 0, len, false});
    for (int k = 1; k <= n - 2; ++k)
      s.push_back(Step{Prim::kRecvReduceSend, next, prev, Buf::kInput, blk(r - 1 - k) + off, 0, len, false});
    s.push_back(Step{Prim::kRecvReduceCopy, -1, prev, Buf::kInput, blk(r) + off, off, len, true});
  }
  return s;
}

}  // namespace coll::algorithms
