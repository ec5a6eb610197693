// The tuner's inputs for one communicator: COLL_ALGO, COLL_PROTO and the cost model's constants
// for its transports and host.
#pragma once

#include <vector>

#include "algorithms/tuner.h"
#include "core/status.h"

struct collComm;

namespace coll {

/// Reads COLL_ALGO and COLL_PROTO (collInvalidArgument naming the variable when malformed) and
/// fills comm->algoFilter, comm->costModel and comm->proto*. Called at the end of init.
Status setupTuning(collComm* comm);

/// The cost model for ranksPerHost ranks on each of nHosts hosts (shm inside a host unless
/// COLL_SHM_DISABLE, TCP between hosts), with this process's FIFO parameters and cores.
/// COLL_TUNER_MODEL overrides apply; a malformed value is collInvalidArgument.
Result<algorithms::CostModel> costModelFor(int ranksPerHost, int nHosts);

/// The bandwidth between hosts the tuner uses: the model's, or the slowest rank's link speed
/// (Mb/s, as every rank reported it at init) when that is lower; unknown speeds (0) leave the
/// model's.
double netBetaByLinks(double modelGBs, const std::vector<int>& linkMbps);

}  // namespace coll
