// All-gather on windows: rank r writes its input into block r of every rank's output (its own
// included, unless in place already put it there). Only outputs are reached remotely.
#include <cstring>

#include "exec/window/window.h"
#include "kernels/cpu/reduce.h"

namespace coll::exec::window {

void allGather(const Args& a) {
  size_t bytes = a.count * kernels::typeSize(a.type);
  const char* mine = a.in[static_cast<size_t>(a.rank)];
  // Starting with the next rank spreads the ranks' first writes over different peers.
  for (int i = 0; i < a.nranks; ++i) {
    char* to = a.out[static_cast<size_t>((a.rank + i) % a.nranks)] + static_cast<size_t>(a.rank) * bytes;
    if (to != mine) std::memcpy(to, mine, bytes);
  }
}

}  // namespace coll::exec::window
