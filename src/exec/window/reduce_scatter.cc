// Reduce-scatter on windows: rank r reduces block r (count elements at r x count) of every rank's
// input into its own output. Only inputs are read remotely; NCCL's in place (the output at block
// r of the input) is safe because no other rank reads block r of anyone.
#include "exec/window/window.h"
#include "kernels/cpu/reduce.h"

namespace coll::exec::window {

void reduceScatter(const Args& a) {
  size_t shift = static_cast<size_t>(a.rank) * a.count * kernels::typeSize(a.type);
  reduceInto(a.in.data(), shift, &a.out[static_cast<size_t>(a.rank)], 1, 0, a.count, a.type, a.op, a.nranks);
}

}  // namespace coll::exec::window
