// The plain data one channel of the device executor works from: its steps, the operation's
// arguments, its connections' FIFO views, and where it reports how it ended. No pointers to C++
// objects and no std:: types: the same bytes are read by a CUDA kernel (copied to the device, or
// as kernel arguments) and by the host build's threads.
#pragma once

#include <cstdint>

#include "exec/cuda/portable.h"

namespace coll::exec::dev {

/// Primitives, numbered as algorithms::Prim (interpreter.h checks they agree).
enum PrimCode : uint8_t {
  kSend,
  kRecv,
  kRecvReduceSend,
  kRecvReduceCopy,
  kRecvReduceCopySend,
  kRecvCopySend,
  kCopy,
  kSendRecv,
  kReduceBlocks,
  kSendRecvReduce,
};
enum BufCode : uint8_t { kInput, kOutput, kScratch };

/// One step (algorithms::Step): offsets and counts in elements.
struct DevStep {
  uint8_t prim;
  uint8_t src;
  uint8_t dst;
  uint8_t final;  // writes final values: collAvg divides here
  int32_t sendPeer;
  int32_t recvPeer;
  uint64_t srcOff;
  uint64_t dstOff;
  uint64_t count;
  uint64_t recvCount;  // kSendRecv / kSendRecvReduce: elements received
};

/// Slot protocols. Simple: a slot's bytes, then its size and a release store of head. LL: 8 data
/// bytes per 16-byte line (portable.h), the flag (slot index + 1) in every line, no head at all:
/// a piece costs the consumer no separate counter read, which is what small messages pay for.
enum Proto : int { kSimple = 0, kLL = 1 };

/// One direction of one connection as the interpreter sees it. head, sizes, slots: Simple;
/// llSlots: LL (a region of its own, so that a stale Simple byte can never pass for a flag);
/// tail: both (the consumer's count of drained slots, which frees them for the producer).
struct DevFifo {
  uint64_t* head = nullptr;
  uint32_t* sizes = nullptr;
  uint64_t* tail = nullptr;
  char* slots = nullptr;
  LLLine* llSlots = nullptr;
  int nslots = 0;
  uint64_t slotBytes = 0;    // Simple bytes per slot
  uint64_t llSlotLines = 0;  // LL lines per slot (8 data bytes each)
};

/// A FIFO end and this end's position in it, which persists from one operation to the next as
/// the FIFO's counters do.
struct DevPort {
  DevFifo fifo;
  uint64_t cursor = 0;  // slots filled (send end) or drained (receive end) so far
  int32_t peer = -1;
};

/// Where a channel's time went, measured inside it (the GPU's %globaltimer and SM cycle counter;
/// the host build's monotonic clock in both): written by the channel's leader when it ends, so
/// that every figure a benchmark prints has a measured cause. Polls and releases are timed on the
/// two threads that do them (the receive side's thread 0 and the send side's thread): the Simple
/// protocol's waits for head or tail, and its release stores of head and tail (each a system-scope
/// fence and a store). LL pieces wait line by line on every thread, which is not timed.
struct DevTiming {
  uint64_t start = 0;       // ns: the channel began
  uint64_t firstPiece = 0;  // ns: its first piece was moved (0: it moved none)
  uint64_t lastPiece = 0;   // ns: its last piece was moved
  uint64_t end = 0;         // ns: it ended
  uint64_t recvPollCycles = 0;
  uint64_t sendPollCycles = 0;
  uint64_t recvFenceCycles = 0;
  uint64_t sendFenceCycles = 0;
  uint64_t pieces = 0;
};

/// How a channel ended. code: kOk, or the first failure (peer and step say where).
struct DevResult {
  enum Code : int32_t { kOk = 0, kAborted, kTimeout, kSizeMismatch, kBadStep, kCallMismatch };
  int32_t code = kOk;
  int32_t peer = -1;
  int32_t step = -1;
  uint32_t got = 0;  // kSizeMismatch: bytes the peer sent, and bytes expected
  uint32_t want = 0;
  // Peer + 1 that this channel's receive side (recvWait) or send side (sendWait) has waited for
  // beyond a short spin, 0 while it waits for nobody: refreshed every 256 polls of a wait, cleared
  // when the wait ends. A peer that exits has ended nothing unless a channel waits for it (its
  // bytes may all have been taken): the proxy fails a launch for a dead peer only then.
  uint32_t recvWait = 0;
  uint32_t sendWait = 0;
  // Step + 1 of the schedule that the last wait beyond a short spin was in (0: none yet), written
  // with recvWait or sendWait: "waits for peer P at step S" in a live view (coll-top).
  uint32_t atStep = 0;
  // kCallMismatch over a FIFO: the peer's print and this rank's (DevWork::print), for the sentence
  // that names both calls (zero for a mismatch on windows, which has a sentence of its own).
  uint64_t theirs[2] = {0, 0};
  uint64_t mine[2] = {0, 0};
  DevTiming timing;
};

/// The in-band call print (core/call_check.h's WirePrint; transport/fifo.h's kPrintBytes and
/// kPrintMagic, which the executors check these equal): the first piece of each step carries it.
/// Simple: after the piece's bytes in the slot, at the next 8-byte boundary (interpreter.h's
/// printAt: two word accesses, where the CPU executor's plain FIFOs put it right after the bytes;
/// the two executors never share a connection), the slot's size word covering it, so the network
/// proxy, which moves a slot's size in bytes, carries it unchanged. LL: in the slot's
/// first kLLPrintLines lines, which every LL piece keeps free for it (the receiver must know where
/// to wait: a print's presence cannot be told from lines that have not arrived).
constexpr uint64_t kPrintBytes = 16;
constexpr int kLLPrintLines = 2;
constexpr uint32_t kPrintMagic = 0xC7;

/// The most ranks a collective on device windows reaches (one host's GPUs: NVLink domains of 8),
/// and the most moves one of its channels makes (all-to-all: one per rank).
constexpr int kWindowMaxRanks = 8;

/// One rank's word in another rank's arrival area (16 bytes, one per (channel, rank)): the phase
/// it reached (2e + 1 at the start of its e-th call on the channel, 2e + 2 at the end), and the
/// fingerprint of that call, written before the phase (the phase's release store publishes it).
struct DevArrival {
  uint64_t phase;
  uint64_t print;
};

/// One move of a collective on windows: element i of the result is src[0][i] op src[1][i] op ...
/// (rank order), written to every dst[k][i]. Pointers are the peers' window memory as this
/// process maps it; count is this channel's share (elements).
struct DevWindowMove {
  const char* src[kWindowMaxRanks];
  char* dst[kWindowMaxRanks];
  int32_t nsrc;
  int32_t ndst;
  uint64_t count;
};

/// A channel's share of a collective on symmetric windows (core/device_window_path.h), or a
/// one-sided operation on device windows (core/device_onesided.h): no FIFO and no step.
/// A collective (nranks > 0): the channel's leader raises its phase in every peer's arrival area
/// and waits for every peer's; the group makes the moves, reading and writing the peers' memory
/// directly; then a second arrival, so that no rank's kernel ends (and its buffers get reused)
/// while a peer still reads or writes them. The channel's call counter (epoch, this rank's device
/// memory) numbers the calls, so that a CUDA graph's replays go on counting.
/// One-sided (nranks == 0): the leader first waits until each wait word reaches its value
/// (collWaitSignal), the group makes the moves (collPutSignal's copy into the peer's window), and
/// the leader then adds 1 to the signal word (in the peer's signal area), after the moves.
struct DevWindow {
  DevWindowMove moves[kWindowMaxRanks];
  int32_t nmoves;
  int32_t nranks;                         // ranks that arrive (the communicator's); 0: one-sided
  DevArrival* arriveAt[kWindowMaxRanks];  // by peer: this rank's word in the peer's area
  const DevArrival* arrivals;             // this rank's area for the channel, by peer
  uint64_t* epoch;                        // calls made on this channel so far
  uint64_t print;                         // the call's fingerprint: every rank's must be equal
  int32_t divide;                         // collAvg: the results are divided by nranks
  int32_t nwaits;                         // one-sided: conditions waited for first
  const uint64_t* waitWord[kWindowMaxRanks];
  uint64_t waitValue[kWindowMaxRanks];
  int32_t waitPeer[kWindowMaxRanks];  // whom each condition waits for (a timeout names them)
  uint64_t* signal;                   // one-sided: raised by 1 after the moves (null: none)
};

/// Everything one channel of one operation needs.
struct DevWork {
  const DevStep* steps = nullptr;
  int32_t nsteps = 0;
  int32_t type = 0;  // collDataType_t
  int32_t op = 0;    // collRedOp_t: collSum..collAvg, collBand..collBxor; premul below
  int32_t nranks = 1;
  int32_t proto = kSimple;
  int32_t premul = 0;   // a PreMulSum op: every element read from the input is first scaled
  uint64_t scalar = 0;  // its scalar: one element of `type`, in the low bytes
  // A collScalarDevice scalar in device memory: read by the channel when it starts, instead of
  // scalar (so that each launch of a captured graph reads its current value, as NCCL does).
  const void* scalarPtr = nullptr;
  // The call's in-band print (see kPrintBytes), sent with and compared against the first piece of
  // each step; print[0] == 0: none (COLL_CHECK_CALLS=0). Every rank must set the check alike: an LL
  // receiver that checks waits for print lines a sender that does not check never writes.
  uint64_t print[2] = {0, 0};
  const void* input = nullptr;
  void* output = nullptr;
  void* scratch = nullptr;
  DevPort* send = nullptr;  // by peer rank (fifo.nslots == 0 where there is no connection)
  DevPort* recv = nullptr;
  const uint32_t* abortFlag = nullptr;  // non-zero: end at the next wait with kAborted
  uint64_t timeoutNs = 0;               // a wait with nothing moving for this long ends with kTimeout
  DevResult* result = nullptr;
  // A collective on windows (no steps, no ports): in pinned memory beside the work.
  const DevWindow* window = nullptr;
};

/// Steps whose descriptors a channel loads into shared memory at once (a ring all-reduce over 8
/// ranks has 14): one round of reads from the launch's pinned block for all of them.
constexpr int kStepBatch = 16;

/// What the threads of one channel share while it runs (shared memory on the GPU, one object per
/// emulated CTA on the host): the work, and a batch of its steps with their ports, copied from the
/// launch's pinned block once per work and once per kStepBatch steps, so that neither a step nor a
/// piece reads a descriptor over PCIe.
struct ChannelShared {
  DevWork work;
  DevStep steps[kStepBatch];
  DevPort send[kStepBatch];  // step k's ports, their cursors as of when step k starts
  DevPort recv[kStepBatch];
  DevTiming timing;       // the channel's, kept here while it runs (timingBegin, timingEnd)
  DevWindow window;       // a work on windows: its moves, copied in one round of reads
  uint64_t peerPrint[2];  // an LL piece's print as received, a line per thread (interpreter.h)
};

/// One CTA's share of a launch: works run in order (a group's collectives, or one peer and
/// direction's sends or receives in posting order), stopping at the first that fails.
struct DevChannel {
  const DevWork* works = nullptr;
  int32_t nworks = 0;
};

}  // namespace coll::exec::dev
