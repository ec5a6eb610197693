// The slot FIFO every connection exposes to the executor.
//
// A FIFO is nslots slots of slotBytes each, plus counters on separate cache lines: head (slots
// the producer has filled, with the slots' sizes beside it) and tail (slots the consumer has
// drained). The producer writes slot head % nslots and its byte count, then publishes with a
// release store of head+1; the consumer reads after an acquire load of head, and frees the slot
// with a release store of tail+1. Only one thread produces and one consumes, so no other
// synchronization is needed. For shm, this memory is shared between the two processes; for TCP,
// each side has a private FIFO and the connection's progress() moves slots between them and the
// socket.
//
// Tagged FIFOs (shm) add one cache line per slot: a tag word (slot index + 1, byte count) and, in
// front of it, room for kLineBytes of data. The tag replaces head and sizes: the consumer polls
// it, and a
// piece of up to kLineBytes travels inside the tag's line: a small message then costs one cache
// line transfer from producer to consumer instead of two (head, then the slot), which is what
// small-message latency is made of. This is the idea of NCCL's LL protocol (flag and data stored
// together), with one flag per line because x86 makes a 64-byte line's stores visible in order.
//
// A tagged slot may also hold a reference instead of bytes (kRefBit in the tag's byte count): the
// address of the piece in the producer's own memory. The consumer then reads it straight from
// there (process_vm_readv, or a plain load for a producer in the same process), so a large piece
// is copied once instead of twice (into the slot, out of it). The consumer's release of the slot
// is what tells the producer it may write that memory again. A producer only publishes references
// once the consumer has said it can read them (refsAccepted), since containers may forbid it.
// A plain FIFO takes references too when its consumer is this process's network proxy
// (refsAccepted = kRefsPlain): the address goes in the slot's unused tag line, kRefBit in its
// size, and the proxy hands the provider the caller's buffer instead of the slot, which saves the
// copy into the slot. A plain piece's print follows its bytes on the wire, so a printed reference
// needs a provider that sends a trailer beside the buffer (kRefsPlainPrinted, isendTrailer); the
// print then waits in the tag line (kPrintBit in the size). Elsewhere a printed piece is copied as
// before. Which networks take references: net.h, sendsUnregistered (UCX); a failed operation
// takes its own back before it returns (Connection::withdrawRefs).
//
// A tagged FIFO's references are taken back through the header (voidRefs, pinRef): a producer
// whose operation fails voids every reference below a slot index and waits while the consumer is
// reading one of them; a consumer pins the reference it is about to read and unpins it when it
// releases the slot, and a pin on a voided reference fails. Both sides store, then load the
// other's word, sequentially consistent: at least one of them sees the other's store. Without
// this, a consumer that reached the piece after the failed producer had returned would read
// memory its caller may already have freed (unmapped, for large buffers: a crash).
//
// A piece may carry a call print (core/call_check.h: 16 bytes that start with kPrintMagic): the
// first piece an operation sends to each peer does, so that the receiver can tell that both
// ranks made the same call before it uses a byte. In a tagged FIFO the print sits in the last 16
// bytes of the tag line's data (kPrintBit in the tag; a piece then travels in the line only up to
// kPrintAt bytes); in a plain FIFO it follows the piece's bytes in the slot (the slot's size says
// piece + kPrintBytes), so transports that move slots (TCP, UCX, net plugins) carry it unchanged.
// Collective pieces are therefore at most slotBytes - kPrintBytes (pieceBytes()), in every FIFO.
//
// Device connections (p2p, host-staged shm) may also carry an LL region after the slots: llLines
// 16-byte lines per slot, each 8 data bytes beside their flags (exec/cuda/dev_work.h, LL), zero
// at creation. The device executor uses it for small operations; the host executors never do.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace coll::transport {

constexpr int kMaxSlots = 64;
constexpr size_t kLineBytes = 56;         // data bytes that fit beside a tag in one cache line
constexpr uint32_t kRefBit = 1u << 31;    // in a tag's byte count: the slot holds a reference
constexpr uint32_t kLineBit = 1u << 30;   // in a tag's byte count: the bytes are in the tag's line
constexpr uint32_t kPrintBit = 1u << 29;  // in a tag's byte count: the line carries a call print
constexpr uint32_t kTagFlags = kRefBit | kLineBit | kPrintBit;
constexpr size_t kPrintBytes = 16;                     // a call print (core/call_check.h)
constexpr size_t kPrintAt = kLineBytes - kPrintBytes;  // where it sits in a tag line's data
constexpr unsigned char kPrintMagic = 0xC7;            // a print's first byte
// FifoHeader::refsAccepted: the consumer reads references from the producer's memory (tagged
// FIFOs, shm), or the consumer is an in-process proxy that sends from it (plain FIFOs, network).
constexpr uint32_t kRefsTagged = 1;
constexpr uint32_t kRefsPlain = 2;
constexpr uint32_t kRefsPlainPrinted = 3;  // kRefsPlain, and printed pieces too

/// One slot's tag and inline data. tag = (index + 1) << 32 | bytes, stored last with release.
struct alignas(64) TagLine {
  char data[kLineBytes];
  std::atomic<uint64_t> tag;
};
static_assert(sizeof(TagLine) == 64, "a tag and its data share one cache line");

struct alignas(64) FifoHeader {
  std::atomic<uint64_t> head;
  // Right after head, so that for up to 14 slots a slot's size travels in the same cache line
  // as the head that publishes it: the consumer pulls one line from the producer's core, not two.
  uint32_t sizes[kMaxSlots];               // bytes in each slot, written before head is published
  alignas(64) std::atomic<uint64_t> tail;  // written by the consumer: a line of its own
  char pad[56];
  // Set up once per connection, for references (see above).
  alignas(64) std::atomic<uint32_t> refsAccepted;  // consumer: 1 once it can read the producer's memory
  int32_t producerPid;                             // producer: its pid
  uint64_t probeAddress;                           // producer: a word the consumer reads to test access
  std::atomic<uint64_t> refsVoidUntil;             // producer: references below this slot index are void
  std::atomic<uint64_t> refPinned;                 // consumer: 1 + the slot of the reference it reads, or 0
  TagLine lines[kMaxSlots];                        // used by tagged FIFOs only
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "FIFO counters must work across processes");

/// Where a FIFO lives: a header and the slots right after it (page-aligned).
struct Fifo {
  FifoHeader* header = nullptr;
  char* slots = nullptr;
  int nslots = 0;
  size_t slotBytes = 0;
  bool tagged = false;      // readiness (and small pieces) in the slots' tag lines
  bool inlineSmall = true;  // producer: pieces of up to kLineBytes go in the tag line (COLL_PROTO LL)
  char* ll = nullptr;       // the LL region (16-byte aligned), nullptr when llLines == 0
  size_t llLines = 0;       // LL lines per slot
  /// nslots - 1 when nslots is a power of two (the default 8 is), else 0: a slot's position is
  /// then a mask instead of a 64-bit division, which costs tens of cycles on every poll of a tag.
  uint64_t slotMask = 0;

  /// Bytes a FIFO of this shape needs, header (and LL region) included.
  static size_t bytesFor(int nslots, size_t slotBytes, size_t llLines = 0);
  /// Lays a FIFO over memory of bytesFor() bytes; initialize=true zeroes the counters (the LL
  /// region must come zeroed: fresh shared or device memory is). initialize=false only computes
  /// the pointers, so it also works over device memory the host cannot touch.
  static Fifo over(void* memory, int nslots, size_t slotBytes, bool initialize, size_t llLines = 0);
  /// Where the LL region of a FIFO of this shape starts, from the start of its memory.
  static size_t llOffset(int nslots, size_t slotBytes);
  /// Whether a shape a peer describes is one a FIFO can have, in memory of `bytes` bytes: what
  /// a transport checks before it lays a view over memory a descriptor names.
  static bool plausible(int64_t nslots, uint64_t slotBytes, uint64_t llLines, uint64_t bytes);
  /// bytesFor() of this FIFO.
  size_t totalBytes() const { return bytesFor(nslots, slotBytes, llLines); }

  /// The position of slot index in the ring.
  uint64_t pos(uint64_t index) const { return slotMask ? index & slotMask : index % static_cast<uint64_t>(nslots); }
  char* slot(uint64_t index) const { return slots + pos(index) * slotBytes; }
  TagLine& line(uint64_t index) const { return header->lines[pos(index)]; }

  /// The most bytes a collective's piece may hold: a plain FIFO's slot keeps room for a print,
  /// and a tagged one the same (the two ends of a step may use FIFOs of both kinds, and must cut
  /// the data into the same pieces).
  size_t pieceBytes() const { return slotBytes - kPrintBytes; }
  /// Producer: where a piece of `bytes` for slot index goes (printed: it will carry a print).
  char* sendBuffer(uint64_t index, size_t bytes, bool printed = false) const {
    return inLine(bytes, printed) ? line(index).data : slot(index);
  }
  /// Producer: publishes slot index holding `bytes`, with the call print `print` (kPrintBytes)
  /// when not null.
  void publish(uint64_t index, size_t bytes, const void* print = nullptr) const {
    if (tagged) {  // the tag carries index and size: head and sizes stay unused
      uint64_t flags = inLine(bytes, print != nullptr) ? kLineBit : 0;
      if (print) {
        std::memcpy(line(index).data + kPrintAt, print, kPrintBytes);
        flags |= kPrintBit;
      }
      line(index).tag.store((index + 1) << 32 | flags | bytes, std::memory_order_release);
      return;
    }
    if (print) std::memcpy(slot(index) + bytes, print, kPrintBytes);
    header->sizes[pos(index)] = static_cast<uint32_t>(bytes + (print ? kPrintBytes : 0));
    header->head.store(index + 1, std::memory_order_release);
  }
  /// Consumer: whether slot index has been published (acquire).
  bool ready(uint64_t index) const {
    if (tagged) return line(index).tag.load(std::memory_order_acquire) >> 32 == ((index + 1) & 0xffffffffu);
    return header->head.load(std::memory_order_acquire) > index;
  }
  /// Producer (FIFOs whose consumer accepts references: acceptsRefs()): publishes slot index as
  /// a reference to `bytes` at `address` in the producer's memory, which stays unchanged until
  /// the consumer releases the slot.
  void publishRef(uint64_t index, const void* address, size_t bytes, const void* print = nullptr) const {
    uint64_t a = reinterpret_cast<uintptr_t>(address);
    std::memcpy(line(index).data, &a, sizeof(a));
    if (print) std::memcpy(line(index).data + kPrintAt, print, kPrintBytes);
    if (!tagged) {
      header->sizes[pos(index)] = static_cast<uint32_t>(bytes) | kRefBit | (print ? kPrintBit : 0);
      header->head.store(index + 1, std::memory_order_release);
      return;
    }
    line(index).tag.store((index + 1) << 32 | kRefBit | (print ? kPrintBit : 0) | bytes, std::memory_order_release);
  }
  /// Consumer, once ready(index): whether the piece, expected to hold `want` bytes, carries a call
  /// print, copied into out (kPrintBytes). A plain FIFO's piece does when its size is want +
  /// kPrintBytes and those bytes start with kPrintMagic.
  bool printIn(uint64_t index, size_t want, void* out) const {
    if (tagged) {
      if (!(line(index).tag.load(std::memory_order_relaxed) & kPrintBit)) return false;
      std::memcpy(out, line(index).data + kPrintAt, kPrintBytes);
      return true;
    }
    if (header->sizes[pos(index)] != want + kPrintBytes) return false;
    const char* trailer = slot(index) + want;
    if (static_cast<unsigned char>(trailer[0]) != kPrintMagic) return false;
    std::memcpy(out, trailer, kPrintBytes);
    return true;
  }
  /// Consumer, once ready(index), of a plain FIFO whose piece is not the size expected (so the
  /// calls already differ): the print at the end of the piece, whatever its size, when the bytes
  /// there start with kPrintMagic (out: kPrintBytes). Only for a better sentence: with the sizes
  /// equal, printIn is the test.
  bool printAtEnd(uint64_t index, void* out) const {
    if (tagged) return false;
    uint32_t size = header->sizes[pos(index)];
    if (size < kPrintBytes || size > slotBytes) return false;
    const char* trailer = slot(index) + (size - kPrintBytes);
    if (static_cast<unsigned char>(trailer[0]) != kPrintMagic) return false;
    std::memcpy(out, trailer, kPrintBytes);
    return true;
  }
  /// Whether the consumer accepts a reference, carrying a call print when printed (the producer
  /// checks before each one).
  bool acceptsRefs(bool printed = false) const {
    uint32_t a = header->refsAccepted.load(std::memory_order_relaxed);
    return tagged ? a == kRefsTagged : a == kRefsPlainPrinted || (a == kRefsPlain && !printed);
  }
  /// Consumer, once ready(index): the piece's byte count (a plain reference's print not included).
  uint32_t bytesIn(uint64_t index) const {
    if (tagged) return static_cast<uint32_t>(line(index).tag.load(std::memory_order_relaxed)) & ~kTagFlags;
    return header->sizes[pos(index)] & ~kTagFlags;
  }
  /// Consumer (the network proxy), once ready(index) and isRef(index) in a plain FIFO: the print
  /// the piece carries, or null.
  const void* refPrint(uint64_t index) const {
    return (header->sizes[pos(index)] & kPrintBit) ? line(index).data + kPrintAt : nullptr;
  }
  /// Consumer, once ready(index): whether the slot holds a reference rather than bytes.
  bool isRef(uint64_t index) const {
    if (!tagged) return (header->sizes[pos(index)] & kRefBit) != 0;
    return (line(index).tag.load(std::memory_order_relaxed) & kRefBit) != 0;
  }
  /// Consumer, once ready(index) and isRef(index): the piece's address in the producer's memory.
  uint64_t refAddress(uint64_t index) const {
    uint64_t a;
    std::memcpy(&a, line(index).data, sizeof(a));
    return a;
  }
  /// Consumer, once ready(index) and not isRef(index): where the piece's bytes are.
  const char* recvBuffer(uint64_t index) const {
    return tagged && (line(index).tag.load(std::memory_order_relaxed) & kLineBit) ? line(index).data : slot(index);
  }
  /// Producer: whether a piece of `bytes` travels inside the tag line (printed: beside a print).
  bool inLine(size_t bytes, bool printed = false) const {
    return tagged && inlineSmall && bytes <= (printed ? kPrintAt : kLineBytes);
  }
  /// Consumer: frees slot index for the producer.
  void release(uint64_t index) const { header->tail.store(index + 1, std::memory_order_release); }
  /// Consumer, before it reads the reference at slot index: false when the producer has taken it
  /// back (its operation failed); else the reference stays valid until unpinRef().
  bool pinRef(uint64_t index) const {
    header->refPinned.store(index + 1, std::memory_order_seq_cst);
    if (header->refsVoidUntil.load(std::memory_order_seq_cst) <= index) return true;
    header->refPinned.store(0, std::memory_order_release);
    return false;
  }
  /// Consumer: done reading the pinned reference (before the slot's release).
  void unpinRef() const { header->refPinned.store(0, std::memory_order_release); }
  /// Producer whose operation failed: voids the references below slot `until` (pinRef fails on
  /// them from now on).
  void voidRefs(uint64_t until) const {
    if (until > header->refsVoidUntil.load(std::memory_order_relaxed))
      header->refsVoidUntil.store(until, std::memory_order_seq_cst);
  }
  /// Producer, after voidRefs(until): whether the consumer is still reading one of them (it pins
  /// only while it copies or reduces a piece, never across a wait).
  bool readingRefBelow(uint64_t until) const {
    uint64_t p = header->refPinned.load(std::memory_order_seq_cst);
    return p != 0 && p <= until;
  }
};

constexpr size_t kLLLineBytes = 16;  // one LL line: two 4-byte data words, each beside its flag

inline size_t Fifo::llOffset(int nslots, size_t slotBytes) {
  size_t headerBytes = (sizeof(FifoHeader) + 4095) & ~size_t(4095);
  return (headerBytes + static_cast<size_t>(nslots) * slotBytes + 15) & ~size_t(15);
}

inline size_t Fifo::bytesFor(int nslots, size_t slotBytes, size_t llLines) {
  return llOffset(nslots, slotBytes) + static_cast<size_t>(nslots) * llLines * kLLLineBytes;
}

inline bool Fifo::plausible(int64_t nslots, uint64_t slotBytes, uint64_t llLines, uint64_t bytes) {
  // Below 2^29: a tag's byte count shares its word with the flags.
  return nslots >= 2 && nslots <= kMaxSlots && slotBytes > kPrintBytes && slotBytes < (uint64_t(1) << 29) &&
         llLines <= (uint64_t(1) << 20) && bytes >= bytesFor(static_cast<int>(nslots), slotBytes, llLines);
}

inline Fifo Fifo::over(void* memory, int nslots, size_t slotBytes, bool initialize, size_t llLines) {
  Fifo f;
  f.header = static_cast<FifoHeader*>(memory);
  f.slots = static_cast<char*>(memory) + ((sizeof(FifoHeader) + 4095) & ~size_t(4095));
  f.nslots = nslots;
  f.slotMask = nslots > 0 && (nslots & (nslots - 1)) == 0 ? static_cast<uint64_t>(nslots) - 1 : 0;
  f.slotBytes = slotBytes;
  f.llLines = llLines;
  f.ll = llLines ? static_cast<char*>(memory) + llOffset(nslots, slotBytes) : nullptr;
  if (initialize) {
    new (&f.header->head) std::atomic<uint64_t>(0);
    new (&f.header->tail) std::atomic<uint64_t>(0);
    new (&f.header->refsAccepted) std::atomic<uint32_t>(0);
    f.header->producerPid = 0;
    f.header->probeAddress = 0;
    new (&f.header->refsVoidUntil) std::atomic<uint64_t>(0);
    new (&f.header->refPinned) std::atomic<uint64_t>(0);
    for (TagLine& l : f.header->lines) new (&l.tag) std::atomic<uint64_t>(0);
  }
  return f;
}

}  // namespace coll::transport
