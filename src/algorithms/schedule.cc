#include "algorithms/schedule.h"

#include <algorithm>

namespace coll::algorithms {

size_t scratchElems(const Schedule& s) {
  size_t n = 0;
  for (const Step& st : s)
    if (st.dst == Buf::kScratch) n = std::max(n, st.dstOff + st.count);
  return n;
}

void peersOf(const Schedule& s, std::vector<int>* sendPeers, std::vector<int>* recvPeers) {
  for (const Step& st : s) {
    if (st.sendPeer >= 0) sendPeers->push_back(st.sendPeer);
    if (st.recvPeer >= 0) recvPeers->push_back(st.recvPeer);
  }
}

}  // namespace coll::algorithms
