// The tuner's inputs for one communicator: COLL_ALGO, COLL_PROTO and the cost model's constants
// for its transports and host.
#pragma once

#include <vector>

#include "algorithms/tuner.h"
#include "base/status.h"
#include "bootstrap/bootstrap_wire.h"

struct collComm;

namespace coll {

/// Reads COLL_ALGO and COLL_PROTO (collInvalidArgument naming the variable when malformed) and
/// fills comm->algoFilter, comm->costModel and comm->proto*. Called at the end of init.
Status setupTuning(collComm* comm);

/// How ranks share cores, from what every rank reported at init (so that all ranks decide alike).
struct CoreSharing {
  double ranksPerCore = 1;  // the most ranks per core on any machine
  int hostsPerMachine = 1;  // the most hosts on one machine (network namespaces, COLL_HOSTID)
};

/// From the rank table: a machine (boot id) has min(its CPUs, the sum of its ranks' affinity
/// sizes) cores; ranks bound to distinct cores count one core each, unbound ranks all of them.
CoreSharing coreSharing(const std::vector<bootstrap::RankInfo>& peers);

/// The cost model for ranksPerHost ranks on each of nHosts hosts (shm inside a host unless
/// COLL_SHM_DISABLE, TCP between hosts), sharing cores as `sharing` says, with this process's
/// FIFO parameters. COLL_TUNER_MODEL overrides apply; a malformed value is collInvalidArgument.
Result<algorithms::CostModel> costModelFor(int ranksPerHost, int nHosts, const CoreSharing& sharing);

/// The bandwidth between hosts the tuner uses: the model's, or the slowest rank's link speed
/// (Mb/s, as every rank reported it at init) when that is lower; unknown speeds (0) leave the
/// model's.
double netBetaByLinks(double modelGBs, const std::vector<int>& linkMbps);

}  // namespace coll
