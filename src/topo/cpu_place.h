// Where the calling thread may run: the package and NUMA node of its CPU affinity, read from
// sysfs (cheap enough for every communicator init, unlike loading hwloc's whole tree).
#pragma once

namespace coll::topo {

struct CpuPlace {
  int package = -1;  // -1: the allowed CPUs span several packages (or sysfs does not say)
  int numa = -1;     // -1: the allowed CPUs span several NUMA nodes (or sysfs does not say)
};

/// The package and NUMA node shared by every CPU the calling thread is allowed to run on.
CpuPlace cpuPlace();

}  // namespace coll::topo
