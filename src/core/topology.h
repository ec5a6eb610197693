// This host's topology for the runtime and the tools: read from COLL_TOPO_FILE when set, else
// detected (topo/detect.h), once per process.
#pragma once

#include "core/status.h"
#include "topo/system.h"

namespace coll {

/// The host's System. An unreadable or malformed COLL_TOPO_FILE is collInvalidArgument naming
/// the file and the cause (not a silent fallback to detection).
Result<topo::System> localSystem();

/// Writes the System to COLL_TOPO_DUMP_FILE when it is set.
Status dumpSystemIfAsked(const topo::System& s);

}  // namespace coll
