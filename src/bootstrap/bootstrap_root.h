// The rendezvous root: a thread that collects every rank's hello and answers with the table of all.
//
// How it works: the root listens on one address. Each rank connects, sends Hello (its rank, the
// rank count it expects, its RankInfo) and keeps the connection open. When all nranks distinct
// ranks have arrived with consistent counts, the root answers each with status 0 and all RankInfos,
// then retires (below). The deadline starts with the first valid hello: when it passes, every waiting rank is
// answered collTimeout with the list of ranks that never arrived. Contradictions (two processes
// claiming one rank, different rank counts, rank out of range) are answered with
// collInvalidUsage to everyone. After any failure the root stays until every rank has been told
// (ranks that died count as told) or the deadline passes, so that late ranks learn the cause.
// Then the root retires: it keeps its port and answers any later hello at once with the outcome
// ("this id belongs to a job whose init already completed", or the failure), so that a rank
// started with a stale id fails now instead of at its deadline. The 8 most recent retired roots
// of a process stay; older ones close, as do all at exit.
#pragma once

#include <cstdint>

#include "base/socket.h"
#include "base/status.h"
#include "coll/coll.h"

namespace coll::bootstrap {

/// Starts a root listening on bindAddr (port 0: any free port) and returns the id that leads to it.
/// advertise, when given, is the address written into the id (e.g. the master address when binding
/// the wildcard). The root thread is owned by a process-wide registry and joined at exit.
Result<collUniqueId> startRoot(const net::Address& bindAddr, const net::Address* advertise, bool reuseAddr,
                               uint64_t secret, int64_t timeoutMs);

/// If this process hosts the root of secret's id, waits until it has finished: used when init
/// fails, so that the process does not exit (taking the root with it) before the root has told
/// every rank why. Returns at once when no such root runs here.
void waitForRoot(uint64_t secret);

/// Joins roots that have ended, and stops the oldest retired roots beyond a small limit (called
/// opportunistically; a root ends on its own only if no rank ever reached it).
void reapRoots();

/// Roots in this process still forming their communicator (tests).
int runningRoots();

/// Roots in this process whose communicator is decided, kept to refuse stale ids (tests).
int retiredRoots();

}  // namespace coll::bootstrap
