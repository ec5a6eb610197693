// The device executor's step interpreter: one channel of one operation, run by a thread group
// (a CTA on the GPU, a team of CPU threads in the host build; portable.h, host_team.h). It walks
// the channel's steps in order and moves each through the connections' FIFO slots in pieces, as
// the CPU executor does (exec/cpu/cpu_executor.cc), with the two slot protocols of dev_work.h.
//
// Where things live while it runs (why: the launch's descriptors are in pinned host memory, one
// PCIe round trip, about 1 us, per read):
//  - the work, and its steps with their ports kStepBatch at a time, are copied into ChannelShared
//    (shared memory) by the whole group in one round of reads each;
//  - every thread keeps the two FIFO cursors in registers (it computes the same values as every
//    other thread), and the leader writes them back to the pinned ports and to the batch's later
//    steps on the same ports when the step ends;
//  - so a piece reads only what it waits for (head or tail, or the LL flags) and, for Simple,
//    the received slot's size word.
//
// One piece, Simple: the receive side's wait runs on thread 0 and the send side's on the first
// thread of the second warp, side by side; one barrier that also agrees on failure (syncOr); the
// copy (kernels/cuda/move.h: 16-byte packs, kUnroll in flight per thread and source); one barrier; then
// thread 0 frees the received slot (a release store of tail) and the sender thread publishes the
// outgoing one (its size, then a release store of head). No fence besides those releases: a
// release after the barrier orders the other threads' stores it observed through the barrier
// (PTX's release is cumulative). LL: every thread waits for the flags of its own lines and stores
// its lines with the flag, so a piece needs no head; tail still frees slots.
//
// A wait ends early when the abort flag is raised or nothing moved for timeoutNs; the first
// failure is written to DevResult and every thread of the group returns false.
// Exactness: element arithmetic is kernels/arith.h's, applied in the same order as the host
// executor (received op local), so results carry the host kernels' bits.
#pragma once

#include "exec/cuda/dev_work.h"
#include "exec/cuda/ll_move.h"

namespace coll::exec::dev {

#if !defined(__CUDA_ARCH__)
/// Host build only: what the channels read of memory a GPU would read over PCIe or NVLink, besides
/// the data and the flags they wait on: descriptors (work, batches of steps and ports), and inside
/// the piece loop only the received slot's size word. The emulated-device tests check that pieces
/// read at most one such word each. A channel adds its counts once per work, not per piece.
struct DescriptorCounters {
  uint64_t setupReads = 0;  // rounds of descriptor loads (per work, per batch of steps)
  uint64_t pieceReads = 0;  // reads inside the piece loop
  uint64_t pieces = 0;
};
DescriptorCounters descriptorCounters();
void countDescriptorReads(uint64_t setupReads, uint64_t pieceReads, uint64_t pieces);
#define COLL_COUNT_READS(setup, inPiece, pieces) countDescriptorReads(setup, inPiece, pieces)
#else
#define COLL_COUNT_READS(setup, inPiece, pieces) ((void)0)
#endif

/// Copies `bytes` (a multiple of 8) from src to dst, 8 bytes per thread and round: the group loads
/// a descriptor from pinned memory together, in one round of reads. Syncs before (no thread still
/// reads what dst held) and after (every thread sees the copy).
template <typename G>
COLL_HD void groupCopy(void* dst, const void* src, size_t bytes, G g) {
  g.sync();
  auto* d = static_cast<uint64_t*>(dst);
  auto* s = static_cast<const uint64_t*>(src);
  for (size_t i = g.tid(); i < bytes / 8; i += g.size()) d[i] = s[i];
  g.sync();
}

/// Where a piece's print goes after its `bytes` in a Simple slot: the next 8-byte boundary, so
/// that it moves as two word stores and loads (a piece of int8 may end at any byte). The slot's
/// size word then says printAt(bytes) + kPrintBytes, which a slot of slotBytes - kPrintBytes of
/// data always has room for (slots are multiples of 64 bytes).
COLL_HD uint64_t printAt(uint64_t bytes) { return (bytes + 7) & ~uint64_t(7); }

/// The thread that waits on and publishes to the send side: the first of the second warp, so
/// that it polls beside thread 0 (the receive side) instead of after it.
template <typename G>
COLL_HD int sendThread(const G& g) {
  return g.size() > 32 ? 32 : g.size() - 1;
}

/// The leader starts the channel's timing (DevTiming) before its first work.
template <typename G>
COLL_HD void timingBegin(ChannelShared& sh, G g) {
  if (!g.leader()) return;
  sh.timing = DevTiming{};
  sh.timing.start = nowNs();
}

/// The leader ends it and writes it beside the channel's result (every work of a channel shares
/// one DevResult).
COLL_HD void timingEnd(ChannelShared& sh, DevResult* result) {
  sh.timing.end = nowNs();
  if (result) result->timing = sh.timing;
}

template <typename T, Op O, typename G>
class Channel {
 public:
  /// sh.work is loaded (runChannel); sh's step and ports are this channel's to fill.
  COLL_HD Channel(ChannelShared& sh, G g) : sh_(sh), w_(sh.work), g_(g) {
    if (w_.premul) {
      if (w_.scalarPtr) {
        scalar_ = loadElem<T>(static_cast<const char*>(w_.scalarPtr), true);
      } else {
        memcpy(&scalar_, &w_.scalar, sizeof(T));  // from shared memory, a register copy
      }
    }
    sendThread_ = sendThread(g);
  }

  /// Runs every step; false (with w.result written) when one failed.
  COLL_HD bool run() {
    // In a register: after the last step's sync, a faster thread may already load the next work.
    const int nsteps = w_.nsteps;
    for (int i = 0; i < nsteps; ++i) {
      step_ = i;
      slot_ = i % kStepBatch;
      if (slot_ == 0) loadBatch(i, nsteps - i < kStepBatch ? nsteps - i : kStepBatch);
      const DevStep& st = sh_.steps[slot_];
      si_ = st.sendPeer >= 0 ? sh_.send[slot_].cursor : 0;
      ri_ = st.recvPeer >= 0 ? sh_.recv[slot_].cursor : 0;
      bool ok = runStep(st);
      if (g_.leader()) saveCursors(st);
      if (!ok) return count(false);
      g_.sync();  // the next step may read what other threads wrote, and the leader's cursors
    }
    return count(true);
  }

 private:
  static constexpr uint64_t kSize = sizeof(T);

  // Steps first .. first + count - 1 and their ports into shared memory: two rounds of reads by
  // the group's threads, 8 bytes each, whatever the number of steps.
  COLL_HD void loadBatch(int first, int count) {
    const int tid = g_.tid(), nt = g_.size();
    constexpr int kStepWords = sizeof(DevStep) / 8, kPortWords = sizeof(DevPort) / 8;
    static_assert(sizeof(DevStep) % 8 == 0 && sizeof(DevPort) % 8 == 0, "descriptors copy in words");
    for (int t = tid; t < count * kStepWords; t += nt)
      reinterpret_cast<uint64_t*>(sh_.steps)[t] = reinterpret_cast<const uint64_t*>(w_.steps + first)[t];
    g_.sync();
    for (int t = tid; t < 2 * count * kPortWords; t += nt) {
      int k = t / (2 * kPortWords), rest = t % (2 * kPortWords);
      bool isSend = rest < kPortWords;
      int word = isSend ? rest : rest - kPortWords;
      int peer = isSend ? sh_.steps[k].sendPeer : sh_.steps[k].recvPeer;
      if (peer < 0) continue;
      const DevPort& from = isSend ? w_.send[peer] : w_.recv[peer];
      DevPort& to = isSend ? sh_.send[k] : sh_.recv[k];
      reinterpret_cast<uint64_t*>(&to)[word] = reinterpret_cast<const uint64_t*>(&from)[word];
    }
    ++setupReads_;  // one round of descriptor reads per batch
    g_.sync();
  }

  // The host build's counts of this work, added once (the GPU build has none: the compiler drops
  // the counters). Returns ok.
  COLL_HD bool count(bool ok) const {
    if (g_.leader()) COLL_COUNT_READS(setupReads_, pieceReads_, pieces_);
    return ok;
  }

  // Leader: the cursors as this step left them, to the pinned ports (the next batch or launch)
  // and to the later steps of this batch on the same ports.
  COLL_HD void saveCursors(const DevStep& st) {
    if (st.sendPeer >= 0) w_.send[st.sendPeer].cursor = si_;
    if (st.recvPeer >= 0) w_.recv[st.recvPeer].cursor = ri_;
    int end = w_.nsteps - (step_ - slot_);
    if (end > kStepBatch) end = kStepBatch;
    for (int k = slot_ + 1; k < end; ++k) {
      if (st.sendPeer >= 0 && sh_.steps[k].sendPeer == st.sendPeer) sh_.send[k].cursor = si_;
      if (st.recvPeer >= 0 && sh_.steps[k].recvPeer == st.recvPeer) sh_.recv[k].cursor = ri_;
    }
  }

  COLL_HD bool runStep(const DevStep& st) {
    uint64_t recvElems = st.recvCount;
    if (st.count == 0 && recvElems == 0) return true;
    bool send = st.sendPeer >= 0, recv = st.recvPeer >= 0;
    const DevFifo& sf = sh_.send[slot_].fifo;
    const DevFifo& rf = sh_.recv[slot_].fifo;
    if ((send && sf.nslots == 0) || (recv && rf.nslots == 0))
      return fail(DevResult::kBadStep, send ? st.sendPeer : st.recvPeer);
    // LL needs the connection's LL region (a network FIFO has none): a step that would reach
    // past a missing one fails instead.
    if (w_.proto == kLL && ((send && !sf.llSlots) || (recv && !rf.llSlots)))
      return fail(DevResult::kBadStep, send && !sf.llSlots ? st.sendPeer : st.recvPeer);
    const char* src = buffer(st.src) + st.srcOff * kSize;
    char* dst = buffer(st.dst) + st.dstOff * kSize;
    uint32_t scaleSrc = w_.premul && st.src == kInput ? kMoveScale : 0;
    uint32_t final = st.final && divides() ? kMoveDivide : 0;
    switch (st.prim) {
      case kReduceBlocks:
        reduceBlocks<T, O>(static_cast<const char*>(w_.scratch), dst, st.count, w_.nranks, final, g_.tid(), g_.size());
        return true;
      case kCopy:
        if (dst != src || scaleSrc || final) move(nullptr, src, dst, nullptr, st.count * kSize, scaleSrc | final);
        return true;
      case kSendRecv:
      case kSendRecvReduce:
        return sendRecv(send, recv, src, scaleSrc, st.count * kSize, dst, recvElems * kSize, st.prim == kSendRecvReduce,
                        final);
      case kSend:
      case kRecv:
      case kRecvReduceSend:
      case kRecvReduceCopy:
      case kRecvReduceCopySend:
      case kRecvCopySend:
        break;
      default:
        return fail(DevResult::kBadStep, -1);
    }
    uint64_t piece = pieceBytes(send, recv);
    uint64_t bytes = st.count * kSize;
    bool usesSrc =
        st.prim == kSend || st.prim == kRecvReduceSend || st.prim == kRecvReduceCopy || st.prim == kRecvReduceCopySend;
    bool writesDst = st.prim != kSend && st.prim != kRecvReduceSend;
    bool recvs = st.prim != kSend;
    for (uint64_t done = 0; done < bytes; done += piece) {
      uint64_t n = bytes - done < piece ? bytes - done : piece;
      if (!movePiece(recvs, usesSrc ? src + done : nullptr, scaleSrc, writesDst ? dst + done : nullptr, send, n, final,
                     done == 0))
        return false;
    }
    return true;
  }

  COLL_HD char* buffer(uint8_t b) const {
    if (b == kInput) return const_cast<char*>(static_cast<const char*>(w_.input));
    return static_cast<char*>(b == kScratch ? w_.scratch : w_.output);
  }
  COLL_HD bool divides() const { return w_.op == 4; }  // collAvg
  COLL_HD uint32_t* recvWait() const { return w_.result ? &w_.result->recvWait : nullptr; }
  COLL_HD uint32_t* sendWait() const { return w_.result ? &w_.result->sendWait : nullptr; }
  COLL_HD uint32_t* atStep() const { return w_.result ? &w_.result->atStep : nullptr; }

  // Bytes of one piece: a slot of the smaller FIFO less the room its print takes (Simple: the
  // bytes after the piece; LL: the first kLLPrintLines lines), in whole elements. Every piece keeps
  // the room, printed or not, so that both ends of a step cut the data alike.
  COLL_HD uint64_t pieceBytes(bool send, bool recv) const {
    uint64_t p = ~uint64_t(0);
    if (send) p = slotData(sh_.send[slot_].fifo);
    if (recv && slotData(sh_.recv[slot_].fifo) < p) p = slotData(sh_.recv[slot_].fifo);
    p -= p % kSize;
    return p < kSize ? kSize : p;
  }

  COLL_HD uint64_t slotData(const DevFifo& f) const {
    if (w_.proto == kLL) return f.llSlotLines > kLLPrintLines ? (f.llSlotLines - kLLPrintLines) * 8 : 0;
    return f.slotBytes > kPrintBytes ? f.slotBytes - kPrintBytes : 0;
  }

  // A Simple move of `bytes`: a plain copy when there is one source and nothing to compute.
  COLL_HD void move(const char* in, const char* src, char* dst, char* out, uint64_t bytes, uint32_t flags) {
    if (!(in && src) && flags == 0)
      copyBytes<static_cast<int>(kSize)>(in ? in : src, dst, out, bytes, g_.tid(), g_.size());
    else if (in && src)
      moveElems<T, O, true, true>(in, src, dst, out, bytes / kSize, flags, scalar_, w_.nranks, g_.tid(), g_.size());
    else if (in)
      moveElems<T, O, true, false>(in, src, dst, out, bytes / kSize, flags, scalar_, w_.nranks, g_.tid(), g_.size());
    else
      moveElems<T, O, false, true>(in, src, dst, out, bytes / kSize, flags, scalar_, w_.nranks, g_.tid(), g_.size());
  }

  // ---- failures ----

  COLL_HD bool fail(int code, int peer, uint32_t got = 0, uint32_t want = 0) {
    if (w_.result && casInt(&w_.result->code, DevResult::kOk, code)) {
      w_.result->peer = peer;
      w_.result->step = step_;
      w_.result->got = got;
      w_.result->want = want;
    }
    return false;
  }

  // A print (a, b) that differs from this call's: kCallMismatch with both prints, for the sentence.
  COLL_HD bool failCall(int peer, uint64_t a, uint64_t b) {
    if (w_.result && casInt(&w_.result->code, DevResult::kOk, DevResult::kCallMismatch)) {
      w_.result->peer = peer;
      w_.result->step = step_;
      w_.result->theirs[0] = a;
      w_.result->theirs[1] = b;
      w_.result->mine[0] = w_.print[0];
      w_.result->mine[1] = w_.print[1];
    }
    return false;
  }

  COLL_HD bool printDiffers(uint64_t a, uint64_t b) const { return a != w_.print[0] || b != w_.print[1]; }

  // The print in a Simple slot at `at` (printAt of the peer's bytes): false when its first byte
  // is not kPrintMagic (the bytes there are data, not a print). Read with the slot's bytes, after
  // the acquire of head that published them.
  COLL_HD static bool loadPrint(const char* slot, uint64_t at, uint64_t* a, uint64_t* b) {
    const uint64_t* p = reinterpret_cast<const uint64_t*>(slot + at);
    *a = p[0];
    *b = p[1];
    return (*a & 0xff) == kPrintMagic;
  }

  // ---- one piece ----

  // Moves one piece of `bytes`: v = received (recv) op local (src), or whichever of the two is
  // given; v goes to dst and/or to the send port's next slot. Then publishes and frees the slots.
  // first: the step's first piece in this direction, which carries the call's print (when the
  // check is on) and whose print a receiver compares before any thread uses a byte.
  COLL_HD bool movePiece(bool recv, const char* src, uint32_t scaleSrc, char* dst, bool send, uint64_t bytes,
                         uint32_t final, bool first) {
    const DevFifo& rf = sh_.recv[slot_].fifo;
    const DevFifo& sf = sh_.send[slot_].fifo;
    const int rpeer = sh_.recv[slot_].peer, speer = sh_.send[slot_].peer;
    const uint64_t ri = ri_, si = si_;
    const bool ll = w_.proto == kLL;
    const int tid = g_.tid();
    bool failed = false;
    // The waits, on two threads side by side.
    if (recv && !ll && tid == 0) {
      const uint64_t c0 = cycles();
      int code = pollUntil([&] { return loadAcquire(rf.head) > ri; }, w_.abortFlag, w_.timeoutNs, recvWait(),
                           static_cast<uint32_t>(rpeer), atStep(), static_cast<uint32_t>(step_));
      sh_.timing.recvPollCycles += cycles() - c0;
      if (code) {
        failed = true;
        fail(code == 1 ? DevResult::kAborted : DevResult::kTimeout, rpeer);
      } else {
        uint32_t got = loadVolatile(&rf.sizes[ri % rf.nslots]);
        ++pieceReads_;
        if (got != bytes) {
          const char* slot = rf.slots + (ri % rf.nslots) * rf.slotBytes;
          uint64_t ta = 0, tb = 0;
          if (got == printAt(bytes) + kPrintBytes && loadPrint(slot, printAt(bytes), &ta, &tb)) {
            // A printed piece; compared when this rank checks too.
            if (w_.print[0] && printDiffers(ta, tb)) {
              failed = true;
              failCall(rpeer, ta, tb);
            }
          } else {
            failed = true;
            // The calls differ; the peer's print, at the end of its piece if it sent one, says how.
            if (w_.print[0] && got >= kPrintBytes && got <= rf.slotBytes && got % 8 == 0 &&
                loadPrint(slot, got - kPrintBytes, &ta, &tb) && printDiffers(ta, tb))
              failCall(rpeer, ta, tb);
            else
              fail(DevResult::kSizeMismatch, rpeer, got, static_cast<uint32_t>(bytes));
          }
        }
      }
    }
    const bool llPrint = recv && ll && first && w_.print[0] != 0;
    if (llPrint) {
      // The print's lines before any data line is used, one thread per line as the data's are
      // (threads 0 and 1); the barrier below carries the verdict, and the halves meet in shared
      // memory for the sentence.
      const LLLine* lines = rf.llSlots + (ri % rf.nslots) * rf.llSlotLines;
      for (int k = tid; k < kLLPrintLines; k += g_.size()) {
        uint64_t v = 0;
        int code =
            pollUntil([&] { return loadLL(lines + k, static_cast<uint32_t>(ri + 1), &v); }, w_.abortFlag, w_.timeoutNs,
                      recvWait(), static_cast<uint32_t>(rpeer), atStep(), static_cast<uint32_t>(step_));
        if (code) {
          failed = true;
          fail(code == 1 ? DevResult::kAborted : DevResult::kTimeout, rpeer);
        } else {
          sh_.peerPrint[k] = v;
          failed = failed || v != w_.print[k];
        }
      }
    }
    if (send && tid == sendThread_) {
      uint64_t free = static_cast<uint64_t>(sf.nslots);
      const uint64_t c0 = cycles();
      int code = pollUntil([&] { return si < loadAcquire(sf.tail) + free; }, w_.abortFlag, w_.timeoutNs, sendWait(),
                           static_cast<uint32_t>(speer), atStep(), static_cast<uint32_t>(step_));
      sh_.timing.sendPollCycles += cycles() - c0;
      if (code) {
        failed = true;
        fail(code == 1 ? DevResult::kAborted : DevResult::kTimeout, speer);
      }
    }
    if (g_.syncOr(failed)) {
      // An LL print that differs (a timeout's code, set first, stays): both halves are in.
      if (llPrint && tid == 0 && printDiffers(sh_.peerPrint[0], sh_.peerPrint[1]))
        failCall(rpeer, sh_.peerPrint[0], sh_.peerPrint[1]);
      return false;
    }
    if (ll) {
      // Data from the line after the print's.
      const LLLine* in = recv ? rf.llSlots + (ri % rf.nslots) * rf.llSlotLines + kLLPrintLines : nullptr;
      LLLine* out = send ? sf.llSlots + (si % sf.nslots) * sf.llSlotLines + kLLPrintLines : nullptr;
      if (send && first && tid == sendThread_ && w_.print[0] != 0) {
        storeLL(out - kLLPrintLines, w_.print[0], static_cast<uint32_t>(si + 1));
        storeLL(out - kLLPrintLines + 1, w_.print[1], static_cast<uint32_t>(si + 1));
      }
      int code = moveLL<T, O>(in, static_cast<uint32_t>(ri + 1), src, dst, out, static_cast<uint32_t>(si + 1), bytes,
                              scaleSrc | final, scalar_, w_.nranks, w_.abortFlag, w_.timeoutNs, recvWait(),
                              static_cast<uint32_t>(rpeer), tid, g_.size(), atStep(), static_cast<uint32_t>(step_));
      if (code) fail(code == 1 ? DevResult::kAborted : DevResult::kTimeout, rpeer);
      if (g_.syncOr(code != 0)) return false;
    } else {
      const char* in = recv ? rf.slots + (ri % rf.nslots) * rf.slotBytes : nullptr;
      char* out = send ? sf.slots + (si % sf.nslots) * sf.slotBytes : nullptr;
      if (send && tid == sendThread_) {
        // The print and the size word before the copy: the receiver reads neither before the
        // release of head below, and nothing of them stays live across the copy's registers.
        uint64_t size = bytes;
        if (first && w_.print[0] != 0) {
          uint64_t* at = reinterpret_cast<uint64_t*>(out + printAt(bytes));
          at[0] = w_.print[0];
          at[1] = w_.print[1];
          size = printAt(bytes) + kPrintBytes;
        }
        sf.sizes[si % sf.nslots] = static_cast<uint32_t>(size);
      }
      move(in, src, dst, out, bytes, scaleSrc | final);
      g_.sync();  // every thread's bytes are written, and the received ones read, before the releases
    }
    if (send && tid == sendThread_ && !ll) {
      const uint64_t c0 = cycles();
      storeRelease(sf.head, si + 1);
      sh_.timing.sendFenceCycles += cycles() - c0;
    }
    if (recv && tid == 0) {
      const uint64_t c0 = cycles();
      storeRelease(rf.tail, ri + 1);
      sh_.timing.recvFenceCycles += cycles() - c0;
    }
    if (tid == 0) {
      const uint64_t t = nowNs();
      if (sh_.timing.firstPiece == 0) sh_.timing.firstPiece = t;
      sh_.timing.lastPiece = t;
      ++sh_.timing.pieces;
    }
    if (send) si_ = si + 1;
    if (recv) ri_ = ri + 1;
    ++pieces_;
    return true;
  }

  // src -> send port while receive port -> dst (or dst = received op dst), alternating a piece
  // each way: every send only waits for its receiver to drain a slot nslots pieces back, which
  // that receiver does before it waits for anything later, so the alternation never deadlocks.
  // Over the same memory (recursive doubling), piece j is received only after piece j was sent.
  COLL_HD bool sendRecv(bool send, bool recv, const char* src, uint32_t scaleSrc, uint64_t sendBytes, char* dst,
                        uint64_t recvBytes, bool reduceInto, uint32_t final) {
    uint64_t piece = pieceBytes(send, recv);
    for (uint64_t sent = 0, got = 0; sent < sendBytes || got < recvBytes;) {
      if (sent < sendBytes) {
        uint64_t k = sendBytes - sent < piece ? sendBytes - sent : piece;
        if (!movePiece(false, src + sent, scaleSrc, nullptr, true, k, 0, sent == 0)) return false;
        sent += k;
      }
      if (got < recvBytes) {
        uint64_t k = recvBytes - got < piece ? recvBytes - got : piece;
        if (!movePiece(true, reduceInto ? dst + got : nullptr, 0, dst + got, false, k, final, got == 0)) return false;
        got += k;
      }
    }
    return true;
  }

  ChannelShared& sh_;
  const DevWork& w_;
  G g_;
  T scalar_{};
  int step_ = -1;
  int slot_ = 0;  // step_ within the batch in shared memory
  int sendThread_ = 0;
  uint64_t si_ = 0, ri_ = 0;                               // FIFO cursors of the current step's ports, in registers
  uint64_t setupReads_ = 0, pieceReads_ = 0, pieces_ = 0;  // the host build's counts (count())
};

}  // namespace coll::exec::dev
