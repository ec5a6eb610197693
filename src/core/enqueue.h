// From an API call to work: argument validation, groups, and running operations on host memory.
#pragma once

#include <vector>

#include "algorithms/catalog.h"
#include "algorithms/tuner.h"
#include "base/status.h"
#include "coll/coll.h"
#include "core/call_check.h"
#include "exec/executor.h"

namespace coll {

enum class OpKind { kAllReduce, kBroadcast, kReduce, kAllGather, kReduceScatter, kAllToAll, kSend, kRecv };

/// A slot of the communicator's op table: the op collNumOps + i is slot i (core/redop.h).
struct PreMulSumOp {
  bool inUse = false;
  collDataType_t type = collFloat32;
  collScalarResidence_t residence = collScalarHostImmediate;
  unsigned char value[8] = {};    // collScalarHostImmediate: the scalar, read at create
  const void* pointer = nullptr;  // collScalarDevice: where the scalar is read at each run
};

/// One collective or point-to-point call, as the user made it.
struct OpArgs {
  OpKind kind;
  const char* name;  // "collAllReduce", for messages
  const void* sendbuff;
  void* recvbuff;
  size_t count;
  int type;  // collDataType_t, kept as int until validated: C callers can pass any int
  int op;    // collRedOp_t, likewise
  int root;  // root for broadcast/reduce, peer for send/recv
  collComm_t comm;
  collStream_t stream;
  /// A PreMulSum op as it was when the call was made (snapshotRedOp): the op may be destroyed as
  /// soon as the call returns, while the call is still queued in a group or on a host stream.
  PreMulSumOp premul{};
  /// Set by validate: the buffers are device memory of the communicator's device, so the call
  /// goes to the device path (core/device_enqueue.h) on a device stream.
  bool onDevice = false;
  /// Set by validate: the data-path deadline in ms the call runs under (the communicator's when
  /// the call was made: collCommSetTimeout changes it for the calls after it).
  int64_t timeoutMs = 0;
};

/// The deadline the calls of one group run under together: the longest among them.
int64_t groupTimeoutMs(const OpArgs* ops, size_t n);

/// Copies the PreMulSum op that a (validated) call names into a->premul; nothing for other ops.
void snapshotRedOp(OpArgs* a);

/// The int behind an enum argument from C, read without loading an out-of-range enum value
/// (which C++ leaves undefined).
template <typename E>
int rawEnum(const E& e) {
  static_assert(sizeof(E) == sizeof(int), "C enums are int-sized here");
  int v;
  __builtin_memcpy(&v, &e, sizeof(v));
  return v;
}

/// The collective an operation is; false for send and receive.
bool collectiveOf(OpKind kind, algorithms::Collective* out);

/// How a collective call of `bytes` (count x type size) runs on comm: the tuner's plan
/// (algorithm, chunk, protocols) under COLL_ALGO and COLL_PROTO. The one decision both scheduling
/// and collCommGetAlgorithm read.
algorithms::Plan choosePlan(const collComm* comm, algorithms::Collective c, size_t bytes);

/// A group's sends and receives as the executors take them (count 0 left out; to oneself too),
/// and the peers each direction needs connected.
void gatherP2P(const OpArgs* ops, size_t n, std::vector<exec::P2POp>* p2p, std::vector<int>* sendPeers,
               std::vector<int>* recvPeers);

/// Whether send s reads memory that a receive of the same group writes: sends and receives
/// progress piece by piece in any order, so such a send must go from a copy taken first.
bool sendOverlapsRecv(const exec::P2POp& s, const std::vector<exec::P2POp>& p2p);

/// collInvalidArgument with a sentence unless type is a collDataType_t and count elements of
/// it, times factor (buffers of several blocks), fit a size_t.
Status checkTypeAndCount(int type, size_t count, size_t factor = 1);

/// Checks everything that can be checked locally (comm state, buffers, type, op, root or peer,
/// size overflow, stream, where the buffers are) and sets op->onDevice. Nothing is sent when this
/// fails. The caller holds a CallGuard.
Status validate(OpArgs* op);

/// Elements of the larger of an operation's two buffers, in units of count.
size_t bufferFactor(OpKind k, int nranks);

/// The tuner's plan for a collective of `bytes` (count x type size) on comm, cached per
/// collective: loops call one size over and over.
const algorithms::Plan& planFor(collComm_t comm, algorithms::Collective c, size_t bytes);

/// The schedule of `plan` for a.count elements (a.root's, comm's ranks and ring order), its chunk
/// within half of fifoBytes (0: the host connections' FIFO) and, when pieceBytes is given, a whole
/// number of pieces of that size (so that no chunk ends in a sliver of a piece).
algorithms::Schedule buildFor(collComm_t comm, const OpArgs& a, algorithms::Collective c, const algorithms::Plan& plan,
                              size_t elem, size_t fifoBytes = 0, size_t pieceBytes = 0);

/// The in-band call check of collective call a at position pos of its group (COLL_CHECK_CALLS,
/// core/call_check.h): writes its print into *print and points *check at it, for an executor's
/// Work; leaves *check empty when the check is off. *print must live as long as the work runs.
void attachCallCheck(collComm_t comm, const OpArgs& a, int pos, WirePrint* print, exec::CallCheck* check);
/// The in-band check of a group's sends and receives: each op's print says its bytes and its
/// ordinal between the two ranks in its direction (p2pPrint), counted on comm; nothing when the
/// check is off. Both paths (host, device) count alike, so the two ends' ordinals agree.
void attachP2PPrints(collComm_t comm, std::vector<exec::P2POp>* ops);

/// An operation failed after data started to move (host or device path): FIFO positions are no
/// longer consistent between the ranks, so the communicator is broken. A timeout names the rank
/// at the end of the chain of waits (core/blame.h); the peers hear why (their waits end with this
/// sentence, or this rank's with theirs when a peer's notice explains it); the flight recorder is
/// written; the first error is kept and the async error set. Returns the status to report.
Status failOperation(collComm_t comm, Status s);

/// COLL_CHECK_CALLS=full: the ranks all-gather the fingerprint of call a over the host
/// connections and compare them all (call_check.h); collInvalidUsage naming the first rank that
/// differs. Collective over the communicator: every rank calls it for the same call. The device
/// path calls it at enqueue too (it blocks the caller, not the stream).
Status checkSameCall(collComm_t comm, const OpArgs& a);

/// The sum of the bytes of ops (count x element size; sends and receives count bytes), for a
/// live view's "moved" (coll-top).
uint64_t opBytes(const OpArgs* ops, size_t n);

/// Runs one communicator's operations: collectives in call order, then all point-to-point
/// operations together (so any matching pattern completes). Blocking. A failure after data
/// started to move marks the communicator broken.
Status runOps(collComm_t comm, const OpArgs* ops, size_t n);
inline Status runOps(collComm_t comm, const std::vector<OpArgs>& ops) { return runOps(comm, ops.data(), ops.size()); }

}  // namespace coll
