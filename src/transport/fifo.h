// The slot FIFO every connection exposes to the executor.
//
// A FIFO is nslots slots of slotBytes each, plus two counters on separate cache lines: head (slots
// the producer has filled, with the slots' sizes beside it) and tail (slots the consumer has
// drained). The producer writes slot
// head % nslots and its byte count, then publishes with a release store of head+1; the consumer
// reads after an acquire load of head, and frees the slot with a release store of tail+1. Only
// one thread produces and one consumes, so no other synchronization is needed. For shm, this
// memory is shared between the two processes; for TCP, each side has a private FIFO and the
// connection's progress() moves slots between them and the socket.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace coll::transport {

constexpr int kMaxSlots = 64;

struct alignas(64) FifoHeader {
  std::atomic<uint64_t> head;
  // Right after head, so that for up to 14 slots a slot's size travels in the same cache line
  // as the head that publishes it: the consumer pulls one line from the producer's core, not two.
  uint32_t sizes[kMaxSlots];               // bytes in each slot, written before head is published
  alignas(64) std::atomic<uint64_t> tail;  // written by the consumer: a line of its own
  char pad[56];
};
static_assert(std::atomic<uint64_t>::is_always_lock_free, "FIFO counters must work across processes");

/// Where a FIFO lives: a header and the slots right after it (page-aligned).
struct Fifo {
  FifoHeader* header = nullptr;
  char* slots = nullptr;
  int nslots = 0;
  size_t slotBytes = 0;

  /// Bytes a FIFO of this shape needs, header included.
  static size_t bytesFor(int nslots, size_t slotBytes);
  /// Lays a FIFO over memory of bytesFor() bytes; initialize=true zeroes the counters.
  static Fifo over(void* memory, int nslots, size_t slotBytes, bool initialize);

  char* slot(uint64_t index) const { return slots + (index % static_cast<uint64_t>(nslots)) * slotBytes; }
};

inline size_t Fifo::bytesFor(int nslots, size_t slotBytes) {
  size_t headerBytes = (sizeof(FifoHeader) + 4095) & ~size_t(4095);
  return headerBytes + static_cast<size_t>(nslots) * slotBytes;
}

inline Fifo Fifo::over(void* memory, int nslots, size_t slotBytes, bool initialize) {
  Fifo f;
  f.header = static_cast<FifoHeader*>(memory);
  f.slots = static_cast<char*>(memory) + ((sizeof(FifoHeader) + 4095) & ~size_t(4095));
  f.nslots = nslots;
  f.slotBytes = slotBytes;
  if (initialize) {
    new (&f.header->head) std::atomic<uint64_t>(0);
    new (&f.header->tail) std::atomic<uint64_t>(0);
  }
  return f;
}

}  // namespace coll::transport
