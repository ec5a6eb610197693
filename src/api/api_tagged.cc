// Tagged messages (collCommTaggedInit, collIsend, collIrecv, collTest, collWait,
// collRequestFree): argument checks and requests over the communicator's mailbox (core/mailbox.h).
#include <memory>
#include <vector>

#include "api/api_util.h"
#include "base/params.h"
#include "coll/coll.h"
#include "core/comm.h"
#include "core/enqueue.h"
#include "core/mailbox.h"
#include "device/runtime.h"
#include "kernels/cpu/reduce.h"

using coll::CallGuard;
using coll::Status;

/// The caller's handle of a request: the request (shared with the mailbox) and its communicator,
/// which may be gone by the time the handle is waited on.
struct collRequest_st {
  std::shared_ptr<coll::MsgRequest> request;
  collComm_t comm = nullptr;
};

namespace {

// The checks both directions share; writes the message's byte count.
Status checkMessage(collComm_t comm, const void* buf, size_t count, int type, int peer, bool anyPeer, int tag,
                    bool anyTag, collRequest_t* request, size_t* bytes) {
  COLL_TRY(coll::checkReady(comm));
  if (!request) return Status(collInvalidArgument, "request is NULL");
  if (!comm->mailbox) return Status(collInvalidUsage, "tagged messages need collCommTaggedInit on every rank first");
  COLL_TRY(coll::checkTypeAndCount(type, count));
  if ((peer < 0 || peer >= comm->nranks) && !(anyPeer && peer == COLL_ANY_SOURCE))
    return COLL_ERROR(collInvalidArgument, FMT_STRING("{} {} is not a rank of this {}-rank communicator{}"),
                      anyPeer ? "source" : "peer", peer, comm->nranks, anyPeer ? " nor COLL_ANY_SOURCE" : "");
  if (tag < 0 && !(anyTag && tag == COLL_ANY_TAG))
    return COLL_ERROR(collInvalidArgument, FMT_STRING("tag {} is negative{}"), tag,
                      anyTag ? " and not COLL_ANY_TAG" : "");
  if (count > 0 && !buf) return COLL_ERROR(collInvalidArgument, FMT_STRING("buf is NULL with count {}"), count);
  coll::device::Runtime* rt = coll::device::runtime();
  int dev = -1;
  if (count > 0 && rt && rt->isDeviceMemory(buf, &dev))
    return COLL_ERROR(collInvalidUsage, FMT_STRING("buf is memory of device {}: tagged messages move host memory only"),
                      dev);
  *bytes = count * coll::kernels::typeSize(static_cast<collDataType_t>(type));
  return Status::ok();
}

collResult_t postRequest(const char* fn, collComm_t comm, bool isSend, void* buf, size_t count, collDataType_t type,
                         int peer, int tag, collRequest_t* request) {
  return coll::api::guarded(fn, comm, [&]() -> Status {
    CallGuard guard(comm);
    if (!guard.ok()) return guard.status();
    auto r = std::make_shared<coll::MsgRequest>();
    COLL_TRY(checkMessage(comm, buf, count, coll::rawEnum(type), peer, !isSend, tag, !isSend, request, &r->bytes));
    r->isSend = isSend;
    r->peer = peer;
    r->tag = tag;
    // The in-band check's part for tagged messages: the type travels in the header.
    r->type = comm->checkCalls == coll::CallChecks::kOff ? -1 : static_cast<int>(coll::rawEnum(type));
    r->buf = static_cast<char*>(buf);
    r->timeoutMs = comm->timeoutMs.load(std::memory_order_relaxed);
    auto handle = std::make_unique<collRequest_st>();
    handle->request = r;
    handle->comm = comm;
    COLL_TRY(comm->mailbox->post(r));
    *request = handle.release();
    return Status::ok();
  });
}

// The end of a request: its outcome, recorded as the last error of its communicator (when alive).
collResult_t endRequest(const char* fn, collRequest_t* request, const Status& result) {
  collComm_t comm = (*request)->comm;
  delete *request;
  *request = nullptr;
  return coll::api::finish(fn, comm, result);
}

}  // namespace

COLL_API collResult_t collCommTaggedInit(collComm_t comm) {
  const char* fn = "collCommTaggedInit";
  coll::CommOptions options;
  bool ready = false;
  collResult_t rc = coll::api::guarded(fn, comm, [&]() -> Status {
    CallGuard guard(comm);
    if (!guard.ok()) return guard.status();
    COLL_TRY(coll::checkReady(comm));
    ready = comm->mailbox != nullptr;
    options = comm->options;
    options.blocking = true;
    options.cudaDev = -1;  // host memory only
    options.buffBytes = coll::params::kP2PBuffSize.get();
    options.timeoutMs = comm->timeoutMs.load();
    options.name = (options.name.empty() ? std::string("comm") : options.name) + ":tagged";
    return Status::ok();
  });
  if (rc != collSuccess || ready) return rc;
  collComm_t inner = nullptr;
  rc = coll::api::splitWithOptions(fn, comm, options, &inner);
  if (rc != collSuccess) return rc;
  return coll::api::guarded(fn, comm, [&]() -> Status {
    CallGuard guard(comm);
    Status s = guard.status();
    std::vector<int> others;
    for (int p = 0; p < inner->nranks; ++p)
      if (p != inner->rank) others.push_back(p);
    if (s.isOk()) s = inner->conns->ensure(others, others);  // every pair, now (receives name any source)
    if (!s.isOk()) {
      (void)coll::releaseComm(inner, coll::Release::kAbort);
      return s;
    }
    comm->mailbox = std::make_unique<coll::Mailbox>(inner);
    return Status::ok();
  });
}

COLL_API collResult_t collIsend(const void* buf, size_t count, collDataType_t datatype, int peer, int tag,
                                collComm_t comm, collRequest_t* request) {
  return postRequest("collIsend", comm, true, const_cast<void*>(buf), count, datatype, peer, tag, request);
}

COLL_API collResult_t collIrecv(void* buf, size_t count, collDataType_t datatype, int source, int tag, collComm_t comm,
                                collRequest_t* request) {
  return postRequest("collIrecv", comm, false, buf, count, datatype, source, tag, request);
}

COLL_API collResult_t collTest(collRequest_t* request, int* done, collMsgStatus_t* status) {
  if (!request || !*request || !done)
    return coll::api::finish("collTest", nullptr,
                             Status(collInvalidArgument, !done ? "done is NULL" : "request is NULL or already ended"));
  Status result;
  *done = (*request)->request->test(&result, status) ? 1 : 0;
  if (!*done) return collSuccess;
  return endRequest("collTest", request, result);
}

COLL_API collResult_t collWait(collRequest_t* request, collMsgStatus_t* status) {
  if (!request || !*request)
    return coll::api::finish("collWait", nullptr, Status(collInvalidArgument, "request is NULL or already ended"));
  Status result = (*request)->request->wait(status);
  return endRequest("collWait", request, result);
}

COLL_API collResult_t collRequestFree(collRequest_t* request) {
  if (!request || !*request) return collSuccess;
  collComm_t comm = (*request)->comm;
  {
    CallGuard guard(comm);  // the mailbox is there as long as its communicator is
    if (guard.ok() && comm->mailbox) comm->mailbox->withdraw((*request)->request);
  }
  delete *request;
  *request = nullptr;
  return collSuccess;
}
