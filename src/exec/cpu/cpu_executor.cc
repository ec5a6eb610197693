// The CPU executor: runs a schedule (or a group's point-to-point operations) over connections.
//
// Each step moves through the connection FIFOs in pieces of one slot: wait until the receive slot
// is filled and/or a send slot is free, reduce or copy, publish, release. Waits spin (briefly when
// there are more ranks than cores, Links::spinsBeforeYield), then yield, so that more ranks than
// cores still progress, then (after Links::napAfterUs) sleep in
// short naps, so that a rank waiting for a late peer leaves the core to computation; they poll the communicator's
// Progress (which wakes the network proxy, or runs its round on crowded hosts), and end with an error naming the peer
// when it died (same host: its pid is gone), when its connection failed, when the communicator is aborted, or when
// nothing moved for COLL_TIMEOUT_MS. Host memory runs every channel of a schedule on this one thread, in step order.
#include "exec/executor.h"

#include <sched.h>
#include <signal.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "base/process.h"
#include "exec/backoff.h"
#include "kernels/cpu/reduce.h"

namespace coll::exec {
namespace {

using algorithms::Buf;
using algorithms::Prim;
using algorithms::Step;
using kernels::finishAverage;
using kernels::reduce;
using kernels::typeSize;
using transport::Fifo;

// How long a failed operation waits for a consumer still reading one of its references in place
// (withdrawRefs): one piece's copy or reduction, well under a millisecond unless descheduled.
constexpr int64_t kUnpinWaitMs = 1000;
// How long a rank that finds a piece taken back waits for its producer's failure notice.
constexpr int64_t kNoticeWaitMs = 2000;

// One direction to one peer as this executor sees it: the connection's plain-data view and the
// executor's own positions in its FIFO, which persist across operations as the FIFO's counters do.
struct Port {
  transport::Connection* conn = nullptr;  // host side: proxy work and peerClosed() only
  const transport::ConnInfo* info = nullptr;
  uint64_t cursor = 0;  // slots this executor filled (send end) or drained (recv end)
  /// Send end: the consumer's tail as last read. Reading the real tail pulls a cache line from the
  /// other core, so it is re-read only when this value says the FIFO is full.
  uint64_t tailSeen = 0;
  /// Send end: the cursor just past the last slot published as a reference (fifo.h); the memory
  /// it points to must stay unchanged until the consumer's tail reaches it.
  uint64_t refsUntil = 0;
  /// Send end: the last operation (CallCheck::id) whose print went out on this port.
  uint64_t printed = 0;
  const Fifo& fifo() const { return info->fifo; }
  int peer() const { return info->peer; }
};

// The executor's ports by peer, refreshed when the communicator adds connections.
struct Ports {
  std::vector<Port> send, recv;
  std::vector<Port*> senders;  // the send ports that have a connection
  uint64_t generation = ~uint64_t(0);

  void refresh(const Links& links) {
    if (generation == links.generation) return;
    generation = links.generation;
    send.resize(links.sendTo.size());
    recv.resize(links.recvFrom.size());
    senders.clear();
    for (size_t p = 0; p < send.size(); ++p) {
      send[p].conn = links.sendTo[p];
      send[p].info = links.sendTo[p] ? &links.sendTo[p]->info() : nullptr;
      if (send[p].conn) senders.push_back(&send[p]);
    }
    for (size_t p = 0; p < recv.size(); ++p) {
      recv[p].conn = links.recvFrom[p];
      recv[p].info = links.recvFrom[p] ? &links.recvFrom[p]->info() : nullptr;
    }
  }
};

// " (reason)" when the transport knows why a connection closed (a network plugin's failed call).
std::string why(const transport::Connection& conn) {
  std::string reason = conn.closedReason();
  return reason.empty() ? reason : " (" + reason + ")";
}

// Waits for a condition on one or two connections, with the failure checks described in the
// header. The common case (already ready) costs one call of ready().
class Waiter {
 public:
  Waiter(const Links& links, const char* opName, int64_t timeoutMs)
      : links_(links), opName_(opName), timeoutMs_(timeoutMs) {}
  /// The schedule's step the next waits belong to (-1 outside schedules), told with whom they wait for.
  void setStep(int step) { step_ = step; }
  // The network's proxy work for a and b, and for every connection with slots still to send.
  Status poll(Port* a, Port* b) { return links_.progress->poll(a ? a->conn : nullptr, b ? b->conn : nullptr); }

  /// Waits until ready(). a and b are progressed; `awaited`, when given, is the connection whose
  /// data the caller needs, so its peer leaving is an error.
  template <typename Ready>
  Status until(Ready ready, Port* a, Port* b, Port* awaited = nullptr) {
    if (ready()) return Status::ok();
    Backoff pace(links_);  // exec/backoff.h: pauses, yields, naps, and when to check
    bool told = false;     // links_.wait names this wait's peer
    for (;;) {
      // Slots published by earlier steps on other connections must keep moving too, or a peer
      // that waits for them never lets this wait end: poll() moves those as well.
      COLL_TRY(poll(a, b));
      if (ready()) {
        if (told && links_.wait) links_.wait->progressed();
        return Status::ok();
      }
      if (!pace.step()) continue;
      if (links_.abort && links_.abort->load(std::memory_order_relaxed))
        return COLL_ERROR(collRemoteError, FMT_STRING("{} was aborted"), opName_);
      if (pace.livenessDue()) {
        // A wait this long is worth telling a peer that asks whom this rank waits for.
        if (links_.wait && !told) {
          if (Port* p = awaited ? awaited : (a ? a : b))
            links_.wait->waitsFor(p->peer(), WaitState::toMs(pace.start()), step_);
          told = true;
        }
        COLL_TRY(checkAlive(a));
        COLL_TRY(checkAlive(b));
        // A peer that failed this operation (a mismatched call it saw, say) and told the others:
        // its sentence ends this wait instead of the deadline.
        if (links_.peerNotice) {
          std::string notice = links_.peerNotice();
          if (!notice.empty()) return Status(collRemoteError, notice);
        }
        if (awaited && awaited->conn->peerClosed())
          return COLL_ERROR(collRemoteError, FMT_STRING("{}: rank {}{} closed its connection while data was awaited{}"),
                            opName_, awaited->peer(), onHost(links_, awaited->peer()), why(*awaited->conn));
      }
      int64_t waited = pace.waitedMs();
      if (waited >= timeoutMs_) {
        int peer = awaited ? awaited->peer() : a ? a->peer() : (b ? b->peer() : -1);
        if (links_.wait && peer >= 0) links_.wait->waitsFor(peer, WaitState::toMs(pace.start()), step_);
        return COLL_ERROR(collTimeout,
                          FMT_STRING("{}: nothing moved for {} ms (COLL_TIMEOUT_MS, config.timeoutMs or "
                                     "collCommSetTimeout) waiting for rank {}{}: it "
                                     "stalled, died, or called a different operation or count"),
                          opName_, waited, peer, onHost(links_, peer));
      }
    }
  }

 private:
  Status checkAlive(Port* c) {
    if (!c) return Status::ok();
    int pid = links_.localPids[c->peer()];
    if (pid > 0 && processGone(pid))
      return COLL_ERROR(collRemoteError, FMT_STRING("{}: rank {} (pid {}) died"), opName_, c->peer(), pid);
    return Status::ok();
  }
  const Links& links_;
  const char* opName_;
  int64_t timeoutMs_;  // the operation's deadline (Work::timeoutMs)
  int step_ = -1;      // setStep()
};

inline bool sendReady(Port* c, uint64_t index) {
  uint64_t n = static_cast<uint64_t>(c->fifo().nslots);
  if (index < c->tailSeen + n) return true;  // the acquire that saw this tail already ordered the reuse
  c->tailSeen = c->fifo().header->tail.load(std::memory_order_acquire);
  return index < c->tailSeen + n;
}

// Checks the ready piece at index before any of its bytes is used: the call print it may carry
// (the first piece of an operation from this peer) against this rank's, then its size.
Status checkPiece(const Fifo& f, uint64_t index, size_t want, int peer, const char* op, const CallCheck* check) {
  unsigned char theirs[transport::kPrintBytes];
  bool printed = f.printIn(index, want, theirs);
  if (printed && check && check->print && std::memcmp(theirs, check->print, sizeof(theirs)) != 0)
    return Status(collInvalidUsage, check->describe(check->print, theirs, check->rank, peer, op));
  uint32_t got = f.bytesIn(index);
  // A plain FIFO's printed piece is want + kPrintBytes (printIn checked it).
  if (got == want || (printed && !f.tagged)) return Status::ok();
  // Pieces of another size (another count, or another collective's: a rank skipped one) in a
  // plain FIFO: their print, at their own end, says which calls differ.
  if (!printed && check && check->print && f.printAtEnd(index, theirs) &&
      std::memcmp(theirs, check->print, sizeof(theirs)) != 0)
    return Status(collInvalidUsage, check->describe(check->print, theirs, check->rank, peer, op));
  return COLL_ERROR(collInvalidUsage,
                    FMT_STRING("{}: rank {} sent a piece of {} bytes where {} were expected: the ranks called it with "
                               "different counts or types"),
                    op, peer, got, want);
}

// Reads a piece that arrived by reference (fifo.h) from another process's memory into `to`.
Status readRef(Port* rc, uint64_t index, char* to, size_t bytes, const char* op) {
  uint64_t from = rc->fifo().refAddress(index);
  for (size_t done = 0; done < bytes;) {
    iovec local{to + done, bytes - done};
    iovec remote{reinterpret_cast<void*>(static_cast<uintptr_t>(from + done)), bytes - done};
    ssize_t got = process_vm_readv(rc->info->refPid, &local, 1, &remote, 1, 0);
    if (got > 0) {
      done += static_cast<size_t>(got);
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    if (got < 0 && errno == ESRCH)
      return COLL_ERROR(collRemoteError, FMT_STRING("{}: rank {} (pid {}) died"), op, rc->peer(), rc->info->refPid);
    return COLL_ERROR(collRemoteError, FMT_STRING("{}: reading {} bytes from rank {}'s buffer failed: {}"), op, bytes,
                      rc->peer(), got < 0 ? std::strerror(errno) : "nothing read");
  }
  return Status::ok();
}

// The error of a piece whose producer took it back: its operation failed, and the sentence it
// sends the others (links.peerNotice) names the cause. It comes right after the references are
// taken back, so it is waited for a moment.
Status voidedPiece(const Links& links, Port* rc, const char* op) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(kNoticeWaitMs);
  while (links.peerNotice) {
    std::string notice = links.peerNotice();
    if (!notice.empty()) return Status(collRemoteError, notice);
    if (std::chrono::steady_clock::now() >= end || (links.abort && links.abort->load(std::memory_order_relaxed))) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return COLL_ERROR(collRemoteError,
                    FMT_STRING("{}: rank {}'s operation failed and took back the piece it had sent by reference"), op,
                    rc->peer());
}

// Where the ready piece at `index` of rc can be read: its slot (or tag line), the producer's own
// memory when the producer is a thread of this process, or else `landing`, where the piece is
// first read from the producer's process. A reference is pinned first (fifo.h): the producer's
// operation may have failed and taken it back. One read from the producer's process is unpinned
// at once; one read in place stays pinned until freeSlot, so the caller must not wait between.
Status pieceData(const Links& links, Port* rc, uint64_t index, size_t bytes, char* landing, const char* op,
                 const char** in) {
  const Fifo& f = rc->fifo();
  if (!f.isRef(index)) {
    *in = f.recvBuffer(index);
    return Status::ok();
  }
  if (!f.pinRef(index)) return voidedPiece(links, rc, op);
  if (rc->info->refSameProcess) {
    *in = reinterpret_cast<const char*>(static_cast<uintptr_t>(f.refAddress(index)));
    return Status::ok();
  }
  Status s = readRef(rc, index, landing, bytes, op);
  f.unpinRef();
  COLL_TRY(s);
  *in = landing;
  return Status::ok();
}

// Frees the slot at index of rc, unpinning the reference read from it in place (pieceData).
void freeSlot(Port* rc, uint64_t index) {
  const Fifo& f = rc->fifo();
  if (rc->info->refSameProcess && f.isRef(index)) f.unpinRef();
  f.release(index);
}

bool overlaps(const char* a, size_t an, const char* b, size_t bn) { return a < b + bn && b < a + an; }

// Whether a piece of `bytes` whose memory stays unchanged goes to sc by reference (printed: it
// carries a call print, which a plain FIFO's reference cannot).
bool sendsByRef(const Links& links, Port* sc, size_t bytes, bool printed) {
  return links.refMinBytes > 0 && bytes >= links.refMinBytes && sc->fifo().acceptsRefs(printed);
}

// Publishes slot index of sc: bytes already in the slot, or (ref not null) a reference to them;
// with the call print when print is not null.
void publish(Port* sc, uint64_t index, const char* ref, size_t bytes, const void* print = nullptr) {
  if (ref) {
    sc->fifo().publishRef(index, ref, bytes, print);
    sc->refsUntil = index + 1;
  } else {
    sc->fifo().publish(index, bytes, print);
  }
}

// Receives the ready piece at rc's cursor (bytes or a reference) into dst and frees its slot.
Status consume(const Links& links, Port* rc, char* dst, size_t bytes, const char* op,
               const CallCheck* check = nullptr) {
  const Fifo& f = rc->fifo();
  uint64_t i = rc->cursor;
  COLL_TRY(checkPiece(f, i, bytes, rc->peer(), op, check));
  const char* in;
  COLL_TRY(pieceData(links, rc, i, bytes, dst, op, &in));
  if (in != dst) std::memcpy(dst, in, bytes);
  freeSlot(rc, i);
  ++rc->cursor;
  return Status::ok();
}

// Runs one step. Counters index the FIFOs: they persist across steps of one connection.
class StepRunner {
 public:
  StepRunner(const ExecArgs& args, const Links& links, Ports& ports, const char* opName, int64_t timeoutMs,
             const CallCheck& check)
      : args_(args), links_(links), ports_(ports), opName_(opName), waiter_(links, opName, timeoutMs), check_(check) {
    elem_ = typeSize(args.type);
  }

  /// Runs st. refOk: the memory st would send by reference is not written again by this operation.
  Status run(const Step& st, bool refOk) {
    if (st.count == 0 && st.recvElems() == 0) return Status::ok();
    Port* sc = st.sendPeer >= 0 ? &ports_.send[st.sendPeer] : nullptr;
    Port* rc = st.recvPeer >= 0 ? &ports_.recv[st.recvPeer] : nullptr;
    const char* src = source(st);
    char* dst = destination(st);
    if (st.prim == Prim::kReduceBlocks) {
      // Rank order, so that every rank performs the same operations: identical bits everywhere.
      const char* blocks = static_cast<const char*>(args_.scratch);
      size_t stride = st.count * elem_;
      if (args_.nranks == 1)
        std::memmove(dst, blocks, stride);
      else
        reduce(dst, blocks, blocks + stride, st.count, args_.type, args_.op);
      for (int b = 2; b < args_.nranks; ++b) reduce(dst, dst, blocks + b * stride, st.count, args_.type, args_.op);
      if (st.final) finish(dst, st.count);
      return Status::ok();
    }
    if (st.prim == Prim::kCopy) {
      if (dst != src) std::memmove(dst, src, st.count * elem_);
      if (st.final) finish(dst, st.count);
      return Status::ok();
    }
    if (st.prim == Prim::kSendRecv || st.prim == Prim::kSendRecvReduce) {
      size_t sendBytes = st.count * elem_, recvBytes = st.recvElems() * elem_;
      bool ok = refOk && !overlaps(src, sendBytes, dst, recvBytes);
      return sendRecv(sc, rc, src, sendBytes, dst, recvBytes, st.prim == Prim::kSendRecvReduce, st.final, ok);
    }
    size_t pieceElems = pieceElemsFor(sc, rc);
    for (size_t done = 0; done < st.count; done += pieceElems) {
      size_t n = std::min(pieceElems, st.count - done);
      COLL_TRY(piece(st, sc, rc, src + done * elem_, dst + done * elem_, n, refOk));
    }
    return Status::ok();
  }

  const char* source(const Step& st) const { return buffer(st.src) + st.srcOff * elem_; }
  char* destination(const Step& st) const { return buffer(st.dst) + st.dstOff * elem_; }
  size_t bytesOf(const Step& st) const { return st.count * elem_; }
  size_t elemBytes() const { return elem_; }
  /// The schedule's step run next, for whom-it-waits-for answers (coll-top).
  void setStep(int step) { waiter_.setStep(step); }

 private:
  char* buffer(Buf b) const {
    if (b == Buf::kInput) return const_cast<char*>(static_cast<const char*>(args_.input));
    return static_cast<char*>(b == Buf::kScratch ? args_.scratch : args_.output);
  }

  size_t pieceElemsFor(Port* sc, Port* rc) const {
    size_t slot = SIZE_MAX;
    if (sc) slot = std::min(slot, sc->fifo().pieceBytes());
    if (rc) slot = std::min(slot, rc->fifo().pieceBytes());
    return std::max<size_t>(1, slot / elem_);
  }

  // The print the next piece to sc carries: the call's, on the operation's first piece to it.
  const void* printFor(Port* sc) {
    if (!check_.print || sc->printed == check_.id) return nullptr;
    sc->printed = check_.id;
    return check_.print;
  }

  void finish(void* data, size_t n) {
    if (args_.op == collAvg) finishAverage(data, n, args_.type, args_.nranks);
  }

  bool sendsRef(Port* sc, size_t bytes, bool refOk, bool printed) const {
    return refOk && sendsByRef(links_, sc, bytes, printed);
  }

  Status piece(const Step& st, Port* sc, Port* rc, const char* src, char* dst, size_t n, bool refOk) {
    size_t bytes = n * elem_;
    const char* in = nullptr;
    char* out = nullptr;
    uint64_t ri = 0, si = 0;
    if (rc) {
      const Fifo& f = rc->fifo();
      ri = rc->cursor;
      COLL_TRY(waiter_.until([&] { return f.ready(ri); }, rc, sc, rc));
      COLL_TRY(checkPiece(f, ri, bytes, rc->peer(), opName_, &check_));
    }
    const char* ref = nullptr;    // what this piece sends by reference, if it does
    const void* print = nullptr;  // the call print it carries, if it does
    if (sc) {
      const Fifo& f = sc->fifo();
      si = sc->cursor;
      COLL_TRY(waiter_.until([&] { return sendReady(sc, si); }, sc, rc));
      print = printFor(sc);
      if (st.prim != Prim::kRecvReduceSend && sendsRef(sc, bytes, refOk, print != nullptr))
        ref = st.prim == Prim::kSend ? src : dst;
      else
        out = f.sendBuffer(si, bytes, print != nullptr);
    }
    if (rc) {
      // After the wait for the send slot: a reference read in place stays pinned until freeSlot.
      // A piece read from another process lands in the output when the step writes it and the
      // local operand does not live there, else in our (unused) slot.
      bool intoDst = st.prim == Prim::kRecv || st.prim == Prim::kRecvCopySend ||
                     ((st.prim == Prim::kRecvReduceCopy || st.prim == Prim::kRecvReduceCopySend) &&
                      !overlaps(dst, bytes, src, bytes));
      COLL_TRY(pieceData(links_, rc, ri, bytes, intoDst ? dst : rc->fifo().slot(ri), opName_, &in));
    }
    switch (st.prim) {
      case Prim::kSend:
        if (!ref) std::memcpy(out, src, bytes);
        break;
      case Prim::kRecv:
        if (in != dst) std::memcpy(dst, in, bytes);
        break;
      case Prim::kRecvReduceSend:
        reduce(out, in, src, n, args_.type, args_.op);
        break;
      case Prim::kRecvReduceCopy:
        reduce(dst, in, src, n, args_.type, args_.op);
        if (st.final) finish(dst, n);
        break;
      case Prim::kRecvReduceCopySend:
        reduce(dst, in, src, n, args_.type, args_.op);
        if (st.final) finish(dst, n);
        if (!ref) std::memcpy(out, dst, bytes);
        break;
      case Prim::kRecvCopySend:
        if (in != dst) std::memcpy(dst, in, bytes);
        if (!ref) std::memcpy(out, dst, bytes);
        break;
      default:
        return Status(collInternalError, "unexpected primitive in a piece");
    }
    if (sc) {
      publish(sc, si, ref, bytes, print);
      ++sc->cursor;
    }
    if (rc) {
      freeSlot(rc, ri);
      ++rc->cursor;
    }
    return Status::ok();
  }

  // src -> send while recv -> dst, or with reduceInto dst = recv (op) dst. Over the same memory
  // (recursive doubling) a piece is reduced only once it has been sent.
  Status sendRecv(Port* sc, Port* rc, const char* src, size_t sendBytes, char* dst, size_t recvBytes, bool reduceInto,
                  bool final, bool refOk) {
    size_t slot = std::min(sc->fifo().pieceBytes(), rc->fifo().pieceBytes());
    slot -= slot % elem_;
    bool sameMemory = src == dst;
    size_t sent = 0, got = 0;
    while (sent < sendBytes || got < recvBytes) {
      bool moved = false;
      if (sent < sendBytes && sendReady(sc, sc->cursor)) {
        size_t k = std::min(slot, sendBytes - sent);
        const void* print = printFor(sc);
        bool byRef = sendsRef(sc, k, refOk, print != nullptr);
        if (!byRef) std::memcpy(sc->fifo().sendBuffer(sc->cursor, k, print != nullptr), src + sent, k);
        publish(sc, sc->cursor++, byRef ? src + sent : nullptr, k, print);
        sent += k;
        moved = true;
      }
      size_t k = std::min(slot, recvBytes - got);
      bool mayWrite = !sameMemory || sent >= std::min(sendBytes, got + k);
      if (got < recvBytes && mayWrite && rc->fifo().ready(rc->cursor)) {
        if (reduceInto)
          COLL_TRY(consumeReduce(rc, dst + got, k, final));
        else
          COLL_TRY(consume(links_, rc, dst + got, k, opName_, &check_));
        got += k;
        moved = true;
      }
      if (moved) continue;
      uint64_t si = sc->cursor, ri = rc->cursor;
      COLL_TRY(waiter_.until(
          [&] { return (sent < sendBytes && sendReady(sc, si)) || (got < recvBytes && rc->fifo().ready(ri)); }, sc,
          rc));
    }
    return Status::ok();
  }

  // dst = the ready piece at rc's cursor (op) dst; frees the slot.
  Status consumeReduce(Port* rc, char* dst, size_t bytes, bool final) {
    const Fifo& f = rc->fifo();
    uint64_t i = rc->cursor;
    COLL_TRY(checkPiece(f, i, bytes, rc->peer(), opName_, &check_));
    const char* in;
    COLL_TRY(pieceData(links_, rc, i, bytes, f.slot(i), opName_, &in));
    reduce(dst, in, dst, bytes / elem_, args_.type, args_.op);
    if (final) finish(dst, bytes / elem_);
    freeSlot(rc, i);
    ++rc->cursor;
    return Status::ok();
  }

 private:
  const ExecArgs& args_;
  const Links& links_;
  Ports& ports_;
  const char* opName_;
  Waiter waiter_;
  const CallCheck& check_;
  size_t elem_ = 1;
};

// For each step, whether the memory it would send by reference stays unchanged until the end of
// the operation: no later step writes over it. (A write could wait for the consumer's release
// instead, but that wait is a dependency the schedule does not have, and could deadlock it.)
//
// All false for in-place operations: there the ring's first send is overwritten later, so only
// the later sends could go by reference, and the data process_vm_readv writes is left out of this
// core's cache (the kernel's string copy), which the next in-place operation then reads: measured,
// in-place all-reduces of 256 KiB to 1 MiB ran at half speed. (Whether an operation's size pays
// for references at all is the tuner's decision: ExecArgs::direct.)
std::vector<char> stableSends(const algorithms::Schedule& schedule, const StepRunner& runner, const ExecArgs& args) {
  std::vector<char> ok(schedule.size(), 0);
  size_t inBytes = 0, outBytes = 0;
  for (const Step& st : schedule) {
    if (st.src == Buf::kInput) inBytes = std::max(inBytes, (st.srcOff + st.count) * runner.elemBytes());
    if (st.dst == Buf::kOutput)
      outBytes = std::max(outBytes, (st.dstOff + std::max(st.count, st.recvElems())) * runner.elemBytes());
  }
  const char* in = static_cast<const char*>(args.input);
  const char* out = static_cast<const char*>(args.output);
  if (inBytes > 0 && outBytes > 0 && overlaps(in, inBytes, out, outBytes)) return ok;
  auto writes = [](Prim p) { return p != Prim::kSend && p != Prim::kRecvReduceSend; };
  auto sendsSource = [](Prim p) { return p == Prim::kSend || p == Prim::kSendRecv || p == Prim::kSendRecvReduce; };
  auto written = [&](const Step& st) {
    bool both = st.prim == Prim::kSendRecv || st.prim == Prim::kSendRecvReduce;
    return (both ? st.recvElems() : st.count) * runner.elemBytes();
  };
  for (size_t i = 0; i < schedule.size(); ++i) {
    const Step& st = schedule[i];
    if (st.sendPeer < 0 || st.count == 0) continue;
    const char* sent = sendsSource(st.prim) ? runner.source(st) : runner.destination(st);
    bool stable = true;
    for (size_t j = i + 1; j < schedule.size() && stable; ++j)
      if (writes(schedule[j].prim))
        stable = !overlaps(sent, runner.bytesOf(st), runner.destination(schedule[j]), written(schedule[j]));
    ok[i] = stable;
  }
  return ok;
}

// Before an operation returns, every reference it published must have been read: the caller may
// reuse its buffers as soon as it returns.
Status awaitRefsRead(const Links& links, const Ports& ports, const char* opName, int64_t timeoutMs) {
  Waiter waiter(links, opName, timeoutMs);
  for (Port* c : ports.senders) {
    if (c->refsUntil <= c->tailSeen) continue;
    COLL_TRY(waiter.until(
        [c] {
          c->tailSeen = c->fifo().header->tail.load(std::memory_order_acquire);
          return c->tailSeen >= c->refsUntil;
        },
        c, nullptr));
  }
  return Status::ok();
}

// A failed operation returns without awaitRefsRead: the connections that may still read its
// buffers take their references back first (Connection::withdrawRefs).
// A tagged FIFO's consumer (shm) reads them itself: they are voided in its header, and a consumer
// reading one at this moment is waited for (it pins a reference only while it copies or reduces
// one piece).
void withdrawRefs(Ports& ports) {
  for (Port* c : ports.senders) {
    if (c->refsUntil <= c->tailSeen) continue;
    c->tailSeen = c->fifo().header->tail.load(std::memory_order_acquire);
    if (c->refsUntil <= c->tailSeen) continue;
    if (!c->fifo().tagged) {
      c->conn->withdrawRefs();
      continue;
    }
    c->fifo().voidRefs(c->refsUntil);
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(kUnpinWaitMs);
    while (c->fifo().readingRefBelow(c->refsUntil) && std::chrono::steady_clock::now() < end) sched_yield();
    if (c->fifo().readingRefBelow(c->refsUntil))
      COLL_LOG(WARN, NET, "rank {} still reads a piece of a failed operation after {} ms; its buffer must stay",
               c->peer(), kUnpinWaitMs);
  }
}

// Hands every published slot to the network before the operation returns.
Status flushSends(const Links& links, const Ports& ports, const char* opName, int64_t timeoutMs) {
  if (links.progress->empty()) return Status::ok();
  Waiter waiter(links, opName, timeoutMs);
  for (Port* c : ports.senders)
    if (c->conn->hasUnsentData()) COLL_TRY(waiter.until([c] { return !c->conn->hasUnsentData(); }, c, nullptr));
  return Status::ok();
}

Status runSchedule(const algorithms::Schedule& schedule, const ExecArgs& args, const Links& links, Ports& ports,
                   const char* opName, int64_t timeoutMs, const CallCheck& check) {
  StepRunner runner(args, links, ports, opName, timeoutMs, check);
  // Only operations with a piece big enough to go by reference pay for the analysis.
  bool large = false;
  if (args.direct && links.refMinBytes > 0)
    for (const Step& st : schedule)
      large |= std::max(st.count, st.recvElems()) * runner.elemBytes() >= links.refMinBytes;
  std::vector<char> refOk = large ? stableSends(schedule, runner, args) : std::vector<char>();
  for (size_t i = 0; i < schedule.size(); ++i) {
    runner.setStep(static_cast<int>(i));
    COLL_TRY(runner.run(schedule[i], !refOk.empty() && refOk[i]));
  }
  COLL_TRY(flushSends(links, ports, opName, timeoutMs));
  return awaitRefsRead(links, ports, opName, timeoutMs);
}

Status runP2P(const std::vector<P2POp>& ops, const Links& links, Ports& ports, const char* opName, int64_t timeoutMs,
              const CallCheck& check) {
  // One cursor per operation; an operation may only move when it is the oldest unfinished one on
  // its (peer, direction), which keeps matching in posting order.
  std::vector<size_t> done(ops.size(), 0);
  size_t left = 0;
  for (const auto& op : ops) left += op.bytes > 0;
  Waiter waiter(links, opName, timeoutMs);
  auto oldest = [&](size_t i) {
    for (size_t j = 0; j < i; ++j)
      if (ops[j].isSend == ops[i].isSend && ops[j].peer == ops[i].peer && done[j] < ops[j].bytes) return false;
    return true;
  };
  while (left > 0) {
    bool moved = false;
    for (size_t i = 0; i < ops.size(); ++i) {
      const P2POp& op = ops[i];
      if (done[i] >= op.bytes || !oldest(i)) continue;
      Port* c = op.isSend ? &ports.send[op.peer] : &ports.recv[op.peer];
      COLL_TRY(links.progress->pollOne(c->conn));
      const Fifo& f = c->fifo();
      // Pieces leave room for a print (pieceBytes), as collectives' do; the first carries it.
      size_t k = std::min(f.pieceBytes(), op.bytes - done[i]);
      const bool first = done[i] == 0 && check.describe && op.print[0] != 0;
      if (op.isSend && sendReady(c, c->cursor)) {
        // A group's send buffers stay unchanged until it returns (runP2P stages those a receive overwrites).
        const void* print = first ? op.print : nullptr;
        bool byRef = sendsByRef(links, c, k, print != nullptr);
        if (!byRef) std::memcpy(f.sendBuffer(c->cursor, k, print != nullptr), op.buffer + done[i], k);
        publish(c, c->cursor++, byRef ? op.buffer + done[i] : nullptr, k, print);
      } else if (!op.isSend && f.ready(c->cursor)) {
        CallCheck mine = check;
        mine.print = first ? op.print : nullptr;
        COLL_TRY(consume(links, c, op.buffer + done[i], k, opName, &mine));
      } else {
        continue;
      }
      done[i] += k;
      left -= done[i] == op.bytes;
      moved = true;
    }
    if (moved || left == 0) continue;
    // Nothing could move: wait until any unfinished operation can.
    Port* first = nullptr;
    for (size_t i = 0; i < ops.size() && !first; ++i)
      if (done[i] < ops[i].bytes) first = ops[i].isSend ? &ports.send[ops[i].peer] : &ports.recv[ops[i].peer];
    Status progressError;
    COLL_TRY(waiter.until(
        [&] {
          for (size_t i = 0; i < ops.size(); ++i) {
            if (done[i] >= ops[i].bytes) continue;
            Port* c = ops[i].isSend ? &ports.send[ops[i].peer] : &ports.recv[ops[i].peer];
            Status s = links.progress->pollOne(c->conn);
            if (s.isOk() && !ops[i].isSend && c->conn->peerClosed() && !c->fifo().ready(c->cursor))
              s = COLL_ERROR(collRemoteError,
                             FMT_STRING("{}: rank {}{} closed its connection while data was awaited{}"), opName,
                             ops[i].peer, onHost(links, ops[i].peer), why(*c->conn));
            if (!s.isOk()) {
              progressError = std::move(s);
              return true;
            }
            if (ops[i].isSend ? sendReady(c, c->cursor) : c->fifo().ready(c->cursor)) return true;
          }
          return false;
        },
        first, nullptr));
    COLL_TRY(progressError);
  }
  COLL_TRY(flushSends(links, ports, opName, timeoutMs));
  return awaitRefsRead(links, ports, opName, timeoutMs);
}

class CpuExecutor : public Executor {
 public:
  explicit CpuExecutor(int nranks) {
    ports_.send.resize(nranks);
    ports_.recv.resize(nranks);
  }
  const char* name() const override { return "cpu"; }
  Status run(const Work& w, const Links& links) override {
    ports_.refresh(links);
    int64_t timeoutMs = timeoutOf(w, links);
    Status s;
    if (w.schedule) s = runSchedule(*w.schedule, w.args, links, ports_, w.opName, timeoutMs, w.check);
    if (w.p2p) s = runP2P(*w.p2p, links, ports_, w.opName, timeoutMs, w.check);
    if (!s.isOk()) withdrawRefs(ports_);
    return s;
  }

 private:
  Ports ports_;
};

}  // namespace

std::unique_ptr<Executor> newCpuExecutor(int nranks) { return std::make_unique<CpuExecutor>(nranks); }

}  // namespace coll::exec
