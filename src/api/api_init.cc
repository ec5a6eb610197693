// Communicator lifecycle: init (one rank, with config, all ranks as threads), finalize, destroy,
// abort, revoke, and the queries.
#include <chrono>
#include <climits>
#include <thread>
#include <vector>

#include "api/api_util.h"
#include "base/log.h"
#include "bootstrap/bootstrap_root.h"
#include "coll/coll.h"
#include "core/comm.h"
#include "core/device_enqueue.h"

using coll::CallGuard;
using coll::Status;

namespace {

Status checkRankArgs(collComm_t* comm, int nranks, int rank) {
  if (!comm) return Status(collInvalidArgument, "comm is NULL");
  if (nranks < 1) return COLL_ERROR(collInvalidArgument, FMT_STRING("nranks={} is not positive"), nranks);
  if (rank < 0 || rank >= nranks)
    return COLL_ERROR(collInvalidArgument, FMT_STRING("rank={} is not in [0, {})"), rank, nranks);
  return Status::ok();
}

// Runs initComm; on failure frees the comm. Returns the comm through *out only on success.
Status initBlocking(collComm_t* out, int nranks, const coll::IdContents& id, int rank, const coll::CommOptions& o) {
  collComm* c = coll::newComm(rank, nranks, o);
  Status s = coll::initComm(c, id);
  if (!s.isOk()) {
    (void)coll::releaseComm(c, coll::Release::kAbort);
    coll::bootstrap::waitForRoot(id.secret);
    return s.prefix(fmt::format("rank {} of {}: ", rank, nranks));
  }
  *out = c;
  return Status::ok();
}

}  // namespace

namespace coll {

void finishNonBlockingInit(collComm* comm, const IdContents& id, Status before, const char* fn) {
  Status s = std::move(before);
  if (s.isOk()) {
    s = initComm(comm, id);
    if (!s.isOk()) bootstrap::waitForRoot(id.secret);
  }
  collResult_t code = s.code();
  if (!s.isOk()) api::fail(fn, comm, std::move(s));
  comm->asyncError.store(code);
}

/// Shared by collCommInitRankConfig and collCommSplit: blocking or not, as options say.
collResult_t initRankWithOptions(const char* fn, collComm_t* comm, int nranks, const IdContents& id, int rank,
                                 const CommOptions& options) {
  if (options.blocking) {
    return api::guarded(fn, nullptr, [&]() -> Status { return initBlocking(comm, nranks, id, rank, options); });
  }
  collResult_t rc = api::guarded(fn, nullptr, [&]() -> Status {
    collComm* c = newComm(rank, nranks, options);
    c->asyncError.store(collInProgress);
    c->initThread =
        std::thread([c, id] { finishNonBlockingInit(c, id, Status::ok(), "collCommInitRankConfig (non-blocking)"); });
    *comm = c;
    return Status::ok();
  });
  return rc == collSuccess ? collInProgress : rc;
}

}  // namespace coll

COLL_API collResult_t collCommInitRankConfig(collComm_t* comm, int nranks, collUniqueId commId, int rank,
                                             collConfig_t* config) {
  coll::CommOptions options;
  coll::IdContents id;
  collResult_t pre = coll::api::guarded("collCommInitRankConfig", nullptr, [&]() -> Status {
    COLL_TRY(checkRankArgs(comm, nranks, rank));
    COLL_ASSIGN_OR_RETURN(options, coll::resolveOptions(config, nullptr));
    COLL_ASSIGN_OR_RETURN(id, coll::decodeUniqueId(commId));
    return Status::ok();
  });
  if (pre != collSuccess) return pre;
  if (coll::api::inGroup() && options.blocking) {
    // Inside a group: *comm is written at collGroupEnd, which runs the group's inits together.
    *comm = nullptr;
    coll::api::deferToGroupEnd([comm, nranks, id, rank, options] {
      return coll::initRankWithOptions("collCommInitRankConfig", comm, nranks, id, rank, options);
    });
    return collSuccess;
  }
  return coll::initRankWithOptions("collCommInitRankConfig", comm, nranks, id, rank, options);
}

COLL_API collResult_t collCommInitRank(collComm_t* comm, int nranks, collUniqueId commId, int rank) {
  return collCommInitRankConfig(comm, nranks, commId, rank, nullptr);
}

COLL_API collResult_t collCommInitAll(collComm_t* comms, int ndev, const int* devlist) {
  return coll::api::guarded("collCommInitAll", nullptr, [&]() -> Status {
    if (!comms) return Status(collInvalidArgument, "comms is NULL");
    if (ndev < 1) return COLL_ERROR(collInvalidArgument, FMT_STRING("ndev={} is not positive"), ndev);
    collUniqueId uid;
    if (collGetUniqueId(&uid) != collSuccess)
      return Status(collSystemError, std::string("cannot create the rendezvous root: ") + collGetLastError(nullptr));
    COLL_ASSIGN_OR_RETURN(coll::IdContents id, coll::decodeUniqueId(uid));
    coll::CommOptions base;
    COLL_ASSIGN_OR_RETURN(base, coll::resolveOptions(nullptr, nullptr));

    std::vector<collComm_t> made(ndev, nullptr);
    std::vector<Status> results(ndev);
    std::vector<std::thread> threads;
    for (int r = 0; r < ndev; ++r) {
      coll::CommOptions o = base;
      o.cudaDev = devlist ? devlist[r] : -1;
      threads.emplace_back([&, r, o] { results[r] = initBlocking(&made[r], ndev, id, r, o); });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < ndev; ++r) {
      if (results[r].isOk()) continue;
      for (auto* c : made)
        if (c) (void)coll::releaseComm(c, coll::Release::kAbort);
      return results[r];  // the first failing rank's reason
    }
    for (int r = 0; r < ndev; ++r) comms[r] = made[r];
    return Status::ok();
  });
}

namespace {

// Finalize's work: what is queued on host streams or issued non-blocking completes first (as
// NCCL's finalize flushes what is in flight), launches on device streams likewise; then the
// barrier keeps every rank's inbox open until all ranks are done with each other.
Status finalizeNow(collComm* comm) {
  comm->hostQueue->drain();
  COLL_TRY(coll::drainDevice(comm));
  {
    int state = comm->asyncError.load();
    if (state != collSuccess) return coll::checkReady(comm, false, /*queued=*/true);  // broken meanwhile
  }
  COLL_TRY(comm->bootstrap->barrier());
  comm->finalized = true;
  return Status::ok();
}

}  // namespace

COLL_API collResult_t collCommFinalize(collComm_t comm) {
  // Inside a group (one thread finalizing every rank of a clique, as NCCL allows), the barrier
  // runs at collGroupEnd, all of the group's finalizes together: one after the other, the first
  // would wait for ranks whose finalize is queued behind it.
  if (coll::api::inGroup()) {
    coll::api::deferToGroupEnd([comm] { return collCommFinalize(comm); });
    return collSuccess;
  }
  bool background = false;
  collResult_t rc = coll::api::guarded("collCommFinalize", comm, [&]() -> Status {
    CallGuard guard(comm);
    if (!guard.ok()) return guard.status();
    COLL_TRY(coll::checkReady(comm));
    if (comm->options.blocking) return finalizeNow(comm);
    // Non-blocking (NCCL's): collInProgress at once; the drain and the barrier run on the
    // communicator's init thread (a destroy meanwhile aborts and joins it), and
    // collCommGetAsyncError says collInProgress until they end. New calls are refused meanwhile.
    if (comm->finalizing.exchange(true))
      return Status(collInvalidUsage, "collCommFinalize is already running on this communicator");
    if (comm->initThread.joinable()) comm->initThread.join();  // a finished non-blocking init's
    comm->initThread = std::thread([comm] {
      Status s = finalizeNow(comm);
      if (!s.isOk()) {
        coll::api::fail("collCommFinalize (non-blocking)", comm, s);
        coll::keepFailure(comm, s);
      }
      comm->finalizing.store(false);  // last: collCommGetAsyncError's collInProgress ends here
    });
    background = true;
    return Status::ok();
  });
  return rc == collSuccess && background ? collInProgress : rc;
}

COLL_API collResult_t collCommDestroy(collComm_t comm) {
  return coll::api::guarded("collCommDestroy", comm, [&]() -> Status {
    if (!comm) return Status::ok();
    return coll::releaseComm(comm, coll::Release::kDestroy);
  });
}

COLL_API collResult_t collCommAbort(collComm_t comm) {
  return coll::api::guarded("collCommAbort", comm, [&]() -> Status {
    return comm ? coll::releaseComm(comm, coll::Release::kAbort) : Status::ok();
  });
}

// collCommRevoke: stop what runs, then leave only split, shrink and destroy. The communicator's
// abort word ends every wait (host links, the device's abort word, queued host-stream work is
// cancelled); once nothing of comm runs, the word is lowered again, because the bootstrap that a
// later split or shrink uses watches it too.
COLL_API collResult_t collCommRevoke(collComm_t comm, int flags) {
  return coll::api::guarded("collCommRevoke", comm, [&]() -> Status {
    CallGuard guard(comm);
    if (!guard.ok()) return guard.status();
    if (flags != COLL_REVOKE_DEFAULT)
      return COLL_ERROR(collInvalidArgument, FMT_STRING("revokeFlags={} is not COLL_REVOKE_DEFAULT (0)"), flags);
    if (comm->asyncError.load() == collInProgress)
      return Status(collInvalidUsage, "the communicator is still initializing (poll collCommGetAsyncError)");
    if (comm->revoked.exchange(true)) return Status::ok();  // already revoked: nothing runs
    comm->abortFlag.store(true);
    comm->hostQueue->cancel("the communicator was revoked (collCommRevoke)");
    comm->hostQueue->drain();
    coll::stopDevice(comm, /*abort=*/true);  // the launches' failures are the revoke's doing
    // Blocking calls of other threads end at the abort word; this call's guard is the one left.
    while (comm->activeCalls.load() > 1) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    comm->abortFlag.store(false);
    return Status::ok();
  });
}

COLL_API collResult_t collCommGetAsyncError(collComm_t comm, collResult_t* asyncError) {
  return coll::api::guarded("collCommGetAsyncError", comm, [&]() -> Status {
    CallGuard guard(comm);
    if (!guard.ok()) return guard.status();
    if (!asyncError) return Status(collInvalidArgument, "asyncError is NULL");
    if (comm->asyncError.load() == collSuccess) coll::pollDevice(comm);  // launches that ended since
    // A non-blocking communicator's calls and finalize in flight are collInProgress, as NCCL's.
    // Read before the state: both publish a failure before they stop being busy.
    bool busy = comm->finalizing.load() || comm->hostQueue->nonBlockingBusy();
    int state = comm->asyncError.load();
    if (state == collSuccess && busy) state = collInProgress;
    *asyncError = static_cast<collResult_t>(state);
    return Status::ok();
  });
}

COLL_API collResult_t collCommSetTimeout(collComm_t comm, int timeoutMs) {
  return coll::api::guarded("collCommSetTimeout", comm, [&]() -> Status {
    CallGuard guard(comm);
    if (!guard.ok()) return guard.status();
    if (timeoutMs < 0) return COLL_ERROR(collInvalidArgument, FMT_STRING("timeoutMs={} is negative"), timeoutMs);
    comm->timeoutMs.store(timeoutMs == 0 ? INT_MAX : timeoutMs);  // 0: as config.timeoutMs = 0
    return Status::ok();
  });
}

COLL_API collResult_t collCommGetDeviceTimings(collComm_t comm, collDeviceTimings_t* timings) {
  return coll::api::guarded("collCommGetDeviceTimings", comm, [&]() -> Status {
    CallGuard guard(comm);
    if (!guard.ok()) return guard.status();
    if (!timings) return Status(collInvalidArgument, "timings is NULL");
    coll::deviceTimings(comm, timings);
    return Status::ok();
  });
}

namespace {

// The queries: an int field of a live comm. Available during a non-blocking init (set at creation).
template <typename Get>
collResult_t query(const char* fn, collComm_t comm, int* out, const char* outName, Get get) {
  return coll::api::guarded(fn, comm, [&]() -> Status {
    CallGuard guard(comm);
    if (!guard.ok()) return guard.status();
    if (!out) return COLL_ERROR(collInvalidArgument, FMT_STRING("{} is NULL"), outName);
    return get(out);
  });
}

}  // namespace

COLL_API collResult_t collCommCount(const collComm_t comm, int* count) {
  return query("collCommCount", comm, count, "count", [&](int* o) {
    *o = comm->nranks;
    return Status::ok();
  });
}

COLL_API collResult_t collCommUserRank(const collComm_t comm, int* rank) {
  return query("collCommUserRank", comm, rank, "rank", [&](int* o) {
    *o = comm->rank;
    return Status::ok();
  });
}

COLL_API collResult_t collCommCuDevice(const collComm_t comm, int* device) {
  return query("collCommCuDevice", comm, device, "device", [&](int* o) -> Status {
    if (comm->asyncError.load() == collInProgress)
      return Status(collInvalidUsage, "the communicator is still initializing (poll collCommGetAsyncError)");
    if (comm->cudaDev < 0)
      return Status(collInvalidUsage,
                    "this is a host-only communicator (no CUDA device was requested or usable); it has no device");
    *o = comm->cudaDev;
    return Status::ok();
  });
}
