// Broadcast on windows: rank r copies block r of the root's input into every rank's output, so
// that the ranks share the copies instead of the root making them all.
#include <cstring>

#include "exec/window/window.h"
#include "kernels/cpu/reduce.h"

namespace coll::exec::window {

void broadcast(const Args& a) {
  size_t elem = kernels::typeSize(a.type), begin, end;
  blockOf(a.count, elem, a.nranks, a.rank, &begin, &end);
  if (begin == end) return;
  const char* from = a.in[static_cast<size_t>(a.root)] + begin * elem;
  for (int i = 0; i < a.nranks; ++i) {
    char* to = a.out[static_cast<size_t>((a.rank + i) % a.nranks)] + begin * elem;
    if (to != from) std::memcpy(to, from, (end - begin) * elem);
  }
}

}  // namespace coll::exec::window
