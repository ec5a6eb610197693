// Host identity: which ranks share a machine (and so may use shared memory with each other).
#pragma once

#include <cstdint>
#include <string>

namespace coll {

/// COLL_HOSTID if set, else "<hostname>:<boot id>": two containers with the same host name on
/// different machines differ by boot id; a rebooted machine is a different host.
std::string hostIdentity();
/// Short host name (up to the first dot).
std::string hostName();
/// 64-bit hash of hostIdentity(), used for grouping ranks by host.
uint64_t hostHash();
/// 64-bit hash of the kernel's boot id alone: equal for every rank on one machine, whatever
/// COLL_HOSTID, host name or network namespace says (they share its cores).
uint64_t machineHash();
/// CPUs this process may run on (its affinity mask; onlineCpus() when that cannot be read).
int usableCores();
/// CPUs online on this machine (at least 1).
int onlineCpus();

}  // namespace coll
