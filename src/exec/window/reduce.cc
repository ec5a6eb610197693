// Reduce on windows: rank r reduces block r of every rank's input into the root's output.
#include "kernels/cpu/reduce.h"
#include "exec/window/window.h"

namespace coll::exec::window {

void reduce(const Args& a) {
  size_t begin, end;
  blockOf(a.count, kernels::typeSize(a.type), a.nranks, a.rank, &begin, &end);
  if (begin < end)
    reduceInto(a.in.data(), 0, &a.out[static_cast<size_t>(a.root)], 1, begin, end, a.type, a.op, a.nranks);
}

}  // namespace coll::exec::window
