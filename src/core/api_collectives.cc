// Collectives, point-to-point and groups on host memory.
//
// Every call is validated first (nothing is sent when it fails). Outside a group it runs at once
// and returns when the result is in recvbuff. Inside collGroupStart/collGroupEnd it is queued per
// calling thread; collGroupEnd runs each communicator's queue: its collectives in call order, then
// all its sends and receives together. Communicators of one group run one after the other, in the
// order they first appear.
#include <vector>

#include "coll/coll.h"
#include "core/api_util.h"
#include "core/comm.h"
#include "core/enqueue.h"

using coll::CallGuard;
using coll::OpArgs;
using coll::OpKind;
using coll::Status;

namespace {

thread_local int tGroupDepth = 0;
thread_local std::vector<OpArgs> tGroupOps;

collResult_t submit(const OpArgs& op) {
  return coll::api::guarded(op.name, op.comm, [&]() -> Status {
    CallGuard guard(op.comm);
    if (!guard.ok()) return guard.status();
    COLL_TRY(coll::validate(op));
    if (tGroupDepth > 0) {
      tGroupOps.push_back(op);
      return Status::ok();
    }
    return coll::runOps(op.comm, {op});
  });
}

}  // namespace

COLL_API collResult_t collAllReduce(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype,
                                    collRedOp_t op, collComm_t comm, collStream_t stream) {
  return submit({OpKind::kAllReduce, "collAllReduce", sendbuff, recvbuff, count, coll::rawEnum(datatype),
                 coll::rawEnum(op), 0, comm, stream});
}

COLL_API collResult_t collBroadcast(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype,
                                    int root, collComm_t comm, collStream_t stream) {
  return submit({OpKind::kBroadcast, "collBroadcast", sendbuff, recvbuff, count, coll::rawEnum(datatype), collSum, root,
                 comm, stream});
}

COLL_API collResult_t collReduce(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype,
                                 collRedOp_t op, int root, collComm_t comm, collStream_t stream) {
  return submit({OpKind::kReduce, "collReduce", sendbuff, recvbuff, count, coll::rawEnum(datatype), coll::rawEnum(op),
                 root, comm, stream});
}

COLL_API collResult_t collAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, collDataType_t datatype,
                                    collComm_t comm, collStream_t stream) {
  return submit({OpKind::kAllGather, "collAllGather", sendbuff, recvbuff, sendcount, coll::rawEnum(datatype), collSum,
                 0, comm, stream});
}

COLL_API collResult_t collReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, collDataType_t datatype,
                                        collRedOp_t op, collComm_t comm, collStream_t stream) {
  return submit({OpKind::kReduceScatter, "collReduceScatter", sendbuff, recvbuff, recvcount, coll::rawEnum(datatype),
                 coll::rawEnum(op), 0, comm, stream});
}

COLL_API collResult_t collAllToAll(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype,
                                   collComm_t comm, collStream_t stream) {
  return submit({OpKind::kAllToAll, "collAllToAll", sendbuff, recvbuff, count, coll::rawEnum(datatype), collSum, 0,
                 comm, stream});
}

COLL_API collResult_t collSend(const void* sendbuff, size_t count, collDataType_t datatype, int peer, collComm_t comm,
                               collStream_t stream) {
  return submit(
      {OpKind::kSend, "collSend", sendbuff, nullptr, count, coll::rawEnum(datatype), collSum, peer, comm, stream});
}

COLL_API collResult_t collRecv(void* recvbuff, size_t count, collDataType_t datatype, int peer, collComm_t comm,
                               collStream_t stream) {
  return submit(
      {OpKind::kRecv, "collRecv", nullptr, recvbuff, count, coll::rawEnum(datatype), collSum, peer, comm, stream});
}

COLL_API collResult_t collGroupStart(void) {
  ++tGroupDepth;
  return collSuccess;
}

COLL_API collResult_t collGroupEnd(void) {
  if (tGroupDepth == 0)
    return coll::api::finish("collGroupEnd", nullptr,
                             Status(collInvalidUsage, "collGroupEnd without a matching collGroupStart"));
  if (--tGroupDepth > 0) return collSuccess;
  std::vector<OpArgs> ops;
  ops.swap(tGroupOps);
  std::vector<collComm_t> order;
  for (const auto& op : ops)
    if (std::find(order.begin(), order.end(), op.comm) == order.end()) order.push_back(op.comm);
  for (collComm_t comm : order) {
    std::vector<OpArgs> mine;
    for (const auto& op : ops)
      if (op.comm == comm) mine.push_back(op);
    collResult_t rc = coll::api::guarded("collGroupEnd", comm, [&]() -> Status {
      CallGuard guard(comm);
      if (!guard.ok()) return guard.status();
      COLL_TRY(coll::checkReady(comm));
      return coll::runOps(comm, mine);
    });
    if (rc != collSuccess) return rc;
  }
  return collSuccess;
}
