// A collective on symmetric windows, one channel's share, or a one-sided operation on device
// windows (dev_work.h: DevWindow), as a kernel of its own (kernel.cuh: windowKernel) and in the
// host build (dispatch.h). No FIFO and no step: the
// channel's leader arrives (raises its phase in every peer's area and waits for theirs, checking
// the call's fingerprint), the group folds the peers' buffers into the peers' buffers
// (kernels/cuda/move.h: foldMove), and the leader arrives again, so that no rank's launch ends
// while a peer still reads or writes its buffers.
//
// Why a kernel of its own, not a branch of the interpreter's: inlined there, the window path took
// the int8 max and min kernels past 128 registers, and they spilled; the interpreter kernels stay
// as they were, and a launch holds works of one kind (the executor splits a group's runs).
#pragma once

#include "exec/cuda/dev_work.h"
#include "exec/cuda/interpreter.h"

namespace coll::exec::dev {

/// The leader raises this rank's phase in every peer's area, then waits for every peer's to reach
/// it (the abort word and the timeout as any wait), and at a first arrival checks that the peer's
/// call has this call's fingerprint. DevResult::kOk, or the failure's code with the peer in the
/// high 32 bits. Leader only. (Nothing here takes an address: a variable whose address is taken
/// lives in local memory.)
COLL_HD uint64_t windowArrive(const DevWindow& win, const DevWork& w, uint64_t phase) {
  // The first phase: this rank's earlier work on the stream has completed (stream order); the
  // second: the group's barrier before it ordered every thread's moves, and a release is
  // cumulative.
  for (int p = 0; p < win.nranks; ++p) {
    storeRelaxed(&win.arriveAt[p]->print, win.print);  // the peer loads it atomically; the release publishes it
    storeRelease(&win.arriveAt[p]->phase, phase);
  }
  uint32_t* waitWord = w.result ? &w.result->recvWait : nullptr;
  for (int p = 0; p < win.nranks; ++p) {
    const uint64_t* word = &win.arrivals[p].phase;
    int code = pollUntil([word, phase] { return loadAcquire(word) >= phase; }, w.abortFlag, w.timeoutNs, waitWord,
                         static_cast<uint32_t>(p));
    uint64_t who = static_cast<uint64_t>(p) << 32;
    if (code) return who | static_cast<uint64_t>(code == 1 ? DevResult::kAborted : DevResult::kTimeout);
    // The peer's print was written before its phase, which the acquire above saw. Only at the
    // first arrival: at the second, a peer that is done may have written its next call's print
    // already (it cannot pass that call's first arrival without this rank).
    if ((phase & 1) && loadAcquire(&win.arrivals[p].print) != win.print)
      return who | static_cast<uint64_t>(DevResult::kCallMismatch);
  }
  return DevResult::kOk;
}

/// One arrival by the group: the leader's, its failure written to the work's result; false on
/// every thread when it failed.
template <typename G>
COLL_HD bool windowSync(const DevWindow& win, const DevWork& w, uint64_t phase, int32_t step, G g) {
  bool failed = false;
  if (g.leader()) {
    uint64_t r = windowArrive(win, w, phase);
    int32_t code = static_cast<int32_t>(r & 0xffffffffu);
    failed = code != DevResult::kOk;
    if (failed && w.result && casInt(&w.result->code, DevResult::kOk, code)) {
      w.result->peer = static_cast<int32_t>(r >> 32);
      w.result->step = step;
    }
  }
  return !g.syncOr(failed);
}

/// One-sided: the leader waits until every wait word reaches its value. Every thread gets the
/// answer.
template <typename G>
COLL_HD bool windowWaits(const DevWindow& win, const DevWork& w, G g) {
  bool failed = false;
  if (g.leader()) {
    uint32_t* waitWord = w.result ? &w.result->recvWait : nullptr;
    for (int i = 0; i < win.nwaits && !failed; ++i) {
      const uint64_t* word = win.waitWord[i];
      const uint64_t value = win.waitValue[i];
      int code = pollUntil([word, value] { return loadAcquire(word) >= value; }, w.abortFlag, w.timeoutNs, waitWord,
                           static_cast<uint32_t>(win.waitPeer[i]));
      if (code) {
        failed = true;
        if (w.result &&
            casInt(&w.result->code, DevResult::kOk, code == 1 ? DevResult::kAborted : DevResult::kTimeout)) {
          w.result->peer = win.waitPeer[i];
          w.result->step = 0;
        }
      }
    }
  }
  return !g.syncOr(failed);
}

/// Runs the window work in sh.work (copied there by the caller) with group g; false with the
/// work's result written when it failed. Every thread gets the same answer.
template <typename T, Op O, typename G>
COLL_HD bool runWindow(ChannelShared& sh, G g) {
  static_assert(sizeof(DevWindow) % 8 == 0, "the window copies in words");
  groupCopy(&sh.window, sh.work.window, sizeof(DevWindow), g);
  if (g.leader()) COLL_COUNT_READS(1, 0, 0);  // host build: the window's round of descriptor reads
  const DevWork& w = sh.work;
  const DevWindow& win = sh.window;
  // The call counter: this rank's memory, written only by this channel's leader. Read again for
  // the second arrival rather than kept across the moves (ptxas kept it in local memory there).
  if (!windowSync(win, w, 2 * *win.epoch + 1, 0, g)) return false;
  COLL_NO_UNROLL
  for (int m = 0; m < win.nmoves; ++m) {
    const DevWindowMove& mv = win.moves[m];
    foldMove<T, O>(mv.src, mv.nsrc, mv.dst, mv.ndst, mv.count, g.tid(), g.size());
  }
  if (win.divide) {
    // collAvg: each result divided where it was written (the same bits in every copy), once the
    // group has written them all.
    g.sync();
    for (int m = 0; m < win.nmoves; ++m)
      for (int d = 0; d < win.moves[m].ndst; ++d) {
        char* out = win.moves[m].dst[d];
        moveElems<T, O, false, true>(nullptr, out, out, nullptr, win.moves[m].count, kMoveDivide, T{}, w.nranks,
                                     g.tid(), g.size());
      }
  }
  g.sync();  // every thread's stores are made before the leader's release
  const uint64_t epoch = *win.epoch;
  if (!windowSync(win, w, 2 * epoch + 2, 1, g)) return false;
  if (g.leader()) *win.epoch = epoch + 1;
  return true;
}

/// Runs the one-sided work in sh.work (DevWindow with nranks 0; copied there by the caller) with
/// group g: the waits, the put's copy (bytes), then the signal. A kernel of its own
/// (oneSidedKernel): bytes need no type or op, and the waits' code stays out of the collectives'
/// kernels. false with the work's result written when a wait failed.
template <typename G>
COLL_HD bool runOneSided(ChannelShared& sh, G g) {
  groupCopy(&sh.window, sh.work.window, sizeof(DevWindow), g);
  if (g.leader()) COLL_COUNT_READS(1, 0, 0);
  const DevWindow& win = sh.window;
  if (win.nwaits > 0 && !windowWaits(win, sh.work, g)) return false;
  for (int m = 0; m < win.nmoves; ++m)
    copyBytes<1>(win.moves[m].src[0], win.moves[m].dst[0], nullptr, win.moves[m].count, g.tid(), g.size());
  g.sync();  // every thread's stores are made before the leader's release
  if (win.signal && g.leader()) addRelease(win.signal, 1);
  return true;
}

}  // namespace coll::exec::dev
