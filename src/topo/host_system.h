// This host's topology for the runtime and the tools: read from COLL_TOPO_FILE when set, else
// detected (topo/detect.h), once per process.
#pragma once

#include <string>
#include <vector>

#include "base/ifaddr.h"
#include "base/status.h"
#include "topo/system.h"

namespace coll {

/// The host's System. An unreadable or malformed COLL_TOPO_FILE is collInvalidArgument naming
/// the file and the cause (not a silent fallback to detection).
Result<topo::System> localSystem();

/// Writes the System to COLL_TOPO_DUMP_FILE when it is set.
Status dumpSystemIfAsked(const topo::System& s);

/// The interface sockets should use for a rank on NUMA node numa (-1: unknown, taken as the
/// first): the NIC by locality (topo::assignNics) among the System's NICs that are up with an
/// address (up), "" when none of them is.
std::string socketInterfaceByLocality(const topo::System& s, int numa, const std::vector<net::Interface>& up);

/// The interface a rank on NUMA node numa uses for bootstrap and TCP: COLL_SOCKET_IFNAME's when
/// set; else, when several physical interfaces are up (or COLL_TOPO_FILE is set), the one
/// closest to the NUMA node (the topology is loaded for it); else the first usable one.
/// *byLocality tells whether the topology decided.
Result<net::Interface> socketInterface(int numa, bool* byLocality);

}  // namespace coll
