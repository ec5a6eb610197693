// Hierarchical all-reduce, for several ranks per host on several hosts.
//
// How it works: with L ranks per host (ranks h*L .. h*L+L-1 on host h) and H hosts, the data is
// cut into rounds of L blocks. Per round: (1) a ring reduce-scatter among the L ranks of each host
// leaves local rank l with its host's sum of block l; (2) a ring all-reduce among the H ranks
// with local rank l (one per host) completes block l across hosts; (3) a ring all-gather among
// the host's L ranks gives every rank every block. Only step (2) crosses hosts, and the L ranks of
// a host run it at the same time on different connections, each with 1/L of the data: the
// network carries 2 (H-1)/H x size per host, spread over L connections, instead of the flat
// ring's 2 (n-1)/n x size over one.
// Bytes sent per rank: 2 (L-1)/L x size inside the host, 2 (H-1)/(H L) x size across hosts.
// Latency: 2 (L-1) + 2 (H-1) steps per round. Ranks must be numbered host by host (as launchers
// do); the tuner only offers this algorithm when they are.
#include <algorithm>

#include "algorithms/schedule.h"

namespace coll::algorithms {
namespace {

// Balanced cut of [base, base+len) into m blocks.
struct Cut {
  size_t base, len;
  int m;
  size_t off(int b) const {
    b = ((b % m) + m) % m;
    size_t q = len / m, rem = len % m;
    return base + q * b + std::min<size_t>(b, rem);
  }
  size_t cnt(int b) const {
    b = ((b % m) + m) % m;
    return len / m + (static_cast<size_t>(b) < len % m ? 1 : 0);
  }
};

}  // namespace

Schedule hierAllReduce(int n, int r, int perHost, size_t count, size_t chunkElems) {
  if (perHost <= 1 || perHost >= n || n % perHost != 0) return ringAllReduce(n, r, count, chunkElems);
  Schedule s;
  if (count == 0) return s;
  int L = perHost, H = n / L, h = r / L, l = r % L;
  auto local = [&](int j) { return h * L + ((j % L) + L) % L; };
  auto host = [&](int j) { return (((j % H) + H) % H) * L + l; };
  int nextL = local(l + 1), prevL = local(l - 1), nextH = host(h + 1), prevH = host(h - 1);
  size_t roundElems = std::max<size_t>(1, chunkElems) * static_cast<size_t>(L);
  for (size_t base = 0; base < count; base += roundElems) {
    Cut blocks{base, std::min(roundElems, count - base), L};
    auto add = [&](Prim p, int to, int from, Buf src, size_t off, size_t cnt, bool final = false) {
      if (cnt) s.push_back(Step{p, to, from, src, off, off, cnt, final});
    };
    // (1) Reduce-scatter inside the host: block l ends, summed over the host, in the output.
    if (L > 1) {
      add(Prim::kSend, nextL, -1, Buf::kInput, blocks.off(l - 1), blocks.cnt(l - 1));
      for (int k = 1; k <= L - 2; ++k)
        add(Prim::kRecvReduceSend, nextL, prevL, Buf::kInput, blocks.off(l - 1 - k), blocks.cnt(l - 1 - k));
      add(Prim::kRecvReduceCopy, -1, prevL, Buf::kInput, blocks.off(l), blocks.cnt(l));
    }
    // (2) Ring all-reduce of block l among the hosts, in place in the output.
    Cut sub{blocks.off(l), blocks.cnt(l), H};
    add(Prim::kSend, nextH, -1, Buf::kOutput, sub.off(h - 1), sub.cnt(h - 1));
    for (int k = 1; k <= H - 2; ++k)
      add(Prim::kRecvReduceSend, nextH, prevH, Buf::kOutput, sub.off(h - 1 - k), sub.cnt(h - 1 - k));
    add(Prim::kRecvReduceCopySend, nextH, prevH, Buf::kOutput, sub.off(h), sub.cnt(h), true);
    for (int k = 1; k <= H - 2; ++k)
      add(Prim::kRecvCopySend, nextH, prevH, Buf::kOutput, sub.off(h - k), sub.cnt(h - k));
    add(Prim::kRecv, -1, prevH, Buf::kOutput, sub.off(h + 1), sub.cnt(h + 1));
    // (3) All-gather inside the host.
    if (L > 1) {
      add(Prim::kSend, nextL, -1, Buf::kOutput, blocks.off(l), blocks.cnt(l));
      for (int k = 1; k <= L - 2; ++k)
        add(Prim::kRecvCopySend, nextL, prevL, Buf::kOutput, blocks.off(l - k), blocks.cnt(l - k));
      add(Prim::kRecv, -1, prevL, Buf::kOutput, blocks.off(l + 1), blocks.cnt(l + 1));
    }
  }
  return s;
}

}  // namespace coll::algorithms
