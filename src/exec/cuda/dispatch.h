// Picks the interpreter's instantiation for an operation's type and op. The host build dispatches
// here for each work (runChannel, with HostGroup: host_team.h); on the GPU the host picks one
// kernel per launch from kernelOp (kernel.cuh), so the device code has no dispatch.
#pragma once

#include "coll/coll.h"
#include "exec/cuda/interpreter.h"
#include "exec/cuda/window_run.h"

namespace coll::exec::dev {

/// One (type, op) instantiation of a channel's run, for the host build's dispatch: a call of its
/// own, which keeps the dispatching function small (the GPU has a kernel per instantiation).
template <typename T, Op O, typename G>
COLL_NOINLINE COLL_HD_FN bool runTyped(ChannelShared& sh, G g) {
  // The GPU's window and one-sided kernels (kernel.cuh, launch.cu). The window is read here from
  // the launch's block, as the host build reads every descriptor.
  if (sh.work.window) return sh.work.window->nranks > 0 ? runWindow<T, O>(sh, g) : runOneSided(sh, g);
  return Channel<T, O, G>(sh, g).run();
}

/// The reduction a work's kernel applies (one kernel per element type and kernel op): collAvg and
/// PreMulSum reduce as sums (the final steps divide; the inputs are scaled as they are read).
/// -1 for an op no kernel has.
COLL_HD int kernelOp(int type, int op, bool premul) {
  if (premul) return static_cast<int>(Op::kSum);
  switch (op) {
    case collSum:
    case collAvg:
      return static_cast<int>(Op::kSum);
    case collProd:
      return static_cast<int>(Op::kProd);
    case collMax:
      return static_cast<int>(Op::kMax);
    case collMin:
      return static_cast<int>(Op::kMin);
    default:
      break;
  }
  bool integral = type == collInt8 || type == collUint8 || type == collInt32 || type == collUint32 ||
                  type == collInt64 || type == collUint64;
  if (integral && op == collBand) return static_cast<int>(Op::kBand);
  if (integral && op == collBor) return static_cast<int>(Op::kBor);
  if (integral && op == collBxor) return static_cast<int>(Op::kBxor);
  return -1;
}

template <typename G>
COLL_HD bool badWork(const DevWork& w, G g) {
  if (w.result && g.leader()) casInt(&w.result->code, DevResult::kOk, DevResult::kBadStep);
  return false;
}

template <typename T, typename G>
COLL_HD_FN bool runWithOp(ChannelShared& sh, G g) {
  // The kernel op the GPU launch picks too (kernelOp): one mapping of collRedOp_t for both builds.
  switch (kernelOp(sh.work.type, sh.work.op, sh.work.premul != 0)) {
    case static_cast<int>(Op::kSum):
      return runTyped<T, Op::kSum>(sh, g);
    case static_cast<int>(Op::kProd):
      return runTyped<T, Op::kProd>(sh, g);
    case static_cast<int>(Op::kMax):
      return runTyped<T, Op::kMax>(sh, g);
    case static_cast<int>(Op::kMin):
      return runTyped<T, Op::kMin>(sh, g);
    default:
      break;
  }
  if constexpr (std::is_integral<T>::value) {
    switch (kernelOp(sh.work.type, sh.work.op, sh.work.premul != 0)) {
      case static_cast<int>(Op::kBand):
        return runTyped<T, Op::kBand>(sh, g);
      case static_cast<int>(Op::kBor):
        return runTyped<T, Op::kBor>(sh, g);
      case static_cast<int>(Op::kBxor):
        return runTyped<T, Op::kBxor>(sh, g);
      default:
        break;
    }
  }
  return badWork(sh.work, g);
}

/// Runs one channel of w with the group g, whose threads share sh (the work is copied there
/// first); false with w.result written when it failed. Every thread gets the same answer.
template <typename G>
COLL_HD_FN bool runChannel(const DevWork& w, ChannelShared& sh, G g) {
  static_assert(sizeof(DevWork) % 8 == 0, "the work copies in words");
  groupCopy(&sh.work, &w, sizeof(DevWork), g);
  if (g.leader()) COLL_COUNT_READS(1, 0, 0);  // host build: the work's round of descriptor reads
  switch (sh.work.type) {
    case collInt8:
      return runWithOp<int8_t>(sh, g);
    case collUint8:
      return runWithOp<uint8_t>(sh, g);
    case collInt32:
      return runWithOp<int32_t>(sh, g);
    case collUint32:
      return runWithOp<uint32_t>(sh, g);
    case collInt64:
      return runWithOp<int64_t>(sh, g);
    case collUint64:
      return runWithOp<uint64_t>(sh, g);
    case collFloat16:
      return runWithOp<Half>(sh, g);
    case collFloat32:
      return runWithOp<float>(sh, g);
    case collFloat64:
      return runWithOp<double>(sh, g);
    case collBfloat16:
      return runWithOp<Bf16>(sh, g);
    case collFloat8e4m3:
      return runWithOp<Fp8E4m3>(sh, g);
    case collFloat8e5m2:
      return runWithOp<Fp8E5m2>(sh, g);
    default:
      return badWork(sh.work, g);
  }
}

}  // namespace coll::exec::dev
