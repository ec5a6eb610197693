// Picks the interpreter's instantiation for an operation's type and op, in both builds: the host
// build calls it with HostGroup, the CUDA kernel with CtaGroup.
#pragma once

#include "coll/coll.h"
#include "exec/cuda/interpreter.h"

namespace coll::exec::dev {

template <typename T, typename G>
COLL_HD_FN bool runWithOp(const DevWork& w, G g) {
  int op = w.premul ? collSum : w.op;  // PreMulSum scales its inputs, then sums
  switch (op) {
    case collSum:
    case collAvg:  // sums; the final steps divide
      return Channel<T, Op::kSum, G>(w, g).run();
    case collProd:
      return Channel<T, Op::kProd, G>(w, g).run();
    case collMax:
      return Channel<T, Op::kMax, G>(w, g).run();
    case collMin:
      return Channel<T, Op::kMin, G>(w, g).run();
    default:
      break;
  }
  if constexpr (std::is_integral<T>::value) {
    if (op == collBand) return Channel<T, Op::kBand, G>(w, g).run();
    if (op == collBor) return Channel<T, Op::kBor, G>(w, g).run();
    if (op == collBxor) return Channel<T, Op::kBxor, G>(w, g).run();
  }
  if (w.result && g.leader()) casInt(&w.result->code, DevResult::kOk, DevResult::kBadStep);
  return false;
}

/// Runs one channel of w with the group g; false with w.result written when it failed.
template <typename G>
COLL_HD_FN bool runChannel(const DevWork& w, G g) {
  switch (w.type) {
    case collInt8:
      return runWithOp<int8_t>(w, g);
    case collUint8:
      return runWithOp<uint8_t>(w, g);
    case collInt32:
      return runWithOp<int32_t>(w, g);
    case collUint32:
      return runWithOp<uint32_t>(w, g);
    case collInt64:
      return runWithOp<int64_t>(w, g);
    case collUint64:
      return runWithOp<uint64_t>(w, g);
    case collFloat16:
      return runWithOp<Half>(w, g);
    case collFloat32:
      return runWithOp<float>(w, g);
    case collFloat64:
      return runWithOp<double>(w, g);
    case collBfloat16:
      return runWithOp<Bf16>(w, g);
    default:
      if (w.result && g.leader()) casInt(&w.result->code, DevResult::kOk, DevResult::kBadStep);
      return false;
  }
}

}  // namespace coll::exec::dev
