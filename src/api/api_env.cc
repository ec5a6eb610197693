// collCommInitFromEnv: a communicator from launcher variables, rank 0 hosting the root.
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <mutex>

#include <cerrno>
#include <cstring>
#include "api/api_util.h"
#include "base/log.h"
#include "base/params.h"
#include "bootstrap/bootstrap_root.h"
#include "bootstrap/launch_env.h"
#include "coll/coll.h"
#include "core/comm.h"

using coll::Status;

namespace {

// Rank 0 binds the master address if it is one of its own, else the wildcard of its family (the
// name may resolve to an address the kernel does not hold, e.g. 127.0.1.1 vs an interface).
Status startMasterRoot(const coll::net::Address& master, uint64_t secret) {
  auto r = coll::bootstrap::startRoot(master, nullptr, true, secret, coll::params::kBootstrapTimeoutMs.get());
  if (r.isOk()) return Status::ok();
  // A port another process holds is taken on every address: say so with the address the user
  // gave, not the wildcard a second try would name.
  if (r.status().message().find(std::strerror(EADDRINUSE)) != std::string::npos)
    return Status(r.status().code(), fmt::format("rank 0 cannot host the rendezvous root: port {} of {} is taken "
                                                 "(another job or process holds it): {}",
                                                 master.port(), master.hostString(), r.status().message()));
  COLL_LOG(INFO, BOOTSTRAP, "binding the master address {} failed ({}); binding all addresses on port {}",
           master.toString(), r.status().message(), master.port());
  auto any = coll::net::Address::any(master.family(), master.port());
  auto r2 = coll::bootstrap::startRoot(any, &master, true, secret, coll::params::kBootstrapTimeoutMs.get());
  if (!r2.isOk())
    return Status(r2.status().code(), fmt::format("rank 0 cannot host the rendezvous root at {} ({}), nor on every "
                                                  "address ({})",
                                                  master.toString(), r.status().message(), r2.status().message()));
  return Status::ok();
}

}  // namespace

COLL_API collResult_t collCommInitFromEnv(collComm_t* comm) {
  coll::IdContents id;
  coll::LaunchEnv env;
  collResult_t pre = coll::api::guarded("collCommInitFromEnv", nullptr, [&]() -> Status {
    if (!comm) return Status(collInvalidArgument, "comm is NULL");
    COLL_TRY(coll::param::validateAll());
    COLL_ASSIGN_OR_RETURN(env, coll::resolveLaunchEnv([](const char* n) { return std::getenv(n); }));
    if (env.secretDerived && !env.masterAddr.empty() && env.worldSize > 1) {
      // Anyone who can reach the root and knows the address, port, size and job id can compute
      // this value and forge bootstrap messages (abort notices included): say so, once.
      static std::once_flag once;
      std::call_once(once, [&] {
        COLL_LOG(WARN, BOOTSTRAP,
                 "no COLL_BOOTSTRAP_SECRET: the bootstrap secret is derived from public values ({} address, port, "
                 "size, job id), so a process that can reach {}:{} could forge bootstrap messages; export the same "
                 "random COLL_BOOTSTRAP_SECRET (hex) to every rank, as coll-run does on one node",
                 env.source, env.masterAddr, env.masterPort);
      });
    }
    if (env.masterAddr.empty()) {
      // Single rank without a master: a private root on loopback.
      auto lo = coll::net::Address::resolve("127.0.0.1", 0, AF_INET);
      COLL_TRY(lo.status());
      COLL_ASSIGN_OR_RETURN(collUniqueId uid, coll::bootstrap::startRoot(*lo, nullptr, false, env.secret,
                                                                         coll::params::kBootstrapTimeoutMs.get()));
      COLL_ASSIGN_OR_RETURN(id, coll::decodeUniqueId(uid));
    } else {
      COLL_ASSIGN_OR_RETURN(id.root, coll::net::Address::resolve(env.masterAddr, env.masterPort));
      id.secret = env.secret;
      if (env.rank == 0) COLL_TRY(startMasterRoot(id.root, env.secret));
    }
    COLL_LOG(INFO, ENV, "{} environment: rank {} of {}, local rank {}, root {}", env.source, env.rank, env.worldSize,
             env.localRank, id.root.toString());
    return Status::ok();
  });
  if (pre != collSuccess) return pre;
  auto options = coll::resolveOptions(nullptr, nullptr);
  return coll::initRankWithOptions("collCommInitFromEnv", comm, env.worldSize, id, env.rank, options.value());
}
