// Ring all-reduce.
//
// How it works: the data is cut into rounds of nranks chunks (chunkElems each, the last round
// smaller). In a round, each rank sends chunk r-1 to its next rank, then for n-2 steps receives a
// chunk from its previous rank, adds its own contribution and passes it on; the last receive
// (chunk r) completes that chunk's sum, which is written to the output and passed on again; n-2
// more steps forward the finished chunks, and a final receive completes the output.
// Bytes sent per rank: 2 (n-1)/n x size. Latency: 2 (n-1) steps per round.
#include <algorithm>

#include "algorithms/schedule.h"

namespace coll::algorithms {

Schedule ringAllReduce(int n, int r, size_t count, size_t chunkElems) {
  Schedule s;
  if (count == 0) return s;
  if (n == 1) return {Step{Prim::kCopy, -1, -1, Buf::kInput, 0, 0, count, true}};
  int next = (r + 1) % n, prev = (r + n - 1) % n;
  size_t roundElems = chunkElems * static_cast<size_t>(n);
  for (size_t base = 0; base < count; base += roundElems) {
    size_t len = std::min(roundElems, count - base);
    size_t block = (len + n - 1) / n;
    auto off = [&](int b) { return base + std::min(len, static_cast<size_t>((b % n + n) % n) * block); };
    auto cnt = [&](int b) {
      size_t start = std::min(len, static_cast<size_t>((b % n + n) % n) * block);
      return std::min(block, len - start);
    };
    auto step = [&](Prim p, int b, bool final) {
      int bb = ((b % n) + n) % n;
      s.push_back(Step{p, next, prev, Buf::kInput, off(bb), off(bb), cnt(bb), final});
    };
    step(Prim::kSend, r - 1, false);
    s.back().recvPeer = -1;
    for (int k = 1; k <= n - 2; ++k) step(Prim::kRecvReduceSend, r - 1 - k, false);
    step(Prim::kRecvReduceCopySend, r, true);
    for (int k = 1; k <= n - 2; ++k) step(Prim::kRecvCopySend, r - k, false);
    step(Prim::kRecv, r + 1, false);
    s.back().sendPeer = -1;
  }
  return s;
}

Schedule ringAllReduceAmong(const std::vector<int>& ranks, int index, size_t base, size_t count, size_t chunkElems) {
  Schedule s = ringAllReduce(static_cast<int>(ranks.size()), index, count, chunkElems);
  auto member = [&](int i) { return i < 0 ? -1 : ranks[static_cast<size_t>(i)]; };
  for (Step& st : s) {
    st.sendPeer = member(st.sendPeer);
    st.recvPeer = member(st.recvPeer);
    st.src = Buf::kOutput;  // the data is already in the output: in place
    st.srcOff += base;
    st.dstOff += base;
  }
  return s;
}

}  // namespace coll::algorithms
