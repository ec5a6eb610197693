// From an API call to work: argument validation, groups, and running operations on host memory.
#pragma once

#include <vector>

#include "coll/coll.h"
#include "core/status.h"

namespace coll {

enum class OpKind { kAllReduce, kBroadcast, kReduce, kAllGather, kReduceScatter, kAllToAll, kSend, kRecv };

/// One collective or point-to-point call, as the user made it.
struct OpArgs {
  OpKind kind;
  const char* name;  // "collAllReduce", for messages
  const void* sendbuff;
  void* recvbuff;
  size_t count;
  collDataType_t type;
  collRedOp_t op;
  int root;  // root for broadcast/reduce, peer for send/recv
  collComm_t comm;
  collStream_t stream;
};

/// Checks everything that can be checked locally (comm state, buffers, type, op, root or peer,
/// size overflow, stream). Nothing is sent when this fails. The caller holds a CallGuard.
Status validate(const OpArgs& op);

/// Runs one communicator's operations: collectives in call order, then all point-to-point
/// operations together (so any matching pattern completes). Blocking. A failure after data
/// started to move marks the communicator broken.
Status runOps(collComm_t comm, const std::vector<OpArgs>& ops);

}  // namespace coll
