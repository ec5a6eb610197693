// All-to-all on windows: rank r writes block p of its input into block r of rank p's output.
// Only outputs are reached remotely; in place is not taken here (core sends it by the FIFOs,
// which stage the input), since a rank's output block would be another rank's unread input.
#include <cstring>

#include "exec/window/window.h"
#include "kernels/cpu/reduce.h"

namespace coll::exec::window {

void allToAll(const Args& a) {
  size_t bytes = a.count * kernels::typeSize(a.type);
  const char* mine = a.in[static_cast<size_t>(a.rank)];
  for (int i = 0; i < a.nranks; ++i) {
    size_t p = static_cast<size_t>((a.rank + i) % a.nranks);
    std::memcpy(a.out[p] + static_cast<size_t>(a.rank) * bytes, mine + p * bytes, bytes);
  }
}

}  // namespace coll::exec::window
