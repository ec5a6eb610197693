// Collectives, point-to-point and groups.
//
// The data path (transports, schedules, executors) is not in this version. Until it is, every
// collective and point-to-point call validates its communicator and then returns collInvalidUsage
// with a message that says so: an honest failure, never a silent no-op. Groups keep their nesting
// depth per thread, which is real and needed by the data path.
#include "coll/coll.h"
#include "core/api_util.h"
#include "core/comm.h"

using coll::CallGuard;
using coll::Status;

namespace {

thread_local int tGroupDepth = 0;

collResult_t notYet(const char* fn, collComm_t comm) {
  return coll::api::guarded(fn, comm, [&]() -> Status {
    CallGuard guard(comm);
    if (!guard.ok()) return guard.status();
    return COLL_ERROR(collInvalidUsage,
                      FMT_STRING("{} is not available in coll {}.{}.{}: the host and device data paths (transports, "
                                 "schedules, executors) are not implemented yet"),
                      fn, COLL_MAJOR, COLL_MINOR, COLL_PATCH);
  });
}

}  // namespace

COLL_API collResult_t collAllReduce(const void*, void*, size_t, collDataType_t, collRedOp_t, collComm_t comm,
                                    collStream_t) {
  return notYet("collAllReduce", comm);
}

COLL_API collResult_t collBroadcast(const void*, void*, size_t, collDataType_t, int, collComm_t comm, collStream_t) {
  return notYet("collBroadcast", comm);
}

COLL_API collResult_t collReduce(const void*, void*, size_t, collDataType_t, collRedOp_t, int, collComm_t comm,
                                 collStream_t) {
  return notYet("collReduce", comm);
}

COLL_API collResult_t collAllGather(const void*, void*, size_t, collDataType_t, collComm_t comm, collStream_t) {
  return notYet("collAllGather", comm);
}

COLL_API collResult_t collReduceScatter(const void*, void*, size_t, collDataType_t, collRedOp_t, collComm_t comm,
                                        collStream_t) {
  return notYet("collReduceScatter", comm);
}

COLL_API collResult_t collAllToAll(const void*, void*, size_t, collDataType_t, collComm_t comm, collStream_t) {
  return notYet("collAllToAll", comm);
}

COLL_API collResult_t collSend(const void*, size_t, collDataType_t, int, collComm_t comm, collStream_t) {
  return notYet("collSend", comm);
}

COLL_API collResult_t collRecv(void*, size_t, collDataType_t, int, collComm_t comm, collStream_t) {
  return notYet("collRecv", comm);
}

COLL_API collResult_t collGroupStart(void) {
  ++tGroupDepth;
  return collSuccess;
}

COLL_API collResult_t collGroupEnd(void) {
  return coll::api::guarded("collGroupEnd", nullptr, []() -> Status {
    if (tGroupDepth == 0) return Status(collInvalidUsage, "collGroupEnd without a matching collGroupStart");
    --tGroupDepth;
    return Status::ok();
  });
}
