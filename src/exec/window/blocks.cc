// What every collective on windows shares: the block of the vector each rank handles, and the
// reduction of one range of every rank's input into every output that needs it.
#include <algorithm>
#include <cstring>

#include "exec/window/window.h"
#include "kernels/cpu/reduce.h"

namespace coll::exec::window {

void blockOf(size_t n, size_t elem, int nranks, int r, size_t* begin, size_t* end) {
  size_t line = std::max<size_t>(1, 64 / elem);
  size_t ranks = static_cast<size_t>(nranks);
  size_t per = (n + ranks - 1) / ranks;
  per = (per + line - 1) / line * line;
  *begin = std::min(n, per * static_cast<size_t>(r));
  *end = std::min(n, *begin + per);
}

namespace {
// The part of a range reduced at once: read from every input, written to every output from the
// core's first-level cache (most x86 cores have 32-48 KiB of it).
constexpr size_t kChunkBytes = 16 << 10;
}  // namespace

void reduceInto(const char* const* srcs, size_t srcShift, char* const* dsts, size_t ndst, size_t begin, size_t end,
                collDataType_t type, collRedOp_t op, int nranks) {
  size_t elem = kernels::typeSize(type);
  size_t step = kChunkBytes / elem;
  alignas(64) char acc[kChunkBytes];
  for (size_t i = begin; i < end; i += step) {
    size_t k = std::min(step, end - i);
    size_t off = i * elem, bytes = k * elem, in = srcShift + off;
    // Inputs are folded in rank order, whichever rank does it: the result does not depend on
    // which block a rank handles.
    if (nranks == 1)
      std::memcpy(acc, srcs[0] + in, bytes);
    else
      kernels::reduce(acc, srcs[0] + in, srcs[1] + in, k, type, op);
    for (int q = 2; q < nranks; ++q) kernels::reduce(acc, acc, srcs[q] + in, k, type, op);
    if (op == collAvg) kernels::finishAverage(acc, k, type, nranks);
    for (size_t d = 0; d < ndst; ++d)
      if (dsts[d]) std::memcpy(dsts[d] + off, acc, bytes);
  }
}

void run(const Args& a) {
  using algorithms::Collective;
  switch (a.collective) {
    case Collective::kAllReduce:
      return allReduce(a);
    case Collective::kReduceScatter:
      return reduceScatter(a);
    case Collective::kAllGather:
      return allGather(a);
    case Collective::kBroadcast:
      return broadcast(a);
    case Collective::kReduce:
      return reduce(a);
    case Collective::kAllToAll:
      return allToAll(a);
  }
}

}  // namespace coll::exec::window
