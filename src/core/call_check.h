// Fingerprints of collective calls, so that ranks that call different collectives, ops, types,
// counts or roots (or skip a call) fail with collInvalidUsage naming both calls instead of
// returning divergent results or timing out. COLL_CHECK_CALLS chooses how:
//  - in band (the default): a 16-byte print (WirePrint) rides with the first piece each
//    operation sends to each peer (transport/fifo.h says where), and the receiver compares it with
//    its own call's before it uses a byte of the piece. Costs a 16-byte copy and compare per peer
//    and operation. Carried by the CPU executor's collectives and sends/receives (p2pPrint: bytes
//    and the ordinal between the two ranks) over shm, TCP, UCX and net plugins (which move the
//    slots it rides in), and by connection setup (core/connections.h: a connection made for a
//    call tells the peer its print), and by the device executor and the device-host executor (the
//    first piece of each step: exec/cuda/dev_work.h, in the kernel; the windows paths compare
//    their own). It sees a mismatch only where a piece moves between ranks that differ, or a
//    connection is made between them. Every rank must set it alike (the device LL protocol's
//    receiver waits for the print lines its sender writes only when it checks too);
//  - full (COLL_CHECK_CALLS=1 or full): before each collective, the ranks also all-gather a
//    32-byte print over the data path and compare them all, PyTorch's collective fingerprint check
//    (TORCH_DISTRIBUTED_DEBUG=DETAIL): it catches what the in-band check cannot see (a rank that
//    receives nothing from a peer that differs), at one small all-gather per call;
//  - off (COLL_CHECK_CALLS=0).
#pragma once

#include <cstdint>
#include <string>

namespace coll {

struct OpArgs;

/// The fingerprint of a call, and the sentence describing one.
struct CallPrint {
  uint64_t seq;
  int32_t kind, type, op, root;
  uint64_t count;
};
static_assert(sizeof(CallPrint) == 32, "a fixed wire size");

CallPrint callPrint(const OpArgs& a, uint64_t seq);
std::string describeCall(const CallPrint& p);
/// "" when all prints are equal; else the sentence naming the first rank that differs from rank 0.
std::string comparePrints(const CallPrint* prints, int nranks);

/// COLL_CHECK_CALLS's modes.
enum class CallChecks { kOff, kInBand, kFull };
/// Parses COLL_CHECK_CALLS: "" or "inband" (the default), "0"/"off", "1"/"full"; false for
/// anything else.
bool parseCallChecks(const std::string& text, CallChecks* out);

/// The in-band print: 16 bytes, its first byte transport::kPrintMagic. Word a: magic (8 bits),
/// kind (4), type (5), op (8; 0xff where the call does not reduce), root (16; 0xffff where not
/// rooted), 16 bits left 0, the call's position in its group (7); word b: count (40 bits,
/// saturated) and the collective's number (24 bits). A PreMulSum's scalar is not in it: NCCL lets
/// every rank scale its input by a scalar of its own.
struct WirePrint {
  uint64_t a = 0, b = 0;
};
static_assert(sizeof(WirePrint) == 16, "transport::kPrintBytes");
/// The print of call a, the seq-th collective of its communicator, at position pos of its group.
WirePrint wirePrint(const OpArgs& a, uint64_t seq, int pos);
/// The print of a send or receive of `bytes`, the ordinal-th (from 1) between this rank and its
/// peer in that direction: a send and the receive it meets have equal prints when they match.
WirePrint p2pPrint(uint64_t bytes, uint64_t ordinal);
/// Whether two in-band prints (kPrintBytes each) are of the same collective number.
bool sameCollective(const void* a, const void* b);
/// The sentence for a piece from rank peer whose print (theirs) differs from this rank's (mine),
/// as exec::CallCheck::describe wants it.
std::string describeMismatch(const void* mine, const void* theirs, int rank, int peer, const char* opName);

}  // namespace coll
