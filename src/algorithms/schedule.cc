#include "algorithms/schedule.h"

namespace coll::algorithms {

void peersOf(const Schedule& s, std::vector<int>* sendPeers, std::vector<int>* recvPeers) {
  for (const Step& st : s) {
    if (st.sendPeer >= 0) sendPeers->push_back(st.sendPeer);
    if (st.recvPeer >= 0) recvPeers->push_back(st.recvPeer);
  }
}

}  // namespace coll::algorithms
