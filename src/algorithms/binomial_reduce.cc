// Binomial-tree reduce (small messages).
//
// How it works: ranks are numbered relative to the root (v = r - root mod n). For j = 0, 1, ...:
// a rank with bit j set sends its partial result to v - 2^j and is done; otherwise it receives
// the partial result of v + 2^j (if that rank exists) and reduces it into its own. The subtree
// of v covers relative ranks [v, v + 2^j), so each reduction joins adjacent ranges. The partial
// result lives in scratch (a non-root's recvbuff may be NULL) and in the output on the root.
// Bytes sent per rank: size (the root sends nothing). Latency: ceil(log2 n) steps.
#include "algorithms/schedule.h"

namespace coll::algorithms {

Schedule binomialReduce(int n, int r, int root, size_t count) {
  if (count == 0) return {};
  if (n == 1) return {Step{Prim::kCopy, -1, -1, Buf::kInput, 0, 0, count, true}};
  int v = (r - root + n) % n;
  auto rank = [&](int rel) { return (rel + root) % n; };
  Buf acc = v == 0 ? Buf::kOutput : Buf::kScratch;
  bool haveAcc = false;  // false: the partial result is still just the input
  int lastChild = 0;
  for (int mask = 1; mask < n && !(v & mask); mask <<= 1)
    if (v + mask < n) lastChild = mask;
  Schedule s;
  for (int mask = 1; mask < n; mask <<= 1) {
    if (v & mask) {
      Step up{Prim::kSend, rank(v - mask), -1, haveAcc ? acc : Buf::kInput, 0, 0, count};
      s.push_back(up);
      return s;
    }
    if (v + mask >= n) continue;
    Step st{Prim::kRecvReduceCopy, -1, rank(v + mask), haveAcc ? acc : Buf::kInput, 0, 0, count};
    st.dst = acc;
    st.final = v == 0 && mask == lastChild;
    s.push_back(st);
    haveAcc = true;
  }
  return s;  // the root
}

}  // namespace coll::algorithms
