// Collectives, point-to-point and groups on host memory.
//
// Every call is validated first (nothing is sent when it fails). Outside a group, with a NULL
// stream, it runs at once (after the communicator's queued host-stream work) and returns when the
// result is in recvbuff; with a host stream it is queued on the communicator's HostQueue and
// returns at once (core/host_stream.h). Inside collGroupStart/collGroupEnd it is queued per
// calling thread; collGroupEnd runs each communicator's queue: its collectives in call order, then
// all its sends and receives together. When a group spans several communicators (one thread
// driving every rank of a collCommInitAll clique, as single-process multi-device programs do),
// their queues run at the same time, one thread each: run one after the other, the first would
// wait forever for ranks whose calls are queued behind it.
#include <fmt/format.h>
#include <algorithm>

#include <functional>
#include <new>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "algorithms/tuner.h"
#include "api/api_util.h"
#include "coll/coll.h"
#include "core/comm.h"
#include "core/device_enqueue.h"
#include "core/enqueue.h"
#include "core/host_stream.h"
#include "kernels/cpu/reduce.h"

using coll::CallGuard;
using coll::OpArgs;
using coll::OpKind;
using coll::Status;

namespace {

thread_local int tGroupDepth = 0;
thread_local std::vector<OpArgs> tGroupOps;
thread_local std::vector<std::function<collResult_t()>> tGroupInits;
// One-sided calls made inside the group (api_onesided.cc): puts and signals, and waits.
thread_local std::vector<std::function<collResult_t()>> tGroupPuts;
thread_local std::vector<std::function<collResult_t()>> tGroupWaits;
// The first call refused inside the current group: collGroupEnd then drops every operation the
// group queued (NCCL's ncclGroupEnd does the same), so that no peer sees part of it.
thread_local collResult_t tGroupRefused = collSuccess;
thread_local std::string tGroupRefusedWhy;

// Runs the inits, splits and finalizes a group deferred, all at once; returns the first failure,
// else collInProgress where one is non-blocking.
collResult_t runDeferredInits() {
  std::vector<std::function<collResult_t()>> jobs;
  jobs.swap(tGroupInits);
  if (jobs.empty()) return collSuccess;
  std::vector<collResult_t> rcs(jobs.size(), collSuccess);
  std::vector<std::thread> helpers;
  for (size_t i = 1; i < jobs.size(); ++i) {
    try {
      helpers.emplace_back([&, i] { rcs[i] = jobs[i](); });
    } catch (const std::system_error& e) {
      rcs[i] =
          coll::api::fail("collGroupEnd", nullptr,
                          Status(collSystemError, std::string("could not start a thread for an init: ") + e.what()));
    }
  }
  rcs[0] = jobs[0]();
  for (auto& t : helpers) t.join();
  // A non-blocking init or split is collInProgress (NCCL's group end returns it then); a failure
  // comes first.
  collResult_t out = collSuccess;
  for (collResult_t rc : rcs) {
    if (rc != collSuccess && rc != collInProgress) return rc;
    if (rc == collInProgress) out = collInProgress;
  }
  return out;
}

collResult_t submitOp(OpArgs op);
collResult_t runGroupOps(std::vector<OpArgs>& ops, collResult_t initResult);

collResult_t submit(OpArgs op) {
  collResult_t rc = submitOp(op);
  if (rc != collSuccess && tGroupDepth > 0 && tGroupRefused == collSuccess) {
    tGroupRefused = rc;
    const char* why = collGetLastError(op.comm);
    tGroupRefusedWhy = why ? why : "";
  }
  return rc;
}

collResult_t submitOp(OpArgs op) {
  bool background = false;
  collResult_t rc = coll::api::guarded(op.name, op.comm, [&]() -> Status {
    CallGuard guard(op.comm);
    if (!guard.ok()) return guard.status();
    COLL_TRY(coll::validate(&op));
    coll::snapshotRedOp(&op);
    if (tGroupDepth > 0) {
      tGroupOps.push_back(op);
      return Status::ok();
    }
    if (op.onDevice) {
      op.comm->hostQueue->drain();  // the bootstrap serves one path at a time
      return coll::enqueueDevice(op.comm, {op});
    }
    if (coll::HostStream* stream = coll::HostStream::find(op.stream)) {
      uint64_t seq = stream->issue(1);
      Status queued = op.comm->hostQueue->enqueue({op}, stream, seq);
      if (!queued.isOk()) stream->finishPart(seq, Status::ok());  // reported here, not on the stream
      return queued;
    }
    if (!op.comm->options.blocking) {
      // A non-blocking communicator (NCCL's config.blocking = 0): the call returns collInProgress
      // and runs on the communicator's queue, in issue order; collCommGetAsyncError says when.
      COLL_TRY(op.comm->hostQueue->enqueue({op}, nullptr, 0));
      background = true;
      return Status::ok();
    }
    op.comm->hostQueue->drain();  // queued work first: the ranks agreed on issue order
    return coll::runOps(op.comm, &op, 1);
  });
  return rc == collSuccess && background ? collInProgress : rc;
}

// Runs comm's share of a group's queue; never throws (it may run on a helper thread).
Status runQueued(collComm_t comm, const std::vector<OpArgs>& ops) noexcept {
  try {
    std::vector<OpArgs> mine;
    for (const auto& op : ops)
      if (op.comm == comm) mine.push_back(op);
    CallGuard guard(comm);
    if (!guard.ok()) return guard.status();
    comm->hostQueue->drain();
    COLL_TRY(coll::checkReady(comm));
    if (!mine.empty() && mine.front().onDevice) return coll::enqueueDevice(comm, mine);
    return coll::runOps(comm, mine);
  } catch (const std::bad_alloc&) {
    return Status(collSystemError, "out of host memory");
  } catch (const std::exception& e) {
    return Status(collInternalError, std::string("unexpected exception: ") + e.what());
  }
}

// The stream of comm's part of a group: every op of it must name the same one (NULL, a host
// stream or a device stream) and be on the same side (host or device buffers). Sets *stream and
// *onDevice, or fails with the reason.
Status streamOfPart(const std::vector<OpArgs>& ops, collComm_t comm, collStream_t* stream, bool* onDevice) {
  bool first = true;
  for (const auto& op : ops) {
    if (op.comm != comm) continue;
    if (!first && op.stream != *stream)
      return Status(collInvalidUsage,
                    "the calls of one communicator inside a group must all use the same stream (NULL, one host "
                    "stream or one device stream)");
    if (!first && op.onDevice != *onDevice)
      return Status(collInvalidUsage,
                    "the calls of one communicator inside a group must all use device buffers or all host buffers");
    *stream = op.stream;
    *onDevice = op.onDevice;
    first = false;
  }
  return Status::ok();
}

// Queues comm's part of a group's ops on its host queue (as item seq of stream; nullptr: a
// non-blocking communicator's stream-less part).
Status enqueuePart(const std::vector<OpArgs>& ops, collComm_t comm, coll::HostStream* stream, uint64_t seq) {
  std::vector<OpArgs> mine;
  for (const auto& op : ops)
    if (op.comm == comm) mine.push_back(op);
  CallGuard guard(comm);
  return guard.ok() ? comm->hostQueue->enqueue(std::move(mine), stream, seq) : guard.status();
}

// Queues the parts of a group that go on host streams: the parts of one stream form one item of
// it (they run together, each on its communicator's worker). The stream-less host parts of
// non-blocking communicators are queued too, each on its own communicator (collInProgress). Removes
// those communicators from *order; returns the first failure (recorded on its communicator), else
// collInProgress when a non-blocking part was queued, else collSuccess.
collResult_t enqueueGroupParts(const std::vector<OpArgs>& ops, std::vector<collComm_t>* order) {
  bool background = false;
  collResult_t first = collSuccess;
  std::vector<std::pair<coll::HostStream*, std::vector<collComm_t>>> byStream;
  std::vector<collComm_t> direct;
  for (collComm_t comm : *order) {
    collStream_t handle = nullptr;
    bool onDevice = false;
    Status s = streamOfPart(ops, comm, &handle, &onDevice);
    if (s.isOk() && onDevice) {  // enqueued on its device stream by runQueued
      direct.push_back(comm);
      continue;
    }
    coll::HostStream* stream = coll::HostStream::find(handle);
    if (s.isOk() && handle && !stream) s = Status(collInvalidArgument, "the stream was destroyed inside the group");
    if (!s.isOk()) {
      collResult_t rc = coll::api::finish("collGroupEnd", comm, std::move(s));
      if (first == collSuccess) first = rc;
      continue;
    }
    if (!stream && comm->options.blocking) {
      direct.push_back(comm);
      continue;
    }
    if (!stream) {
      Status q = enqueuePart(ops, comm, nullptr, 0);
      if (q.isOk()) {
        background = true;
        continue;
      }
      collResult_t rc = coll::api::finish("collGroupEnd", comm, std::move(q));
      if (first == collSuccess) first = rc;
      continue;
    }
    auto it = std::find_if(byStream.begin(), byStream.end(), [&](const auto& e) { return e.first == stream; });
    if (it == byStream.end()) it = byStream.insert(byStream.end(), {stream, {}});
    it->second.push_back(comm);
  }
  for (auto& [stream, comms] : byStream) {
    uint64_t seq = stream->issue(static_cast<int>(comms.size()));
    for (collComm_t comm : comms) {
      Status s = enqueuePart(ops, comm, stream, seq);
      if (s.isOk()) continue;
      stream->finishPart(seq, Status::ok());  // reported here, not on the stream
      collResult_t rc = coll::api::finish("collGroupEnd", comm, std::move(s));
      if (first == collSuccess) first = rc;
    }
  }
  order->swap(direct);
  return first == collSuccess && background ? collInProgress : first;
}

}  // namespace

namespace coll::api {

bool inGroup() { return tGroupDepth > 0; }

void deferToGroupEnd(std::function<collResult_t()> job) { tGroupInits.push_back(std::move(job)); }

void deferOneSided(bool wait, std::function<collResult_t()> job) {
  (wait ? tGroupWaits : tGroupPuts).push_back(std::move(job));
}

void refuseGroup(collResult_t rc, collComm_t comm) {
  if (tGroupDepth == 0 || tGroupRefused != collSuccess) return;
  tGroupRefused = rc;
  const char* why = collGetLastError(comm);
  tGroupRefusedWhy = why ? why : "";
}

}  // namespace coll::api

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

namespace {

// Gather and scatter are groups of point-to-point calls, the root's own block included (a send to
// oneself is a connection like any other): one group, so that a refused call drops all of it.
template <typename Parts>
collResult_t rootedGroup(const char* fn, int root, collComm_t comm, Parts parts) {
  int nranks = 0, rank = 0;
  if (collCommCount(comm, &nranks) != collSuccess || collCommUserRank(comm, &rank) != collSuccess)
    return coll::api::finish(fn, comm, Status(collInvalidArgument, "the communicator is NULL, destroyed or unknown"));
  if (root < 0 || root >= nranks)
    return coll::api::finish(
        fn, comm,
        COLL_ERROR(collInvalidArgument, FMT_STRING("root {} is not a rank of a communicator of {}"), root, nranks));
  collGroupStart();
  collResult_t first = parts(rank, nranks);
  collResult_t end = collGroupEnd();
  return first != collSuccess ? first : end;
}

size_t blockBytes(size_t count, collDataType_t type) {
  return static_cast<int>(type) >= 0 && type < collNumTypes ? count * coll::kernels::typeSize(type) : 0;
}

}  // namespace

COLL_API collResult_t collGather(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype, int root,
                                 collComm_t comm, collStream_t stream) {
  return rootedGroup("collGather", root, comm, [&](int rank, int nranks) {
    collResult_t rc = collSend(sendbuff, count, datatype, root, comm, stream);
    if (rc != collSuccess || rank != root) return rc;
    const size_t block = blockBytes(count, datatype);
    for (int r = 0; r < nranks && rc == collSuccess; ++r) {
      void* at = recvbuff ? static_cast<char*>(recvbuff) + r * block : nullptr;
      rc = collRecv(at, count, datatype, r, comm, stream);
    }
    return rc;
  });
}

COLL_API collResult_t collScatter(const void* sendbuff, void* recvbuff, size_t count, collDataType_t datatype, int root,
                                  collComm_t comm, collStream_t stream) {
  return rootedGroup("collScatter", root, comm, [&](int rank, int nranks) {
    collResult_t rc = collRecv(recvbuff, count, datatype, root, comm, stream);
    if (rc != collSuccess || rank != root) return rc;
    const size_t block = blockBytes(count, datatype);
    for (int r = 0; r < nranks && rc == collSuccess; ++r) {
      const void* at = sendbuff ? static_cast<const char*>(sendbuff) + r * block : nullptr;
      rc = collSend(at, count, datatype, r, comm, stream);
    }
    return rc;
  });
}

namespace {

// A group in which a call was refused: none of its nOps operations runs, and the group's end
// returns the refusal with its sentence (NCCL's ncclGroupEnd does the same).
collResult_t finishRefusedGroup(const char* fn, size_t nOps) {
  const collResult_t refused = tGroupRefused;
  tGroupRefused = collSuccess;
  std::string why;
  why.swap(tGroupRefusedWhy);
  return coll::api::finish(
      fn, nullptr,
      Status(refused, fmt::format("a call inside the group was refused, so none of its {} queued operation(s) ran: {}",
                                  nOps, why)));
}

// The tuner's prediction for one queued operation, in microseconds.
double predictOpUs(const OpArgs& op) {
  const size_t bytes = op.count * coll::kernels::typeSize(static_cast<collDataType_t>(op.type));
  coll::algorithms::Collective c;
  if (coll::collectiveOf(op.kind, &c)) {
    coll::algorithms::Plan plan = coll::choosePlan(op.comm, c, bytes);
    return coll::algorithms::predictUs(plan.algorithm, c, op.comm->nranks, bytes, op.comm->costModel);
  }
  // A send or a receive: one step of a two-rank ring moving its bytes.
  return coll::algorithms::predictUs(coll::algorithms::Algorithm::kRing, coll::algorithms::Collective::kAllGather, 2,
                                     bytes, op.comm->costModel);
}

}  // namespace

COLL_API collResult_t collGroupSimulateEnd(collSimInfo_t* simInfo) {
  if (tGroupDepth != 1)
    return coll::api::finish("collGroupSimulateEnd", nullptr,
                             Status(collInvalidUsage, tGroupDepth == 0 ? "collGroupSimulateEnd outside a group"
                                                                       : "collGroupSimulateEnd inside a nested group "
                                                                         "(it ends the outermost one)"));
  if (!simInfo || simInfo->magic != COLL_SIM_INFO_MAGIC || simInfo->size < sizeof(collSimInfo_t))
    return coll::api::finish("collGroupSimulateEnd", nullptr,
                             Status(collInvalidArgument,
                                    "simInfo is NULL or was not made from COLL_SIM_INFO_INITIALIZER "
                                    "(its magic or size is wrong); the group is still open"));
  --tGroupDepth;
  collResult_t initResult = runDeferredInits();
  std::vector<OpArgs> ops;
  ops.swap(tGroupOps);
  // One-sided calls take no part in the estimate: they move what they move, with no schedule.
  tGroupPuts.clear();
  tGroupWaits.clear();
  if (tGroupRefused != collSuccess) return finishRefusedGroup("collGroupSimulateEnd", ops.size());
  // A communicator's operations run one after the other; communicators run side by side.
  std::vector<std::pair<collComm_t, double>> perComm;
  for (const auto& op : ops) {
    CallGuard guard(op.comm);
    if (!guard.ok()) return coll::api::finish("collGroupSimulateEnd", op.comm, guard.status());
    auto it = std::find_if(perComm.begin(), perComm.end(), [&](const auto& e) { return e.first == op.comm; });
    if (it == perComm.end()) it = perComm.insert(perComm.end(), {op.comm, 0.0});
    it->second += predictOpUs(op);
  }
  double us = 0;
  for (const auto& e : perComm) us = std::max(us, e.second);
  simInfo->estimatedTime = static_cast<float>(us);
  return initResult;
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
  // Communicators a group creates exist before its operations run (NCCL's order).
  collResult_t initResult = runDeferredInits();
  std::vector<OpArgs> ops;
  ops.swap(tGroupOps);
  std::vector<std::function<collResult_t()>> puts, waits;
  puts.swap(tGroupPuts);
  waits.swap(tGroupWaits);
  if (tGroupRefused != collSuccess) return finishRefusedGroup("collGroupEnd", ops.size() + puts.size() + waits.size());
  if (puts.empty() && waits.empty()) return runGroupOps(ops, initResult);
  // One-sided calls: the puts and signals first, then the other operations, then the waits, so a
  // wait never holds up a put of the same group, whatever order they were called in. Each records
  // its own failure; the first one ends the group there.
  collResult_t inProgress = collSuccess;
  auto failed = [&](collResult_t rc) {  // a failure ends the group; collInProgress is remembered
    if (rc == collInProgress) inProgress = rc;
    return rc != collSuccess && rc != collInProgress;
  };
  collResult_t rc;
  for (auto& job : puts)
    if (failed(rc = job())) return rc;
  if (failed(rc = runGroupOps(ops, initResult))) return rc;
  for (auto& job : waits)
    if (failed(rc = job())) return rc;
  return inProgress;
}

namespace {

// The collectives and sends/receives of a group (ops), after its inits (initResult).
collResult_t runGroupOps(std::vector<OpArgs>& ops, collResult_t initResult) {
  if (ops.empty()) return initResult;
  std::vector<collComm_t> order;
  for (const auto& op : ops)
    if (std::find(order.begin(), order.end(), op.comm) == order.end()) order.push_back(op.comm);
  // Communicators whose part goes on a host stream are queued; the others run here.
  collResult_t queuedResult = enqueueGroupParts(ops, &order);
  if (queuedResult == collSuccess || (queuedResult == collInProgress && initResult != collSuccess))
    queuedResult = initResult;
  if (order.empty()) return queuedResult;
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
  collResult_t first = queuedResult == collInProgress ? collSuccess : queuedResult;
  for (size_t i = 0; i < order.size(); ++i) {
    collResult_t rc = coll::api::finish("collGroupEnd", order[i], std::move(results[i]));
    if (first == collSuccess) first = rc;
  }
  return first == collSuccess ? queuedResult : first;
}

}  // namespace
