// A summary of the host's CPU and memory layout from hwloc. The full topology graph (PCI tree,
// NICs, GPUs, path classification) is built on this in the topology issue.
#pragma once

#include <cstdint>
#include <string>

namespace coll::topo {

struct MachineSummary {
  int packages = 0;
  int numaNodes = 0;
  int cores = 0;
  int pus = 0;  // hardware threads
  uint64_t memoryBytes = 0;
  std::string hwlocVersion;
  std::string error;  // set when hwloc could not load the topology
};

/// Loads the topology with hwloc and counts objects. Blocking (tens of ms); not cached.
MachineSummary summarizeMachine();

}  // namespace coll::topo
