#include "algorithms/channels.h"

#include <algorithm>

namespace coll::algorithms {
namespace {

// What each primitive reads from src and writes to dst (schedule.h); kReduceBlocks reads the
// scratch's blocks from offset 0, whatever srcOff says.
bool readsSrc(Prim p) { return p != Prim::kRecv && p != Prim::kRecvCopySend; }
bool writesDst(Prim p) { return p != Prim::kSend && p != Prim::kRecvReduceSend; }

}  // namespace

int channelsFor(size_t bytes, int maxChannels, size_t minBytes) {
  int most = std::max(1, std::min(maxChannels, kMaxChannels));
  if (minBytes == 0) return most;
  size_t fit = bytes / minBytes;
  return static_cast<int>(std::max<size_t>(1, std::min<size_t>(fit, static_cast<size_t>(most))));
}

Slice channelSlice(size_t count, int c, int n, size_t alignElems) {
  if (n <= 1) return c == 0 ? Slice{0, count} : Slice{count, 0};
  size_t a = std::max<size_t>(1, alignElems);
  size_t per = (count + static_cast<size_t>(n) - 1) / static_cast<size_t>(n);
  per = (per + a - 1) / a * a;
  Slice s;
  s.lo = std::min(count, per * static_cast<size_t>(c));
  s.count = std::min(per, count - s.lo);
  return s;
}

bool inputIsBlocked(Collective c) { return c == Collective::kReduceScatter || c == Collective::kAllToAll; }
bool outputIsBlocked(Collective c) { return c == Collective::kAllGather || c == Collective::kAllToAll; }

bool slicesAcrossChannels(Algorithm a, Collective c) {
  if (!inputIsBlocked(c) && !outputIsBlocked(c)) return true;
  return a == Algorithm::kRing || a == Algorithm::kPairwise;
}

bool spreadOverBlocks(Schedule* s, Collective c, size_t slice, size_t block) {
  if (slice == block) return true;  // one channel: the schedule's own addresses
  // One range of one buffer: false when it leaves its slice of a block.
  auto move = [&](Buf b, size_t* off, size_t len) {
    if (b == Buf::kScratch) return true;
    bool blocked = b == Buf::kInput ? inputIsBlocked(c) : outputIsBlocked(c);
    if (!blocked) return *off + len <= slice;
    if (slice == 0) return len == 0;
    size_t index = *off / slice, within = *off % slice;
    if (within + len > slice) return false;
    *off = index * block + within;
    return true;
  };
  for (Step& st : *s) {
    if (st.prim == Prim::kReduceBlocks && st.src != Buf::kScratch) return false;
    bool pair = st.prim == Prim::kSendRecv || st.prim == Prim::kSendRecvReduce;
    if (readsSrc(st.prim) && st.prim != Prim::kReduceBlocks && !move(st.src, &st.srcOff, st.count)) return false;
    if (writesDst(st.prim) && !move(st.dst, &st.dstOff, pair ? st.recvElems() : st.count)) return false;
  }
  return true;
}

}  // namespace coll::algorithms
