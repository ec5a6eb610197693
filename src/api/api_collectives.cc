// Collectives, point-to-point and groups on host memory.
//
// Every call is validated first (nothing is sent when it fails). Outside a group it runs at once
// and returns when the result is in recvbuff. Inside collGroupStart/collGroupEnd it is queued per
// calling thread; collGroupEnd runs each communicator's queue: its collectives in call order, then
// all its sends and receives together. When a group spans several communicators (one thread
// driving every rank of a collCommInitAll clique, as single-process multi-device programs do),
// their queues run at the same time, one thread each: run one after the other, the first would
// wait forever for ranks whose calls are queued behind it.
#include <algorithm>
#include <new>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <vector>

#include "api/api_util.h"
#include "coll/coll.h"
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

// Runs comm's share of a group's queue; never throws (it may run on a helper thread).
Status runQueued(collComm_t comm, const std::vector<OpArgs>& ops) noexcept {
  try {
    std::vector<OpArgs> mine;
    for (const auto& op : ops)
      if (op.comm == comm) mine.push_back(op);
    CallGuard guard(comm);
    if (!guard.ok()) return guard.status();
    COLL_TRY(coll::checkReady(comm));
    return coll::runOps(comm, mine);
  } catch (const std::bad_alloc&) {
    return Status(collSystemError, "out of host memory");
  } catch (const std::exception& e) {
    return Status(collInternalError, std::string("unexpected exception: ") + e.what());
  }
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
  if (ops.empty()) return collSuccess;
  std::vector<collComm_t> order;
  for (const auto& op : ops)
    if (std::find(order.begin(), order.end(), op.comm) == order.end()) order.push_back(op.comm);
  std::vector<Status> results(order.size());
  std::vector<std::thread> helpers;
  for (size_t i = 1; i < order.size(); ++i) {
    try {
      helpers.emplace_back([&, i] { results[i] = runQueued(order[i], ops); });
    } catch (const std::system_error& e) {
      // Its peers will end in collTimeout; this thread can still run the others.
      results[i] = Status(collSystemError, std::string("could not start a thread for the group: ") + e.what());
    }
  }
  results[0] = runQueued(order[0], ops);
  for (auto& t : helpers) t.join();
  // Every failure is recorded on its communicator; the call returns the first.
  collResult_t first = collSuccess;
  for (size_t i = 0; i < order.size(); ++i) {
    collResult_t rc = coll::api::finish("collGroupEnd", order[i], std::move(results[i]));
    if (first == collSuccess) first = rc;
  }
  return first;
}
