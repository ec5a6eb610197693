#include "algorithms/rank_order.h"

namespace coll::algorithms {
namespace {

bool readsSrc(Prim p) { return p != Prim::kRecv && p != Prim::kRecvCopySend; }
bool writesDst(Prim p) { return p != Prim::kSend && p != Prim::kRecvReduceSend; }

// Moves an offset inside position block b to the same offset inside rank block order[b].
size_t moveBlock(size_t off, const std::vector<int>& order, size_t blockElems) {
  size_t b = off / blockElems;
  return static_cast<size_t>(order[b]) * blockElems + off % blockElems;
}

}  // namespace

bool reordered(Algorithm a, Collective c) {
  if (c == Collective::kAllToAll) return false;  // every pair talks: no neighbours to choose
  if (c == Collective::kReduceScatter || c == Collective::kAllGather) return a == Algorithm::kRing;
  return true;
}

bool isPermutation(const std::vector<int>& order, int n) {
  if (static_cast<int>(order.size()) != n) return false;
  std::vector<char> seen(order.size(), 0);
  for (int r : order) {
    if (r < 0 || r >= n || seen[r]) return false;
    seen[r] = 1;
  }
  return true;
}

Schedule toRanks(Schedule s, const std::vector<int>& order, Collective c, size_t blockElems) {
  // The buffer whose blocks belong to ranks: reduce-scatter's input, all-gather's output.
  bool blocks = blockElems > 0 && (c == Collective::kReduceScatter || c == Collective::kAllGather);
  Buf blocked = c == Collective::kReduceScatter ? Buf::kInput : Buf::kOutput;
  for (Step& st : s) {
    if (st.sendPeer >= 0) st.sendPeer = order[st.sendPeer];
    if (st.recvPeer >= 0) st.recvPeer = order[st.recvPeer];
    if (!blocks) continue;
    if (st.src == blocked && readsSrc(st.prim)) st.srcOff = moveBlock(st.srcOff, order, blockElems);
    if (st.dst == blocked && writesDst(st.prim)) st.dstOff = moveBlock(st.dstOff, order, blockElems);
  }
  return s;
}

}  // namespace coll::algorithms
