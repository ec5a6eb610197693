// collCommSplit: new communicators from (color, key), built through the parent's bootstrap.
//
// How it works: one all-gather of (color, key) over the parent tells every rank its group, its
// new rank (order of key, then parent rank) and the group's leader (lowest parent rank). Each
// leader starts a rendezvous root; a second all-gather hands every rank its leader's id; each
// group then runs an ordinary init. Ranks with COLL_SPLIT_NOCOLOR take part in both all-gathers
// (the parent's collectives need every rank) and get NULL.
#include <algorithm>
#include <cstring>
#include <memory>
#include <vector>

#include "api/api_util.h"
#include "base/ifaddr.h"
#include "base/random.h"
#include "bootstrap/bootstrap_root.h"
#include "coll/coll.h"
#include "core/comm.h"

using coll::CallGuard;
using coll::Status;

namespace {

struct Plan {
  int newRank = -1;
  int newSize = 0;
  bool isLeader = false;
  int leader = -1;
};

Plan planSplit(const std::vector<int32_t>& colorKey, int nranks, int me) {
  int color = colorKey[2 * me];
  std::vector<std::pair<int32_t, int>> members;  // (key, parent rank)
  for (int r = 0; r < nranks; ++r)
    if (colorKey[2 * r] == color) members.push_back({colorKey[2 * r + 1], r});
  std::sort(members.begin(), members.end());
  Plan p;
  p.newSize = static_cast<int>(members.size());
  p.leader = nranks;
  for (int i = 0; i < p.newSize; ++i) {
    if (members[i].second == me) p.newRank = i;
    p.leader = std::min(p.leader, members[i].second);
  }
  p.isLeader = p.leader == me;
  return p;
}

// A leader's root, or an all-zero id (and the reason) when it could not start one.
collUniqueId leaderId(const coll::CommOptions& o, Status* why) {
  collUniqueId id;
  std::memset(&id, 0, sizeof(id));
  auto iface = coll::net::selectInterfaceFromEnv();
  if (!iface.isOk()) {
    *why = iface.takeStatus();
    return id;
  }
  coll::net::Address bind = iface->address;
  bind.setPort(0);
  auto r = coll::bootstrap::startRoot(bind, nullptr, false, coll::randomU64(), o.bootstrapTimeoutMs);
  if (!r.isOk())
    *why = r.takeStatus();
  else
    id = *r;
  return id;
}

collResult_t splitNow(collComm_t comm, int color, int key, collComm_t* newcomm, collConfig_t* config);

// The exchange over the parent's bootstrap: the plan, and for a rank with a color the id of its
// group's root (started by the group's leader).
Status exchange(collComm_t comm, int color, int key, const coll::CommOptions& options, Plan* plan,
                coll::IdContents* id) {
  comm->hostQueue->drain();  // calls issued before the split (host streams, non-blocking) end first
  std::vector<int32_t> colorKey(2 * comm->nranks);
  colorKey[2 * comm->rank] = color;
  colorKey[2 * comm->rank + 1] = key;
  COLL_TRY(comm->bootstrap->allGather(colorKey.data(), 2 * sizeof(int32_t)));
  *plan = planSplit(colorKey, comm->nranks, comm->rank);

  Status rootError;
  std::vector<collUniqueId> ids(comm->nranks);
  std::memset(ids.data(), 0, ids.size() * sizeof(collUniqueId));
  if (color != COLL_SPLIT_NOCOLOR && plan->isLeader) ids[comm->rank] = leaderId(options, &rootError);
  COLL_TRY(comm->bootstrap->allGather(ids.data(), sizeof(collUniqueId)));
  if (!rootError.isOk()) return rootError.prefix("cannot start the new communicator's root: ");
  if (color == COLL_SPLIT_NOCOLOR) return Status::ok();
  auto decoded = coll::decodeUniqueId(ids[plan->leader]);
  if (!decoded.isOk())
    return COLL_ERROR(collRemoteError, FMT_STRING("the group leader {} could not start the new communicator"),
                      comm->bootstrap->describe(plan->leader));
  *id = *decoded;
  return Status::ok();
}

// Non-blocking split (config.blocking=0, or a NULL config under a non-blocking parent), as NCCL's:
// returns collInProgress at once. The parent reports collInProgress (and refuses other calls)
// while the exchange uses its bootstrap; *newcomm is a communicator at once (NULL for
// COLL_SPLIT_NOCOLOR) that reports collInProgress until it is ready or has failed. One thread does
// the exchange and the init; it is joined by the destroy of the new communicator (or, for
// COLL_SPLIT_NOCOLOR, of the parent).
collResult_t splitInBackground(collComm_t comm, int color, int key, collComm_t* newcomm,
                               const coll::CommOptions& options) {
  collComm* made = nullptr;
  collResult_t rc = coll::api::guarded("collCommSplit", comm, [&]() -> Status {
    // Its state now (collSuccess, or a revoked one's failure), restored after the exchange.
    int ready = comm->asyncError.load();
    if (ready == collInProgress || !comm->asyncError.compare_exchange_strong(ready, collInProgress))
      return Status(collInvalidUsage, "the parent communicator is busy (poll collCommGetAsyncError)");
    // Rank and size are placeholders until the exchange (the user waits for collSuccess first).
    if (color != COLL_SPLIT_NOCOLOR) {
      made = coll::newComm(0, 1, options);
      made->asyncError.store(collInProgress);
    }
    auto work = [comm, color, key, options, made, ready] {
      Plan plan;
      coll::IdContents id;
      Status s;
      {
        CallGuard guard(comm);  // the parent stays alive while its bootstrap is used
        s = guard.ok() ? exchange(comm, color, key, options, &plan, &id) : guard.status();
        // Back to its state before, unless a call queued before the split failed meanwhile
        // (the exchange drains the queue first): that failure is the communicator's now.
        int busy = collInProgress;
        comm->asyncError.compare_exchange_strong(busy, ready);
      }
      if (!made) {
        if (!s.isOk()) coll::api::fail("collCommSplit (non-blocking)", comm, std::move(s));
        return;
      }
      if (s.isOk()) {
        made->rank = plan.newRank;
        made->nranks = plan.newSize;
      }
      coll::finishNonBlockingInit(made, id, std::move(s), "collCommSplit (non-blocking)");
    };
    if (made) {
      made->initThread = std::thread(work);
    } else {
      if (comm->initThread.joinable()) comm->initThread.join();  // a finished earlier one
      comm->initThread = std::thread(work);
    }
    *newcomm = made;
    return Status::ok();
  });
  return rc == collSuccess ? collInProgress : rc;
}

}  // namespace

namespace coll::api {

collResult_t splitWithOptions(const char* fn, collComm_t comm, const CommOptions& options, collComm_t* newcomm) {
  coll::IdContents id;
  Plan plan;
  collResult_t rc = guarded(fn, comm, [&]() -> Status {
    CallGuard guard(comm);
    if (!guard.ok()) return guard.status();
    return exchange(comm, 0, comm->rank, options, &plan, &id);
  });
  if (rc != collSuccess) return rc;
  return coll::initRankWithOptions(fn, newcomm, plan.newSize, id, plan.newRank, options);
}

}  // namespace coll::api

COLL_API collResult_t collCommSplit(collComm_t comm, int color, int key, collComm_t* newcomm, collConfig_t* config) {
  if (coll::api::inGroup()) {
    // Inside a group the split runs at collGroupEnd, beside the group's other splits and inits
    // (one thread may drive every rank of the parent); *newcomm is written then. The config is
    // copied: the caller's may be gone by then.
    if (!newcomm) return coll::api::finish("collCommSplit", comm, Status(collInvalidArgument, "newcomm is NULL"));
    *newcomm = nullptr;
    std::shared_ptr<collConfig_t> copy;
    if (config) copy = std::make_shared<collConfig_t>(*config);
    coll::api::deferToGroupEnd([=] { return splitNow(comm, color, key, newcomm, copy.get()); });
    return collSuccess;
  }
  return splitNow(comm, color, key, newcomm, config);
}

namespace {

collResult_t splitNow(collComm_t comm, int color, int key, collComm_t* newcomm, collConfig_t* config) {
  coll::CommOptions options;
  coll::IdContents id;
  Plan plan;
  collResult_t pre = coll::api::guarded("collCommSplit", comm, [&]() -> Status {
    CallGuard guard(comm);
    if (!guard.ok()) return guard.status();
    if (!newcomm) return Status(collInvalidArgument, "newcomm is NULL");
    if (color < 0 && color != COLL_SPLIT_NOCOLOR)
      return COLL_ERROR(collInvalidArgument, FMT_STRING("color={} is negative and not COLL_SPLIT_NOCOLOR"), color);
    COLL_TRY(coll::checkReady(comm, /*allowRevoked=*/true));
    coll::CommOptions inherit = comm->options;
    inherit.cudaDev = comm->cudaDev;
    inherit.timeoutMs = comm->timeoutMs.load();  // as collCommSetTimeout last left it
    COLL_ASSIGN_OR_RETURN(options, coll::resolveOptions(config, &inherit));
    if (!options.blocking) return Status::ok();  // the exchange runs in the background
    return exchange(comm, color, key, options, &plan, &id);
  });
  if (pre != collSuccess) return pre;
  if (!options.blocking) return splitInBackground(comm, color, key, newcomm, options);
  if (color == COLL_SPLIT_NOCOLOR) {
    *newcomm = nullptr;
    return collSuccess;
  }
  return coll::initRankWithOptions("collCommSplit", newcomm, plan.newSize, id, plan.newRank, options);
}

}  // namespace

// collCommShrink: the survivors' new communicator, through the parent's bootstrap between
// survivors only (an excluded rank may be dead). The lowest survivor starts the rendezvous root and
// sends its id to every other survivor; each then runs an ordinary init.
namespace {

// Shrinks' messages: a user tag (top bit clear) apart from anything else sent on the bootstrap.
constexpr uint64_t kShrinkTag = 0x5348524b00000000ull;  // "SHRK"

Status survivorsOf(collComm_t comm, const int* exclude, int count, std::vector<int>* survivors) {
  if (count < 0 || (count > 0 && !exclude))
    return COLL_ERROR(collInvalidArgument, FMT_STRING("excludeRanksList is {} with excludeRanksCount={}"),
                      exclude ? "set" : "NULL", count);
  std::vector<bool> out(comm->nranks, false);
  for (int i = 0; i < count; ++i) {
    int r = exclude[i];
    if (r < 0 || r >= comm->nranks)
      return COLL_ERROR(collInvalidArgument, FMT_STRING("excluded rank {} is not a rank of a communicator of {}"), r,
                        comm->nranks);
    if (out[r]) return COLL_ERROR(collInvalidArgument, FMT_STRING("rank {} is excluded twice"), r);
    out[r] = true;
  }
  if (out[comm->rank])
    return COLL_ERROR(collInvalidUsage,
                      FMT_STRING("rank {} is in excludeRanksList: an excluded rank does not call collCommShrink"),
                      comm->rank);
  survivors->clear();
  for (int r = 0; r < comm->nranks; ++r)
    if (!out[r]) survivors->push_back(r);
  return Status::ok();
}

}  // namespace

collResult_t shrinkNow(collComm_t comm, int* excludeRanksList, int excludeRanksCount, collComm_t* newcomm,
                       collConfig_t* config, int shrinkFlags);

namespace {

// The survivors' exchange over the parent's bootstrap: the parent's queued work settled (or
// cancelled first), then the lowest survivor's new root id, sent to every other survivor.
Status shrinkExchange(collComm_t comm, const std::vector<int>& survivors, uint64_t tag, int shrinkFlags,
                      const coll::CommOptions& options, coll::IdContents* id) {
  // The parent may be broken by the failure that makes the survivors shrink: its state is not
  // checked, only its queued work settled.
  if (shrinkFlags == COLL_SHRINK_ABORT) comm->hostQueue->cancel("collCommShrink with COLL_SHRINK_ABORT was called");
  comm->hostQueue->drain();
  const int leader = survivors.front();
  collUniqueId raw;
  if (comm->rank == leader) {
    Status rootError;
    raw = leaderId(options, &rootError);
    if (!rootError.isOk()) return rootError.prefix("cannot start the new communicator's root: ");
    for (int r : survivors)
      if (r != leader) COLL_TRY(comm->bootstrap->send(r, tag, &raw, sizeof(raw)));
  } else {
    COLL_TRY(comm->bootstrap->recvDespiteFailures(leader, tag, &raw, sizeof(raw)));
  }
  auto decoded = coll::decodeUniqueId(raw);
  if (!decoded.isOk())
    return COLL_ERROR(collRemoteError, FMT_STRING("the lowest survivor {} could not start the new communicator"),
                      comm->bootstrap->describe(leader));
  *id = *decoded;
  return Status::ok();
}

}  // namespace

COLL_API collResult_t collCommShrink(collComm_t comm, int* excludeRanksList, int excludeRanksCount, collComm_t* newcomm,
                                     collConfig_t* config, int shrinkFlags) {
  if (coll::api::inGroup()) {
    // As a split: at collGroupEnd, beside the group's other shrinks (one thread may drive every
    // survivor). The list and the config are copied: the caller's may be gone by then.
    if (!newcomm) return coll::api::finish("collCommShrink", comm, Status(collInvalidArgument, "newcomm is NULL"));
    *newcomm = nullptr;
    std::shared_ptr<collConfig_t> copy;
    if (config) copy = std::make_shared<collConfig_t>(*config);
    std::vector<int> list;
    if (excludeRanksList && excludeRanksCount > 0) list.assign(excludeRanksList, excludeRanksList + excludeRanksCount);
    coll::api::deferToGroupEnd([=]() mutable {
      return shrinkNow(comm, list.empty() ? excludeRanksList : list.data(), excludeRanksCount, newcomm, copy.get(),
                       shrinkFlags);
    });
    return collSuccess;
  }
  return shrinkNow(comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags);
}

collResult_t shrinkNow(collComm_t comm, int* excludeRanksList, int excludeRanksCount, collComm_t* newcomm,
                       collConfig_t* config, int shrinkFlags) {
  coll::CommOptions options;
  coll::IdContents id;
  int newRank = -1, newSize = 0;
  bool background = false;  // non-blocking: the exchange and init run on the new comm's thread
  collResult_t pre = coll::api::guarded("collCommShrink", comm, [&]() -> Status {
    CallGuard guard(comm);
    if (!guard.ok()) return guard.status();
    if (!newcomm) return Status(collInvalidArgument, "newcomm is NULL");
    if (shrinkFlags != COLL_SHRINK_DEFAULT && shrinkFlags != COLL_SHRINK_ABORT)
      return COLL_ERROR(collInvalidArgument,
                        FMT_STRING("shrinkFlags={} is neither COLL_SHRINK_DEFAULT nor COLL_SHRINK_ABORT"), shrinkFlags);
    if (comm->asyncError.load() == collInProgress)
      return Status(collInvalidUsage, "the communicator is still initializing (poll collCommGetAsyncError)");
    std::vector<int> survivors;
    COLL_TRY(survivorsOf(comm, excludeRanksList, excludeRanksCount, &survivors));
    newSize = static_cast<int>(survivors.size());
    newRank = static_cast<int>(std::find(survivors.begin(), survivors.end(), comm->rank) - survivors.begin());
    coll::CommOptions inherit = comm->options;
    inherit.cudaDev = comm->cudaDev;
    inherit.timeoutMs = comm->timeoutMs.load();  // as collCommSetTimeout last left it
    COLL_ASSIGN_OR_RETURN(options, coll::resolveOptions(config, &inherit));
    const uint64_t tag = kShrinkTag | ++comm->shrinks;
    if (options.blocking) return shrinkExchange(comm, survivors, tag, shrinkFlags, options, &id);
    // Non-blocking (NCCL's): *newcomm at once, reporting collInProgress until the exchange and
    // its init are done on a thread, which the new communicator's destroy joins. The parent is
    // not marked: it may be broken, and only its bootstrap is used (kept alive by a guard).
    collComm* made = coll::newComm(newRank, newSize, options);
    made->asyncError.store(collInProgress);
    made->initThread = std::thread([comm, survivors, tag, shrinkFlags, options, made] {
      coll::IdContents newId;
      Status s;
      {
        CallGuard parent(comm);
        s = parent.ok() ? shrinkExchange(comm, survivors, tag, shrinkFlags, options, &newId) : parent.status();
      }
      coll::finishNonBlockingInit(made, newId, std::move(s), "collCommShrink (non-blocking)");
    });
    *newcomm = made;
    background = true;
    return Status::ok();
  });
  if (pre != collSuccess) return pre;
  if (background) return collInProgress;
  return coll::initRankWithOptions("collCommShrink", newcomm, newSize, id, newRank, options);
}
