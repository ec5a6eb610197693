// collCommGetAlgorithm and collCommGetTransports: what a communicator decided, for tools.
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "api/api_util.h"
#include "coll/coll.h"
#include "core/comm.h"
#include "core/enqueue.h"
#include "transport/transport.h"

using coll::CallGuard;
using coll::OpKind;
using coll::Status;

namespace {

Status copyOut(const std::string& text, char* buf, size_t len) {
  if (!buf || len == 0) return Status(collInvalidArgument, "buf is NULL or len is 0");
  size_t n = std::min(text.size(), len - 1);
  std::memcpy(buf, text.data(), n);
  buf[n] = '\0';
  return Status::ok();
}

}  // namespace

COLL_API collResult_t collCommGetAlgorithm(const collComm_t comm, const char* name, size_t bytes, char* buf,
                                           size_t len) {
  return coll::api::guarded("collCommGetAlgorithm", comm, [&]() -> Status {
    CallGuard guard(comm);
    if (!guard.ok()) return guard.status();
    COLL_TRY(coll::checkReady(comm));
    static const std::map<std::string, OpKind> kinds = {{"all_reduce", OpKind::kAllReduce},
                                                        {"all_gather", OpKind::kAllGather},
                                                        {"reduce_scatter", OpKind::kReduceScatter},
                                                        {"broadcast", OpKind::kBroadcast},
                                                        {"reduce", OpKind::kReduce},
                                                        {"alltoall", OpKind::kAllToAll},
                                                        {"sendrecv", OpKind::kSend}};
    auto it = name ? kinds.find(name) : kinds.end();
    if (it == kinds.end())
      return COLL_ERROR(collInvalidArgument,
                        FMT_STRING("'{}' is not a collective name (all_reduce, all_gather, "
                                   "reduce_scatter, broadcast, reduce, alltoall, sendrecv)"),
                        name ? name : "(null)");
    coll::algorithms::Collective c;
    if (!coll::collectiveOf(it->second, &c)) return copyOut("p2p", buf, len);
    return copyOut(coll::algorithms::algorithmName(coll::choosePlan(comm, c, bytes).algorithm), buf, len);
  });
}

COLL_API collResult_t collCommGetTransports(const collComm_t comm, char* buf, size_t len) {
  return coll::api::guarded("collCommGetTransports", comm, [&]() -> Status {
    CallGuard guard(comm);
    if (!guard.ok()) return guard.status();
    COLL_TRY(coll::checkReady(comm));
    std::string text = fmt::format("{} rank{} on {} host{}", comm->nranks, comm->nranks == 1 ? "" : "s", comm->nHosts,
                                   comm->nHosts == 1 ? "" : "s");
    text += coll::transportsText(comm);
    return copyOut(text, buf, len);
  });
}
