// The device executor's step interpreter: one channel of one operation, run by a thread group
// (a CTA on the GPU, one thread in the host build; portable.h). It walks the channel's steps in
// order and moves each through the connections' FIFO slots in pieces, as the CPU executor does
// (exec/cpu/cpu_executor.cc), with the two slot protocols of dev_work.h:
//  - Simple: the leader waits for the counter (head for a receive, tail for a send), the group
//    moves the piece with 16-byte vectors, syncs, and the leader publishes (size, then a release
//    store of head) and frees the received slot (release store of tail);
//  - LL: every thread waits for the flags of its own lines and stores its lines with the flag, so
//    a piece needs no head; tail still frees slots, so a producer never overwrites unread lines.
// A wait ends early when the abort flag is raised or nothing moved for timeoutNs; the first
// failure is written to DevResult and every thread of the group returns false.
// Exactness: element arithmetic is dev_reduce.h's, applied in the same order as the host
// executor (received op local), so results carry the host kernels' bits.
#pragma once

#include "exec/cuda/dev_reduce.h"
#include "exec/cuda/dev_work.h"

namespace coll::exec::dev {

template <typename T, Op O, typename G>
class Channel {
 public:
  COLL_HD_FN Channel(const DevWork& w, G g) : w_(w), g_(g) {
    if (w.premul) memcpy(&scalar_, w.scalarPtr ? w.scalarPtr : &w.scalar, sizeof(T));
  }

  /// Runs every step; false (with w.result written) when one failed.
  COLL_NOINLINE COLL_HD_FN bool run() {
    for (int i = 0; i < w_.nsteps; ++i) {
      step_ = i;
      if (!runStep(w_.steps[i])) return false;
      g_.sync();  // the next step may read what other threads of the group wrote
    }
    return true;
  }

 private:
  static constexpr uint64_t kSize = sizeof(T);

  COLL_HD_FN bool runStep(const DevStep& st) {
    uint64_t recvElems = st.recvCount;
    if (st.count == 0 && recvElems == 0) return true;
    DevPort* sc = st.sendPeer >= 0 ? &w_.send[st.sendPeer] : nullptr;
    DevPort* rc = st.recvPeer >= 0 ? &w_.recv[st.recvPeer] : nullptr;
    if ((st.sendPeer >= 0 && sc->fifo.nslots == 0) || (st.recvPeer >= 0 && rc->fifo.nslots == 0))
      return fail(DevResult::kBadStep, st.sendPeer >= 0 ? st.sendPeer : st.recvPeer);
    // LL needs the connection's LL region (a network FIFO has none): a step that would reach
    // past a missing one fails instead.
    if (w_.proto == kLL && ((sc && !sc->fifo.llSlots) || (rc && !rc->fifo.llSlots)))
      return fail(DevResult::kBadStep, sc && !sc->fifo.llSlots ? st.sendPeer : st.recvPeer);
    const char* src = buffer(st.src) + st.srcOff * kSize;
    char* dst = buffer(st.dst) + st.dstOff * kSize;
    bool scaleSrc = w_.premul && st.src == kInput;
    bool final = st.final != 0;
    switch (st.prim) {
      case kReduceBlocks:
        reduceBlocks(dst, st.count, final);
        return true;
      case kCopy:
        if (dst != src || scaleSrc || (final && divides())) local(dst, src, scaleSrc, nullptr, st.count, final);
        return true;
      case kSendRecv:
      case kSendRecvReduce:
        return sendRecv(sc, rc, src, scaleSrc, st.count * kSize, dst, recvElems * kSize, st.prim == kSendRecvReduce,
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
    uint64_t piece = pieceBytes(sc, rc);
    uint64_t bytes = st.count * kSize;
    bool usesSrc =
        st.prim == kSend || st.prim == kRecvReduceSend || st.prim == kRecvReduceCopy || st.prim == kRecvReduceCopySend;
    bool writesDst = st.prim != kSend && st.prim != kRecvReduceSend;
    for (uint64_t done = 0; done < bytes; done += piece) {
      uint64_t n = bytes - done < piece ? bytes - done : piece;
      if (!movePiece(st.prim == kSend ? nullptr : rc, usesSrc ? src + done : nullptr, scaleSrc,
                     writesDst ? dst + done : nullptr, sc, n, final))
        return false;
    }
    return true;
  }

  COLL_HD_FN char* buffer(uint8_t b) const {
    if (b == kInput) return const_cast<char*>(static_cast<const char*>(w_.input));
    return static_cast<char*>(b == kScratch ? w_.scratch : w_.output);
  }
  COLL_HD bool divides() const { return w_.op == 4; }  // collAvg

  // Bytes of one piece: a whole slot of the smaller FIFO (Simple), or its LL lines' data (LL),
  // in whole elements.
  COLL_HD_FN uint64_t pieceBytes(const DevPort* a, const DevPort* b) const {
    uint64_t p = ~uint64_t(0);
    if (a) p = slotData(*a);
    if (b && slotData(*b) < p) p = slotData(*b);
    p -= p % kSize;
    return p < kSize ? kSize : p;
  }

  COLL_HD uint64_t slotData(const DevPort& c) const {
    return w_.proto == kLL ? c.fifo.llSlotLines * 8 : c.fifo.slotBytes;
  }

  // ---- failures and waits ----

  COLL_HD_FN bool fail(int code, int peer, uint32_t got = 0, uint32_t want = 0) {
    if (w_.result && casInt(&w_.result->code, DevResult::kOk, code)) {
      w_.result->peer = peer;
      w_.result->step = step_;
      w_.result->got = got;
      w_.result->want = want;
    }
    return false;
  }

  // Polls ready() (any thread) until it holds, the abort flag rises, or nothing moved for
  // timeoutNs.
  template <typename Ready>
  COLL_HD_FN bool poll(Ready ready, int peer) {
    uint64_t start = 0;
    for (uint64_t spins = 1;; ++spins) {
      if (ready()) return true;
      if ((spins & 255) == 0) {
        if (w_.abortFlag && loadVolatile(w_.abortFlag)) return fail(DevResult::kAborted, peer);
        uint64_t now = nowNs();
        if (start == 0) start = now;
        if (w_.timeoutNs && now - start > w_.timeoutNs) return fail(DevResult::kTimeout, peer);
      }
      backoff(spins);
    }
  }

  // The leader polls; every thread learns whether the wait failed.
  template <typename Ready>
  COLL_HD_FN bool leaderWait(Ready ready, int peer) {
    bool failed = false;
    if (g_.leader()) failed = !poll(ready, peer);
    return !g_.syncOr(failed);
  }

  COLL_HD_FN bool waitSendSlot(DevPort* c, uint64_t index) {
    const DevFifo& f = c->fifo;
    return leaderWait([&] { return index < loadAcquire(f.tail) + static_cast<uint64_t>(f.nslots); }, c->peer);
  }

  COLL_HD_FN bool waitRecvSlot(DevPort* c, uint64_t index, uint64_t bytes) {
    const DevFifo& f = c->fifo;
    if (!leaderWait([&] { return loadAcquire(f.head) > index; }, c->peer)) return false;
    uint32_t got = loadVolatile(&f.sizes[index % f.nslots]);
    if (got != bytes) return fail(DevResult::kSizeMismatch, c->peer, got, static_cast<uint32_t>(bytes));
    return true;
  }

  // ---- one piece ----

  // Moves one piece of `bytes`: v = received (rc) op local (src), or whichever of the two is
  // given; v goes to dst and/or to sc's next slot. Then publishes and frees the slots.
  COLL_NOINLINE COLL_HD_FN bool movePiece(DevPort* rc, const char* src, bool scaleSrc, char* dst, DevPort* sc,
                                          uint64_t bytes, bool final) {
    uint64_t ri = rc ? rc->cursor : 0, si = sc ? sc->cursor : 0;
    bool ll = w_.proto == kLL;
    if (rc && !ll && !waitRecvSlot(rc, ri, bytes)) return false;
    if (sc && !waitSendSlot(sc, si)) return false;
    if (ll) {
      const LLLine* in = rc ? rc->fifo.llSlots + (ri % rc->fifo.nslots) * rc->fifo.llSlotLines : nullptr;
      LLLine* out = sc ? sc->fifo.llSlots + (si % sc->fifo.nslots) * sc->fifo.llSlotLines : nullptr;
      bool failed = !llPiece(in, static_cast<uint32_t>(ri + 1), rc ? rc->peer : -1, src, scaleSrc, dst, out,
                             static_cast<uint32_t>(si + 1), bytes, final);
      if (g_.syncOr(failed)) return false;
    } else {
      const char* in = rc ? rc->fifo.slots + (ri % rc->fifo.nslots) * rc->fifo.slotBytes : nullptr;
      char* out = sc ? sc->fifo.slots + (si % sc->fifo.nslots) * sc->fifo.slotBytes : nullptr;
      simplePiece(in, src, scaleSrc, dst, out, bytes, final);
      g_.sync();  // every thread's bytes are written before the leader publishes them
    }
    if (g_.leader()) {
      if (sc) {
        if (!ll) {
          sc->fifo.sizes[si % sc->fifo.nslots] = static_cast<uint32_t>(bytes);
          fenceSystem();  // the other threads' slot bytes (seen through the sync) before head
          storeRelease(sc->fifo.head, si + 1);
        }
        sc->cursor = si + 1;
      }
      if (rc) {
        storeRelease(rc->fifo.tail, ri + 1);
        rc->cursor = ri + 1;
      }
    }
    g_.sync();  // every thread sees the new cursors
    return true;
  }

  COLL_HD T load(const char* p, bool scale) const {
    T v;
    memcpy(&v, p, sizeof(T));
    return scale ? premul(v, scalar_) : v;
  }
  COLL_HD void store(char* p, T v) const { memcpy(p, &v, sizeof(T)); }

  // One element: received op local, either alone, then the average's division on final values.
  COLL_HD T combine(const T* recv, const T* loc, bool final) const {
    T v = recv && loc ? apply<T, O>(*recv, *loc) : (recv ? *recv : *loc);
    return final && divides() ? divide(v, w_.nranks) : v;
  }

  // Simple: 16 bytes per thread and iteration where every pointer is 16-byte aligned, element
  // by element for the rest.
  COLL_HD_FN void simplePiece(const char* in, const char* src, bool scaleSrc, char* dst, char* out, uint64_t bytes,
                              bool final) {
    constexpr uint64_t kVec = 16 / sizeof(T);
    uint64_t n = bytes / kSize;
    uintptr_t bits = reinterpret_cast<uintptr_t>(in) | reinterpret_cast<uintptr_t>(src) |
                     reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(out);
    uint64_t nvec = (bits & 15) == 0 ? n / kVec : 0;
    for (uint64_t v = g_.tid(); v < nvec; v += g_.size()) {
      T r[kVec], l[kVec], o[kVec];
      uint64_t at = v * 16;
      if (in) memcpy(r, in + at, 16);
      if (src) {
        memcpy(l, src + at, 16);
        if (scaleSrc)
          for (uint64_t e = 0; e < kVec; ++e) l[e] = premul(l[e], scalar_);
      }
      for (uint64_t e = 0; e < kVec; ++e) o[e] = combine(in ? &r[e] : nullptr, src ? &l[e] : nullptr, final);
      if (dst) memcpy(dst + at, o, 16);
      if (out) memcpy(out + at, o, 16);
    }
    for (uint64_t i = nvec * kVec + g_.tid(); i < n; i += g_.size()) {
      uint64_t at = i * kSize;
      T r, l;
      if (in) r = load(in + at, false);
      if (src) l = load(src + at, scaleSrc);
      T o = combine(in ? &r : nullptr, src ? &l : nullptr, final);
      if (dst) store(dst + at, o);
      if (out) store(out + at, o);
    }
  }

  // LL: thread t handles lines t, t + size, ...; each line 8 data bytes (the last one partly).
  COLL_HD_FN bool llPiece(const LLLine* in, uint32_t inFlag, int inPeer, const char* src, bool scaleSrc, char* dst,
                          LLLine* out, uint32_t outFlag, uint64_t bytes, bool final) {
    constexpr uint64_t kPer = 8 / sizeof(T);
    uint64_t lines = (bytes + 7) / 8;
    for (uint64_t u = g_.tid(); u < lines; u += g_.size()) {
      uint64_t at = u * 8, k = bytes - at < 8 ? (bytes - at) / kSize : kPer;
      uint64_t rv = 0, lv = 0, ov = 0;
      if (in && !poll([&] { return loadLL(in + u, inFlag, &rv); }, inPeer)) return false;
      if (src) memcpy(&lv, src + at, k * kSize);
      T r[kPer], l[kPer], o[kPer];
      memcpy(r, &rv, sizeof(r));
      memcpy(l, &lv, sizeof(l));
      for (uint64_t e = 0; e < k; ++e) {
        if (src && scaleSrc) l[e] = premul(l[e], scalar_);
        o[e] = combine(in ? &r[e] : nullptr, src ? &l[e] : nullptr, final);
      }
      memcpy(&ov, o, k * kSize);
      if (dst) memcpy(dst + at, &ov, k * kSize);
      if (out) storeLL(out + u, ov, outFlag);
    }
    return true;
  }

  // ---- steps without a piece loop ----

  // dst = local (scaled) with the division on final values; dst may be src.
  COLL_HD_FN void local(char* dst, const char* src, bool scaleSrc, const char* other, uint64_t count, bool final) {
    for (uint64_t i = g_.tid(); i < count; i += g_.size()) {
      T a = load(src + i * kSize, scaleSrc), b;
      if (other) b = load(other + i * kSize, false);
      store(dst + i * kSize, combine(other ? &a : nullptr, other ? &b : &a, final));
    }
  }

  // dst = block 0 op block 1 op ... op block n-1 of scratch, in rank order (every rank then does
  // the same operations and gets the same bits). Each thread keeps to its own elements, so the
  // passes need no sync between them.
  COLL_HD_FN void reduceBlocks(char* dst, uint64_t count, bool final) {
    const char* blocks = static_cast<const char*>(w_.scratch);
    uint64_t stride = count * kSize;
    for (uint64_t i = g_.tid(); i < count; i += g_.size()) {
      T v = load(blocks + i * kSize, false);
      for (int b = 1; b < w_.nranks; ++b) v = apply<T, O>(v, load(blocks + b * stride + i * kSize, false));
      store(dst + i * kSize, final && divides() ? divide(v, w_.nranks) : v);
    }
  }

  // src -> sc while rc -> dst (or dst = received op dst), alternating a piece each way: every
  // send only waits for its receiver to drain a slot nslots pieces back, which that receiver
  // does before it waits for anything later, so the alternation never deadlocks. Over the same
  // memory (recursive doubling), piece j is received only after piece j was sent.
  COLL_HD_FN bool sendRecv(DevPort* sc, DevPort* rc, const char* src, bool scaleSrc, uint64_t sendBytes, char* dst,
                           uint64_t recvBytes, bool reduceInto, bool final) {
    uint64_t piece = pieceBytes(sc, rc);
    for (uint64_t sent = 0, got = 0; sent < sendBytes || got < recvBytes;) {
      if (sent < sendBytes) {
        uint64_t k = sendBytes - sent < piece ? sendBytes - sent : piece;
        if (!movePiece(nullptr, src + sent, scaleSrc, nullptr, sc, k, false)) return false;
        sent += k;
      }
      if (got < recvBytes) {
        uint64_t k = recvBytes - got < piece ? recvBytes - got : piece;
        if (!movePiece(rc, reduceInto ? dst + got : nullptr, false, dst + got, nullptr, k, final)) return false;
        got += k;
      }
    }
    return true;
  }

  const DevWork& w_;
  G g_;
  T scalar_{};
  int step_ = -1;
};

}  // namespace coll::exec::dev
