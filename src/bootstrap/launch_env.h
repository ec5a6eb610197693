// Which launcher started this process, and what it says about rank, size and the master address.
//
// resolveLaunchEnv is a pure function of an environment lookup so that every launcher's variables,
// and every way they can be missing or contradictory, are unit-tested without touching the
// process environment.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "base/status.h"

namespace coll {

struct LaunchEnv {
  std::string source;  // "coll-run", "torchrun", "Open MPI", "Slurm", "PMI"
  int rank = -1;
  int worldSize = 0;
  int localRank = -1;      // -1 when the launcher gives none
  std::string masterAddr;  // empty only for a single-rank job (the root then uses loopback)
  int masterPort = 0;
  uint64_t secret = 0;
  bool secretDerived = false;  // no COLL_BOOTSTRAP_SECRET: derived from public values (see the .cc)
};

/// Looks a variable up; nullptr when unset.
using EnvLookup = std::function<const char*(const char*)>;

/// Reads, in this order, coll-run (COLL_*), torchrun, Open MPI, Slurm and PMI variables; the first
/// launcher with any of its rank/size variables set is used. A missing, malformed or
/// contradictory variable is collInvalidArgument naming it.
Result<LaunchEnv> resolveLaunchEnv(const EnvLookup& lookup);

}  // namespace coll
