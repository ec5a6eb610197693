// Detecting the System of this host: hwloc for packages, NUMA nodes and the PCI tree (bridges,
// GPUs, NICs), /sys/class/net for every network interface (speed, virtual ones too),
// /sys/class/infiniband for verbs ports (link layer, rate, GID), and the CUDA driver (loaded at
// run time) for GPUs, matched to their PCI devices by bus id. NVLink peers (NVML) are not read
// yet: GPUs detected here have none, a topology file can describe them.
#pragma once

#include <string>

#include "topo/system.h"

namespace coll::topo {

/// Detects this host. `host` and `hostId` come from the caller (core knows how hosts are told
/// apart). Never fails: what cannot be read is left out and noted in System::error.
System detectSystem(const std::string& host, const std::string& hostId);

}  // namespace coll::topo
