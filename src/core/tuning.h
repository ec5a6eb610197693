// The tuner's inputs for one communicator: COLL_ALGO, COLL_PROTO and the cost model's constants
// for its transports and host.
#pragma once

#include "core/status.h"

struct collComm;

namespace coll {

/// Reads COLL_ALGO and COLL_PROTO (collInvalidArgument naming the variable when malformed) and
/// fills comm->algoFilter, comm->costModel and comm->proto*. Called at the end of init.
Status setupTuning(collComm* comm);

}  // namespace coll
